"""Compressing the tensors autograd saves for backward.

``compressed_activations(...)`` installs a pair of
``torch.autograd.graph.saved_tensors_hooks``: every tensor autograd saves
inside the ``with`` block goes through ``pack`` (compress) and, in backward,
through ``unpack`` (decompress). What is compressed, what is kept, and what
is counted:

* parameters (leaves that require grad, views of them, and with ``model=``
  every parameter and buffer of the model) are handed back untouched and are
  not counted as activation memory: they exist anyway;
* floating-point tensors (float32, float16, bfloat16) with at least
  ``min_numel`` elements are compressed under the error bound (a tensor of
  at most 16 distinct values, such as a dropout mask, losslessly);
* integer and bool tensors (max-pool indices, bool dropout masks, labels)
  with at least ``min_numel`` elements are compressed losslessly; the
  indices a ``nn.MaxPool1d/2d/3d`` saves are coded as offsets inside their
  pooling windows (the geometry comes from the module and its input);
* everything else that autograd saves (float64, complex, tiny tensors,
  tensors on a device without a backend) is kept as is and counted with its
  raw size, so the reported ratio covers every saved byte;
* a view that repeats its elements (a broadcast operand such as
  ``b.expand(2048, 4096)`` of a 1 x 4096 ``b``) is kept as is (kept reason
  "broadcast") and counted as the memory it reaches, as plain PyTorch keeps it;
* the float32 input an ``nn.LayerNorm`` saves is compressed row by row in
  LayerNorm's own units (``layernorm_rows``): each row divided by its
  standard deviation, under the bound scaled so that no element's error
  exceeds the one asked for. A row with a small spread (a ViT's class token
  at initialisation) otherwise comes back with an error of several times its
  own scale, which LayerNorm's backward multiplies by 1/std;
* the mean and 1/sigma an ``nn.LayerNorm`` saves (one element a row) are
  kept raw (kept reason "norm-statistics"): its backward scales a whole row's
  gradients by them, and a bound relative to their range (one class-token row
  can stretch it 20x) moved the other rows' 1/sigma by tens of percent;
* the input a BatchNorm saves is compressed under ``batchnorm_bound_scale``
  (default 0.5) times the session's bound when that bound is the session's
  default (``bounds`` and ``policy`` answers are used as given). BatchNorm's
  gamma gradient sums dy * error / std over a channel against a gradient
  that is itself a cancelling sum, so at one bound its relative error is up
  to 2-2.5x a convolution weight's (docs/error-model.md, section 6.6);
* a tensor saved twice (a ReLU output that the next conv saves too) is
  stored and counted once: same storage (checked through a weak reference,
  so a recycled address never matches), data pointer, shape, strides, dtype
  and version;
* a saved tensor changed in place before backward (a kept or compressed
  tensor still alive, or a parameter) makes backward raise autograd's own
  error ("one of the variables needed for gradient computation has been
  modified by an inplace operation"), which autograd does not check for
  tensors that saved_tensors_hooks handle. A compressed tensor that is gone
  by then cannot be asked; its blob holds the values it was saved with.

A "pass" is the lifetime of the saved tensors of one (or several
overlapping) autograd graphs: it starts with the first tensor packed while
nothing from an earlier pass is alive, and is complete once backward (or the
end of the graph) has freed all of them. ``stats()`` reports the latest pass.
"""

import math
import threading
import time
import warnings
import weakref
from collections import OrderedDict

import torch

from . import _ext
from . import derived as _derived
from . import sliced_conv as _sliced_conv

_FLOAT_CODES = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}
# Every dtype ebac codes, as its element code (ebac::dtype): floats under the
# bound, the integer and bool ones losslessly.
_ELEM_CODES = {**_FLOAT_CODES, torch.bool: 4, torch.uint8: 5, torch.int8: 6, torch.int16: 7, torch.int32: 8,
               torch.int64: 9}
_POOLS = (torch.nn.MaxPool1d, torch.nn.MaxPool2d, torch.nn.MaxPool3d)
_BATCHNORMS = (torch.nn.modules.batchnorm._BatchNorm,)  # BatchNorm1d/2d/3d, SyncBatchNorm
# Modules whose input the pre-hook records, so that pack can tell it apart from
# other tensors they save: LayerNorm (its rows), BatchNorm (its bound), GELU (derived.py).
_INPUT_READERS = (torch.nn.LayerNorm, torch.nn.GELU) + _BATCHNORMS
BATCHNORM_BOUND_SCALE = 0.5  # compressed_activations' default batchnorm_bound_scale
# The pipeline "auto" picks per device: the one with the best memory/time
# trade measured on whole training steps (docs/pytorch.md, "Which pipeline").
# On the host `balanced` takes 11-19% less step time than `max` for 13-20%
# more stored bytes (resnet20 / vit12 at rel 1e-2, one thread, batch 256:
# 9.1x / 12.9x against 10.9x / 14.6x; steps 2.59 / 9.77 s against 3.19 /
# 10.94 s in the recorded run), and the peak rise stays below per-block
# checkpointing's on both, with step times level with checkpointing's within
# the machine's noise (1.02x / 1.03x medians over four rounds). `balanced`
# has no CUDA implementation; there `ratio` is the best ratio. All
# reconstruct the same values.
AUTO_PIPELINES = {"cpu": "balanced", "cuda": "ratio"}


def resolve_pipeline(pipeline, t):
    """The pipeline a session uses for tensor t: `pipeline`, or for "auto" the device's (AUTO_PIPELINES)."""
    if pipeline != "auto":
        return pipeline
    return AUTO_PIPELINES.get(t.device.type, "ratio")


# A stream's fixed header and checksum (docs/format.md): a tensor of fewer
# bytes than its stream's header cannot get smaller.
_STREAM_OVERHEAD = 112 + 8


def _tuple(v, d):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * d


