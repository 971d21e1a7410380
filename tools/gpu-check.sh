#!/usr/bin/env bash
# One-call GPU check for the lent H200 (device tool), writing everything under $OUT:
#   build:    configure + build the CUDA targets (sm_90 only here: the machine's chip)
#   test:     ctest -L gpu
#   sanitize: compute-sanitizer memcheck + racecheck on the GPU tests
#   bench:    the GPU throughput benchmark (1 GiB tensor + corpus, memcpy yardstick)
#   torch:    ebac_torch with its CUDA backend (in-tree build), its tests on the
#             GPU, and tools/gpu_memory_study.py (ResNet-18/50 peak memory and
#             step time, plain vs compressed, largest batch in a fixed budget)
# and a summary. STAGES selects (default: all, in this order); a 10-minute
# device call may not hold all of them, so the first call can run
# STAGES=build,test,sanitize,bench and a second STAGES=torch.
# Each stage has a time limit (TEST_TIMEOUT, SANITIZE_TIMEOUT, BENCH_TIMEOUT
# seconds) so that one 10-minute call always ends with a summary; a stage
# that runs out says so and the next one runs.
# Usage there:  OUT=/some/dir bash tools/gpu-check.sh   (the device tool sets $OUT)
# Nothing here needs the network; cmake, ninja and nvcc come with that image.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
STAGES=${STAGES:-build,test,sanitize,bench,torch}
TEST_TIMEOUT=${TEST_TIMEOUT:-200}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-110}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-120}
# "failed", or "ran out of time" for timeout's exit code 124.
why() { [ "$1" -eq 124 ] && echo "RAN OUT OF TIME" || echo "FAILED (exit $1)"; }
mkdir -p "$OUT"
summary="$OUT/summary.md"
: > "$summary"
step() { echo "== $* ($(date +%T))" | tee -a "$summary"; }
want() { [[ ",$STAGES," == *",$1,"* ]]; }
status=0

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nvcc --version | tail -2; } | tee "$OUT/machine.txt" >> "$summary"

if want build || want test || want sanitize || want bench; then
step "build (Release, CUDA arch 90)"
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
if cmake -S . -B build/gpu $gen -DCMAKE_BUILD_TYPE=Release -DEBAC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DEBAC_BUILD_TESTS=OFF -DEBAC_BUILD_TOOLS=ON -DEBAC_BUILD_HEADER_CHECKS=OFF -DEBAC_INSTALL=OFF > "$OUT/build.log" 2>&1 &&
   cmake --build build/gpu -j 16 >> "$OUT/build.log" 2>&1; then
  echo "build ok" >> "$summary"
else
  echo "BUILD FAILED (see build.log)" >> "$summary"; tail -40 "$OUT/build.log"; exit 1
fi
fi

if want test; then
step "ctest -L gpu"
(cd build/gpu && timeout "$TEST_TIMEOUT" ctest -L gpu --output-on-failure --timeout "$TEST_TIMEOUT") > "$OUT/ctest.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  echo "gpu tests passed" >> "$summary"
else
  echo "GPU TESTS $(why $rc)" >> "$summary"; status=1
fi
tail -5 "$OUT/ctest.log" >> "$summary"
fi

if want sanitize; then
# The large-tensor case is skipped under the sanitizers (they are slow on 2^31 bytes).
for tool in memcheck racecheck; do
  step "compute-sanitizer --tool $tool"
  timeout "$SANITIZE_TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 9 build/gpu/tests/cuda/ebac_gpu_tests \
       --test-case-exclude='*large tensor*' > "$OUT/sanitizer-$tool.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "$tool clean" >> "$summary"
  elif [ $rc -eq 9 ]; then
    echo "$tool REPORTED ERRORS (see sanitizer-$tool.log)" >> "$summary"; status=1
  else
    echo "$tool $(why $rc) (see sanitizer-$tool.log)" >> "$summary"; status=1
  fi
  tail -3 "$OUT/sanitizer-$tool.log" >> "$summary"
done
fi

if want bench; then
step "GPU throughput (cudaEvent timing, D2D memcpy yardstick)"
timeout "$BENCH_TIMEOUT" build/gpu/bench/cuda/ebac_gpu_throughput --corpus data/corpus/manifest.tsv --gib 1 --eb 1e-3 --reps 20 \
  > "$OUT/throughput.md" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  cat "$OUT/throughput.md" >> "$summary"
else
  echo "BENCHMARK $(why $rc)" >> "$summary"; cat "$OUT/throughput.md" >> "$summary"; status=1
fi
fi

if want torch; then
step "ebac_torch CUDA backend: build + tests on the GPU"
py=$(command -v python3)
export TORCH_EXTENSIONS_DIR="$PWD/build/torch_extensions" EBAC_TORCH_CUDA=1
if "$py" -c 'import sys; sys.path.insert(0, "integrations/pytorch"); import ebac_torch as e; C = e.load_extension(verbose=True); assert C.has_cuda(), "no CUDA backend"' \
     > "$OUT/torch-build.log" 2>&1; then
  echo "extension built with the CUDA backend" >> "$summary"
  if "$py" -m unittest discover -s integrations/pytorch/tests -v > "$OUT/torch-tests.log" 2>&1; then
    echo "ebac_torch tests passed" >> "$summary"
  else
    echo "EBAC_TORCH TESTS FAILED" >> "$summary"; status=1
  fi
  tail -4 "$OUT/torch-tests.log" >> "$summary"
  step "GPU memory study (ResNet-18/50, 224x224)"
  if timeout 420 "$py" tools/gpu_memory_study.py --out "$OUT/gpu-study" > "$OUT/gpu-study.log" 2>&1; then
    cat "$OUT/gpu-study/report.md" >> "$summary"
  else
    echo "GPU MEMORY STUDY FAILED (see gpu-study.log)" >> "$summary"; tail -20 "$OUT/gpu-study.log" >> "$summary"; status=1
  fi
else
  echo "EXTENSION BUILD FAILED (see torch-build.log)" >> "$summary"; tail -30 "$OUT/torch-build.log" >> "$summary"; status=1
fi
fi
cat "$summary"
exit $status
