"""How a BatchNorm's compressed saved input reaches the weight gradient of the layer before it.

ebac's error model (include/ebac/error_model) predicts the weight-gradient
error a layer gets from *its own* compressed input. In training every saved
tensor is compressed, and BatchNorm's backward reads its saved input to
compute the gradient it passes upstream:

    dx_j = gamma / s * (dy_j - mean(dy) - xhat_j * mean(dy * xhat)),   xhat = (x - mu) / s

(mu and 1/s are saved exactly; include/ebac/error_model/batchnorm_model.hpp
has the algebra). With x replaced by its reconstruction, dx changes by

    d(dx)_j = -gamma / s^2 * [ e_j (m1 + delta / s) + xhat_j delta ],   delta = mean(dy * e),

and the convolution that produced x receives dx as its output gradient, so
its weight gradient changes by conv2d_weight(layer input, d(dx)). That term
is *not* small next to the layer's own error: the part xhat_j * delta is
proportional to the layer's own output, so it sums coherently against the
layer's input (on the study's ResNet at rel 1e-2 it is 0.3-3x the layer's
own error; docs/study/README.md). Errors that travel further (through later
BatchNorms and the residual path) are not included: with them the measured
error is 0.92-1.18x the prediction on the study's layers, except the stem
at a fixed rel 1e-2 (1.60x).

The same holds for an elementwise function whose backward reads its saved
input (GELU, SiLU: dx = dy g(x)): the Linear (or Conv2d) that produced x
receives d(dx) = dy (g(x^) - g(x)) as part of its output gradient
(include/ebac/error_model/elementwise_model.hpp, docs/error-model.md 6.3).

`propagated_weight_error` computes this first-order term exactly for one
step's tensors: the change of dx from ebac's
include/ebac/error_model/batchnorm_propagation.hpp, then one
weight-gradient product (torch's conv2d_weight). It is
what LayerAwareCompression's propagation-aware budget observes and what the
accuracy study's "model total" adds to the error model's prediction.
"""

import weakref

import torch

from . import _ext

nn = torch.nn


# Elementwise modules whose backward reads their saved input, and the name
# ebac's error model knows them by (GELU only in its exact erf form).
ELEMENTWISE = {nn.GELU: "gelu", nn.SiLU: "silu"}


def elementwise_name(mod):
    """ebac's name for an elementwise module whose saved input it models, else None."""
    name = ELEMENTWISE.get(type(mod))
    if name == "gelu" and getattr(mod, "approximate", "none") != "none":
        return None  # the tanh approximation has another derivative
    return name


class ConvOutputs:
    """Which layer produced a tensor, within one forward pass.

    record() a Conv2d's (or Linear's) output under a key (from a forward
    hook); producer(x) gives that key back when a BatchNorm's (or
    activation's) input x is one of them, else None.
    The weak reference tells a later tensor that reuses a freed output's id
    apart, and keeps no output alive.
    """

    def __init__(self):
        self._out = {}

    def record(self, key, out):
        self._out[id(out)] = (key, weakref.ref(out))

    def producer(self, x):
        hit = self._out.get(id(x))
        return hit[0] if hit is not None and hit[1]() is x else None

    def clear(self):
        self._out.clear()


def batchnorm_input_grad_error(bn, x, x_hat, grad_output):
    """The change of a training-mode BatchNorm2d's input gradient when its saved input `x` is replaced by `x_hat`.

    Mean and 1/s are the batch statistics of the exact `x` (what the forward
    pass saves); `grad_output` is dL/d(output). Computed by ebac's
    error_model::batchnorm_input_grad_change on the CPU in float64 (CUDA
    tensors are copied); returns a float64 tensor shaped like `x`, on x's
    device.
    """
    if not isinstance(bn, nn.BatchNorm2d):
        raise TypeError("batchnorm_input_grad_error: nn.BatchNorm2d, got %s" % type(bn).__name__)
    if x.dim() != 4 or x.shape != x_hat.shape or x.shape != grad_output.shape:
        raise ValueError("batchnorm_input_grad_error: x, x_hat and grad_output must be N,C,H,W tensors of one shape "
                         "(got %s, %s, %s)" % (tuple(x.shape), tuple(x_hat.shape), tuple(grad_output.shape)))
    gamma = bn.weight if bn.weight is not None else None
    d = _ext.load().batchnorm_input_grad_change(x, x_hat, grad_output, gamma, float(bn.eps))
    return d.to(x.device)


