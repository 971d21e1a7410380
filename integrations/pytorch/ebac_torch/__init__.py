"""ebac_torch: train PyTorch models with error-bounded compressed activations.

    import ebac_torch
    with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", pipeline="ratio", model=net):
        loss = criterion(net(x), y)
    loss.backward()
    print(ebac_torch.stats()["ratio"])

See docs/pytorch.md in the ebac repository.
"""

import hashlib
import operator

import torch

from . import _ext
from .adaptive import LayerAwareCompression, plan_batch
from .hooks import _ELEM_CODES, KERNEL_PATHS, _check_kernel_path, compressed_activations, stats
from .recompute import checkpoint
from .propagation import batchnorm_input_grad_error, elementwise_input_grad_error, propagated_weight_error

__all__ = ["compressed_activations", "checkpoint", "stats", "LayerAwareCompression", "plan_batch", "compress", "decompress",
           "inspect", "predict_weight_error", "propagated_weight_error", "batchnorm_input_grad_error",
           "elementwise_input_grad_error", "load_extension", "has_cuda", "KERNEL_PATHS", "ebac_version", "__version__"]

__version__ = "0.1.0"


def load_extension(verbose=False):
    """The C++ extension module (installed, or built in-tree on first use)."""
    return _ext.load(verbose)


class Compressed:
    """A compressed tensor: the uint8 `blob` plus what is needed to rebuild it.

    Anyone can build or unpickle one, so decompress() trusts none of its
    fields: the blob must be a stream, and dtype, shape and strides must be
    what its header says (the element type, the element count, and the
    extents in memory order that compress derived from shape and strides),
    or it raises ValueError/TypeError naming the field. `digest`, written by
    compress(), binds shape, strides and dtype to the blob's header; it
    catches the edits the header cannot refute (a size-1 dimension added,
    two equal dimensions' strides exchanged). An object built without one
    (digest=None) gets the header checks only. A payload byte changed in a
    blob without a checksum (compress(checksum=False), the default) decodes
    to other values within the decoder's checks; with checksum=True every
    blob edit is refused.
    """

    __slots__ = ("blob", "shape", "strides", "dtype", "digest")

    def __init__(self, blob, shape, strides, dtype, digest=None):
        self.blob, self.shape, self.strides, self.dtype = blob, tuple(shape), tuple(strides), dtype
        self.digest = digest

    @property
    def nbytes(self):
        return self.blob.numel()

    def __repr__(self):
        return "Compressed(shape=%s, dtype=%s, bytes=%d)" % (self.shape, self.dtype, self.nbytes)


def _layout_digest(blob, shape, strides, dtype):
    """The digest of shape, strides and dtype with the blob's header bytes."""
    k = min(blob.numel(), _ext.load().max_header_bytes)
    head = blob[:k].cpu() if blob.is_cuda else blob[:k]
    h = hashlib.blake2b(digest_size=16, person=b"ebac-compressed")
    h.update(bytes(head.numpy().tobytes()))
    h.update(repr((tuple(int(v) for v in shape), tuple(int(v) for v in strides), str(dtype))).encode())
    return h.hexdigest()


def compress(t, error_bound=1e-2, mode="rel", pipeline="fast", threads=None, checksum=False, kernel_path="staged",
             pooling=None):
    """Compresses one tensor (CPU, or CUDA when the extension has its CUDA
    backend); returns a Compressed. float32/float16/bfloat16 are compressed
    under the bound; bool, uint8, int8, int16, int32 and int64 losslessly
    (the bound is ignored). `pooling` = (input, kernel, stride, padding,
    dilation), each a list over the spatial dims, marks a tensor of max-pool
    indices whose last dims are the pooling output's (see
    hooks.pooling_geometry). `kernel_path` picks the CUDA kernels
    (KERNEL_PATHS; same stream from each). checksum=True makes every later
    change of the blob's bytes an error at decompress."""
    if t.dtype not in _ELEM_CODES:
        raise TypeError("ebac_torch.compress: dtype %s is not one ebac codes (float32, float16, bfloat16, bool, "
                        "uint8, int8, int16, int32, int64)" % t.dtype)
    _check_kernel_path(kernel_path)
    C = _ext.load()
    th = torch.get_num_threads() if threads is None else threads
    blob, strides = C.compress(t.detach(), float(error_bound), mode, pipeline, th, checksum, kernel_path, pooling)
    return Compressed(blob, t.shape, strides, t.dtype, _layout_digest(blob, t.shape, strides, t.dtype))


