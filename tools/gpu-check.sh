#!/usr/bin/env bash
# One-call GPU check (the device tool's lent H100/H200), writing under $OUT.
# Stages, in this order, each in its own time box:
#   build       configure + build ebac_gpu_tests and ebac_gpu_throughput
#               (sm_90 only: the machine's chip; build/gpu is kept on a warm
#               machine, so a rerun rebuilds only what changed)
#   torch-build ebac_torch with its CUDA backend (in-tree JIT build under
#               build/torch_extensions), started in the background next to
#               `build` so that its units fill the cores the build's
#               longest units leave idle
#   test        every GPU test case (doctest; --duration per case)
#   memcheck, initcheck, racecheck
#               compute-sanitizer on a short list of cases in quick mode
#               (EBAC_GPU_TEST_QUICK=1: small tensors; initcheck also without
#               the tests' poisoned allocations, EBAC_GPU_TEST_NO_POISON=1)
#   bench       the GPU throughput benchmark, D2D memcpy of the same bytes
#               as the yardstick in the same run (throughput.md)
#   ncu         Nsight Compute on the `fast` pipeline's kernels of a small
#               benchmark run (a handful of launches, two sections)
#   torch       ebac_torch's CUDA tests (tests/test_cuda.py) on the GPU
#   torch-report  studies/memory_report.py on resnet50 and vit_b_16 at a
#               batch that fills a few GB, plain / ebac / checkpoint
#               (torch.cuda.max_memory_allocated, step time, gradients)
#   torch-all   every ebac_torch test under the machine's torch 2.x
# Every stage that needs a GPU reports "skipped: no GPU" at once where none
# is visible; a stage whose program was not built says so; a stage cut by
# its time box reports "TIMED OUT". The summary is written whatever happens.
# The boxes add up to more than DEADLINE: the last stages get what is left.
#
# Prepare HERE first: `bash tools/gpu-prepare.sh` (the machine has no
# doctest), then call the device tool with carry ["build/deps"],
# timeout_s 420 and the command
#   OUT=$OUT bash tools/gpu-check.sh
# (docs/cuda.md, "The one-call check", gives the expected time per stage).
#
# Settings (environment):
#   STAGES        comma list (default all of the above)
#   DEADLINE      seconds for the whole script (default 300); a stage gets
#                 its own limit or what is left minus RESERVE, never more
#   <STAGE>_TIMEOUT  BUILD_TIMEOUT, TORCH_BUILD_TIMEOUT, TEST_TIMEOUT,
#                 SANITIZE_TIMEOUT (each tool), BENCH_TIMEOUT, NCU_TIMEOUT,
#                 TORCH_TEST_TIMEOUT, REPORT_TIMEOUT, TORCH_ALL_TIMEOUT
#   BENCH_ARGS, SANITIZE_CASES, RACECHECK_CASES, NCU_KERNELS, NCU_LAUNCHES,
#   REPORT_ARGS, RESERVE (seconds kept for the summary, default 8)
#   GPU_BUILD_DIR the CMake build directory (default build/gpu)
#   EBAC_GPU_CHECK_GPU=0|1  overrides the GPU detection (nvidia-smi -L)
#   EBAC_GPU_CHECK_STUB="NAME:SECONDS:COMMAND"  adds a stage NAME running
#                 COMMAND in a time box of SECONDS, first (the self-test,
#                 tests/tools/gpu_check_selftest.sh, uses it)
# What comes back (the device tool returns at most 8 files): summary.md,
# throughput.md, ncu.txt, memory-report.md and logs.tar.gz (every log,
# re-packed after each stage).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, compute-sanitizer, ncu where the image does not put them on PATH
if ! command -v ncu > /dev/null; then  # Nsight Compute's own folder, newest version first
  for d in $(ls -d /opt/nvidia/nsight-compute/*/ /usr/local/cuda/nsight-compute*/ 2> /dev/null | sort -rV); do
    [[ -x $d/ncu ]] && { export PATH="$PATH:${d%/}"; break; }
  done
