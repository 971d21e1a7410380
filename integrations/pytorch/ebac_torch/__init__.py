"""ebac_torch: train PyTorch models with error-bounded compressed activations.

    import ebac_torch
    with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", pipeline="ratio", model=net):
        loss = criterion(net(x), y)
    loss.backward()
    print(ebac_torch.stats()["ratio"])

See docs/pytorch.md in the ebac repository.
"""

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
    """A compressed tensor: the uint8 `blob` plus what is needed to rebuild it."""

    __slots__ = ("blob", "shape", "strides", "dtype")

    def __init__(self, blob, shape, strides, dtype):
        self.blob, self.shape, self.strides, self.dtype = blob, tuple(shape), tuple(strides), dtype

    @property
    def nbytes(self):
        return self.blob.numel()

    def __repr__(self):
        return "Compressed(shape=%s, dtype=%s, bytes=%d)" % (self.shape, self.dtype, self.nbytes)


def compress(t, error_bound=1e-2, mode="rel", pipeline="fast", threads=None, checksum=False, kernel_path="staged",
             pooling=None):
    """Compresses one tensor (CPU, or CUDA when the extension has its CUDA
    backend); returns a Compressed. float32/float16/bfloat16 are compressed
    under the bound; bool, uint8, int8, int16, int32 and int64 losslessly
    (the bound is ignored). `pooling` = (input, kernel, stride, padding,
    dilation), each a list over the spatial dims, marks a tensor of max-pool
    indices whose last dims are the pooling output's (see
    hooks.pooling_geometry). `kernel_path` picks the CUDA kernels
    (KERNEL_PATHS; same stream from each)."""
    if t.dtype not in _ELEM_CODES:
        raise TypeError("ebac_torch.compress: dtype %s is not one ebac codes (float32, float16, bfloat16, bool, "
                        "uint8, int8, int16, int32, int64)" % t.dtype)
    _check_kernel_path(kernel_path)
    C = _ext.load()
    th = torch.get_num_threads() if threads is None else threads
    blob, strides = C.compress(t.detach(), float(error_bound), mode, pipeline, th, checksum, kernel_path, pooling)
    return Compressed(blob, t.shape, strides, t.dtype)


def decompress(c, threads=None, kernel_path="staged"):
    """Rebuilds the tensor of a Compressed (same shape, strides, dtype and
    device as the blob)."""
    _check_kernel_path(kernel_path)
    C = _ext.load()
    th = torch.get_num_threads() if threads is None else threads
    return C.decompress(c.blob, list(c.shape), list(c.strides), _ELEM_CODES[c.dtype], th, kernel_path)


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
