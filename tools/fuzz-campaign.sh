#!/usr/bin/env bash
# A fuzzing campaign that counts: runs each libFuzzer target for a number of
# executions or seconds and reports, per target, executions, exec/s, coverage
# (libFuzzer's final cov: edges and ft: features), corpus growth and crashes.
#
#   RUNS=10000000 bash tools/fuzz-campaign.sh          # executions per target (default 10^7)
#   SECONDS_PER_TARGET=3600 bash tools/fuzz-campaign.sh # or a time per target (then RUNS is ignored)
#   TARGETS="decompress inspect compress"              # default: all three, and decompress_avx2
#                                                      # compress_avx2 (x86-64-v3 builds) where the CPU has AVX2
#   JOBS=N                                             # build parallelism
#   FORK=N                                             # fuzzing jobs per target at once (default 1)
#   OUT=build/fuzz/campaign                            # logs, corpora, artifacts, summary.md
#
# The corpora stay under $OUT/corpus/<target>: a second run with the same OUT
# resumes from what the first found (the summary's corpus column shows the
# count it started from), which is how a campaign longer than a sitting is run.
#
# It builds the `fuzz` preset (ASan + UBSan + libFuzzer) like tools/fuzz.sh,
# starts each target from its seeds (and regressions/), keeps going after a
# crash (-fork=$FORK -ignore_crashes=1, so one finding does not end the count) and
# exits non-zero when any target crashed, leaked or timed out. The summary
# table is printed and written to $OUT/summary.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${RUNS:-10000000}
SECONDS_PER_TARGET=${SECONDS_PER_TARGET:-}
JOBS=${JOBS:-$(nproc)}
FORK=${FORK:-1}
OUT=${OUT:-build/fuzz/campaign}
build=build/fuzz
regressions=tests/fuzz/regressions
# shellcheck source=tools/fuzz-targets.sh
source tools/fuzz-targets.sh
TARGETS=${TARGETS:-$(fuzz_default_targets)}
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14; fi
command -v clang++ >/dev/null || { echo "fuzz-campaign.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS" >/dev/null
mkdir -p "$OUT"

if [[ -n "$SECONDS_PER_TARGET" ]]; then limit=(-max_total_time="$SECONDS_PER_TARGET"); what="${SECONDS_PER_TARGET}s per target"
else limit=(-runs="$RUNS"); what="$RUNS executions per target"; fi

rows=()
status=0
for target in $TARGETS; do
  fuzzer=$build/tests/fuzz/ebac_fuzz_$target
  corpus=$OUT/corpus/$target
  artifacts=$OUT/artifacts/$target
  log=$OUT/$target.log
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*
  start_units=$(find "$corpus" -type f | wc -l)
  echo "fuzz-campaign: $target, $what (log: $log)" >&2
  t0=$(date +%s.%N)
  rc=0
  # shellcheck disable=SC2046
  "$fuzzer" "${limit[@]}" -fork="$FORK" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" $(fuzz_seeds_of "$target") >"$log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  # Fork mode prints "#N: cov: C ft: F corp: K exec/s: E oom/timeout/crash: a/b/c time: Ts job: J dft_time: D"
  # lines and a final "INFO: exiting: ... time: Ts"; the last stats line has the totals.
  last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -n 1 || true)
  execs=$(sed -nE 's/^#([0-9]+): .*/\1/p' <<<"$last")
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<<"$last")
  crashes=$(sed -nE 's/.* oom\/timeout\/crash: ([0-9]+)\/([0-9]+)\/([0-9]+) .*/\1 ooms, \2 timeouts, \3 crashes/p' <<<"$last")
  found=$(find "$artifacts" -type f | wc -l)
  units=$(find "$corpus" -type f | wc -l)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')
  rate=$(awk -v n="${execs:-0}" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  [[ -n "$execs" ]] || { echo "fuzz-campaign: $target printed no statistics (exit $rc); see $log" >&2; tail -n 20 "$log" >&2; status=1; }
  if [[ $rc -ne 0 || $found -ne 0 ]]; then status=1; fi
  rows+=("| $target | ${execs:-?} | ${secs} | ${rate} | ${cov:-?} | ${ft:-?} | ${start_units} -> ${units} | ${crashes:-?}; ${found} artifact(s) |")
done

{
  echo "fuzz campaign: $what, $FORK job(s) per target, $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
  echo
  echo "| target | executions | seconds | exec/s | cov | ft | corpus | findings |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$OUT/summary.md"
[[ $status -eq 0 ]] || echo "fuzz-campaign: FINDINGS or errors; artifacts under $OUT/artifacts/" >&2
exit $status
