#!/usr/bin/env bash
# One-call GPU check for the lent H200 (device tool), writing under $OUT:
#   build:    configure + build the CUDA targets (sm_90 only: the machine's chip)
#   test:     ctest -L "gpu|cuda_host" (the doctest suites; failures go into the summary)
#   bench:    the GPU throughput benchmark (ANS decode of the training corpus tiled
#             to 1 GiB; 1 GiB tensor + corpus for the device pipelines; memcpy yardstick)
#   sanitize: compute-sanitizer memcheck, initcheck and racecheck on a
#             subset of the GPU tests in quick mode (EBAC_GPU_TEST_QUICK=1:
#             smaller tensors, no large-tensor case; initcheck also without
#             the tests' poisoned allocations, EBAC_GPU_TEST_NO_POISON=1)
#   torch:    ebac_torch with its CUDA backend (in-tree build), its tests on the
#             GPU, studies/gpu_memory_study.py and studies/memory_report.py on four
#             networks (opt-in: STAGES=torch)
# Prepare HERE first: `bash tools/gpu-prepare.sh` (the machine has no
# doctest), then call the device tool with carry ["build/deps"] and
#   OUT=$OUT bash tools/gpu-check.sh
# STAGES picks stages (default build,test,bench,sanitize, in that order);
# BENCH_ARGS the benchmark's arguments, SANITIZE_TOOLS and SANITIZE_CASES
# (doctest's --test-case filter) what the sanitizers run.
# The whole script keeps to DEADLINE seconds (default 420: one 10-minute
# call plus the machine's start leaves room in a 15-minute budget for a
# rerun on the warm machine, where build/gpu is kept): each stage gets at most its own limit (TEST_TIMEOUT,
# BENCH_TIMEOUT, SANITIZE_TIMEOUT per tool) and never more than what is left
# minus a reserve, so the summary is always written. What comes back (the
# device tool returns at most 8 files): summary.md, throughput.md and
# logs.tar.gz (every log, re-packed after each stage).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"  # nvcc, compute-sanitizer where the image does not put them on PATH
OUT=${OUT:-out/gpu-check}
STAGES=${STAGES:-build,test,bench,sanitize}
DEADLINE=${DEADLINE:-420}
TEST_TIMEOUT=${TEST_TIMEOUT:-200}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-150}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-90}
# The benchmark's arguments; "--gib 0 ..." runs its ANS section only.
BENCH_ARGS=${BENCH_ARGS:---corpus data/corpus/manifest.tsv --gib 1 --eb 1e-3 --reps 20 --training data/training-corpus/manifest.tsv --ans-gib 1}
RESERVE=15
start=$SECONDS
mkdir -p "$OUT"
logs=$(mktemp -d)
summary="$OUT/summary.md"
: > "$summary"
status=0

step() { echo "== $* ($(date +%T), ${SECONDS}s)" >> "$summary"; }
want() { [[ ",$STAGES," == *",$1,"* ]]; }
pack() { tar czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null; }
# Seconds a stage may take: its own limit, or what is left before the deadline.
budget() {
  local left=$((DEADLINE - (SECONDS - start) - RESERVE))
  ((left < $1)) && echo $((left > 5 ? left : 5)) || echo "$1"
}
# "failed", or "ran out of time" for timeout's exit code 124.
why() { [ "$1" -eq 124 ] && echo "RAN OUT OF TIME" || echo "FAILED (exit $1)"; }
trap 'pack; cat "$summary"' EXIT

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nvcc --version | tail -2; } | tee "$logs/machine.txt" >> "$summary"

if want build; then
  step "build (Release, CUDA arch 90)"
  gen=""; keep_going="-k"
  command -v ninja >/dev/null && { gen="-G Ninja"; keep_going="-k 0"; }
  # -k 0: a target that fails to build does not stop the others; each stage
  # below runs if its binary exists.
  if cmake -S . -B build/gpu $gen -DCMAKE_BUILD_TYPE=Release -DEBAC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DEBAC_BUILD_TESTS=OFF -DEBAC_BUILD_TOOLS=OFF -DEBAC_BUILD_HEADER_CHECKS=OFF -DEBAC_INSTALL=OFF \
       > "$logs/build.log" 2>&1 &&
     timeout -k 10 "$(budget 300)" cmake --build build/gpu -j 16 -- $keep_going >> "$logs/build.log" 2>&1; then
    echo "build ok" >> "$summary"
  else
    echo "BUILD FAILED (see build.log in logs.tar.gz):" >> "$summary"
    grep -E "error|Error" "$logs/build.log" | head -20 >> "$summary"
    status=1
  fi
  pack
fi

tests=build/gpu/tests/cuda/ebac_gpu_tests
if want test; then
  step "ctest -L gpu|cuda_host"
  if [[ -x $tests ]]; then
    t=$(budget "$TEST_TIMEOUT")
    # -V streams the suite's own output (doctest's counts, skipped-case
    # messages) into the log even when the time limit stops it; the outer
    # timeout is the only limit.
    (cd build/gpu && timeout -k 10 "$t" ctest -L "gpu|cuda_host" -V) > "$logs/ctest.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      echo "gpu tests passed" >> "$summary"
    else
      echo "GPU TESTS $(why $rc)" >> "$summary"; status=1
      grep -E "TEST CASE|ERROR|FATAL|error:|Timeout" "$logs/ctest.log" | head -40 >> "$summary"
    fi
    grep -E "test cases:|assertions:|skipped" "$logs/ctest.log" >> "$summary"
  else
    echo "GPU TESTS NOT BUILT" >> "$summary"; status=1
  fi
  pack
