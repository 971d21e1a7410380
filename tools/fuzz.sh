#!/usr/bin/env bash
# Builds ebac's libFuzzer targets with clang (CMake preset `fuzz`: ASan +
# UBSan + libFuzzer), replays the seed corpora, then fuzzes each target for a
# bounded time. Exits non-zero on any crash, sanitizer report, leak or
# timeout; the offending input is left under build/fuzz/artifacts/<target>/.
#
#   FUZZ_SECONDS=60 bash tools/fuzz.sh     # per target, default 60; 0 = build + seed replay only
#   FUZZ_TARGETS="decompress compress"     # default: decompress inspect compress, and
#                                          # decompress_avx2 compress_avx2 where the CPU has AVX2
#   JOBS=2                                 # build parallelism and fuzzers at once (default: nproc)
#
# Targets: decompress (stream decoder), inspect (header reader), compress
# (arbitrary tensors, bound checked on every element); decompress_avx2 and
# compress_avx2 (x86-64-v3 builds: the eight-lane context-ANS coders).
# Longer runs with counts: tools/fuzz-campaign.sh.
# Reproduce a crash:  build/fuzz/tests/fuzz/ebac_fuzz_<target> build/fuzz/artifacts/<target>/crash-...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}
build=build/fuzz
regressions=tests/fuzz/regressions   # inputs that once failed: replayed by ctest, fuzzed from too
# shellcheck source=tools/fuzz-targets.sh
source tools/fuzz-targets.sh
FUZZ_TARGETS=${FUZZ_TARGETS:-$(fuzz_default_targets)}
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14; fi

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"
ctest --preset fuzz    # every seed and regression input once through the sanitized targets

if [[ "$FUZZ_SECONDS" == 0 ]]; then
  echo "fuzz.sh: FUZZ_SECONDS=0, seed replay only"
  exit 0
fi

# The targets run JOBS at a time (each fuzzer is one process on one core),
# each for FUZZ_SECONDS; their reports are printed in order once all ended.
fuzz_target() {  # fuzz_target TARGET: fuzzes it; its exit status in $build/fuzz_TARGET.rc
  local target=$1 rc=0
  local fuzzer=$build/tests/fuzz/ebac_fuzz_$target
  local corpus=$build/corpus/$target          # grows across local runs; seeds stay pristine
  local artifacts=$build/artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  # shellcheck disable=SC2046
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" $(fuzz_seeds_of "$target") >"$build/fuzz_$target.log" 2>&1 || rc=$?
  echo "$rc" >"$build/fuzz_$target.rc"
}
running=0
for target in $FUZZ_TARGETS; do
  if [[ $running -ge $JOBS ]]; then wait -n || true; running=$((running - 1)); fi
  echo "fuzz.sh: fuzzing $target for ${FUZZ_SECONDS}s (log: $build/fuzz_$target.log)"
  rm -f "$build/fuzz_$target.rc"
  fuzz_target "$target" &
  running=$((running + 1))
done
wait

failed=()
for target in $FUZZ_TARGETS; do
  log=$build/fuzz_$target.log
  rc=$(cat "$build/fuzz_$target.rc" 2>/dev/null || echo "no exit status")
  if [[ $rc != 0 ]]; then
    tail -n 60 "$log"
    echo "fuzz.sh: $target FAILED (libFuzzer exit $rc); inputs that failed:" >&2
    ls -l "$build/artifacts/$target" >&2 || true
    echo "fuzz.sh: reproduce with: $build/tests/fuzz/ebac_fuzz_$target <artifact>; once fixed, add the input to $regressions/" >&2
    failed+=("$target")
    continue
  fi
  echo "fuzz.sh: $target:"
  grep -E 'DONE|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb' "$log" || tail -n 5 "$log"
done
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${FUZZ_SECONDS}s per target ($FUZZ_TARGETS)"
