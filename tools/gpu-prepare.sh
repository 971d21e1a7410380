#!/usr/bin/env bash
# Run HERE (not on the GPU machine) before a device call: copies what the
# lent H200's image lacks into build/deps (ignored by git), to be carried.
#   doctest/doctest.h - the GPU tests' framework (Debian's doctest-dev here)
# Then call the device tool with carry ["build/deps"], timeout_s 600, and
#   OUT=$OUT bash tools/gpu-check.sh          (build, test, bench, sanitize; 420 s at most)
# and, if the device budget still has 4+ minutes after it, a second call on
# the warm machine with STAGES=torch DEADLINE=<seconds left, minus a margin>.
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