def pooling_geometry(module, input_shape, indices):
    """(input, kernel, stride, padding, dilation) of a MaxPoolNd's saved
    indices, or None when `indices` is not that pool's output (shape)."""
    d = 1 if isinstance(module, torch.nn.MaxPool1d) else 2 if isinstance(module, torch.nn.MaxPool2d) else 3
    if input_shape is None or len(input_shape) < d or indices.dim() < d:
        return None
    kernel = _tuple(module.kernel_size, d)
    stride = _tuple(module.stride if module.stride is not None else module.kernel_size, d)
    padding = _tuple(module.padding, d)
    dilation = _tuple(module.dilation, d)
    inp = tuple(int(v) for v in input_shape[-d:])
    out = tuple(int(v) for v in indices.shape[-d:])
    for j in range(d):  # the output size PyTorch computes, floor or ceil mode
        span = inp[j] + 2 * padding[j] - dilation[j] * (kernel[j] - 1) - 1
        lo = span // stride[j] + 1
        hi = -(-span // stride[j]) + 1
        if hi > lo and (hi - 1) * stride[j] >= inp[j] + padding[j]:
            hi -= 1
        if out[j] not in (lo, hi):
            return None
    return [list(inp), list(kernel), list(stride), list(padding), list(dilation)]

# The CUDA backend's kernels (ebac::cuda::kernel_path, docs/cuda.md): all give
# the same stream; the host backend ignores the choice.
KERNEL_PATHS = ("staged", "fused", "single_pass")


def _check_kernel_path(kernel_path):
    if kernel_path not in KERNEL_PATHS:
        raise ValueError("ebac_torch: kernel_path must be one of %s, got %r" % (", ".join(KERNEL_PATHS), kernel_path))
    return kernel_path

_state = threading.local()  # .boundary: (eb, mode, pipeline) while ebac_torch.checkpoint saves a block's inputs


class boundary_bound:
    """While active (this thread), tensors packed by a session get the bound
    (eb, mode) instead of the session's (and `pipeline`, None: the
    session's), and never share a blob with an
    earlier save of the same tensor (which may hold it under a looser bound):
    ebac_torch.checkpoint keeps a block's inputs this way, because the
    recomputed block carries their error through every layer inside it."""

    def __init__(self, eb, mode, pipeline=None):
        self.spec = (float(eb), "rel" if mode.startswith("rel") else "abs", pipeline)

    def __enter__(self):
        self.prev = getattr(_state, "boundary", None)
        _state.boundary = self.spec
        return self

    def __exit__(self, *exc):
        _state.boundary = self.prev
        return False
_last_session = None


def _table_key(t):
    """A strided tensor's key in a session's dedupe table (checked against its storage on a hit)."""
    return (t.data_ptr(), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t._version)


def _nbytes(t):
    return t.numel() * t.element_size()


def _footprint(t):
    """Bytes of memory a strided tensor reaches: less than _nbytes(t) for a
    view that repeats elements (expand, a broadcast operand), which holds
    only that much however large it looks."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))) * t.element_size()


def _row_normalized(t, ln, eb, mode):
    """The rows of a LayerNorm's float32 input divided by their standard
    deviation, with the absolute bound that keeps every element of the input
    within the one asked for: (rows, sigma, bound), or None when the tensor
    does not qualify (not LayerNorm's input shape, non-finite values, a
    degenerate range). _row_normalization gives the same with the rows'
    statistics.

    LayerNorm's backward sees (x - mean) / sigma per row. A bound relative to
    the whole tensor's range can exceed a row's sigma many times over (a
    ViT's class token row at initialisation: sigma 0.02 against a range of
    6), and that row's gradients are then noise. Here the error of row r is
    at most bound * sigma_r with bound = eb_x / max(sigma): every row gets
    the same error in LayerNorm's units, and no element's error exceeds eb_x
    (sigma_r <= max sigma). The float32 division and multiplication round by
    at most 2^-24 |x| each; the bound leaves 4 x 2^-24 max|x| of room for that.
    """
    r = _row_normalization(t, ln, eb, mode)
    return None if r is None else (r.rows, r.sigma, r.bound)


class RowNormalization:
    """_row_normalization's result: rows = x / sigma per row, sigma, the
    rows' absolute bound, and their derived.RowStatistics."""

    __slots__ = ("rows", "sigma", "bound", "statistics")

    def __init__(self, rows, sigma, bound, statistics):
        self.rows, self.sigma, self.bound, self.statistics = rows, sigma, bound, statistics


def _normalize_rows_torch(x, eps):
    """The extension's layernorm_rows(x, eps) with torch's ops, on any device:
    (rows, sigma, shift, col_lo, col_hi, lo, hi, sigma_max, rows_max_abs,
    shift_max_abs), or None when an element is not finite. The same
    quantities up to rounding (the extension accumulates in double)."""
    # One pass for the range and the finiteness check: aminmax propagates a
    # NaN, and an infinity is an extreme, so both are finite iff every element is.
    lo, hi = (float(v) for v in torch.aminmax(x))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    sigma = (x.var(dim=1, unbiased=False) + eps).sqrt()
    rows = x / sigma[:, None]
    st = _derived.RowStatistics.of(rows)
    return rows, sigma, st.shift, st.col_lo, st.col_hi, lo, hi, float(sigma.max()), st.rows_max_abs, st.shift_max_abs


def _row_normalization(t, ln, eb, mode):
    """_row_normalized as a RowNormalization, or None. A CPU tensor's rows
    and statistics come from the extension's layernorm_rows, in one pass
    over memory (4-6 ms for a 12-block ViT's LayerNorm input, 256 x 50 x
    96, on one core, against 18-23 ms with _normalize_rows_torch's eight
    passes); another device's from _normalize_rows_torch."""
    ns = tuple(ln.normalized_shape)
    if t.dtype != torch.float32 or t.dim() < len(ns) or tuple(t.shape[t.dim() - len(ns):]) != ns:
        return None
    d = 1
    for v in ns:
        d *= int(v)
    x = t.detach().reshape(-1, d)
    if x.shape[0] < 2 or d == 0:
        return None
    if x.device.type == "cpu":
        r = _ext.load().layernorm_rows(x.contiguous(), float(ln.eps))
    else:
        r = _normalize_rows_torch(x, ln.eps)
    if r is None:  # an element is not finite
        return None
    rows, sigma, shift, col_lo, col_hi, lo, hi, smax, rows_max, shift_max = r
    eb_x = eb * (hi - lo) if mode == "rel" else eb
    room = eb_x * (1 - 2.0 ** -20) - 4 * 2.0 ** -24 * max(abs(lo), abs(hi))
    if not (smax > 0 and room > 0):
        return None
    return RowNormalization(rows, sigma, room / smax,
                            _derived.RowStatistics(shift, col_lo, col_hi, rows_max, shift_max))


def round_trip(t, eb, mode="rel", pipeline="auto", threads=None):
    """A float tensor compressed and back as a session stores it (no checksum): (reconstruction, blob)."""
    C = _ext.load()
    th = threads if threads is not None else torch.get_num_threads()
    blob, strides = C.compress(t.detach(), eb, mode, resolve_pipeline(pipeline, t), th, False)
    return C.decompress(blob, list(t.shape), list(strides), _FLOAT_CODES[t.dtype], th), blob


def layernorm_input_round_trip(t, ln, eb, mode="rel", pipeline="auto", threads=None):
    """A LayerNorm's float32 input `t` compressed and back as a session stores it (``layernorm_rows``).

    Returns (reconstruction shaped like t, stored bytes: the blob and the
    row scales), or None when t does not qualify for the row path (a session
    then compresses it like any tensor).
    """
    rows = _row_normalized(t, ln, eb, mode)
    if rows is None:
        return None
    x_rows, sigma, row_eb = rows
    y, blob = round_trip(x_rows, row_eb, "abs", pipeline, threads)
    return (y * sigma[:, None]).reshape(t.shape), blob.numel() + _nbytes(sigma)


class _Packed:
    """What pack() returns for a non-parameter tensor: a blob or the tensor itself."""

    __slots__ = ("session", "blob", "tensor", "sizes", "strides", "elem", "stored", "saves",
                 "unpacks", "cache", "module", "row_scale", "shape", "version", "source", "recipe", "eb_abs",
                 "row_shift", "row_error",
                 "__weakref__")

    def __init__(self, session, stored):
        self.session = session
        self.blob = None
        self.tensor = None
        self.sizes = None
        self.strides = None
        self.elem = 0
        self.stored = stored
        self.saves = 1      # times autograd saved it (dedupe hits + 1)
        self.unpacks = 0
        self.cache = None   # decompressed tensor while more unpacks are expected
        self.module = None  # the module that saved it first
        self.row_scale = None  # LayerNorm rows: the blob holds rows / row_scale (see _row_normalized)
        self.shape = None      # ... and the tensor's shape to restore
        self.version = 0       # the tensor's _version when it was saved (checked at unpack, as autograd does)
        self.source = None     # a compressed tensor: a weak reference to it, for that check
        self.recipe = None     # a derived tensor: the resolved derived.Recipe that rebuilds it (no blob)
        self.eb_abs = None     # a float blob's bound on its elements, once known
        self.row_shift = None  # LayerNorm rows: mean / sigma per row, for the recipe of its output
        self.row_error = None  # ... and the error that output carries when rebuilt

    def __del__(self):
        s = self.session
        if s is not None:
            try:
                s._release(self.stored)
            except Exception:  # noqa: BLE001  (interpreter shutdown: nothing left to account to)
                pass


def _module_record():
    return {"raw_bytes": 0, "stored_bytes": 0, "tensors": 0, "compressed_tensors": 0,
            "sq_error": 0.0, "elements": 0, "max_abs_error": 0.0, "max_error_over_bound": 0.0}


class _Pass:
    def __init__(self, index):
        self.index = index
        self.complete = False
        self.raw_bytes = 0
        self.stored_bytes = 0
        self.tensors = 0
        self.compressed_tensors = 0
        self.kept = {}            # reason -> [tensors, bytes]
        self.duplicates = 0
        self.derived = [0, 0]     # tensors stored as recipes (derived.py), their raw bytes
        self.duplicate_bytes = 0
        self.param_tensors = 0
        self.param_bytes = 0
        self.pack_seconds = 0.0
        self.unpack_seconds = 0.0
        # The codec's own CPU time within pack and unpack (the extension's compress and decompress
        # calls; process CPU seconds, see _codec): ebac_torch's cost per step beyond it is the hooks'.
        self.compress_cpu_seconds = 0.0
        self.decompress_cpu_seconds = 0.0
        self.decompressions = 0
        self.live_stored_bytes = 0
        self.peak_stored_bytes = 0
        self.bound_violations = 0
        self.modules = OrderedDict()
        self.details = []
        self.pending_headers = []  # (detail, header bytes on the host, stream bytes, copied from a GPU)

    def module(self, name):
        m = self.modules.get(name)
        if m is None:
            m = self.modules[name] = _module_record()
        return m

    def _read_pending_headers(self):
        if not self.pending_headers:
            return
        if any(from_gpu for _, _, _, from_gpu in self.pending_headers):
            torch.cuda.synchronize()  # the non-blocking header copies have landed after this
        C = _ext.load()
        for detail, head, size, _ in self.pending_headers:
            info = C.inspect(head, size)
            detail["eb_abs"] = info["eb_abs"]
            detail["outliers"] = info["outliers"]
        self.pending_headers = []

    def as_dict(self):
        self._read_pending_headers()
        d = {
            "pass": self.index,
            "complete": self.complete,
            "raw_bytes": self.raw_bytes,
            "compressed_bytes": self.stored_bytes,
            "ratio": (self.raw_bytes / self.stored_bytes) if self.stored_bytes else float("nan"),
            "tensors": self.tensors,
            "compressed_tensors": self.compressed_tensors,
            "kept": {k: {"tensors": v[0], "bytes": v[1]} for k, v in self.kept.items()},
            "duplicates": self.duplicates,
            "duplicate_bytes": self.duplicate_bytes,
            "derived": {"tensors": self.derived[0], "bytes": self.derived[1]},
            "parameters": {"tensors": self.param_tensors, "bytes": self.param_bytes},
            "pack_seconds": self.pack_seconds,
            "unpack_seconds": self.unpack_seconds,
            "compress_cpu_seconds": self.compress_cpu_seconds,
            "decompress_cpu_seconds": self.decompress_cpu_seconds,
            "decompressions": self.decompressions,
            "peak_compressed_bytes": self.peak_stored_bytes,
            "bound_violations": self.bound_violations,
            "per_module": OrderedDict(),
            "details": [dict(x) for x in self.details],
        }
        for name, m in self.modules.items():
            r = dict(m)
            r["ratio"] = (m["raw_bytes"] / m["stored_bytes"]) if m["stored_bytes"] else float("nan")
            if m["elements"]:
                r["mse"] = m["sq_error"] / m["elements"]
            d["per_module"][name] = r
        return d


def _normalize_bound(v, default_mode, default_pipeline):
    """A policy answer -> (eb, mode, pipeline) or None (keep the tensor raw)."""
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v), default_mode, default_pipeline
    v = tuple(v)
    if len(v) == 2:
        return float(v[0]), v[1], default_pipeline
    if len(v) == 3:
        return float(v[0]), v[1], v[2]
    raise ValueError("ebac_torch: a bound is eb, (eb, mode) or (eb, mode, pipeline), got %r" % (v,))


