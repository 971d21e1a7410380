"""Layer-aware compression: per-layer bounds from ebac's controller, and the batch planner.

``LayerAwareCompression`` wraps ``compressed_activations`` with a policy
whose bounds come from ``ebac::adapt::controller`` (include/ebac/adapt):

* every Conv2d/Linear layer (and affine LayerNorm, below) of the model is a
  controlled layer; its saved input is compressed with that layer's bound
  (value-range relative). A
  tensor that feeds several layers (a block input read by conv1 and the
  projection shortcut) gets the tightest of their bounds;
* every ``observe_every`` steps it measures, per layer, the predicted
  weight-gradient error at the bound used (ebac's error model, from the
  layer's input, its reconstruction and dL/dy), the weight-gradient RMS and
  the compression ratio, and hands them to the controller;
* every ``window`` steps the controller moves each bound towards
  ``target_relative_error`` x gradient RMS (smoothed, step-limited, clamped).

The budget is propagation-aware. A BatchNorm2d that reads a Conv2d's
output saves that output, and its backward turns the compression error into
an error of the gradient it hands the convolution, so the convolution's
weight gradient gets two errors: its own input's and its BatchNorm's
(ebac_torch.propagation; on the study's ResNet the second is 0.3-3x the
first at rel 1e-2). With ``propagated_share`` = s > 0 each such pair splits the
budget tau^2: the convolution's input aims at tau * sqrt(1 - s), the
BatchNorm's input (a controlled layer of its own) at tau * sqrt(s) of the
convolution's gradient RMS, so the two together land at tau. Layers without
such a BatchNorm keep tau. With s = 0 BatchNorm inputs are not controlled
and stay at ``other_bound``, as before.

The same holds for a GELU or SiLU that reads a Linear's (or Conv2d's)
output, as in a transformer's MLP: its backward reads its saved input for
dx = dy g(x), so the compression error of that input reaches the Linear's
weight gradient (docs/error-model.md 6.3). Such an activation is a
controlled follower like the BatchNorm, with the same split of the budget.

A LayerNorm with an affine weight (a transformer's ln1, ln2 and final
LayerNorm) is a controlled layer too. Its backward rebuilds the normalized
input from the saved input and the exactly saved row statistics, so the
compression error reaches both its weight gradient and the input gradient it
sends into the residual stream (docs/error-model.md 6.2). It observes both
exactly on the held input (ebac_torch.propagation.layernorm_error) and aims
the larger of the two, each relative to its own RMS (dgamma's, and the
LayerNorm's own share of the input gradient), at tau: conservative, since
the residual stream's gradient also carries the skip path's.

A module that saves tensors in its own forward and owns Linear (or Conv2d)
children, as an attention module does (Q, K, the softmax output and V are
saved by its own matmuls; qkv and proj are its children), is an *operand
group*: with ``propagated_share`` > 0 its own saved tensors get one
controlled bound. Their errors reach the gradient it hands its qkv
projection, so that child splits its budget with the group like a layer
with a follower. The group is observed by replaying the module on its held
input, exactly and with its own saved tensors round-tripped
(ebac_torch.propagation.operand_error), and the child with the largest
relative weight-gradient change is the one that counts.

Everything else autograd saves (other inputs, BatchNorms that do not follow
a Conv2d, activations that do not follow a layer, a GELU's tanh
approximation, what the model's root module saves itself) is compressed at
the fixed ``other_bound``.

Observed steps hold each layer's (and each controlled BatchNorm's)
uncompressed input until ``end_iteration()`` (that is how the error
statistics are computed), so on those steps the
activation memory is not reduced; with ``observe_every=10`` that is one step
in ten.

    la = ebac_torch.LayerAwareCompression(model, target_relative_error=0.1)
    for x, y in loader:
        opt.zero_grad()
        with la:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        la.end_iteration()      # after backward, before the gradients are cleared
        opt.step()

``plan_batch`` turns measured statistics into the largest batch that fits a
memory budget (``ebac::adapt::plan_batch``).
"""

import math