def elementwise_input_grad_error(act, x, x_hat, grad_output):
    """The change of an elementwise module's input gradient (GELU, SiLU) when its saved input `x` is replaced by `x_hat`.

    dy (g(x_hat) - g(x)) element by element, from ebac's
    error_model::elementwise_input_grad_change on the CPU in float64; returns
    a float64 tensor shaped like `x`, on x's device.
    """
    name = elementwise_name(act)
    if name is None:
        raise TypeError("elementwise_input_grad_error: nn.GELU (approximate='none') or nn.SiLU, got %r" % (act,))
    if x.shape != x_hat.shape or x.shape != grad_output.shape:
        raise ValueError("elementwise_input_grad_error: x, x_hat and grad_output must have one shape (got %s, %s, %s)"
                         % (tuple(x.shape), tuple(x_hat.shape), tuple(grad_output.shape)))
    return _ext.load().elementwise_input_grad_change(name, x, x_hat, grad_output).to(x.device)


def propagated_weight_error(layer, layer_input, bn, bn_input, bn_input_hat, bn_grad_output):
    """RMS error of `layer`'s weight gradient caused by `bn` (which reads the layer's output) storing `bn_input_hat`.

    `bn` is an nn.BatchNorm2d after an nn.Conv2d, or an elementwise module
    (nn.GELU, nn.SiLU) after an nn.Linear or nn.Conv2d; `layer` produced
    `bn_input`; `layer_input` is its (exact) input; `bn_grad_output` is
    dL/d(bn output). First order: the change of the module's input gradient
    (batchnorm_input_grad_error, elementwise_input_grad_error) pushed through
    the layer's weight-gradient product.
    """
    if elementwise_name(bn) is not None:
        d = elementwise_input_grad_error(bn, bn_input, bn_input_hat, bn_grad_output)
    elif isinstance(layer, nn.Conv2d):
        d = batchnorm_input_grad_error(bn, bn_input, bn_input_hat, bn_grad_output)
    else:
        raise TypeError("propagated_weight_error: the layer before a BatchNorm2d must be an nn.Conv2d, got %s"
                        % type(layer).__name__)
    if isinstance(layer, nn.Linear):
        x = layer_input.detach().double().reshape(-1, layer.in_features)
        dw = d.reshape(-1, layer.out_features).t() @ x
        return float(dw.pow(2).mean().sqrt())
    if not isinstance(layer, nn.Conv2d):
        raise TypeError("propagated_weight_error: the layer before an activation must be an nn.Linear or nn.Conv2d, got %s"
                        % type(layer).__name__)
    if isinstance(layer.padding, str) or layer.padding_mode != "zeros":
        raise ValueError("propagated_weight_error: Conv2d with numeric zero padding only")
    dw = torch.nn.grad.conv2d_weight(layer_input.detach().double(), layer.weight.shape, d, layer.stride,
                                     layer.padding, layer.dilation, layer.groups)
    return float(dw.pow(2).mean().sqrt())


