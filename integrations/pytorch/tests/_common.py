"""Shared set-up for the ebac_torch tests: import path, threads, extension."""

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see docs/pytorch.md, "Threads"

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)            # integrations/pytorch
REPO = os.path.normpath(os.path.join(PKG_ROOT, "..", ".."))
# The tree's package (its extension built on first use), or, with
# $EBAC_TORCH_PATH, an installed copy (e.g. `pip install --target DIR`): the
# tests then check what that install built.
IMPORT_ROOT = os.environ.get("EBAC_TORCH_PATH") or PKG_ROOT
if IMPORT_ROOT not in sys.path:
    sys.path.insert(0, IMPORT_ROOT)

import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads() or 1) or 1)

import ebac_torch  # noqa: E402

C = ebac_torch.load_extension()
if IMPORT_ROOT != PKG_ROOT:  # an install was asked for: make sure it is what runs, not a JIT build
    from ebac_torch import _ext
    if _ext.origin() != "installed" or not os.path.abspath(ebac_torch.__file__).startswith(os.path.abspath(IMPORT_ROOT)):
        raise ImportError("EBAC_TORCH_PATH=%s, but ebac_torch came from %s (extension: %s)"
                          % (IMPORT_ROOT, ebac_torch.__file__, _ext.origin()))


def max_err(x, y):
    """max |x - y| over finite x, in float64."""
    x64, y64 = x.detach().double(), y.detach().double()
    fin = torch.isfinite(x64)
    d = torch.where(fin, (x64 - y64).abs(), torch.zeros_like(x64))
    return float(d.max()) if d.numel() else 0.0


def promised_bound(x, eb, mode):
    """The absolute bound a caller asking for (eb, mode) is promised on x,
    computed here in float64 (not read from the stream's header): eb, or
    eb * (max - min) over x's finite values (0 when there are none)."""
    if mode == "abs":
        return eb
    x64 = x.detach().double().reshape(-1)
    fin = x64[torch.isfinite(x64)]
    return eb * (float(fin.max()) - float(fin.min())) if fin.numel() else 0.0
