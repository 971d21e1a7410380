"""Compression composed with recomputation: ``ebac_torch.checkpoint``.

    with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel"):
        x = stem(x)
        for block in blocks:
            x = ebac_torch.checkpoint(block, x)
        loss = criterion(head(x), y)
    loss.backward()

``checkpoint(fn, *args)`` runs ``fn`` without recording a graph and keeps
only its tensor arguments for backward, through ``ctx.save_for_backward``:
inside ``compressed_activations`` they go through its pack hook, so a block
boundary is stored compressed, under a tighter bound than the session's
(``BOUNDARY_BOUND``, or ``error_bound=``/``mode=``; pipeline
``BOUNDARY_PIPELINE`` or ``pipeline=``) because the whole block is
recomputed from it. In backward the arguments
are decompressed, ``fn`` runs again with grad enabled (its own saved tensors
are then ordinary, short-lived ones: the session is not active during
backward) and its graph is back-propagated at once. The memory of a step is
then the compressed boundaries plus one block's raw activations; the time is
one extra forward of each block plus a compression per boundary.

Like ``torch.utils.checkpoint(use_reentrant=True)``: the CPU (and, when an
argument is on CUDA, the CUDA) RNG state is restored for the recomputation
(same dropout masks); BatchNorm's running statistics are updated twice; the
gradients of ``fn``'s parameters are accumulated by an inner backward, so
DistributedDataParallel needs ``static_graph`` or ``find_unused_parameters``
as with any reentrant checkpoint. A parameter gets its gradient even when no
argument requires one (the first block reads the data). Run backward outside
the ``with`` block (as always with compressed_activations), otherwise the
recomputation's saved tensors are compressed too (correct, only slower).
"""

import torch

from .hooks import boundary_bound

__all__ = ["checkpoint"]

# The bound of a block's inputs. A block recomputed from an input with error e
# carries e through all its layers (a BatchNorm divides it by the batch's
# spread), so the inputs need a tighter bound than tensors a single layer
# reads: on a ResNet-20-shaped CNN at batch 256, rel 1e-2 and 1e-3 gave
# gradient cosines of 0.67 and 0.92 against plain, rel 1e-4 0.994
# (studies/peak_step.py --grads); the boundaries are few, so this costs
# little (26 MB stored for 94 MB of boundaries there).
BOUNDARY_BOUND = (1e-4, "rel")
# ... and their pipeline: at rel 1e-4 `fast` stores the boundaries of the
# networks above nearly as small as `ratio` (27.5 vs 21.4 MB on the CNN, 23.0
# vs 21.5 on the ViT) and codes them 4-10x faster (0.10 vs 0.73 s a step on
# the CNN, one thread).
BOUNDARY_PIPELINE = "fast"


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng, anchor, *args):  # noqa: ARG004  (anchor: see checkpoint)
        ctx.fn = fn
        ctx.preserve_rng = preserve_rng
        ctx.tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        ctx.others = [None if isinstance(a, torch.Tensor) else a for a in args]
        ctx.grad_wanted = [isinstance(a, torch.Tensor) and a.requires_grad for a in args]
        ctx.cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if preserve_rng:
            ctx.cpu_rng = torch.get_rng_state()
            ctx.cuda_rng = torch.cuda.get_rng_state() if ctx.cuda else None
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_at])
        with torch.no_grad():
            out = fn(*args)
        ctx.tuple_out = isinstance(out, tuple)
        return out

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors  # decompressed here, freed when this function returns
        args = list(ctx.others)
        for k, i in enumerate(ctx.tensor_at):
            args[i] = saved[k].detach().requires_grad_(ctx.grad_wanted[i])
        del saved
        devices = [torch.cuda.current_device()] if ctx.cuda else []
        with torch.random.fork_rng(devices=devices, enabled=ctx.preserve_rng):
            if ctx.preserve_rng:
                torch.set_rng_state(ctx.cpu_rng)
                if ctx.cuda_rng is not None:
                    torch.cuda.set_rng_state(ctx.cuda_rng)
            with torch.enable_grad():
                out = ctx.fn(*args)
        outs = out if ctx.tuple_out else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        del out, outs, pairs
        ins = tuple(a.grad if isinstance(a, torch.Tensor) and ctx.grad_wanted[i] else None
                    for i, a in enumerate(args))
        return (None, None, None) + ins


# A tensor that requires grad, passed to every _Recompute so that autograd
# calls its backward (and so fn's parameters get gradients) even when no
# argument requires grad.
_anchors = {}


def _anchor(device):
    a = _anchors.get(device)
    if a is None:
        a = _anchors[device] = torch.empty(0, device=device, requires_grad=True)
    return a


def checkpoint(fn, *args, preserve_rng_state=True, error_bound=None, mode=None, pipeline=None):
    """fn(*args), keeping only the tensor arguments for backward (compressed
    when a compressed_activations session is active, under error_bound/mode
    and pipeline, default BOUNDARY_BOUND and BOUNDARY_PIPELINE, whatever the
    session's) and recomputing fn in backward. fn returns a tensor or a tuple
    of tensors. See the module's docstring."""
    if not torch.is_grad_enabled():
        return fn(*args)
    bound = (BOUNDARY_BOUND[0] if error_bound is None else float(error_bound),
             BOUNDARY_BOUND[1] if mode is None else mode,
             BOUNDARY_PIPELINE if pipeline is None else pipeline)
    dev = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    # autograd packs what forward saved after forward returns, still inside apply
    with boundary_bound(*bound):
        return _Recompute.apply(fn, bool(preserve_rng_state), _anchor(dev), *args)
