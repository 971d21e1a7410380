#!/usr/bin/env bash
# Compiles ebac_torch's C++ sources against the headers of a torch 2.x release
# (issue #5: the extension must build against Debian's torch 1.13 and against
# torch 2.x; the lent H200 has 2.11). CI has no torch 2.x to import, so this
# takes the wheel from PyPI without its dependencies, unpacks only
# torch/include, and runs g++ -fsyntax-only over every C++ source of the
# extension, once as the CPU build and once with its CUDA branch
# (EBAC_TORCH_WITH_CUDA, against /usr/local/cuda's headers). cuda_codec.cu
# includes no torch header; tools/test.sh's CUDA stage compiles it.
#
#   bash tools/torch2-headers.sh            # torch 2.11.0 (EBAC_TORCH2_VERSION overrides)
#
# Needs network access to PyPI once (the wheel is cached under build/torch2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=${EBAC_TORCH2_VERSION:-2.11.0}
py=${EBAC_PYTHON:-/usr/bin/python3}
dir=build/torch2/$version
mkdir -p "$dir"
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pyinc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[[ -f "$pyinc/Python.h" ]] || { echo "torch2-headers: no Python.h under $pyinc (Debian: python3-dev)" >&2; exit 1; }

if [[ ! -f "$dir/torch/include/torch/extension.h" ]]; then
  if ! ls "$dir"/torch-"$version"-*.whl >/dev/null 2>&1; then
    echo "downloading the torch $version wheel (headers only are used)"
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
      --platform manylinux_2_28_x86_64 "torch==$version" -d "$dir"
  fi
  whl=$(ls "$dir"/torch-"$version"-*.whl | head -1)
  "$py" - "$whl" "$dir" <<'EOF'
import sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith("torch/include/") or n == "torch/version.py"]
    z.extractall(out, names)
print("unpacked %d header files" % len(names))
EOF
fi
echo "torch headers: $(sed -n 's/^__version__ = //p' "$dir/torch/version.py")"

inc=$dir/torch/include
# The extension's own flag and source lists (ebac_torch/_ext.py, as setup.py reads them).
ext() { "$py" -c "import sys; sys.path.insert(0, 'integrations/pytorch/ebac_torch'); import _ext; print(' '.join($1))"; }
read -r -a ext_flags <<< "$(ext '_ext.CXX_FLAGS')"
read -r -a sources <<< "$(ext '_ext.SOURCES')"
cuda_define=$(ext '[_ext.CUDA_DEFINE]')
flags=(-fsyntax-only "${ext_flags[@]}"
       -DTORCH_EXTENSION_NAME=ebac_torch_C -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=1
       -Iinclude -I"$inc" -I"$inc/torch/csrc/api/include" -I"$pyinc")
status=0
for src in "${sources[@]}"; do
  if g++ "${flags[@]}" "integrations/pytorch/csrc/$src"; then echo "ok: $src"; else echo "FAILED: $src" >&2; status=1; fi
done
if [[ -f /usr/local/cuda/include/cuda_runtime.h ]]; then
  if g++ "${flags[@]}" "$cuda_define" -I/usr/local/cuda/include integrations/pytorch/csrc/bindings.cpp; then
    echo "ok: bindings.cpp with the CUDA branch"
  else
    echo "FAILED: bindings.cpp with the CUDA branch" >&2; status=1
  fi
else
  echo "SKIPPED: bindings.cpp's CUDA branch (no /usr/local/cuda/include/cuda_runtime.h)"
fi
exit $status