fi
OUT=${OUT:-out/gpu-check}
STAGES=${STAGES:-build,torch-build,test,memcheck,initcheck,racecheck,bench,ncu,torch,torch-report,torch-all}
GPU_BUILD_DIR=${GPU_BUILD_DIR:-build/gpu}
DEADLINE=${DEADLINE:-300}
RESERVE=${RESERVE:-8}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-150}
TORCH_BUILD_TIMEOUT=${TORCH_BUILD_TIMEOUT:-200}
TEST_TIMEOUT=${TEST_TIMEOUT:-40}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-15}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-30}
NCU_TIMEOUT=${NCU_TIMEOUT:-20}
TORCH_TEST_TIMEOUT=${TORCH_TEST_TIMEOUT:-30}
REPORT_TIMEOUT=${REPORT_TIMEOUT:-90}
TORCH_ALL_TIMEOUT=${TORCH_ALL_TIMEOUT:-120}
# 1 GiB post-ReLU activations (the corpus tiled) at rel 1e-2, the issue's
# yardstick; the ANS section on a quarter GiB.
BENCH_ARGS=${BENCH_ARGS:---corpus data/corpus/manifest.tsv --gib 1 --eb 1e-2 --reps 10 --training data/training-corpus/manifest.tsv --ans-gib 0.25}
# The sanitizers: "sanitizer tour" runs every kind of kernel once on small
# tensors (tests/cuda/test_cuda_codec.cu); memcheck and initcheck also the
# damaged streams (reads past what a corrupt header claims), the captured
# graphs and the statistics kernels. racecheck, the slowest tool (every
# shared-memory access tracked), the tour alone.
SANITIZE_CASES=${SANITIZE_CASES:-'sanitizer tour*,device decoder: a damaged*,device compress is capturable*,cuda statistics*'}
RACECHECK_CASES=${RACECHECK_CASES:-'sanitizer tour*'}
# The kernels of `fast` (staged, fused, single pass; compress and decompress).
NCU_KERNELS=${NCU_KERNELS:-'regex:^(range|level_sets|quantize|residual|bitpack_size|bitpack_write|fused_bitpack_[a-z_]+|bitpack_decode|inverse_pass|unzigzag|reconstruct)_kernel'}
NCU_LAUNCHES=${NCU_LAUNCHES:-24}
# resnet50 and vit_b_16 at 224x224, batch 32: a plain step's peak is a few GB.
REPORT_ARGS=${REPORT_ARGS:---networks resnet50,vit_b_16 --ways plain,ebac,checkpoint --batch 32 --budget-networks none --steps 3}

start=$SECONDS
mkdir -p "$OUT"
logs=$(mktemp -d)
summary="$OUT/summary.md"
results="$logs/results.txt"  # one line per stage: name|result|seconds
: > "$results"
status=0

note() { printf '%s\n' "$*" >> "$summary"; }
want() { [[ ",$STAGES," == *",$1,"* ]]; }
pack() { tar czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null; }
left() { echo $((DEADLINE - (SECONDS - start) - RESERVE)); }
# Seconds a stage may take: its own limit, or what is left before the deadline.
budget() {
  local l
  l=$(left)
  ((l < $1)) && echo "$l" || echo "$1"
}
record() {  # stage result seconds [detail]
  printf '%s|%s|%s\n' "$1" "$2" "$3" >> "$results"
  note "- **$1**: $2 (${3} s)${4:+ - $4}"
  case $2 in passed|skipped:\ not\ in\ STAGES) ;; *) status=1 ;; esac
}
finish() {
  {
    echo
    echo "## Result ($((SECONDS - start)) s of a ${DEADLINE} s deadline)"
    echo
    echo "| stage | result | seconds |"
    echo "|---|---|---|"
    while IFS='|' read -r s r t; do echo "| $s | $r | $t |"; done < "$results"
  } >> "$summary"
  pack
  cat "$summary"
}
trap finish EXIT

if [[ -n ${EBAC_GPU_CHECK_GPU:-} ]]; then
  gpu=$EBAC_GPU_CHECK_GPU
elif nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  gpu=1
else
  gpu=0
fi

{
  echo "# gpu-check $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo '```'
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1 | head -3
  else
    echo "nvidia-smi: not found"
  fi
  for tool in nvcc compute-sanitizer ncu python3; do
    command -v $tool > /dev/null || echo "$tool: not found"
  done
  command -v nvcc > /dev/null && nvcc --version | tail -1
  echo "cores: $(nproc); GPU visible: $gpu; stages: $STAGES"
  echo '```'
  echo
} >> "$summary"