class compressed_activations:
    """Context manager: compress what autograd saves for backward.

    Args:
        error_bound: the bound (value-range relative with mode="rel":
            |x - y| <= error_bound * (max - min) of each tensor; absolute with
            mode="abs").
        mode: "rel" or "abs".
        pipeline: "auto" (the default: `balanced` for CPU tensors, `ratio`
            for CUDA tensors; see AUTO_PIPELINES), an ebac pipeline name
            ("balanced" (CPU tensors only): ~9.1x on a ResNet-20-shaped CNN
            at rel 1e-2; "max" (CPU tensors only): ~10.9x, slower; "ratio":
            ~9.3x, slower on the host; "fast": ~6.8x, faster; "ratio-flat",
            "rle", "plain") or a "PREDICTOR:QUANTIZER:ENCODER"
            triple. At one bound all these named pipelines reconstruct the same
            values, so the choice never changes training, only size and speed.
            "max-bound" (CPU tensors only) does not: it may quantize linearly,
            so a value within the bound of 0 comes back as 0, which
            breaks a ReLU mask read from the tensor; give it per module (in
            `bounds`) to tensors whose backward needs only their values.
        min_numel: floating-point tensors with fewer elements are kept raw.
        model: optional nn.Module; names per-module statistics with its
            qualified module names and excludes all its parameters and buffers.
        bounds: optional {module name: eb | (eb, mode) | (eb, mode, pipeline) |
            None}; None keeps that module's tensors raw.
        policy: optional callable(module_name, tensor) returning the same kinds
            of values as `bounds`; takes precedence over `bounds`. This is
            where a controller plugs in per-module bounds.
        threads: host threads for compression (default: torch.get_num_threads()).
        checksum: add a checksum to every blob (off: in-memory buffers).
        measure_error: also decompress at pack time and record the realised
            error per module (costs a decompression per tensor; for studies
            and tests).
        unsupported_device: "raw" (keep tensors on a device this build cannot
            compress, with a warning) or "error".
        keep_details: record one dict per saved tensor in stats()["details"].
        kernel_path: the CUDA backend's kernels for CUDA tensors, "staged"
            (default), "fused" or "single_pass" (docs/cuda.md); every path
            writes the same stream and values. CPU tensors ignore it.
        layernorm_rows: compress the float32 input of an nn.LayerNorm row by
            row in LayerNorm's units (see _row_normalized): every element
            still within the bound asked for, every row's error the same
            fraction of its own standard deviation. False: like any tensor.
        batchnorm_bound_scale: the input a BatchNorm module saves is
            compressed under this times `error_bound` (0 < scale <= 1; 1
            turns it off). Applies to the session's default bound only, not
            to `bounds` or `policy` answers. 0.5 keeps every non-negligible
            parameter's gradient cosine >= 0.99 on the study ResNet-20 at rel
            1e-2 (blocks.1.bn1.weight: 0.988 at 1) for 12-17% more stored
            bytes (docs/error-model.md, section 6.6).
        derive: store a saved tensor that is the output of an nn.GELU or of
            a training nn.Dropout whose input is saved too (an MLP's hidden
            activation, dropout of attention probabilities) as a recipe over
            those saved tensors, rebuilt in backward, when the bound allows
            (see ebac_torch/derived.py); an nn.GELU's input is then stored
            under the bound its output needs. False: every tensor is stored.
        conv_backward_slices: None (default: off), an int K >= 1 or "auto":
            nn.Conv1d/2d/3d run in the session through a Function whose
            backward computes the gradients over K slices of the batch
            ("auto": slices of at most sliced_conv.AUTO_SLICE_BYTES of input),
            their input kept through this session as any saved tensor; this
            cuts the convolution backward's working set (see sliced_conv.py).
    """

    def __init__(self, error_bound=1e-2, mode="rel", pipeline="auto", *, min_numel=4096, model=None,
                 bounds=None, policy=None, threads=None, checksum=False, measure_error=False,
                 unsupported_device="raw", keep_details=True, kernel_path="staged", layernorm_rows=True,
                 batchnorm_bound_scale=BATCHNORM_BOUND_SCALE, derive=True, conv_backward_slices=None):
        if mode not in ("rel", "abs", "relative", "absolute"):
            raise ValueError("ebac_torch: mode must be 'rel' or 'abs', got %r" % (mode,))
        if not (error_bound > 0) or not math.isfinite(error_bound):
            raise ValueError("ebac_torch: error_bound must be a finite number > 0, got %r" % (error_bound,))
        if unsupported_device not in ("raw", "error"):
            raise ValueError("ebac_torch: unsupported_device must be 'raw' or 'error'")
        self.kernel_path = _check_kernel_path(kernel_path)
        self.layernorm_rows = bool(layernorm_rows)
        if isinstance(batchnorm_bound_scale, bool) or not isinstance(batchnorm_bound_scale, (int, float)) \
                or not (0 < batchnorm_bound_scale <= 1):
            raise ValueError("ebac_torch: batchnorm_bound_scale must be a number in (0, 1], got %r"
                             % (batchnorm_bound_scale,))
        self.batchnorm_bound_scale = float(batchnorm_bound_scale)
        self.derive = bool(derive)
        self.conv_backward_slices = _sliced_conv.check_slices(conv_backward_slices)
        self.C = _ext.load()
        for p in [pipeline] + [b[2] for b in (bounds or {}).values()
                               if isinstance(b, (tuple, list)) and len(b) == 3]:
            if p != "auto" and not self.C.valid_pipeline(p):
                raise ValueError("ebac_torch: unknown pipeline %r" % (p,))
        self.error_bound = float(error_bound)
        self.mode = "rel" if mode.startswith("rel") else "abs"
        self.pipeline = pipeline
        self.min_numel = int(min_numel)
        self.bounds = dict(bounds or {})
        self.policy = policy
        self.threads = threads
        self.checksum = bool(checksum)
        self.measure_error = bool(measure_error)
        self.unsupported_device = unsupported_device
        self.keep_details = keep_details
        self._lock = threading.RLock()
        self._names = {}
        self._param_ids = set()
        if model is not None:
            self._names = {m: n for n, m in model.named_modules()}
            self._param_ids = {self.C.storage_id(p) for p in model.parameters()}
            self._param_ids |= {self.C.storage_id(b) for b in model.buffers()}
        self._anon = {}
        self._stack = []
        self._pool_inputs = {}
        self._module_inputs = {}  # LayerNorm / BatchNorm / GELU -> its input's (data_ptr, shape, dtype)
        self._table = {}
        self._measuring = False
        self._recipes = {}        # derived.contiguous_key(output) -> (StorageRef, derived.Recipe)
        self._dropout_noise = {}  # nn.Dropout -> the record of the noise it saved, while it runs
        self._live = 0
        self._closed = True       # the latest pass has freed everything it held
        self._pass = None
        self._passes = 0
        self._handles = []
        self._hooks = None
        self._warned_device = False

    # -- context -------------------------------------------------------------
    def __enter__(self):
        global _last_session
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        mm = torch.nn.modules.module
        self._handles = [mm.register_module_forward_pre_hook(self._pre),
                         mm.register_module_forward_hook(self._post)]
        _sliced_conv.enter(self)
        _last_session = self
        return self

    def __exit__(self, *exc):
        _sliced_conv.exit(self)
        for h in self._handles:
            h.remove()
        self._handles = []
        self._stack = []
        self._dropout_noise.clear()
        self._hooks.__exit__(*exc)
        self._hooks = None
        return False

    def _pre(self, module, inputs):
        self._stack.append(module)
        if isinstance(module, _POOLS) and inputs and isinstance(inputs[0], torch.Tensor):
            self._pool_inputs[module] = tuple(inputs[0].shape)
        if isinstance(module, _INPUT_READERS) and inputs and isinstance(inputs[0], torch.Tensor):
            x = inputs[0]
            self._module_inputs[module] = (x.data_ptr(), tuple(x.shape), x.dtype)
        if self.derive and isinstance(module, torch.nn.Dropout):
            self._dropout_noise[module] = None

    def _post(self, module, inputs, output):
        if self.derive and isinstance(module, (torch.nn.GELU, torch.nn.Dropout, torch.nn.LayerNorm)):
            self._learn_recipe(module, inputs, output)
        if self._stack and self._stack[-1] is module:
            self._stack.pop()
        elif module in self._stack:  # an inner forward raised; drop what it left
            del self._stack[self._stack.index(module):]

    # -- derived tensors (see derived.py) -------------------------------------
    def _stored(self, t):
        """The record this pass stored strided tensor t as (same storage, pointer, shape, strides, dtype,
        version: the dedupe table), or None."""
        hit = self._table.get(_table_key(t))
        if hit is None:
            return None
        sref, wref = hit
        p = wref()
        return p if p is not None and sref.same(t) else None

    def _source_of(self, x):
        """The record or recipe x is stored as in this pass, or None."""
        if x.layout != torch.strided:
            return None
        p = self._stored(x)
        if p is not None and p.recipe is None:
            return p
        ck = _derived.contiguous_key(x)
        r = self._recipes.get(ck) if ck is not None else None
        if r is not None and r[0].same(x):
            return r[1]
        return None

    def _learn_recipe(self, module, inputs, output):
        """After an nn.GELU, nn.LayerNorm or nn.Dropout ran: remember how its output is made
        from what this pass has stored, if it is (exact module types only: a
        subclass may compute something else)."""
        with self._lock, torch.no_grad():
            noise = self._dropout_noise.pop(module, None)
            if (type(module) not in (torch.nn.GELU, torch.nn.Dropout, torch.nn.LayerNorm)
                    or getattr(_state, "boundary", None) is not None):
                return
            if not inputs or not isinstance(inputs[0], torch.Tensor) or not isinstance(output, torch.Tensor):
                return
            x = inputs[0]
            if (output is x or output.dtype != torch.float32 or x.dtype != torch.float32
                    or output.shape != x.shape or output.device != x.device):
                return
            ck = _derived.contiguous_key(output)
            src = self._source_of(x)
            if ck is None or src is None:
                return
            if type(module) is torch.nn.LayerNorm:
                if isinstance(src, _derived.Recipe) or src.row_shift is None:
                    return
                w = None if module.weight is None else module.weight.detach().clone()
                b = None if module.bias is None else module.bias.detach().clone()
                rec = _derived.Recipe("layernorm", [src], {"shift": src.row_shift, "weight": w, "bias": b,
                                                           "error": src.row_error}, output.shape, output.dtype)
            elif type(module) is torch.nn.GELU:
                rec = _derived.Recipe("gelu", [src], {"approximate": module.approximate}, output.shape, output.dtype)
            else:
                if noise is None or not module.training or module.inplace or not (0.0 < module.p < 1.0):
                    return
                rec_noise, n = noise
                p_noise = rec_noise()
                if p_noise is None or n.shape != output.shape or not n.is_contiguous() or not x.is_contiguous():
                    return
                scale = 1.0 / (1.0 - module.p)
                if n.dtype == torch.bool:
                    params = {"scale": scale, "noise_max": 1.0}
                elif n.dtype == torch.float32:
                    params = {"scale": 1.0, "noise_max": _derived.max_magnitude(n) if n.numel() else 0.0}
                else:
                    return
                # A spot check that the output is x * noise (* scale): a few
                # thousand evenly spaced elements (no random draw: training's
                # RNG stream stays as it is), within float32 rounding.
                k = min(4096, output.numel())
                idx = torch.arange(k, device=output.device) * (output.numel() // max(k, 1))
                xs, ns, ys = x.reshape(-1)[idx], n.reshape(-1)[idx], output.detach().reshape(-1)[idx]
                want = xs * ns * params["scale"] if n.dtype == torch.bool else xs * ns
                if not bool(((want - ys).abs() <= 2.0 ** -20 * ys.abs()).all()):
                    return
                rec = _derived.Recipe("mul", [src, p_noise], params, output.shape, output.dtype)
            self._recipes[ck] = (self.C.StorageRef(output), rec)

    def _packed_error(self, p):
        """Bound on the error of a stored record's elements (0: exact), None if unknown."""
        if p.tensor is not None:
            return 0.0
        if p.recipe is not None or p.blob is None:
            return None
        if p.elem not in _FLOAT_CODES.values():
            return 0.0
        if p.eb_abs is None:
            blob = p.blob
            k = min(blob.numel(), self.C.max_header_bytes)
            head = blob[:k].cpu() if blob.is_cuda else blob[:k]
            p.eb_abs = float(self.C.inspect(head, blob.numel())["eb_abs"])
        return p.eb_abs

    def _try_derive(self, t, eb, mode):
        """A record that rebuilds t from this pass's stored tensors, or None
        (no recipe for t, a source gone, or the bound does not allow it)."""
        if t.dtype != torch.float32:
            return None
        ck = _derived.contiguous_key(t)
        hit = self._recipes.get(ck) if ck is not None else None
        if hit is None or not hit[0].same(t):
            return None
        node = hit[1].resolved()
        if node is None:
            return None
        if t.numel():
            lo, hi = (float(v) for v in torch.aminmax(t.detach()))
        else:
            lo = hi = 0.0
        eb_abs = eb * (hi - lo) if mode == "rel" else eb
        if not _derived.fits(node, max(abs(lo), abs(hi)), eb_abs, self._packed_error):
            return None
        node.shape = tuple(t.shape)
        p = _Packed(self, 0)
        p.recipe = node
        p.eb_abs = eb_abs
        return p

    def _module_name(self):
        if not self._stack:
            return "<top>"
        m = self._stack[-1]
        n = self._names.get(m)
        if n is not None:
            return n or "<model>"
        n = self._anon.get(m)
        if n is None:
            n = self._anon[m] = "%s#%d" % (type(m).__name__, len(self._anon))
        return n

    # -- stats ---------------------------------------------------------------
    def stats(self):
        """Statistics of the latest pass (see module docstring), as a dict."""
        with self._lock:
            if self._pass is None:
                return _Pass(0).as_dict()
            return self._pass.as_dict()

    def _release(self, stored):
        with self._lock:
            self._live -= 1
            if self._pass is not None:
                self._pass.live_stored_bytes -= stored
                if self._live == 0:
                    self._pass.complete = True
                    self._closed = True
                    self._table.clear()
                    self._recipes.clear()

    def _new_pass_if_idle(self):
        if self._live == 0 and self._closed:
            self._closed = False
            self._passes += 1
            self._pass = _Pass(self._passes)
            self._table.clear()
            self._recipes.clear()

    # -- hooks ---------------------------------------------------------------
    def _is_parameter(self, t):
        if t.requires_grad and t.is_leaf:
            return True
        b = t._base
        if b is not None and b.requires_grad and b.is_leaf:
            return True
        return bool(self._param_ids) and self.C.storage_id(t) in self._param_ids

    def _bound_for(self, name, t):
        boundary = getattr(_state, "boundary", None)
        if boundary is not None:
            return boundary[0], boundary[1], boundary[2] or self.pipeline
        if self.policy is not None:
            v = self.policy(name, t)
        elif name in self.bounds:
            v = self.bounds[name]
        elif self._is_batchnorm_input(t):
            return self.error_bound * self.batchnorm_bound_scale, self.mode, self.pipeline
        else:
            return self.error_bound, self.mode, self.pipeline
        return _normalize_bound(v, self.mode, self.pipeline)

    def _is_batchnorm_input(self, t):
        """True when `t` is the input of the BatchNorm module running now (what it saves for backward)."""
        return self._is_input_of_running(t, _BATCHNORMS)

    def _is_input_of_running(self, t, kinds):
        """True when the module running now is one of `kinds` and `t` is its input (_pre recorded it)."""
        if not self._stack or not isinstance(self._stack[-1], kinds):
            return False
        return self._module_inputs.get(self._stack[-1]) == (t.data_ptr(), tuple(t.shape), t.dtype)

    def _is_row_statistics_of_running_layernorm(self, t):
        """True when the module running now is an nn.LayerNorm and `t` has one element per row of
        its input (the shape of its input with the normalized dims set to 1): its mean or 1/sigma."""
        if not self._stack or not isinstance(self._stack[-1], torch.nn.LayerNorm):
            return False
        ln = self._stack[-1]
        seen = self._module_inputs.get(ln)
        if seen is None:
            return False
        k = len(ln.normalized_shape)
        shape = seen[1]
        return len(shape) >= k and tuple(t.shape) == tuple(shape[:len(shape) - k]) + (1,) * k

    def _keep_reason(self, t):
        if t.layout != torch.strided:
            return "layout"
        if t.dtype not in _ELEM_CODES:
            return "dtype"
        if _footprint(t) < _nbytes(t):
            # A view that repeats its elements (b.expand(...), a broadcast operand): kept as is,
            # it holds only its storage, which compressing its logical size would exceed.
            return "broadcast"
        if t.numel() < self.min_numel or _nbytes(t) <= _STREAM_OVERHEAD + 8 * t.dim():
            return "tiny"  # (a stream is never smaller than its header)
        if self._is_row_statistics_of_running_layernorm(t):
            # LayerNorm's saved mean and 1/sigma, one per row (1/D of its input's bytes): every
            # gradient of a row is scaled by them, and a bound relative to their range (which one
            # row, e.g. a ViT's class token, can stretch 20x past the rest) would move most rows'
            # 1/sigma by tens of percent (docs/error-model.md 6.6).
            return "norm-statistics"
        if t.device.type != "cpu" and not self.C.has_cuda():
            if self.unsupported_device == "error":
                raise RuntimeError("ebac_torch: this build has no %s backend (saved tensor of shape %s)"
                                   % (t.device.type, tuple(t.shape)))
            if not self._warned_device:
                warnings.warn("ebac_torch: built without a %s backend; %s tensors are kept uncompressed"
                              % (t.device.type, t.device.type))
                self._warned_device = True
            return "device"
        return None

    def _pack(self, t):
        t0 = time.perf_counter()
        with self._lock:
            self._new_pass_if_idle()
            P = self._pass
            if self._is_parameter(t):
                P.param_tensors += 1
                P.param_bytes += _nbytes(t)
                return (t, t._version)
            raw = _nbytes(t)
            if t.layout == torch.strided and _footprint(t) < raw:
                raw = _footprint(t)  # a broadcast view: counted as the memory it holds (see _keep_reason)
            key = None
            if t.layout == torch.strided and getattr(_state, "boundary", None) is None:
                key = _table_key(t)
                p = self._stored(t)
                if p is not None:
                    p.saves += 1
                    P.duplicates += 1
                    P.duplicate_bytes += raw
                    return p
            name = self._module_name()
            reason = self._keep_reason(t)
            spec = None
            if reason is None:
                spec = self._bound_for(name, t)
                if spec is None:
                    reason = "policy"
            derived_p = None
            if reason is None and key is not None and self._recipes:
                derived_p = self._try_derive(t, spec[0], spec[1])
            if reason is not None:
                p, detail = self._pack_raw(P, t, name, raw, reason)
            elif derived_p is not None:
                p, detail = self._pack_recipe(P, t, name, raw, derived_p, spec)
            else:
                p, detail = self._pack_compressed(P, t, name, raw, key, spec)
            self._account_packed(P, t, p, name, raw, key, detail)
            P.pack_seconds += time.perf_counter() - t0
            return p

    @staticmethod
    def _detail(name, t, raw, stored):
        return {"module": name, "shape": tuple(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                "raw_bytes": raw, "stored_bytes": stored}

    def _pack_raw(self, P, t, name, raw, reason):
        """A tensor kept as it is (`reason`: why, see _keep_reason)."""
        p = _Packed(self, raw)
        p.tensor = t
        P.kept.setdefault(reason, [0, 0])
        P.kept[reason][0] += 1
        P.kept[reason][1] += raw
        detail = self._detail(name, t, raw, raw)
        detail["kept"] = reason
        return p, detail

    def _pack_recipe(self, P, t, name, raw, p, spec):
        """A tensor stored as the recipe that rebuilds it from its sources (derived.py)."""
        P.derived[0] += 1
        P.derived[1] += raw
        detail = self._detail(name, t, raw, 0)
        detail.update(derived=p.recipe.op, eb=spec[0], mode=spec[1], eb_abs=p.eb_abs)
        if self.measure_error:
            self._measure(P, name, t, p, p.eb_abs, detail)
        return p, detail

    def _codec(self, P, field, fn, *args):
        """Calls the extension's compress or decompress, its CPU time added to P.<field> (P may be None).
        CPU time of the process (time.process_time), so that it counts the codec's OpenMP threads and
        is not inflated by other jobs on the machine; it also counts any other thread of the process
        that runs meanwhile (a data loader's)."""
        t0 = time.process_time()
        out = fn(*args)
        if P is not None:
            setattr(P, field, getattr(P, field) + time.process_time() - t0)
        return out

    def _pack_compressed(self, P, t, name, raw, key, spec):
        """A tensor compressed under its bound: LayerNorm inputs as rows scaled to unit range, GELU
        inputs under the bound their outputs need (derived.py), integer tensors losslessly."""
        eb, mode, pipeline = spec
        pipeline = resolve_pipeline(pipeline, t)
        threads = self.threads if self.threads is not None else torch.get_num_threads()
        lossless = t.dtype not in _FLOAT_CODES
        pooling = None
        if lossless and self._stack and isinstance(self._stack[-1], _POOLS):
            pool = self._stack[-1]
            pooling = pooling_geometry(pool, self._pool_inputs.get(pool), t)
        rows = None
        if not lossless and self.layernorm_rows and self._is_input_of_running(t, torch.nn.LayerNorm):
            rows = _row_normalization(t, self._stack[-1], eb, mode)
        if rows is not None:
            p, row_eb = self._pack_rows(P, t, key, rows, eb, mode, pipeline, threads)
        else:
            c_eb, c_mode = eb, mode
            if (self.derive and not lossless and key is not None and self._is_input_of_running(t, torch.nn.GELU)
                    and type(self._stack[-1]) is torch.nn.GELU):
                g = _derived.gelu_input_bound(t, eb, mode)
                if g is not None:  # the bound its output will need (derived.py)
                    c_eb, c_mode = g, "abs"
            blob, strides = self._codec(P, "compress_cpu_seconds", self.C.compress, t.detach(), c_eb, c_mode, pipeline,
                                        threads, self.checksum, self.kernel_path, pooling)
            p = _Packed(self, blob.numel())
            p.sizes = list(t.shape)
            p.blob, p.strides = blob, list(strides)
        p.elem = _ELEM_CODES[t.dtype]
        P.compressed_tensors += 1
        detail = self._detail(name, t, raw, p.stored)
        detail["pipeline"] = pipeline
        if rows is not None:
            detail["layernorm_rows"] = {"rows": int(p.row_scale.numel()), "bound": row_eb}
        if lossless:
            detail["lossless"] = True
            if pooling is not None:
                detail["pooling"] = pooling
        else:
            detail.update(eb=eb, mode=mode)
        if self.measure_error and not lossless:
            info = self.C.inspect(p.blob)
            detail.update(eb_abs=info["eb_abs"], outliers=info["outliers"])
            # the bound on the tensor's own elements (row_eb scales up to it by at most max sigma)
            eb_x = info["eb_abs"] if rows is None else p.eb_abs
            self._measure(P, name, t, p, eb_x, detail)
        elif self.keep_details:
            # The header's eb_abs and outlier count are read when
            # stats() asks: a device blob's header is copied out
            # without waiting, so packing does not synchronize for it.
            k = min(p.blob.numel(), self.C.max_header_bytes)
            head = p.blob[:k].to("cpu", non_blocking=True) if p.blob.is_cuda else p.blob[:k].clone()
            P.pending_headers.append((detail, head, p.blob.numel(), p.blob.is_cuda))
        return p, detail

    def _pack_rows(self, P, t, key, rows, eb, mode, pipeline, threads):
        """A LayerNorm input stored as rows x / sigma under row_eb (tightened to what its output
        needs when derive is on and that is cheap: derived.layernorm_rows_bound)."""
        x_rows, sigma, row_eb = rows.rows, rows.sigma, rows.bound
        ln = self._stack[-1]
        shift = None
        if self.derive and key is not None and type(ln) is torch.nn.LayerNorm:
            row_eb, shift, row_error = _derived.layernorm_rows_bound(rows.statistics, row_eb, ln.weight, ln.bias, eb,
                                                                     mode)
        blob, strides = self._codec(P, "compress_cpu_seconds", self.C.compress, x_rows, row_eb, "abs", pipeline, threads,
                                    self.checksum, self.kernel_path, None)
        p = _Packed(self, blob.numel() + _nbytes(sigma) + (_nbytes(shift) if shift is not None else 0))
        p.row_scale = sigma
        if shift is not None:
            p.row_shift, p.row_error = shift, row_error
        p.eb_abs = row_eb * float(sigma.max())
        p.shape = tuple(t.shape)
        p.sizes = list(x_rows.shape)
        p.blob, p.strides = blob, list(strides)
        return p, row_eb

    def _account_packed(self, P, t, p, name, raw, key, detail):
        """The pass's and the module's counts of a packed tensor, and its dedupe-table entry."""
        p.module = name
        p.version = t._version
        if self._stack and self._stack[-1] in self._dropout_noise:
            self._dropout_noise[self._stack[-1]] = (weakref.ref(p), t)  # read by _learn_recipe
        if p.tensor is None:
            p.source = weakref.ref(t)
        self._live += 1
        P.tensors += 1
        P.raw_bytes += raw
        P.stored_bytes += p.stored
        P.live_stored_bytes += p.stored
        P.peak_stored_bytes = max(P.peak_stored_bytes, P.live_stored_bytes)
        m = P.module(name)
        m["raw_bytes"] += raw
        m["stored_bytes"] += p.stored
        m["tensors"] += 1
        m["compressed_tensors"] += int(p.blob is not None)
        if self.keep_details:
            P.details.append(detail)
        if key is not None:
            self._table[key] = (self.C.StorageRef(t), weakref.ref(p))

    def producer_of(self, t):
        """Name of the module that already saved tensor t in the current pass, or None."""
        with self._lock:
            if t.layout != torch.strided:
                return None
            p = self._stored(t)
            return p.module if p is not None else None

    def _restore(self, p, threads):
        """The tensor a blob stands for (LayerNorm rows scaled back), or a derived one rebuilt."""
        if p.recipe is not None:
            return _derived.rebuild(p.recipe, lambda q: self._source_value(q, threads),
                                    lambda q: self._source_rows(q, threads))
        y = self._codec(self._pass, "decompress_cpu_seconds", self.C.decompress, p.blob, p.sizes, p.strides, p.elem,
                        threads, self.kernel_path)
        if p.row_scale is not None:
            y = y.mul_(p.row_scale[:, None]).reshape(p.shape)  # in place: y is this call's own tensor
        return y

    # A recipe's sources were saved by earlier ops, so their own unpacks come
    # later in backward: a source decompressed for a rebuild is handed to its
    # own unpack (as a tensor saved twice is) instead of being decoded again.
    def _source_value(self, q, threads):
        if q.tensor is not None:
            return q.tensor
        if q.cache is not None:
            return q.cache
        v = self._restore(q, threads)
        if q.unpacks < q.saves and not self._measuring:
            q.cache = v
        return v

    def _source_rows(self, q, threads):
        """A LayerNorm input's stored rows (x / sigma), for the recipe of its output."""
        if q.cache is not None:
            return (q.cache.reshape(q.sizes) / q.row_scale[:, None])
        rows = self._codec(self._pass, "decompress_cpu_seconds", self.C.decompress, q.blob, q.sizes, q.strides, q.elem,
                           threads, self.kernel_path)
        if q.unpacks < q.saves and not self._measuring:
            q.cache = (rows * q.row_scale[:, None]).reshape(q.shape)
        return rows

    def _measure(self, P, name, t, p, eb_abs, detail):
        self._measuring = True  # at pack time: a rebuild must not leave its sources decompressed till backward
        try:
            y = self._restore(p, 1 if self.threads is None else self.threads)
        finally:
            self._measuring = False
        x64 = t.detach().double()
        e = (y.double() - x64)
        fin = torch.isfinite(x64)
        e = torch.where(fin, e, torch.zeros_like(e))
        max_err = float(e.abs().max()) if e.numel() else 0.0
        sq = float((e * e).sum())
        m = P.module(name)
        m["sq_error"] += sq
        m["elements"] += t.numel()
        m["max_abs_error"] = max(m["max_abs_error"], max_err)
        ratio = (max_err / eb_abs) if eb_abs > 0 else (0.0 if max_err == 0 else float("inf"))
        m["max_error_over_bound"] = max(m["max_error_over_bound"], ratio)
        if max_err > eb_abs:
            P.bound_violations += 1
        detail["max_abs_error"] = max_err
        detail["mse"] = sq / max(1, t.numel())

    def _unpack(self, p):
        if isinstance(p, tuple):  # a parameter: (tensor, its version when saved)
            _check_version(p[0], p[1], None)
            return p[0]
        if p.tensor is not None:
            _check_version(p.tensor, p.version, p.module)
            return p.tensor
        source = p.source() if p.source is not None else None
        if source is not None:  # the blob holds the old values; autograd would refuse the new ones
            _check_version(source, p.version, p.module)
        p.unpacks += 1
        if p.cache is not None:
            out = p.cache
            if p.unpacks >= p.saves:
                p.cache = None
            return out
        t0 = time.perf_counter()
        threads = self.threads if self.threads is not None else torch.get_num_threads()
        out = self._restore(p, threads)
        # A tensor saved by k nodes is decompressed once and handed to the
        # other k-1 unpacks (backward visits them close together).
        if p.unpacks < p.saves:
            p.cache = out
        with self._lock:
            P = self._pass
            if P is not None:
                P.unpack_seconds += time.perf_counter() - t0
                P.decompressions += 1
        return out


def _check_version(t, saved_version, module):
    """Autograd's check on a saved tensor (its SavedVariable check, which it
    skips for tensors that saved_tensors_hooks handle): refuses one changed in
    place since it was saved, with autograd's own words."""
    if t._version != saved_version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[%s %s]%s is at version %d; expected version %d instead. (Saved inside "
            "ebac_torch.compressed_activations; without it autograd raises the same error.)"
            % (t.type(), list(t.shape), "" if module is None else ", saved in %s," % module, t._version,
               saved_version))


def stats():
    """Statistics of the latest pass of the most recently entered session."""
    if _last_session is None:
        return _Pass(0).as_dict()
    return _last_session.stats()
