#!/usr/bin/env bash
# Lays out every tracked C++ and CUDA file with .clang-format, or checks that it is.
#
#   bash tools/format.sh            rewrites the files in place
#   bash tools/format.sh --check    changes nothing; lists each file that is not laid out
#                                   and exits 1 (CI runs this)
#   bash tools/format.sh FILE...    only these files (either mode)
#
# Needs clang-format 14 (Debian's `clang-format`); other versions lay out some
# constructs differently, so the check names the version it expects.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=0
if [[ "${1:-}" == --check ]]; then check=1; shift; fi

cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then cf=$c; break; fi
done
[[ -n "$cf" ]] || { echo "tools/format.sh: clang-format 14 not found (apt-get install clang-format)" >&2; exit 2; }

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.hpp' '*.cuh' '*.cpp' '*.cu' '*.h' '*.ipp')
fi

if [[ $check == 0 ]]; then
  "$cf" -i --style=file "${files[@]}"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  if ! "$cf" --style=file "$f" | cmp -s - "$f"; then bad+=("$f"); fi
done
if [[ ${#bad[@]} -ne 0 ]]; then
  printf 'tools/format.sh: %d file(s) not laid out as .clang-format says (run: bash tools/format.sh FILE...):\n' "${#bad[@]}" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "tools/format.sh: ${#files[@]} files laid out as .clang-format says"