# run_stage NAME LIMIT NEEDS_GPU NEEDS_FILE COMMAND: runs COMMAND (bash -c)
# in a time box (timeout kills its whole process group), its output in
# NAME.log, and records how it ended. NEEDS_FILE ("" for none) must exist.
run_stage() {
  local name=$1 limit=$2 needs_gpu=$3 needs=$4 cmd=$5 t0=$SECONDS t rc
  if ! want "$name"; then record "$name" "skipped: not in STAGES" 0; return 2; fi
  if [[ $needs_gpu == 1 && $gpu != 1 ]]; then record "$name" "skipped: no GPU" 0; return 2; fi
  if (($(left) < 3)); then record "$name" "skipped: no time left" 0; return 2; fi
  if [[ -n $needs && ! -e $needs ]]; then record "$name" "skipped: $needs not built" 0; return 2; fi
  t=$(budget "$limit")
  timeout -k 5 "$t" bash -c "$cmd" > "$logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) record "$name" passed $((SECONDS - t0)) ;;
    124 | 137) record "$name" "TIMED OUT after ${t} s" $((SECONDS - t0)) "see $name.log" ;;
    *) record "$name" "FAILED (exit $rc)" $((SECONDS - t0)) "see $name.log" ;;
  esac
  pack
  return $rc
}

if [[ -n ${EBAC_GPU_CHECK_STUB:-} ]]; then
  IFS=: read -r stub_name stub_limit stub_cmd <<< "$EBAC_GPU_CHECK_STUB"
  STAGES="$STAGES,$stub_name"
  run_stage "$stub_name" "$stub_limit" 0 "" "$stub_cmd"
fi

# --- builds -----------------------------------------------------------------
# torch-build first, in the background: it needs no result of `build`.
torch_pid=""
torch_t0=$SECONDS
if want torch-build && { want torch || want torch-report || want torch-all; }; then
  if [[ $gpu != 1 ]]; then
    record torch-build "skipped: no GPU" 0
  else
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
    torch_limit=$(budget "$TORCH_BUILD_TIMEOUT")
    # TORCH_CUDA_ARCH_LIST: the machine's chip only; MAX_JOBS: all cores for
    # torch's ninja. The build only: nothing here touches the GPU.
    TORCH_EXTENSIONS_DIR="$PWD/build/torch_extensions" EBAC_TORCH_CUDA=1 TORCH_CUDA_ARCH_LIST="${cap:-9.0}" MAX_JOBS=$(nproc) \
      timeout -k 5 "$torch_limit" python3 -c 'import sys; sys.path.insert(0, "integrations/pytorch"); import ebac_torch as e
C = e.load_extension(verbose=True)
assert C.has_cuda(), "ebac_torch built without its CUDA backend"
print("built with the CUDA backend")' > "$logs/torch-build.log" 2>&1 &
    torch_pid=$!
  fi
elif want torch-build; then
  record torch-build "skipped: no torch stage in STAGES" 0
fi

tests=$GPU_BUILD_DIR/tests/cuda/ebac_gpu_tests
bench=$GPU_BUILD_DIR/bench/cuda/ebac_gpu_throughput
gen=""
command -v ninja > /dev/null && gen="-G Ninja"
# -k 0 / -k: a target that fails does not stop the other; each stage below
# runs if its program exists.
run_stage build "$BUILD_TIMEOUT" 0 "" "
  cmake -S . -B '$GPU_BUILD_DIR' $gen -DCMAKE_BUILD_TYPE=Release -DEBAC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DEBAC_BUILD_TESTS=OFF -DEBAC_BUILD_TOOLS=OFF -DEBAC_BUILD_HEADER_CHECKS=OFF -DEBAC_INSTALL=OFF &&
  cmake --build '$GPU_BUILD_DIR' -j $(nproc) --target ebac_gpu_tests ebac_gpu_throughput -- $([[ -n $gen ]] && echo '-k 0' || echo -k)"
[[ -s $logs/build.log ]] && grep -E "error|Error" "$logs/build.log" | head -20 >> "$summary"

# --- GPU tests --------------------------------------------------------------
if run_stage test "$TEST_TIMEOUT" 1 "$tests" "'$tests' --duration=true"; then :; fi
grep -E "test cases:|assertions:|Status" "$logs/test.log" 2> /dev/null | tail -3 >> "$summary"
grep -E "ERROR|FATAL|error:" "$logs/test.log" 2> /dev/null | head -20 >> "$summary"

for tool in memcheck initcheck racecheck; do
  cases=$SANITIZE_CASES
  [[ $tool == racecheck ]] && cases=$RACECHECK_CASES
  no_poison=0
  [[ $tool == initcheck ]] && no_poison=1
  run_stage "$tool" "$SANITIZE_TIMEOUT" 1 "$tests" \
    "EBAC_GPU_TEST_QUICK=1 EBAC_GPU_TEST_NO_POISON=$no_poison compute-sanitizer --tool $tool --error-exitcode 9 \
       '$tests' --test-case='$cases' --test-case-exclude='*large tensor*' --duration=true"
  if [[ -s $logs/$tool.log ]]; then
    # What it found before it ended, however it ended, and how far it got.
    grep -E "^========= " "$logs/$tool.log" | grep -v "ERROR SUMMARY: 0" | head -12 >> "$summary"
    note "  cases finished: $(grep -cE "^[0-9.]+ s: " "$logs/$tool.log"); $(grep -E "ERROR SUMMARY" "$logs/$tool.log" | tail -1)"
  fi
