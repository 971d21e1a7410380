#!/usr/bin/env bash
# Run HERE (not on the GPU machine) before a device call: copies what the
# lent H200's image lacks into build/deps (ignored by git), to be carried.
#   doctest/doctest.h - the GPU tests' framework (Debian's doctest-dev here)
# Then call the device tool with carry ["build/deps"] and the command
#   OUT=$OUT bash tools/gpu-check.sh          (build, test, bench, sanitize)
# and, if device time is left, STAGES=torch in a second call.
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
