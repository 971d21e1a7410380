"""Saved tensors rebuilt from other saved tensors instead of stored.

Some tensors autograd saves are cheap elementwise functions of tensors it
saves anyway:

* in a transformer's MLP, ``nn.GELU`` saves its input ``a`` and the next
  ``nn.Linear`` saves ``dropout(gelu(a))``, which is ``gelu(a) * noise``; the
  noise (0 or 1/(1-p), or a bool mask on CUDA) is saved by the dropout itself;
* in attention, softmax saves its output ``p`` and the matmul with ``v`` saves
  ``dropout(p) = p * noise``;
* ``nn.LayerNorm`` saves its input ``x`` (which a session stores row by row,
  divided by each row's spread sigma: hooks._row_normalized) and the next
  Linear saves its output ``(x - mean) / sigma * w + b``.

A session stores such a tensor as a *recipe* (``gelu``, ``multiply by the
saved noise``): no bytes and no compression. In backward it is rebuilt from
its sources' reconstructions. The sessions learn the recipes from the module
hooks they already run (``nn.GELU``, ``nn.Dropout``); nothing else is guessed.

The bound still holds for every element. A recipe is used only when the
error it carries from its sources, times the op's Lipschitz constant, plus
float32 rounding, is within the bound the session asks for that tensor
(``error_of`` below); otherwise the tensor is compressed like any other. To
make that the usual case, the input a session packs for an ``nn.GELU`` gets
the bound its output will need (``gelu_input_bound``): at mode "rel" the
output's bound is rel x its range, which is about half the input's range
(GELU maps the negative half to [-0.17, 0]), so the input is stored about
one bit per element finer, and the output, as large as the input and often
larger after dropout, is not stored at all. Likewise a LayerNorm's input
rows get the bound its output needs (``layernorm_rows_bound``), if that costs
at most two bits an element.
"""

import math
import weakref

import torch

# max |d gelu / dx| over the reals (at x = sqrt 2: Phi + x phi = 1.12890 for
# the erf form, 1.12899 for the tanh form), rounded up.
GELU_LIPSCHITZ = 1.1291
# min gelu(x) (x = -0.752: -0.16997 erf form, -0.17004 tanh form), rounded down
# in magnitude so that the estimated output range is never too large.
_GELU_MIN = -0.1699
# The input's bound is aimed this far below what the output needs, so that a
# dropout that happens to drop the largest outputs still leaves the output's
# range, and with it its bound, large enough (else the output is compressed).
GELU_MARGIN = 1.02
# Float32 rounding of a rebuilt element, against the largest magnitude in
# the tensor: a few ulps for gelu (its erf/tanh) and for each multiplication,
# with room to spare (2^-16 = 128 ulps of the largest element).
_ROUNDING = 2.0 ** -16


def contiguous_key(t):
    """Identity of a contiguous tensor's elements, shared by its reshaped
    views (a matmul saves its 4-d operand as a 3-d view): data pointer,
    element count, dtype, device, version. None for other layouts."""
    if t.layout != torch.strided or not t.is_contiguous():
        return None
    return (t.data_ptr(), t.numel(), t.dtype, t.device, t._version)


# A LayerNorm input is stored finer for its output only if that costs at most
# this factor in bound (two bits an element): beyond it, storing the output is cheaper.
LAYERNORM_MAX_TIGHTENING = 4.0


class RowStatistics:
    """What layernorm_rows_bound needs of a LayerNorm input's stored rows
    (x / sigma per row): shift = the mean of each row, col_lo / col_hi = the
    min / max over rows of rows - shift in each column (float32, as the
    output is rebuilt), and max |rows|, max |shift|."""

    __slots__ = ("shift", "col_lo", "col_hi", "rows_max_abs", "shift_max_abs")

    def __init__(self, shift, col_lo, col_hi, rows_max_abs, shift_max_abs):
        self.shift, self.col_lo, self.col_hi = shift, col_lo, col_hi
        self.rows_max_abs, self.shift_max_abs = float(rows_max_abs), float(shift_max_abs)

    @classmethod
    def of(cls, rows):
        """With torch's ops (any device; the extension's layernorm_rows computes the same for CPU tensors)."""
        shift = rows.mean(dim=1)
        col_lo, col_hi = torch.aminmax(rows - shift[:, None], dim=0)
        return cls(shift, col_lo, col_hi, max_magnitude(rows), float(shift.abs().max()))