fi

bench=build/gpu/bench/cuda/ebac_gpu_throughput
if want bench; then
  step "GPU throughput (cudaEvent timing, D2D memcpy yardstick)"
  if [[ -x $bench ]]; then
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
    timeout -k 10 "$(budget "$BENCH_TIMEOUT")" "$bench" $BENCH_ARGS > "$OUT/throughput.md" 2> "$logs/bench.err"
    rc=$?
    cat "$OUT/throughput.md" >> "$summary"
    if [ $rc -ne 0 ]; then
      echo "BENCHMARK $(why $rc)" >> "$summary"; cat "$logs/bench.err" >> "$summary"; status=1
    fi
    grep -qE "DIFFER|VIOLATED|ERROR" "$OUT/throughput.md" && { echo "BENCHMARK ROWS FAILED THEIR CHECKS" >> "$summary"; status=1; }
  else
    echo "BENCHMARK NOT BUILT" >> "$summary"; status=1
  fi
  pack
fi

if want sanitize; then
  # A subset that still runs every kernel: the round trips (quick sizes),
  # the rejections of corrupt streams, graph capture, statistics.
  subset=${SANITIZE_CASES:-'device fast*,fused*,device Huffman*,device path handles*,a finite far outlier*,edge tensors*,device decoder*,device compress is capturable*,cuda statistics*,ANS streams*'}
  for tool in ${SANITIZE_TOOLS:-memcheck initcheck racecheck}; do
    step "compute-sanitizer --tool $tool"
    if [[ ! -x $tests ]]; then echo "GPU TESTS NOT BUILT" >> "$summary"; status=1; break; fi
    t=$(budget "$SANITIZE_TIMEOUT")
    if ((t <= 5)); then echo "SKIPPED: no time left" >> "$summary"; status=1; continue; fi
    no_poison=0; [[ $tool == initcheck ]] && no_poison=1
    EBAC_GPU_TEST_QUICK=1 EBAC_GPU_TEST_NO_POISON=$no_poison timeout -k 10 "$t" compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$tests" --test-case="$subset" --test-case-exclude='*large tensor*' --duration=true > "$logs/sanitizer-$tool.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      echo "$tool clean" >> "$summary"
    elif [ $rc -eq 9 ]; then
      echo "$tool REPORTED ERRORS:" >> "$summary"; status=1
    else
      echo "$tool $(why $rc)" >> "$summary"; status=1
    fi
    # What it found before it ended, however it ended, and how far it got.
    grep -E "^========= " "$logs/sanitizer-$tool.log" | grep -v "ERROR SUMMARY: 0" | head -20 >> "$summary"
    echo "test cases finished: $(grep -cE "^[0-9.]+ s: " "$logs/sanitizer-$tool.log")" >> "$summary"
    grep -E "ERROR SUMMARY|test cases:" "$logs/sanitizer-$tool.log" >> "$summary"
    pack
  done
fi

if want torch; then
  step "ebac_torch CUDA backend: build + tests on the GPU"
  py=$(command -v python3)
  export TORCH_EXTENSIONS_DIR="$PWD/build/torch_extensions" EBAC_TORCH_CUDA=1 PYTHONUNBUFFERED=1
  if timeout -k 10 "$(budget 300)" "$py" -c 'import sys; sys.path.insert(0, "integrations/pytorch"); import ebac_torch as e; C = e.load_extension(verbose=True); assert C.has_cuda(), "no CUDA backend"' \
       > "$logs/torch-build.log" 2>&1; then
    echo "extension built with the CUDA backend" >> "$summary"
    if timeout -k 10 "$(budget 200)" "$py" -m unittest discover -s integrations/pytorch/tests -v > "$logs/torch-tests.log" 2>&1; then
      echo "ebac_torch tests passed" >> "$summary"
    else
      echo "EBAC_TORCH TESTS FAILED" >> "$summary"; status=1
      grep -E "^(FAIL|ERROR):" "$logs/torch-tests.log" | head -20 >> "$summary"
    fi
    tail -4 "$logs/torch-tests.log" >> "$summary"
    pack
    step "GPU memory study (ResNet-18/50, 224x224)"
    if timeout -k 10 "$(budget 420)" "$py" studies/gpu_memory_study.py --out "$logs/gpu-study" > "$logs/gpu-study.log" 2>&1; then
      cat "$logs/gpu-study/report.md" >> "$summary"
    else
      echo "GPU MEMORY STUDY FAILED (see gpu-study.log)" >> "$summary"; tail -20 "$logs/gpu-study.log" >> "$summary"; status=1
    fi
    pack
    # The whole-network memory report (studies/memory_report.py) on the GPU:
    # max_memory_allocated instead of RSS, save_on_cpu a real offload.
    step "whole-network memory report on the GPU (VGG-style CNN, small ViT, GPT, resnet18)"
    if timeout -k 10 "$(budget 300)" "$py" studies/memory_report.py --networks vgg-cnn,small-vit,gpt,resnet18 \
         --out "$logs/memory-report" > "$logs/memory-report.log" 2>&1; then
      cat "$logs/memory-report/report.md" >> "$summary"
    else
      echo "MEMORY REPORT FAILED (see memory-report.log)" >> "$summary"; tail -20 "$logs/memory-report.log" >> "$summary"; status=1
    fi
  else
    echo "EXTENSION BUILD FAILED:" >> "$summary"; tail -30 "$logs/torch-build.log" >> "$summary"; status=1
  fi
  pack
fi
step "done"
exit $status