def _int_tuple(c, field):
    v = getattr(c, field, None)
    try:
        out = tuple(operator.index(x) for x in v)
    except TypeError:
        raise TypeError("ebac_torch.decompress: %s: expected a sequence of ints, got %r" % (field, v)) from None
    if any(not -2 ** 63 <= x < 2 ** 63 for x in out):
        raise ValueError("ebac_torch.decompress: %s: %r has an entry outside int64" % (field, out))
    return out


def decompress(c, threads=None, kernel_path="staged"):
    """Rebuilds the tensor of a Compressed (same shape, strides, dtype and
    device as the blob). Every field is checked against the blob's header
    (and the digest compress wrote) before memory is touched: ValueError or
    TypeError naming the field that does not fit (see Compressed)."""
    _check_kernel_path(kernel_path)
    if not isinstance(c, Compressed):
        raise TypeError("ebac_torch.decompress: expected a Compressed, got %s" % type(c).__name__)
    blob = getattr(c, "blob", None)
    if not isinstance(blob, torch.Tensor):
        raise TypeError("ebac_torch.decompress: blob: expected a uint8 tensor, got %s" % type(blob).__name__)
    dtype = getattr(c, "dtype", None)
    if not isinstance(dtype, torch.dtype) or dtype not in _ELEM_CODES:
        raise TypeError("ebac_torch.decompress: dtype: %r is not one ebac codes (float32, float16, bfloat16, bool, "
                        "uint8, int8, int16, int32, int64)" % (dtype,))
    shape, strides = _int_tuple(c, "shape"), _int_tuple(c, "strides")
    C = _ext.load()
    C.check_fields(blob, list(shape), list(strides), _ELEM_CODES[dtype])
    digest = getattr(c, "digest", None)
    if digest is not None and digest != _layout_digest(blob, shape, strides, dtype):
        raise ValueError("ebac_torch.decompress: digest: shape %s, strides %s and dtype %s are not those compress "
                         "recorded for this blob's header (a field, the blob's header or the digest was changed)"
                         % (shape, strides, dtype))
    th = torch.get_num_threads() if threads is None else threads
    return C.decompress(blob, list(shape), list(strides), _ELEM_CODES[dtype], th, kernel_path)


def inspect(c):
    """The stream header of a Compressed (or of a raw uint8 blob) as a dict."""
    blob = c.blob if isinstance(c, Compressed) else c
    return _ext.load().inspect(blob)


def predict_weight_error(layer, x, x_hat, grad_output, eb_abs, grad_rms=None):
    """ebac's error model (include/ebac/error_model) for one layer.

    Predicts the RMS error of `layer`'s weight gradient when its saved input
    `x` is replaced by the reconstruction `x_hat`, from the compressor's error
    statistics and those of `grad_output` (dL/d output). `grad_rms` is the RMS
    of the layer's weight gradient as the trainer has it (default: that of
    `layer.weight.grad` when it is set, else unknown); the model uses it, not
    the gradient's entries, to gauge how coherent the gradient is. Returns a
    dict: sigma (the prediction), iid_sigma (the i.i.d. baseline of
    DESIGN.md), coherent_share, flat_share. `layer` is an nn.Conv2d (numeric
    padding) or an nn.Linear (leading dimensions are flattened into rows, and
    identical rows are merged as `ebac grad-error` does: their errors are
    identical and add up; docs/error-model.md section 3.6).
    """
    C = _ext.load()
    if grad_rms is None:
        g = getattr(getattr(layer, "weight", None), "grad", None)
        grad_rms = float(g.detach().double().pow(2).mean().sqrt()) if g is not None and g.numel() else 0.0
    if isinstance(layer, torch.nn.Conv2d):
        if isinstance(layer.padding, str) or layer.padding_mode != "zeros":
            raise ValueError("predict_weight_error: Conv2d with numeric zero padding only")
        return C.predict_weight_error(x, x_hat, grad_output, float(eb_abs), list(layer.kernel_size),
                                      list(layer.stride), list(layer.padding), list(layer.dilation), layer.groups,
                                      float(grad_rms))
    if isinstance(layer, torch.nn.Linear):
        return C.predict_weight_error(x.reshape(-1, x.shape[-1]), x_hat.reshape(-1, x_hat.shape[-1]),
                                      grad_output.reshape(-1, grad_output.shape[-1]), float(eb_abs),
                                      weight_grad_rms=float(grad_rms))
    raise TypeError("predict_weight_error: nn.Conv2d or nn.Linear, got %s" % type(layer).__name__)


def has_cuda():
    """True when the extension was built with ebac's CUDA backend."""
    return _ext.load().has_cuda()


def ebac_version():
    return _ext.load().ebac_version()