def layernorm_error(ln, x, x_hat, grad_output):
    """What a LayerNorm's backward gets wrong when its saved input `x` comes back as `x_hat`.

    The forward pass saves the input and, exactly, each row's mean mu and
    1/s; backward rebuilds xhat = (x - mu) / s from them, then

        dgamma = sum over rows of dy * xhat
        dx     = 1/s * (g - mean(g) - xhat * mean(g * xhat)),   g = dy * gamma

    (means over the normalized dimensions; docs/error-model.md 6.2). Both
    are computed here in float64 for `x` and for `x_hat`, with mu and 1/s of
    the exact `x`, as backward does. Returns {"weight": RMS change of dgamma,
    "input": RMS change of dx, "weight_grad_rms", "input_grad_rms": the RMS of
    dgamma and dx themselves}; "weight" and "weight_grad_rms" are 0 without
    an affine weight.
    """
    if not isinstance(ln, nn.LayerNorm):
        raise TypeError("layernorm_error: nn.LayerNorm, got %s" % type(ln).__name__)
    k = len(ln.normalized_shape)
    if x.shape != x_hat.shape or x.shape != grad_output.shape or tuple(x.shape[x.dim() - k:]) != tuple(ln.normalized_shape):
        raise ValueError("layernorm_error: x, x_hat and grad_output must have one shape ending in %s (got %s, %s, %s)"
                         % (tuple(ln.normalized_shape), tuple(x.shape), tuple(x_hat.shape), tuple(grad_output.shape)))
    dims = tuple(range(x.dim() - k, x.dim()))
    x = x.detach().double()
    dy = grad_output.detach().double()
    mu = x.mean(dim=dims, keepdim=True)
    rstd = (x.var(dim=dims, unbiased=False, keepdim=True) + ln.eps).rsqrt()
    gamma = ln.weight.detach().double() if ln.weight is not None else None
    g = dy * gamma if gamma is not None else dy

    def backward(saved):
        xhat = (saved.detach().double() - mu) * rstd
        dx = rstd * (g - g.mean(dim=dims, keepdim=True) - xhat * (g * xhat).mean(dim=dims, keepdim=True))
        dgamma = (dy * xhat).reshape(-1, *ln.normalized_shape).sum(0)
        return dx, dgamma

    dx, dgamma = backward(x)
    dx_hat, dgamma_hat = backward(x_hat)

    def rms(t):
        return float(t.pow(2).mean().sqrt()) if t.numel() else 0.0
    affine = gamma is not None
    return {"weight": rms(dgamma_hat - dgamma) if affine else 0.0, "input": rms(dx_hat - dx),
            "weight_grad_rms": rms(dgamma) if affine else 0.0, "input_grad_rms": rms(dx)}


def operand_error(module, x, grad_output, eb, pipeline="ratio", threads=None, min_numel=4096):
    """What compressing a module's *own* saved tensors does to its child layers' weight gradients.

    An attention module computes its scores, softmax and P V in its own
    forward: what those operations save (Q, K, the softmax output, V) is
    attributed to the module itself, while its projections (child Linear
    layers) save their own inputs. The errors of the operands reach the
    gradient the module hands its qkv projection (docs/error-model.md 6.4),
    and from there that projection's weight gradient.

    This replays the module on its held input `x` twice with one RNG state
    (dropout draws one mask): exact, and with every float tensor of at least
    `min_numel` elements that the module's own code saves compressed at
    relative bound `eb` and back (what a session stores); tensors its
    children save stay exact. Backward takes `grad_output`. Returns
    {child name: (RMS change of its weight gradient, RMS of the exact one)}
    for every direct child with a weight that the change reaches. The
    module's buffers (a child BatchNorm's running statistics) are put back
    as they were: the replay leaves no trace in training.
    """
    from .hooks import _FLOAT_CODES, round_trip as stored  # noqa: PLC0415 (hooks imports this module)

    children = [(n, c) for n, c in module.named_children()
                if isinstance(getattr(c, "weight", None), torch.Tensor) and c.weight.requires_grad]
    if not children:
        return {}
    depth = [0]
    handles = []
    for sub in module.modules():
        if sub is not module:
            handles.append(sub.register_forward_pre_hook(lambda m, i: depth.__setitem__(0, depth[0] + 1)))
            handles.append(sub.register_forward_hook(lambda m, i, o: depth.__setitem__(0, depth[0] - 1)))

    def round_trip(t):
        if (depth[0] != 0 or t.dtype not in _FLOAT_CODES or t.numel() < min_numel or t.device.type != "cpu"
                or (t.requires_grad and t.is_leaf)):
            return t
        return stored(t, eb, "rel", pipeline, threads)[0]

    def grads(compress):
        if compress:
            with torch.autograd.graph.saved_tensors_hooks(round_trip, lambda t: t):
                out = module(x.detach())
        else:
            out = module(x.detach())
        return torch.autograd.grad(out, [c.weight for _, c in children], grad_output, allow_unused=True)

    rng = torch.get_rng_state()
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    try:
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(rng)
            exact = grads(False)
            torch.set_rng_state(rng)
            approx = grads(True)
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    out = {}
    for (n, _), g0, g1 in zip(children, exact, approx):
        if g0 is None or g1 is None:
            continue
        g0, g1 = g0.double(), g1.double()
        out[n] = (float((g1 - g0).pow(2).mean().sqrt()), float(g0.pow(2).mean().sqrt()))
    return out
