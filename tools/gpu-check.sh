#!/usr/bin/env bash
# One-call GPU check for the lent H200 (device tool), writing everything under $OUT:
#   configure + build the CUDA targets (sm_90 only here: the machine's chip),
#   ctest -L gpu, compute-sanitizer memcheck + racecheck on the GPU tests,
#   the GPU throughput benchmark, and a summary.
# Usage there:  OUT=/some/dir bash tools/gpu-check.sh   (the device tool sets $OUT)
# Nothing here needs the network; cmake, ninja and nvcc come with that image.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
summary="$OUT/summary.md"
: > "$summary"
step() { echo "== $*" | tee -a "$summary"; }
status=0

step "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nvcc --version | tail -2; } | tee "$OUT/machine.txt" >> "$summary"

step "build (Release, CUDA arch 90)"
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
if cmake -S . -B build/gpu $gen -DCMAKE_BUILD_TYPE=Release -DEBAC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DEBAC_BUILD_TESTS=OFF -DEBAC_BUILD_TOOLS=ON -DEBAC_BUILD_HEADER_CHECKS=OFF -DEBAC_INSTALL=OFF > "$OUT/build.log" 2>&1 &&
   cmake --build build/gpu -j 16 >> "$OUT/build.log" 2>&1; then
  echo "build ok" >> "$summary"
else
  echo "BUILD FAILED (see build.log)" >> "$summary"; tail -40 "$OUT/build.log"; exit 1
fi

step "ctest -L gpu"
if (cd build/gpu && ctest -L gpu --output-on-failure --timeout 900) > "$OUT/ctest.log" 2>&1; then
  echo "gpu tests passed" >> "$summary"
else
  echo "GPU TESTS FAILED" >> "$summary"; status=1
fi
tail -5 "$OUT/ctest.log" >> "$summary"

# The large-tensor case is skipped under the sanitizers (they are slow on 2^31 bytes).
for tool in memcheck racecheck; do
  step "compute-sanitizer --tool $tool"
  if compute-sanitizer --tool "$tool" --error-exitcode 9 build/gpu/tests/cuda/ebac_gpu_tests \
       --test-case-exclude='*large tensor*' > "$OUT/sanitizer-$tool.log" 2>&1; then
    echo "$tool clean" >> "$summary"
  else
    echo "$tool REPORTED ERRORS (or could not run; see sanitizer-$tool.log)" >> "$summary"; status=1
  fi
  tail -3 "$OUT/sanitizer-$tool.log" >> "$summary"
done

step "GPU throughput (cudaEvent timing, D2D memcpy yardstick)"
if build/gpu/bench/cuda/ebac_gpu_throughput --corpus data/corpus/manifest.tsv --gib 1 --eb 1e-3 --reps 20 > "$OUT/throughput.md" 2>&1; then
  cat "$OUT/throughput.md" >> "$summary"
else
  echo "BENCHMARK FAILED" >> "$summary"; cat "$OUT/throughput.md" >> "$summary"; status=1
fi
cat "$summary"
exit $status