import torch

from . import _ext
from .hooks import _FLOAT_CODES, compressed_activations, layernorm_input_round_trip, round_trip, stats as _last_stats
from .propagation import ConvOutputs, elementwise_name, layernorm_error, operand_error, propagated_weight_error

nn = torch.nn


def _rms(t):
    return float(t.detach().double().pow(2).mean().sqrt()) if t is not None and t.numel() else 0.0


class LayerAwareCompression:
    """Per-Conv2d/Linear/LayerNorm bounds driven by ebac's controller (see the module docstring).

    Args:
        model: the nn.Module trained (a DDP wrapper is fine).
        target_relative_error: tau, the weight-gradient RMS error each layer
            aims for, relative to that layer's gradient RMS (ebac's default 0.1).
        window: steps between bound updates.
        observe_every: steps between observations (each costs an error-model
            evaluation per layer and holds the layers' inputs until
            end_iteration()).
        initial_bound: every layer's relative bound before the first update.
        other_bound: the fixed relative bound of all other saved tensors.
        propagated_share: share s of a layer's variance budget given to
            the BatchNorm2d (after a Conv2d) or GELU/SiLU (after a Linear or
            Conv2d) that reads its output (see the module docstring); 0 leaves
            their inputs at other_bound.
        pipeline, min_numel, threads: as for compressed_activations.
        eb_min, eb_max, smoothing, max_step, tolerance: the controller's
            bound_update_config (include/ebac/adapt/bound_update.hpp).
    """

    def __init__(self, model, target_relative_error=0.1, window=50, observe_every=10, initial_bound=1e-2,
                 other_bound=1e-2, pipeline="auto", *, eb_min=1e-5, eb_max=0.1, smoothing=0.5, max_step=4.0,
                 tolerance=0.25, min_numel=4096, threads=None, propagated_share=0.25):
        if observe_every < 1 or window < 1:
            raise ValueError("LayerAwareCompression: window and observe_every must be >= 1")
        if not 0.0 <= propagated_share < 1.0:
            raise ValueError("LayerAwareCompression: propagated_share must be in [0, 1), got %r" % (propagated_share,))
        self.C = _ext.load()
        self.model = model
        self.pipeline = pipeline
        self.other_bound = float(other_bound)
        self.observe_every = int(observe_every)
        self.threads = threads
        self.layers = [(n, m) for n, m in model.named_modules()
                       if isinstance(m, (nn.Conv2d, nn.Linear, nn.LayerNorm)) and m.weight is not None]
        if not self.layers:
            raise ValueError("LayerAwareCompression: the model has no Conv2d, Linear or affine LayerNorm layer")
        self.names = [n for n, _ in self.layers]
        self.tau = float(target_relative_error)
        self.propagated_share = float(propagated_share)
        # Controlled followers (BatchNorm2d after a Conv2d; GELU/SiLU after a
        # Linear or Conv2d) follow the Conv/Linear layers in the controller
        # (index len(layers) + j); only those found reading a Conv2d's output are used.
        self.followers = ([(n, m) for n, m in model.named_modules()
                           if isinstance(m, nn.BatchNorm2d) or elementwise_name(m) is not None]
                    if self.propagated_share > 0 else [])
        self.follower_index = {n: j for j, (n, _) in enumerate(self.followers)}
        # Operand groups (module docstring): non-root modules with a controlled Conv2d/Linear child,
        # controlled once their own code is seen saving tensors (index len(layers) + len(followers) + g).
        layer_ids = {id(m): i for i, (_, m) in enumerate(self.layers)}
        self.groups = []         # (name, module, [indices of its child layers])
        if self.propagated_share > 0:
            for n, m in model.named_modules():
                kids = [layer_ids[id(c)] for c in m.children() if id(c) in layer_ids and not isinstance(c, nn.LayerNorm)]
                if n and kids and id(m) not in layer_ids:
                    self.groups.append((n, m, kids))
        self.group_index = {n: g for g, (n, _, _) in enumerate(self.groups)}
        # group -> indices of the children its error reached when last observed (empty before), for the
        # groups whose own code saved a compressible tensor on the previous step
        self.active_groups = {}
        self._next_active = set()
        self.ctrl = self.C.Controller(len(self.layers) + len(self.followers) + len(self.groups), target_relative_error,
                                      window, initial_bound, smoothing, max_step, eb_min, eb_max, tolerance)
        self.session = compressed_activations(initial_bound, "rel", pipeline, model=model, policy=self._policy,
                                              min_numel=min_numel, threads=threads)
        self.step = 0
        self.history = []          # one entry per bound update
        self.consumers = {}        # producer module name -> layer indices (from the previous step)
        self._next_consumers = {}
        self._producer = {}        # layer index -> producer name (this step)
        self._given = {}           # producer name -> bound handed out this step
        self._obs = {}             # layer index -> {"x": input, "dy": output gradient}
        self.follower_pairs = {}   # follower index -> the layer index whose output it reads (previous step)
        self._next_pairs = {}
        self._conv_out = ConvOutputs()  # Conv2d/Linear outputs of this forward pass -> layer index
        self._follower_obs = {}    # follower index -> {"x": input, "dy": output gradient}
        self._group_obs = {}       # group index -> {"x": input, "dy": output gradient}
        self._handles = []
        self._observing = False

    # -- the policy -----------------------------------------------------------
    def bound(self, layer_name):
        """The controller's current bound for a Conv2d/Linear/LayerNorm layer's input (or a controlled follower's,
        or an operand group's own saved tensors)."""
        if layer_name in self.follower_index:
            return self.ctrl.bound(len(self.layers) + self.follower_index[layer_name])
        if layer_name in self.group_index:
            return self.ctrl.bound(self._group_slot(self.group_index[layer_name]))
        return self.ctrl.bound(self.names.index(layer_name))

    def _group_slot(self, g):
        return len(self.layers) + len(self.followers) + g

    def _bound_of(self, name, consumers, pairs, bound, active=None):
        eb = [bound(i) for i in consumers.get(name, ())]
        j = self.follower_index.get(name)
        if j is not None and j in pairs:
            eb.append(bound(len(self.layers) + j))
        g = self.group_index.get(name)
        if g is not None and g in (self.active_groups if active is None else active):
            eb.append(bound(self._group_slot(g)))
        return min(eb) if eb else self.other_bound

    def _policy(self, name, t):
        if name in self.group_index:
            self._next_active.add(self.group_index[name])
        eb = self._bound_of(name, self.consumers, self.follower_pairs, self.ctrl.bound)
        self._given[name] = eb
        return eb

    # -- context --------------------------------------------------------------
    def __enter__(self):
        self._observing = self.step % self.observe_every == 0
        self._next_consumers = {}
        self._producer = {}
        self._given = {}
        self._obs = {}
        self._next_pairs = {}
        self._conv_out.clear()
        self._follower_obs = {}
        self._group_obs = {}
        self._next_active = set()
        if self._observing:
            for g, (_, mod, _) in enumerate(self.groups):
                self._handles.append(mod.register_forward_pre_hook(lambda m, inp, g=g: self._group_pre(g, inp)))
                self._handles.append(mod.register_forward_hook(lambda m, inp, out, g=g: self._group_post(g, out)))
        for i, (name, mod) in enumerate(self.layers):
            self._handles.append(mod.register_forward_pre_hook(
                lambda m, inp, i=i, name=name: self._pre(i, name, inp)))
            self._handles.append(mod.register_forward_hook(
                lambda m, inp, out, i=i: self._post(i, m, out)))
        for j, (name, mod) in enumerate(self.followers):
            self._handles.append(mod.register_forward_pre_hook(lambda m, inp, j=j: self._follower_pre(j, inp)))
            if self._observing:
                self._handles.append(mod.register_forward_hook(lambda m, inp, out, j=j: self._follower_post(j, out)))
        self.session.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            return self.session.__exit__(*exc)
        finally:
            for h in self._handles:
                h.remove()
            self._handles = []

    def _pre(self, i, name, inp):
        x = inp[0] if inp else None
        if not isinstance(x, torch.Tensor):
            return
        # A tensor some module already saved this pass (a ReLU output) is stored
        # at that module's turn; else this layer saves it first itself.
        prod = self.session.producer_of(x) or name
        self._producer[i] = prod
        self._next_consumers.setdefault(prod, []).append(i)
        if self._observing and x.is_floating_point() and torch.is_grad_enabled():
            self._obs.setdefault(i, {})["x"] = x.detach()

    def _post(self, i, mod, out):
        if not isinstance(out, torch.Tensor):
            return
        if self.followers and not isinstance(self.layers[i][1], nn.LayerNorm):
            self._conv_out.record(i, out)  # a BatchNorm or activation reading this tensor pairs with layer i
        if i in self._obs and out.requires_grad:
            _keep_grad(out, self._obs[i])

    def _follower_pre(self, j, inp):
        x = inp[0] if inp else None
        if not isinstance(x, torch.Tensor):
            return
        i = self._conv_out.producer(x)
        if i is None or (isinstance(self.followers[j][1], nn.BatchNorm2d) and not isinstance(self.layers[i][1], nn.Conv2d)):
            return  # a BatchNorm's term is modelled after a Conv2d only
        self._next_pairs[j] = i
        if self._observing and x.is_floating_point() and torch.is_grad_enabled():
            self._follower_obs[j] = {"x": x.detach()}

    def _follower_post(self, j, out):
        if j in self._follower_obs and isinstance(out, torch.Tensor) and out.requires_grad:
            _keep_grad(out, self._follower_obs[j])

    def _group_pre(self, g, inp):
        if len(inp) == 1 and isinstance(inp[0], torch.Tensor) and inp[0].is_floating_point() and torch.is_grad_enabled():
            self._group_obs[g] = {"x": inp[0].detach()}

    def _group_post(self, g, out):
        if g in self._group_obs and isinstance(out, torch.Tensor) and out.requires_grad:
            _keep_grad(out, self._group_obs[g])

    # -- after backward -------------------------------------------------------
    def end_iteration(self):
        """Feeds this step's observations to the controller; call after backward.

        Returns the controller's report when this step ended a window, else None.
        """
        from . import predict_weight_error  # the package's wrapper (a circular import at load time)

        if self._next_consumers:
            self.consumers = {k: sorted(set(v)) for k, v in self._next_consumers.items()}
        if self._next_active and self._next_active != set(self.active_groups):
            self.active_groups = {g: self.active_groups.get(g, set()) for g in self._next_active}
            self._set_pairs(self.follower_pairs)
        if self._next_pairs and self._next_pairs != self.follower_pairs:
            self._set_pairs(dict(self._next_pairs))
        if self._observing:
            st = self.session.stats()
            th = self.threads if self.threads is not None else torch.get_num_threads()
            for i, rec in self._obs.items():
                if "x" not in rec or "dy" not in rec:
                    continue
                name, mod = self.layers[i]
                prod = self._producer.get(i)
                eb = self._given.get(prod)
                if eb is None or rec["x"].numel() < self.session.min_numel:
                    continue  # not compressed (tiny, or kept raw): nothing to control
                x = rec["x"]
                grad_rms = _rms(mod.weight.grad)  # this step's gradient, computed with compressed inputs
                rows = (layernorm_input_round_trip(x, mod, eb, "rel", self.pipeline, th)
                        if isinstance(mod, nn.LayerNorm) and self.session.layernorm_rows else None)
                if rows is not None:  # stored in the LayerNorm's own units, as the session does
                    y, stored = rows
                else:
                    y, blob = self._round_trip(x, eb, th)
                    stored = blob.numel()
                    eb_abs = self.C.inspect(blob)["eb_abs"]
                    if not eb_abs > 0:
                        continue
                if isinstance(mod, nn.LayerNorm):
                    sigma = grad_rms * _layernorm_relative_error(mod, x, y, rec["dy"])
                else:
                    sigma = predict_weight_error(mod, x, y, rec["dy"], eb_abs, grad_rms=grad_rms)["sigma"]
                self.ctrl.observe(i, eb, sigma, grad_rms, _stored_ratio(st, prod, x, stored))
            self._observe_followers(st, th)
            self._observe_groups(st, th)
            self._obs = {}
            self._follower_obs = {}
            self._group_obs = {}
        self.step += 1
        if self.ctrl.end_iteration():
            rep = self.ctrl.report()
            layers = []
            for k, layer in enumerate(rep["layers"]):
                if k < len(self.layers):
                    layer["layer"] = self.names[k]
                elif k - len(self.layers) in self.follower_pairs:  # an unpaired follower is not controlled
                    j = k - len(self.layers)
                    layer["layer"] = self.followers[j][0]
                    layer["propagates_to"] = self.names[self.follower_pairs[j]]
                elif k - len(self.layers) - len(self.followers) in self.active_groups:
                    g = k - len(self.layers) - len(self.followers)
                    layer["layer"] = self.groups[g][0]
                    layer["propagates_to"] = ", ".join(self.names[i] for i in sorted(self.active_groups[g]))
                else:
                    continue
                layers.append(layer)
            rep["layers"] = layers
            rep["step"] = self.step
            self.history.append(rep)
            return rep
        return None

    def _set_pairs(self, pairs):
        """Splits the budget of every layer that a controlled follower reads, or whose
        operand group is controlled (module docstring)."""
        self.follower_pairs = pairs
        s = self.propagated_share
        paired = set(pairs.values())
        for reached in self.active_groups.values():
            paired.update(reached)
        for i in range(len(self.layers)):
            self.ctrl.set_target(i, self.tau * math.sqrt(1.0 - s) if i in paired else self.tau)
        for j in range(len(self.followers) + len(self.groups)):
            self.ctrl.set_target(len(self.layers) + j, self.tau * math.sqrt(s))

    def _observe_followers(self, st, th):
        """The error each controlled follower's compressed input adds to its layer's weight gradient."""
        for j, rec in self._follower_obs.items():
            i = self.follower_pairs.get(j)
            conv = self._obs.get(i) if i is not None else None
            if conv is None or "x" not in conv or "dy" not in rec:
                continue
            f_name, follower = self.followers[j]
            eb = self._given.get(f_name)
            x = rec["x"]
            if eb is None or x.numel() < self.session.min_numel or x.dtype not in _FLOAT_CODES:
                continue  # not compressed: nothing to control
            y, blob = self._round_trip(x, eb, th)
            sigma = propagated_weight_error(self.layers[i][1], conv["x"], follower, x, y, rec["dy"])
            grad_rms = _rms(self.layers[i][1].weight.grad)
            self.ctrl.observe(len(self.layers) + j, eb, sigma, grad_rms, _stored_ratio(st, f_name, x, blob.numel()))

    def _observe_groups(self, st, th):
        """The error each controlled operand group's own saved tensors add to its children's weight gradients."""
        for g, rec in self._group_obs.items():
            name, mod, kids = self.groups[g]
            eb = self._given.get(name)
            if g not in self.active_groups or eb is None or "dy" not in rec:
                continue
            err = operand_error(mod, rec["x"], rec["dy"], eb, self.pipeline, th, self.session.min_numel)
            reached = {i for i in kids if err.get(self.names[i].rsplit(".", 1)[-1], (0.0, 0.0))[0] > 0}
            if reached != self.active_groups[g]:  # only the children it reaches share their budget with it
                self.active_groups[g] = reached
                self._set_pairs(self.follower_pairs)
            worst = max(((e, r) for e, r in err.values() if r > 0), key=lambda er: er[0] / er[1], default=None)
            if worst is None:
                continue
            pm = st["per_module"].get(name) or {}
            ratio = pm["raw_bytes"] / pm["stored_bytes"] if pm.get("stored_bytes") else 1.0
            self.ctrl.observe(self._group_slot(g), eb, worst[0], worst[1], ratio)

    def _round_trip(self, x, eb, th):
        """x compressed at relative bound eb with this session's pipeline and back: (reconstruction, blob)."""
        return round_trip(x, eb, "rel", self.pipeline, th)

    # -- reporting ------------------------------------------------------------
    def bounds(self):
        """{layer name: current relative bound of its saved input}, then {follower name: its input's bound}
        for the controlled followers (BatchNorms that read a Conv2d's output, GELU/SiLU that read a
        Linear's or Conv2d's), then {group name: the bound of its own saved tensors} for the controlled
        operand groups (an attention module's Q, K, softmax output and V)."""
        b = {n: self.ctrl.bound(i) for i, n in enumerate(self.names)}
        for j in sorted(self.follower_pairs):
            b[self.followers[j][0]] = self.ctrl.bound(len(self.layers) + j)
        for g in sorted(self.active_groups):
            b[self.groups[g][0]] = self.ctrl.bound(self._group_slot(g))
        return b

    def input_bound(self, layer_name):
        """The bound the layer's saved input gets now (the tightest over the layers sharing it).

        For a BatchNorm's or activation's name: the bound of its saved input; for an operand group's,
        that of the tensors its own code saves."""
        if layer_name in self.follower_index or layer_name in self.group_index:  # other_bound unless controlled
            return self._bound_of(layer_name, self.consumers, self.follower_pairs, self.ctrl.bound)
        i = self.names.index(layer_name)
        for idx in self.consumers.values():
            if i in idx:
                return min(self.ctrl.bound(j) for j in idx)
        return self.ctrl.bound(i)

    def frozen_policy(self):
        """A policy for compressed_activations with the current bounds, fixed (for probes and sweeps)."""
        consumers = {k: list(v) for k, v in self.consumers.items()}
        pairs = dict(self.follower_pairs)
        bounds = [self.ctrl.bound(i) for i in range(self.ctrl.layers())]
        active = set(self.active_groups)

        def policy(name, t):
            return self._bound_of(name, consumers, pairs, bounds.__getitem__, active)
        return policy

    def stats(self):
        """compressed_activations statistics of the latest pass."""
        return self.session.stats()

    def plan_batch(self, budget_bytes, batch, **kw):
        """plan_batch() with this session's latest statistics and tau."""
        kw.setdefault("reference_tau", self.tau)
        return plan_batch(budget_bytes, batch, stats=self.session.stats(), **kw)


