#!/usr/bin/env bash
# Run HERE (not on the GPU machine) before a device call: copies what the
# lent H100/H200's image lacks into build/deps (ignored by git), to be carried.
#   doctest/doctest.h - the GPU tests' framework (Debian's doctest-dev here)
# Then call the device tool with carry ["build/deps"], timeout_s 420, and
#   OUT=$OUT bash tools/gpu-check.sh
# (every stage: builds, GPU tests, sanitizers, benchmark, ncu, ebac_torch;
# 300 s at most). On the warm machine a rerun rebuilds only what changed
# (build/gpu, build/torch_extensions stay); STAGES picks stages.
set -euo pipefail
cd "$(dirname "$0")/.."
src=/usr/include/doctest/doctest.h
if [[ ! -f $src ]]; then
  echo "gpu-prepare: $src missing; run: apt-get install -y doctest-dev" >&2
  exit 1
fi
mkdir -p build/deps/doctest
cp "$src" build/deps/doctest/
echo "build/deps ready ($(du -sh build/deps | cut -f1)): carry [\"build/deps\"]"
