#!/usr/bin/env bash
# Builds ebac's libFuzzer targets with clang (CMake preset `fuzz`: ASan +
# UBSan + libFuzzer), replays the seed corpora, then fuzzes each target for a
# bounded time. Exits non-zero on any crash, sanitizer report, leak or
# timeout; the offending input is left under build/fuzz/artifacts/<target>/.
#
#   FUZZ_SECONDS=60 bash tools/fuzz.sh     # per target, default 60; 0 = build + seed replay only
#   FUZZ_TARGETS="decompress compress"     # default: decompress inspect compress, and
#                                          # decompress_avx2 compress_avx2 where the CPU has AVX2
#   JOBS=2                                 # build parallelism (default: nproc)
#
# Targets: decompress (stream decoder), inspect (header reader), compress
# (arbitrary tensors, bound checked on every element); decompress_avx2 and
# compress_avx2 (x86-64-v3 builds: the eight-lane context-ANS coders).
# Longer runs with counts: tools/fuzz-campaign.sh.
# Reproduce a crash:  build/fuzz/tests/fuzz/ebac_fuzz_<target> build/fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
# decompress_avx2 and compress_avx2 (the same targets compiled for
# x86-64-v3: the eight-lane context-ANS coders) join the default where the
# CPU has AVX2; elsewhere the run says that they were skipped.
if [[ -z "${FUZZ_TARGETS:-}" ]]; then
  FUZZ_TARGETS="decompress inspect compress"
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    FUZZ_TARGETS+=" decompress_avx2 compress_avx2"
  else
    echo "fuzz.sh: SKIPPED: decompress_avx2 and compress_avx2 (this CPU has no AVX2)"
  fi
fi
JOBS=${JOBS:-$(nproc)}
build=build/fuzz
regressions=tests/fuzz/regressions   # inputs that once failed: replayed by ctest, fuzzed from too
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14; fi

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"
ctest --preset fuzz    # every seed and regression input once through the sanitized targets

if [[ "$FUZZ_SECONDS" == 0 ]]; then
  echo "fuzz.sh: FUZZ_SECONDS=0, seed replay only"
  exit 0
fi

# seeds_of TARGET: the read-only seed directories of a target.
seeds_of() {
  case $1 in
    compress | compress_avx2) echo "$build/tests/fuzz/compress-seeds" ;;
    *) echo "$build/tests/fuzz/seeds"; [[ -d $regressions ]] && echo "$regressions" ;;
  esac
}

failed=()
for target in $FUZZ_TARGETS; do
  fuzzer=$build/tests/fuzz/ebac_fuzz_$target
  corpus=$build/corpus/$target          # grows across local runs; seeds stay pristine
  artifacts=$build/artifacts/$target
  log=$build/fuzz_$target.log
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz.sh: fuzzing $target for ${FUZZ_SECONDS}s (log: $log)"
  rc=0
  # shellcheck disable=SC2046
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" $(seeds_of "$target") >"$log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    tail -n 60 "$log"
    echo "fuzz.sh: $target FAILED (libFuzzer exit $rc); inputs that failed:" >&2
    ls -l "$artifacts" >&2 || true
    echo "fuzz.sh: reproduce with: $fuzzer <artifact>; once fixed, add the input to $regressions/" >&2
    failed+=("$target")
    continue
  fi
  grep -E 'DONE|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb' "$log" || tail -n 5 "$log"
done
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${FUZZ_SECONDS}s per target ($FUZZ_TARGETS)"