def _stored_ratio(st, module, x, stored_bytes):
    """The ratio the pass measured for what `module` saved, else that of this round trip's bytes."""
    pm = st["per_module"].get(module)
    if pm and pm.get("stored_bytes"):
        return pm["raw_bytes"] / pm["stored_bytes"]
    return x.numel() * x.element_size() / max(1, stored_bytes)


def _layernorm_relative_error(ln, x, x_hat, dy):
    """The larger of a LayerNorm's two relative errors: its weight gradient's and its input gradient's."""
    e = layernorm_error(ln, x, x_hat, dy)
    rel = [e[k] / e[k + "_grad_rms"] for k in ("weight", "input") if e[k + "_grad_rms"] > 0]
    return max(rel) if rel else 0.0


def _keep_grad(t, rec):
    """Stores the gradient that reaches `t` in rec["dy"]."""
    def keep(g, rec=rec):
        rec["dy"] = g.detach()
    t.register_hook(keep)


def plan_batch(budget_bytes, batch, stats=None, static_bytes=0.0, safety_margin=0.1, target_global_batch=0,
               reference_batch=None, reference_lr=0.1, scaling="linear", warmup_samples=0.0, reference_tau=0.1,
               max_batch=1 << 24, probe_rise=None, probe_static_bytes=None, working_set_tensors=3.5,
               compressed=True):
    """The largest batch whose training step fits `budget_bytes` (ebac::adapt::plan_batch).

    The step's peak is modelled as static + batch x (saved + working) per
    sample. `stats` (default: ebac_torch.stats()) is a pass measured at batch
    size `batch`: each compressed tensor is saved at raw_bytes / batch per
    sample over its measured ratio, everything kept raw at its raw bytes /
    batch (tensors that do not grow with the batch, such as BatchNorm's
    statistics, are counted as if they did, a small over-estimate), a tensor
    stored as a recipe (derive=True) at one byte: backward rebuilds it, and
    the working set covers that. With `compressed=False` every saved tensor counts at its raw size: the plan
    for the same network trained plainly (or, with the statistics of an
    ebac_torch.checkpoint pass, with torch.utils.checkpoint at the same
    boundaries).

    The working set (transients alive beside the saved bytes at the peak) is
    `working_set_tensors` x the largest saved tensor's raw bytes per sample
    (not enough for recomputation, whose backward rebuilds a block raw), or
    more when `probe_rise` measures more: the peak memory rise of one training
    step at this `batch`, of which `probe_static_bytes` (default
    `static_bytes`) does not grow with the batch. working_set_tensors=0 takes
    the probe's figure as it is. `probe_rise={b1: rise1, b2: rise2}`: two
    steps at two batches, read as a line (ebac::adapt::probe_line): its slope
    is the cost per sample, a positive intercept is static, and no floor
    applies (the line is what a single small probe lacked). Recommended: the
    floor is an average over two networks and is 15-16% too high on
    torchvision's resnet18 and mobilenet_v2 (docs/pytorch.md).
    `static_bytes` is what does not depend on the batch (weights, optimizer
    state, gradients, workspace), in the same terms as the budget: 0 (or the
    gradients' bytes) when the budget is a peak rise over the memory before
    the step. Learning rate and tau are scaled from `reference_batch`
    (default: `batch`) as the planner does (linear or "sqrt"). Returns a dict
    with the plan (saved_bytes_per_sample and working_bytes_per_sample
    included) and a one-line `description`.
    """
    st = stats if stats is not None else _last_stats()
    if not st.get("details"):
        raise ValueError("plan_batch: the statistics have no per-tensor details (run a pass with keep_details=True)")
    if batch < 1:
        raise ValueError("plan_batch: batch must be >= 1 (the batch the statistics were measured at), got %r" % (batch,))
    per, ratio, raw = [], [], 0.0
    for d in st["details"]:
        if "kept" in d:
            raw += d["raw_bytes"] / batch
        elif d["stored_bytes"] > 0:  # compressed (under a bound or losslessly)
            per.append(d["raw_bytes"] / batch)
            ratio.append(d["raw_bytes"] / d["stored_bytes"] if compressed else 1.0)
        elif d["raw_bytes"] > 0:
            # Stored as a recipe (derived.py): no bytes until backward rebuilds it, which the working
            # set covers; counted as a byte, not at its raw size (that made the small ViT's plan 37% low).
            per.append(d["raw_bytes"] / batch)
            ratio.append(float(d["raw_bytes"]) if compressed else 1.0)
    probe = {}
    if probe_rise is not None:
        steps = sorted(probe_rise.items()) if isinstance(probe_rise, dict) else [(batch, probe_rise)]
        if not 1 <= len(steps) <= 2 or any(int(b) < 1 for b, _ in steps):
            raise ValueError("plan_batch: probe_rise is one rise (at `batch`) or {batch: rise} for one or two "
                             "batches >= 1, got %r" % (probe_rise,))
        probe = dict(probe_rise_bytes=float(steps[-1][1]), probe_batch=int(steps[-1][0]),
                     probe_static_bytes=float(static_bytes if probe_static_bytes is None else probe_static_bytes))
        if len(steps) == 2:
            probe.update(second_probe_rise_bytes=float(steps[0][1]), second_probe_batch=int(steps[0][0]))
    return _ext.load().plan_batch(float(budget_bytes), float(static_bytes), raw, per, ratio, safety_margin,
                                  int(target_global_batch), int(max_batch), int(reference_batch or batch),
                                  float(reference_lr), scaling, float(warmup_samples), float(reference_tau),
                                  working_set_tensors=float(working_set_tensors), **probe)
