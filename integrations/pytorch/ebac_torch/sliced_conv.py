"""Convolution backward in batch slices: ``compressed_activations(conv_backward_slices=K)``.

Inside a session with this option, ``nn.Conv1d/2d/3d`` run through
``_SlicedConv``, an autograd.Function whose forward is the ordinary
convolution and whose backward computes the gradients over K slices of the
batch instead of all at once. Why: with the saved tensors compressed, most
of what a CNN's step still holds at its peak is the working set of one
convolution's backward, all full-batch at once: the decompressed input, the
output gradient, the input gradient, and the temporaries of the weight
gradient (im2col columns, oneDNN's reorders), which are input-sized or
larger. Sliced, those temporaries are a slice's, and the input is
decompressed only for the weight gradient and let go before the input
gradient is allocated (the input gradient needs the weight and the output
gradient only). Per convolution the output gradient, one input-sized tensor
(two when another saver, such as a ReLU, keeps the decompressed input for
its own backward) and a slice's temporaries are alive.

The input is kept through the session's own packing (``_pack``), so a tensor
that a ReLU saved too is stored once, as without the option, and restored
through ``_unpack`` (its version check, its decompression shared with the
other saver). The weight (a parameter) is saved as autograd saves it.

The gradients are the unsliced ones up to float rounding: the weight
gradient is summed slice by slice (a different order of the same float32
sum), the input gradient is computed per sample as before, the bias
gradient from the whole output gradient.

The ordinary path runs instead (``eligible`` says why not) for: no grad
needed or grad mode off, an unbatched input, one slice (batch 1, K = 1, or
"auto" on an input of at most AUTO_SLICE_BYTES), anything but
float32/float16/bfloat16, a non-strided input, forward-mode AD,
``padding="same"`` where the padding would be asymmetric (an even
dilation x (kernel - 1)), a subclass of ``nn.ConvNd`` that overrides
``_conv_forward``, and ``nn.ConvTranspose*`` (not patched). The backward is
once-differentiable: a double backward through a sliced convolution raises
(use the option off for gradient penalties), and so does a second backward
through the same graph (retain_graph=True): the input is kept for one.
"""

import threading

import torch
from torch.autograd.function import once_differentiable

__all__ = ["check_slices", "slices_for", "eligible", "enter", "exit"]

# "auto": as many slices as make one slice's input at most this many bytes
# (at most one sample a slice). A slice's weight-gradient temporaries scale
# with its input. On the CNNs measured (docs/pytorch.md, "Convolution
# backward in slices") 2 MiB gave the lowest peaks for about 5% more CPU
# time; 8 and 16 MiB lowered the peak less and were not cheaper.
AUTO_SLICE_BYTES = 2 << 20

_CONVS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)

_local = threading.local()  # .sessions: the sessions entered on this thread, innermost last
_patch_lock = threading.Lock()
_patch_count = 0  # sessions with the option entered (all threads): the classes stay patched while > 0
_originals = {}


def check_slices(v):
    """The option's value checked: None (off), "auto" or an int >= 1."""
    if v is None or v == "auto":
        return v
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError("ebac_torch: conv_backward_slices must be None, 'auto' or an int >= 1, got %r" % (v,))
    return v


