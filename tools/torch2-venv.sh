#!/usr/bin/env bash
# Runs ebac_torch on a current torch 2.x CPU build (issue 50 item 6), outside CI:
# it needs network access to PyPI and takes minutes (the torch wheel alone is
# close to 1 GB; building the extension and the smokes take ~10 min on 2 cores).
#
#   bash tools/torch2-venv.sh                 # torch 2.15.0 (EBAC_TORCH2_VERSION overrides)
#   EBAC_TORCH2_STEPS=install bash tools/torch2-venv.sh   # only create the venv
#
# What it does:
#   1. creates build/torch2-venv/<version> (python3 -m venv, no system packages,
#      so Debian's torch 1.13 cannot leak in);
#   2. installs torch from PyPI with --no-deps plus only the pure-Python packages
#      torch imports (filelock, typing-extensions, sympy, networkx, jinja2, fsspec)
#      and what ebac_torch, its tests and the studies use (numpy, setuptools, wheel,
#      matplotlib). The Linux wheel on PyPI declares ~15 NVIDIA CUDA packages
#      (several GB); a CPU-only machine does not need them: torch loads its CUDA
#      libraries lazily, and `import torch` is checked right after. Should that
#      check fail, it installs the full dependency set instead (set
#      EBAC_TORCH2_FULL=1 to start with it);
#   3. builds the extension against that torch (pip --no-build-isolation --target);
#   4. runs the PyTorch unit tests, memory_report.py --smoke and
#      peak_step.py --smoke --networks resnet20 with the venv's python;
#   5. prints a summary (torch version, tests run/failed/skipped, the smoke
#      figures) and writes it to build/torch2-venv/<version>/summary.txt.
# docs/pytorch.md ("torch 2.x") records a run of it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=${EBAC_TORCH2_VERSION:-2.15.0}
steps=${EBAC_TORCH2_STEPS:-install,build,test,smoke}
root=build/torch2-venv/$version
venv=$root/venv
py=$PWD/$venv/bin/python
site=$PWD/$root/ebac_torch_site
mkdir -p "$root"
log() { echo "torch2-venv: $*" >&2; }
has() { [[ ",$steps," == *",$1,"* ]]; }

if has install; then
  [[ -x "$py" ]] || /usr/bin/python3 -m venv "$venv" || { log "python3 -m venv failed"; exit 1; }
  "$py" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  if [[ "${EBAC_TORCH2_FULL:-0}" != 1 ]]; then
    "$py" -m pip install -q --no-deps "torch==$version" || { log "pip install torch==$version failed"; exit 1; }
    "$py" -m pip install -q filelock typing-extensions sympy networkx jinja2 fsspec \
      numpy "setuptools>=77" wheel matplotlib || { log "installing torch's Python dependencies failed"; exit 1; }
  fi
  if [[ "${EBAC_TORCH2_FULL:-0}" == 1 ]] || ! "$py" -c 'import torch; torch.ones(2).sum()'; then
    log "import torch failed with --no-deps; installing torch's full dependency set"
    "$py" -m pip install -q "torch==$version" numpy "setuptools>=77" wheel matplotlib || { log "full install failed"; exit 1; }
  fi
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda build", torch.version.cuda, "available", torch.cuda.is_available())' \
    || { log "import torch fails"; exit 1; }
fi

status=0
if has build; then
  rm -rf "$site"
  log "building the extension against $("$py" -c 'import torch; print(torch.__version__)')"
  if ! PATH=/usr/lib/ccache:$PATH EBAC_TORCH_CUDA=0 "$py" -m pip install -q --no-build-isolation --no-deps \
        --target "$site" integrations/pytorch > "$root/build.log" 2>&1; then
    log "extension build FAILED (see $root/build.log)"; tail -30 "$root/build.log" >&2; exit 1
  fi
fi

if has test; then
  log "unit tests"
  EBAC_TORCH_PATH=$site "$py" -m unittest discover -s integrations/pytorch/tests > "$root/tests.log" 2>&1 || status=1
  tail -5 "$root/tests.log" >&2
fi

if has smoke; then
  log "memory report smoke"
  EBAC_TORCH_PATH=$site "$py" studies/memory_report.py --smoke --out "$root/memory-report-smoke" \
    > "$root/memory-report-smoke.log" 2>&1 || status=1
  tail -3 "$root/memory-report-smoke.log" >&2
  log "peak_step smoke"
  EBAC_TORCH_PATH=$site "$py" studies/peak_step.py --smoke --networks resnet20 --out "$root/peak-step-smoke" \
    > "$root/peak-step-smoke.log" 2>&1 || status=1
  tail -3 "$root/peak-step-smoke.log" >&2
fi

# Summary: versions, unittest's own counts, the smokes' main tables (from their report.md).
"$py" - "$root" <<'EOF' | tee "$root/summary.txt"
import os, re, sys
root = sys.argv[1]
import torch
print("torch %s (Python %s)" % (torch.__version__, sys.version.split()[0]))
t = os.path.join(root, "tests.log")
if os.path.exists(t):
    text = open(t).read()
    ran = re.findall(r"^Ran (\d+) tests?", text, re.M)
    tail = re.findall(r"^(OK.*|FAILED.*)$", text, re.M)
    print("unit tests: ran %s, %s" % (ran[-1] if ran else "?", tail[-1] if tail else "no result line"))
    for name in re.findall(r"^(?:FAIL|ERROR): (\S+ \(\S+\))", text, re.M):
        print("  failed: " + name)
for name, header in (("memory-report-smoke", "| network | saved raw MB"), ("peak-step-smoke", "| network | way | peak rise")):
    p = os.path.join(root, name, "report.md")
    if not os.path.exists(p):
        print("%s: no report.md" % name)
        continue
    lines = open(p).read().splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith(header)), None)
    print("%s (%s):" % (name, p))
    if at is None:
        print("  (no table)")
        continue
    for l in lines[at:]:
        if not l.startswith("|"):
            break
        print("  " + l)
EOF
exit $status
