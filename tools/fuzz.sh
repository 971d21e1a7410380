#!/usr/bin/env bash
# Builds ebac's libFuzzer targets with clang (CMake preset `fuzz`: ASan +
# UBSan + libFuzzer), replays the seed corpus, then fuzzes the stream decoder
# for a bounded time. Exits non-zero on any crash, sanitizer report, leak or
# timeout; the offending input is left under build/fuzz/artifacts/.
#
#   FUZZ_SECONDS=60 bash tools/fuzz.sh     # default 60; 0 = build + seed replay only
#   JOBS=2                                 # build parallelism (default: nproc)
#
# Reproduce a crash:  build/fuzz/tests/fuzz/ebac_fuzz_decompress build/fuzz/artifacts/crash-...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}
build=build/fuzz
fuzzer=$build/tests/fuzz/ebac_fuzz_decompress
seeds=$build/tests/fuzz/seeds
corpus=$build/corpus/decompress    # grows across local runs; seeds stay pristine
artifacts=$build/artifacts
log=$build/fuzz_decompress.log

regressions=tests/fuzz/regressions   # inputs that once failed: replayed by ctest, fuzzed from too
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14; fi

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"
ctest --preset fuzz    # every seed and regression input once through the sanitized decoder

if [[ "$FUZZ_SECONDS" == 0 ]]; then
  echo "fuzz.sh: FUZZ_SECONDS=0, seed replay only"
  exit 0
fi

mkdir -p "$corpus" "$artifacts"
echo "fuzz.sh: fuzzing the decoder for ${FUZZ_SECONDS}s (log: $log)"
rc=0
"$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus" "$seeds" $([[ -d $regressions ]] && echo "$regressions") >"$log" 2>&1 || rc=$?
if [[ $rc -ne 0 ]]; then
  tail -n 80 "$log"
  echo "fuzz.sh: FAILED (libFuzzer exit $rc); inputs that failed:" >&2
  ls -l "$artifacts" >&2 || true
  echo "fuzz.sh: reproduce with: $fuzzer <artifact>; once fixed, add the input to $regressions/" >&2
  exit 1
fi
grep -E 'DONE|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb' "$log" || tail -n 5 "$log"
echo "fuzz.sh: no crash in ${FUZZ_SECONDS}s"