def slices_for(option, x):
    """The number of batch slices for the backward of a convolution of input x: `option` (an int, at
    most the batch), or for "auto" ceil(x's bytes / AUTO_SLICE_BYTES), at most the batch."""
    batch = x.shape[0]
    if option == "auto":
        k = -(-x.numel() * x.element_size() // AUTO_SLICE_BYTES)
    else:
        k = int(option)
    return max(1, min(k, batch))


def _same_padding(module, d):
    """nn.ConvNd's padding="same" as symmetric padding, or None when it is asymmetric."""
    pad = []
    for j in range(d):
        total = module.dilation[j] * (module.kernel_size[j] - 1)
        if total % 2:
            return None
        pad.append(total // 2)
    return tuple(pad)


def eligible(module, x, weight, bias):
    """The padding to run `module` sliced with, or None for the ordinary path (see the module's docstring)."""
    d = len(module.kernel_size)
    if not torch.is_grad_enabled() or not any(t is not None and t.requires_grad for t in (x, weight, bias)):
        return None
    if x.dim() != d + 2 or x.shape[0] < 2 or x.layout != torch.strided or x.dtype not in _FLOATS:
        return None
    if torch.autograd.forward_ad._current_level >= 0:  # inside forward-mode AD's dual_level
        return None
    if module.padding_mode != "zeros":
        return (0,) * d  # the input is padded explicitly first, as nn.ConvNd does
    if isinstance(module.padding, str):
        return (0,) * d if module.padding == "valid" else _same_padding(module, d)
    return tuple(module.padding)


def _bounds(n, slices):
    """[a, b) of each of `slices` near-equal batch slices of n samples."""
    step = -(-n // slices)
    return [(a, min(n, a + step)) for a in range(0, n, step)]


class _SlicedConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, session, stride, padding, dilation, groups, slices):
        ctx.session = session
        ctx.geometry = (stride, padding, dilation, groups)
        ctx.slices = slices
        ctx.x_shape = tuple(x.shape)
        ctx.channels_last = x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(
            memory_format=torch.channels_last)
        ctx.has_bias = bias is not None
        # (the forward itself is not sliced: its temporaries were not the step's peak on the CNNs measured)
        out = torch.convolution(x, weight, bias, stride, padding, dilation, False, [0] * len(stride), groups)
        # The input through the session (dedupe with another saver, compression, accounting); only
        # needed for the weight gradient.
        ctx.x_record = session._pack(x) if weight.requires_grad else None
        ctx.save_for_backward(weight)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, gy):
        weight, = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        bounds = _bounds(ctx.x_shape[0], ctx.slices)
        d = len(stride)
        conv_back = torch.ops.aten.convolution_backward
        gw = gb = gx = None
        if need_b and ctx.has_bias:
            gb = gy.sum(dim=[0] + list(range(2, gy.dim())))
        record, ctx.x_record = ctx.x_record, None
        if need_w and record is None:
            raise RuntimeError("ebac_torch: a second backward through a convolution sliced by conv_backward_slices "
                               "(it keeps its input for one backward, as if retain_graph were False); run the "
                               "session with conv_backward_slices=None to backward twice (retain_graph=True)")
        if need_w:
            # The weight gradient first: the input is decompressed for it and dropped
            # (unless another saver still needs it) before the input gradient exists.
            x = ctx.session._unpack(record)
            del record
            for a, b in bounds:
                g = conv_back(gy[a:b], x[a:b], weight, None, stride, padding, dilation, False, [0] * d, groups,
                              (False, True, False))[1]
                if gw is None:
                    gw = g
                else:
                    gw.add_(g)
                del g
            del x
        if need_x:
            fmt = torch.channels_last if ctx.channels_last else torch.contiguous_format
            gx = torch.empty(ctx.x_shape, dtype=gy.dtype, device=gy.device, memory_format=fmt)
            for a, b in bounds:
                shape = (b - a,) + ctx.x_shape[1:]
                # only the input's shape matters for its gradient: a one-element tensor expanded
                stand_in = gy.new_empty(1).expand(shape)
                gx[a:b] = conv_back(gy[a:b], stand_in, weight, None, stride, padding, dilation, False, [0] * d,
                                    groups, (True, False, False))[0]
        return gx, gw, gb, None, None, None, None, None, None


def _active():
    """The innermost session entered on this thread when it has the option on, else None."""
    s = getattr(_local, "sessions", None)
    return s[-1] if s and s[-1].conv_backward_slices is not None else None


def _make_forward(cls, original):
    d = {torch.nn.Conv1d: 1, torch.nn.Conv2d: 2, torch.nn.Conv3d: 3}[cls]
    pad_zero = (0,) * d

    def _conv_forward(self, input, weight, bias):  # noqa: A002  (nn.ConvNd's own signature)
        session = _active()
        if session is None or type(self)._conv_forward is not _conv_forward:
            return original(self, input, weight, bias)
        padding = eligible(self, input, weight, bias)
        if padding is None:
            return original(self, input, weight, bias)
        k = slices_for(session.conv_backward_slices, input)
        if k == 1:  # one slice saves nothing: the ordinary path, bit for bit
            return original(self, input, weight, bias)
        if self.padding_mode != "zeros":
            input = torch.nn.functional.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = pad_zero
        return _SlicedConv.apply(input, weight, bias, session, tuple(self.stride), tuple(padding),
                                 tuple(self.dilation), self.groups, k)

    _conv_forward.__wrapped__ = original
    return _conv_forward


def enter(session):
    """A session entered on this thread: while it is the innermost one and has the option on,
    nn.Conv1d/2d/3d run through _SlicedConv (the classes are patched while any such session is entered)."""
    global _patch_count
    if not hasattr(_local, "sessions"):
        _local.sessions = []
    _local.sessions.append(session)
    if session.conv_backward_slices is None:
        return
    with _patch_lock:
        if _patch_count == 0:
            for cls in _CONVS:
                _originals[cls] = cls.__dict__["_conv_forward"]
                cls._conv_forward = _make_forward(cls, _originals[cls])
        _patch_count += 1


def exit(session):  # noqa: A001  (the counterpart of enter)
    """Undoes enter(session)."""
    global _patch_count
    s = getattr(_local, "sessions", [])
    if session in s:
        del s[len(s) - 1 - s[::-1].index(session)]
    if session.conv_backward_slices is None:
        return
    with _patch_lock:
        _patch_count -= 1
        if _patch_count == 0:
            for cls, f in _originals.items():
                cls._conv_forward = f
            _originals.clear()