def layernorm_rows_bound(stats, row_eb, weight, bias, eb, mode):
    """For a LayerNorm input stored as rows (x / sigma per row, whose
    RowStatistics are `stats`) under `row_eb`: (bound, shift, output error)
    where shift = mean / sigma per row (the output is (rows - shift) * w +
    b), bound = the rows' bound that keeps the output within (eb, mode) of
    its own range (never looser than row_eb; row_eb itself when the
    tightening would cost more than LAYERNORM_MAX_TIGHTENING), and the output
    error that bound carries, rounding included."""
    lo, hi = _output_range(stats.col_lo, stats.col_hi, weight, bias)
    w_max = 1.0 if weight is None else float(weight.detach().abs().max())
    need = eb * (hi - lo) if mode == "rel" else eb
    bound = row_eb
    if w_max > 0 and need / (w_max * GELU_MARGIN) < row_eb:
        tighter = need / (w_max * GELU_MARGIN)
        if tighter * LAYERNORM_MAX_TIGHTENING >= row_eb:
            bound = tighter
    # rows - shift and the LayerNorm's own (x - mean) * rstd differ by a few
    # ulps of |rows| + |shift| (cancellation), times |w|.
    rounding = 2.0 ** -20 * (stats.rows_max_abs + stats.shift_max_abs) * w_max
    return bound, stats.shift, w_max * bound + rounding


def max_magnitude(t):
    """max |t| of a non-empty tensor in one pass, without forming |t| (NaN if t holds one)."""
    lo, hi = (float(v) for v in torch.aminmax(t))
    return max(abs(lo), abs(hi)) if lo == lo and hi == hi else float("nan")


def _output_range(z_lo, z_hi, weight, bias):
    """min and max of y = z * w + b (w, b per column, float32 as LayerNorm's
    output is rebuilt) without forming y, from each column's smallest and
    largest z (z_lo, z_hi): per column, z * w and then + b are monotone in z
    (rounding included), so y's extremes are those of z's."""
    if weight is not None:
        w = weight.detach().reshape(-1)
        z_lo, z_hi = z_lo * w, z_hi * w
    if bias is not None:
        b = bias.detach().reshape(-1)
        z_lo, z_hi = z_lo + b, z_hi + b
    lo = torch.minimum(z_lo, z_hi).min()  # (a NaN weight propagates, as it did through y)
    hi = torch.maximum(z_lo, z_hi).max()
    return float(lo), float(hi)


def gelu_input_bound(x, eb, mode):
    """The absolute bound for the float input `x` of an nn.GELU such that
    gelu(x) rebuilt from it stays within `eb` (`mode`) of gelu's output
    range, or None to keep the session's bound (abs mode, empty or non-finite
    input). Never larger than the bound asked for x itself."""
    if mode != "rel" or x.numel() == 0 or x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    lo, hi = (float(v) for v in torch.aminmax(x.detach()))
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return None
    g = torch.nn.functional.gelu(torch.tensor([lo, hi], dtype=torch.float64))
    gmin = _GELU_MIN if lo < -0.75 < hi else float(g.min())
    g_range = float(g.max()) - gmin
    own = eb * (hi - lo)
    return min(own, eb * g_range / (GELU_LIPSCHITZ * GELU_MARGIN))