done

# --- speed --------------------------------------------------------------------
# shellcheck disable=SC2016  # $OUT expands inside the stage's shell
run_stage bench "$BENCH_TIMEOUT" 1 "$bench" "'$bench' $BENCH_ARGS > '$OUT/throughput.md'"
if [[ -s $OUT/throughput.md ]]; then
  grep -E "memcpy|^\| (bundled corpus tiled|data)" "$OUT/throughput.md" | head -40 >> "$summary"
  grep -qE "DIFFER|VIOLATED|ERROR" "$OUT/throughput.md" && record bench-checks "FAILED: rows that did not hold their checks" 0
fi

# The first NCU_LAUNCHES launches of `fast`'s kernels (its staged rows come
# first: compress, then decompress) on 256 MiB of the corpus tiled, the
# benchmark's `fast` rows only: the pipeline the issue's yardstick is about,
# at 3% of memcpy when it last ran. Two sections (speed of light, memory
# workload) keep the replays per kernel few.
run_stage ncu "$NCU_TIMEOUT" 1 "$bench" \
  "ncu --kernel-name '$NCU_KERNELS' --launch-count $NCU_LAUNCHES --section SpeedOfLight --section MemoryWorkloadAnalysis \
     --clock-control none '$bench' --corpus data/corpus/manifest.tsv --gib 0.25 --eb 1e-2 --reps 1 --ans-gib 0 --only fast > '$OUT/ncu.txt'"

# --- PyTorch -----------------------------------------------------------------
if [[ -n $torch_pid ]]; then
  wait "$torch_pid"
  rc=$?
  case $rc in
    0) record torch-build passed $((SECONDS - torch_t0)) "in the background" ;;
    124 | 137) record torch-build "TIMED OUT after ${torch_limit} s" $((SECONDS - torch_t0)) "see torch-build.log" ;;
    *) record torch-build "FAILED (exit $rc)" $((SECONDS - torch_t0)) "see torch-build.log"; tail -15 "$logs/torch-build.log" >> "$summary" ;;
  esac
fi
torch_env="TORCH_EXTENSIONS_DIR='$PWD/build/torch_extensions' EBAC_TORCH_CUDA=1 PYTHONUNBUFFERED=1"
# When torch-build ran and failed, the stages below would only fail the same
# way: say so instead. Without torch-build in STAGES they load what an earlier
# call built (build/torch_extensions on the warm machine), or build it in
# their own box. (A GPU-less machine gets "skipped: no GPU" from run_stage.)
torch_missing=""
if [[ $gpu == 1 && -f $logs/torch-build.log ]] && ! grep -q "built with the CUDA backend" "$logs/torch-build.log"; then
  torch_missing="skipped: the extension did not build"
fi
# torch: the CUDA tests (test_cuda.py); torch-report: the figures;
# torch-all: every ebac_torch test under this torch 2.x (CI runs them under
# Debian's torch 1.13 only), with whatever time is left.
for stage in torch torch-report torch-all; do
  if [[ -n $torch_missing ]] && want $stage; then
    record $stage "$torch_missing" 0
    continue
  fi
  case $stage in
    torch)
      run_stage torch "$TORCH_TEST_TIMEOUT" 1 "" \
        "$torch_env python3 -m unittest discover -s integrations/pytorch/tests -p test_cuda.py -v"
      ;;
    torch-report)
      run_stage torch-report "$REPORT_TIMEOUT" 1 "" \
        "$torch_env python3 studies/memory_report.py $REPORT_ARGS --out '$logs/memory-report' &&
         cp '$logs/memory-report/report.md' '$OUT/memory-report.md'"
      ;;
    torch-all)
      run_stage torch-all "$TORCH_ALL_TIMEOUT" 1 "" \
        "$torch_env python3 -m unittest discover -s integrations/pytorch/tests -v"
      ;;
  esac
  [[ $stage != torch-report ]] &&
    grep -E "^(FAIL|ERROR):|^Ran |^OK|^FAILED|skipped 'no CUDA" "$logs/$stage.log" 2> /dev/null | sort | uniq -c | head -20 >> "$summary"
done
exit $status
