#!/usr/bin/env bash
# The project's test command (README, .ci/run). On a fresh Debian 12 machine,
# as root, it installs what the tests need, then:
#   1. release preset: build + ctest -LE gpu (unit, property, header, consumer tests)
#   2. asan preset:    ASan + UBSan build + ctest -LE 'gpu|consumer'
#   3. fuzz preset:    clang + libFuzzer, seed replay + FUZZ_SECONDS of fuzzing
#   4. cuda preset:    compile-only nvcc header checks, when /usr/local/cuda/bin/nvcc exists
# and exits non-zero on the first failure.
#
#   FUZZ_SECONDS=60   fuzzing time (0: build and replay the seeds only)
#   JOBS=N            build and ctest parallelism (default: nproc)
#   EBAC_SKIP_APT=1   never touch apt (report missing packages instead)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
NVCC=/usr/local/cuda/bin/nvcc

# Debian packages the tests need (extend this list when a test needs more).
packages=(
  cmake ninja-build g++     # build
  doctest-dev               # unit and property tests
  python3 python3-numpy     # tests/cli drives the CLI from Python and checks results in numpy
  clang libclang-rt-14-dev  # libFuzzer + sanitizer runtimes for the fuzz preset
  llvm-14                   # llvm-symbolizer: sanitizer reports with file:line
)

stage_start=$SECONDS
stage_name=""
timings=()
stage() {  # stage NAME: closes the previous stage's timer, opens a new one
  if [[ -n "$stage_name" ]]; then timings+=("$(printf '%-28s %5ss' "$stage_name" $((SECONDS - stage_start)))"); fi
  stage_name=$1
  stage_start=$SECONDS
  [[ -n "$1" ]] && printf '\n==== %s ====\n' "$1"
  return 0
}
summary() {
  stage ""
  printf '\n==== timings ====\n'
  printf '%s\n' "${timings[@]}"
  printf '%-28s %5ss\n' total "$SECONDS"
}
trap 'rc=$?; if [[ $rc -ne 0 ]]; then failed=$stage_name; summary; echo "tools/test.sh: FAILED in stage: ${failed:-?} (exit $rc)" >&2; fi' EXIT

stage "packages"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "all ${#packages[@]} packages already installed"
elif [[ "${EBAC_SKIP_APT:-0}" == 1 ]]; then
  echo "missing packages: ${missing[*]} (EBAC_SKIP_APT=1)" >&2
  exit 1
else
  echo "installing: ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "not root and no sudo: install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Sanitizers look for a plain `llvm-symbolizer` in PATH; Debian names it by version.
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" && -x /usr/bin/llvm-symbolizer-14 ]]; then export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14; fi

stage "release: configure + build"
cmake --preset release
cmake --build --preset release -j "$JOBS"
stage "release: ctest"
ctest --test-dir build/release --output-on-failure -LE gpu -j "$JOBS"

stage "asan: configure + build"
cmake --preset asan
cmake --build --preset asan -j "$JOBS"
stage "asan: ctest"
# Consumer builds do not depend on the sanitizer; the release run covers them.
ctest --test-dir build/asan --output-on-failure -LE 'gpu|consumer' -j "$JOBS"

stage "fuzz (${FUZZ_SECONDS}s)"
JOBS=$JOBS bash tools/fuzz.sh

stage "cuda: compile-only"
if [[ -x "$NVCC" ]]; then
  cmake --preset cuda
  cmake --build --preset cuda -j "$JOBS"
else
  echo "SKIPPED: CUDA compile-only build: $NVCC not found, so the headers were not checked under nvcc."
  echo "         (install the CUDA toolkit there, or configure the 'cuda' preset with -DCMAKE_CUDA_COMPILER=...)"
fi

# ---- PyTorch integration (issue #5: integrations/pytorch, tools/accuracy_study.py) ------------
# Needs Debian's /usr/bin/python3 with python3-torch; SKIPPED without it. The extension is
# built in-tree on first use (cached under ~/.cache/torch_extensions). About 5-10 min on 2 cores.
stage "pytorch: ebac_torch tests + smoke study"
if /usr/bin/python3 -c 'import torch, numpy, matplotlib' 2>/dev/null; then
  /usr/bin/python3 -m unittest discover -s integrations/pytorch/tests -v
  /usr/bin/python3 tools/accuracy_study.py --smoke --out build/study-smoke
else
  echo "SKIPPED: /usr/bin/python3 lacks torch/numpy/matplotlib (Debian: python3-torch python3-numpy python3-matplotlib)."
fi
# ---- end of the PyTorch block ------------------------------------------------------------------

summary
echo "tools/test.sh: all stages passed"