class Recipe:
    """out = op(sources): op "gelu" (params: approximate) or "mul" (out =
    sources[0] * sources[1] * scale; sources[1] is the dropout noise, stored
    losslessly; scale 1 for float noise, 1/(1-p) for a bool mask).

    A source is a packed record (held weakly here: a recipe table must not
    keep blobs alive; a derived record holds them strongly) or another
    Recipe. `shape` is the output's shape."""

    __slots__ = ("op", "sources", "params", "shape", "dtype")

    def __init__(self, op, sources, params, shape, dtype):
        self.op = op
        self.sources = [s if isinstance(s, Recipe) else weakref.ref(s) for s in sources]
        self.params = params
        self.shape = tuple(shape)
        self.dtype = dtype

    def resolved(self):
        """A copy whose packed sources are strong references, or None if one is gone."""
        out = []
        for s in self.sources:
            if isinstance(s, Recipe):
                r = s.resolved()
            else:
                r = s()
            if r is None:
                return None
            out.append(r)
        c = Recipe.__new__(Recipe)
        c.op, c.sources, c.params, c.shape, c.dtype = self.op, out, self.params, self.shape, self.dtype
        return c

    def gain(self):
        """How much a source's error is multiplied on its way to the output (a resolved recipe)."""
        if self.op == "layernorm":
            return float("nan")  # not a multiple of the source's error: see params["error"]
        if self.op == "gelu":
            return GELU_LIPSCHITZ
        return abs(self.params["scale"]) * self.params["noise_max"]


def error_of(node, packed_error):
    """Bound on the error of a resolved recipe's output before rounding, or
    None when a source's error is unknown or the noise is not exact.
    `packed_error(p)` gives a packed record's bound (0 for a lossless one)."""
    if isinstance(node, Recipe):
        if node.op == "layernorm":  # fixed when learned: |w| x the rows' bound + rounding
            return node.params["error"]
        if node.op == "gelu":
            e = error_of(node.sources[0], packed_error)
            return None if e is None else GELU_LIPSCHITZ * e
        e_x = error_of(node.sources[0], packed_error)
        e_n = error_of(node.sources[1], packed_error)
        if e_x is None or e_n != 0.0:
            return None
        return node.gain() * e_x
    return packed_error(node)


def fits(node, top, eb_abs, packed_error):
    """Whether rebuilding a tensor whose largest magnitude is `top` from the
    resolved recipe `node` keeps every element within eb_abs: the carried
    error plus rounding (see _ROUNDING) against `top` (for a dropout's output
    the elements it keeps are its only nonzero ones, so their rounding is
    bounded by it too)."""
    e = error_of(node, packed_error)
    if e is None or not (math.isfinite(eb_abs) and math.isfinite(top)):
        return False
    return e + _ROUNDING * (top + e) <= eb_abs


def rebuild(node, value_of, rows_of):
    """The output of a resolved recipe; `value_of(p)` reconstructs a packed
    source, `rows_of(p)` a LayerNorm input's stored rows (x / sigma)."""
    if not isinstance(node, Recipe):
        return value_of(node)
    if node.op == "layernorm":
        q = node.sources[0]
        rows = rebuild(q, value_of, rows_of) if isinstance(q, Recipe) else rows_of(q)
        y = rows - node.params["shift"][:, None]  # a new tensor: the steps below work in place
        if node.params["weight"] is not None:
            y.mul_(node.params["weight"].reshape(1, -1))
        if node.params["bias"] is not None:
            y.add_(node.params["bias"].reshape(1, -1))
        return y.reshape(node.shape)
    xs = [rebuild(s, value_of, rows_of) for s in node.sources]
    if node.op == "gelu":
        y = torch.nn.functional.gelu(xs[0], approximate=node.params["approximate"])
    else:
        n = xs[1]
        # A source rebuilt from a recipe (dropout after GELU) is this call's own new tensor: the
        # product goes into it. A stored source's value may be handed to its own unpack: not touched.
        fresh = isinstance(node.sources[0], Recipe) and xs[0].shape == n.shape and xs[0].dtype == torch.float32
        y = xs[0].mul_(n) if fresh else xs[0] * n
        if n.dtype == torch.bool:
            y.mul_(node.params["scale"])  # in place on the product
    return y.reshape(node.shape)
