#!/usr/bin/env bash
# Self-test of tools/gpu-check.sh's control flow, without a GPU and without
# building anything (CTest: tools.gpu_check_selftest). Checks that
#   1. with no GPU, every GPU stage reports "skipped: no GPU", the summary
#      and its result table are written, and the exit status says not
#      everything passed;
#   2. a stage that overruns its time box (a stub that sleeps 300 s and
#      would then write a file) is cut and reported "TIMED OUT", and the
#      stages after it still run and report;
#   3. a stage that fails reports "FAILED (exit N)", one that succeeds
#      "passed";
#   4. the deadline: a stub that eats what is left makes every later stage
#      "skipped: no time left" (a GPU is pretended, so that the time check,
#      not the GPU check, is what stops them; no program is built, so
#      nothing could run on it anyway).
# Each run lasts a few seconds; if a time box did not work the run would
# last 300 s and CTest's TIMEOUT fails the test.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
script=$here/tools/gpu-check.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() {  # file, stage, result prefix
  grep -qF -- "- **$2**: $3" "$1" || fail "$2: expected '$3' in $1, got: $(grep -F -- "- **$2**:" "$1" || echo '(no line)')"
}
gpu_stages="test memcheck initcheck racecheck bench ncu torch torch-report torch-all"

# 1-3: no GPU; a stub that overruns its 2 s box, one that fails, one that passes.
out=$tmp/run1
EBAC_GPU_CHECK_GPU=0 OUT=$out GPU_BUILD_DIR=$tmp/none STAGES="torch-build,${gpu_stages// /,}" \
  EBAC_GPU_CHECK_STUB="slow:2:sleep 300; touch $tmp/slow-finished" bash "$script" > "$tmp/run1.log" 2>&1
rc=$?
[[ -f $out/summary.md ]] || fail "run 1 wrote no summary.md"
[[ -f $out/logs.tar.gz ]] || fail "run 1 wrote no logs.tar.gz"
[[ $rc -ne 0 ]] || fail "run 1 exited 0 although nothing was checked"
expect "$out/summary.md" slow "TIMED OUT after 2 s"
[[ -e $tmp/slow-finished ]] && fail "the slow stub ran to its end: its time box did not cut it"
for s in torch-build $gpu_stages; do expect "$out/summary.md" "$s" "skipped: no GPU"; done
expect "$out/summary.md" build "skipped: not in STAGES"
grep -q "^| stage | result | seconds |" "$out/summary.md" || fail "run 1: no result table"
grep -q "^| slow | TIMED OUT" "$out/summary.md" || fail "run 1: the result table lacks the stub's row"

out=$tmp/run2
EBAC_GPU_CHECK_GPU=0 OUT=$out GPU_BUILD_DIR=$tmp/none STAGES=test EBAC_GPU_CHECK_STUB="bad:5:exit 3" \
  bash "$script" > "$tmp/run2.log" 2>&1
expect "$out/summary.md" bad "FAILED (exit 3)"
tar xzf "$out/logs.tar.gz" -C "$tmp" ./results.txt 2> /dev/null || fail "run 2: logs.tar.gz lacks results.txt"

out=$tmp/run3
EBAC_GPU_CHECK_GPU=0 OUT=$out GPU_BUILD_DIR=$tmp/none STAGES=test EBAC_GPU_CHECK_STUB="good:5:echo fine" \
  bash "$script" > "$tmp/run3.log" 2>&1
expect "$out/summary.md" good "passed"

# 4: the deadline (12 s, 8 of them the reserve): the stub is cut after the
# 4 s left, and nothing after it starts.
out=$tmp/run4
EBAC_GPU_CHECK_GPU=1 OUT=$out GPU_BUILD_DIR=$tmp/none DEADLINE=12 RESERVE=8 STAGES="test,memcheck,initcheck,racecheck,bench,ncu,torch,torch-report,torch-all" \
  EBAC_GPU_CHECK_STUB="hog:100:sleep 300" bash "$script" > "$tmp/run4.log" 2>&1
grep -qF -- "- **hog**: TIMED OUT" "$out/summary.md" || fail "run 4: the stub was not cut by the deadline: $(grep -F hog "$out/summary.md")"
for s in test memcheck initcheck racecheck bench ncu torch torch-report torch-all; do expect "$out/summary.md" "$s" "skipped: no time left"; done

if ((fails)); then
  echo "--- run logs"
  cat "$tmp"/run*.log
  exit 1
fi
echo "gpu-check self-test passed"
