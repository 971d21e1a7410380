"""Layer-aware compression: per-layer bounds from ebac's controller, and the batch planner.

``LayerAwareCompression`` wraps ``compressed_activations`` with a policy
whose bounds come from ``ebac::adapt::controller`` (include/ebac/adapt):

* every Conv2d/Linear layer of the model is a controlled layer; its saved
  input is compressed with that layer's bound (value-range relative). A
  tensor that feeds several layers (a block input read by conv1 and the
  projection shortcut) gets the tightest of their bounds;
* every ``observe_every`` steps it measures, per layer, the predicted
  weight-gradient error at the bound used (ebac's error model, from the
  layer's input, its reconstruction and dL/dy), the weight-gradient RMS and
  the compression ratio, and hands them to the controller;
* every ``window`` steps the controller moves each bound towards
  ``target_relative_error`` x gradient RMS (smoothed, step-limited, clamped).

Everything else autograd saves (BatchNorm's inputs, i.e. conv outputs, and
other non-Conv/Linear inputs) is compressed at the fixed ``other_bound``: the
error model covers Conv2d/Linear weight gradients, and the study found
BatchNorm's saved inputs to be the sensitive ones (rel 1e-1 there diverges).

Observed steps hold each layer's uncompressed input until ``end_iteration()``
(that is how the error statistics are computed), so on those steps the
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

import torch

from . import _ext
from .hooks import compressed_activations, stats as _last_stats

nn = torch.nn


def _rms(t):
    return float(t.detach().double().pow(2).mean().sqrt()) if t is not None and t.numel() else 0.0


class LayerAwareCompression:
    """Per-Conv2d/Linear bounds driven by ebac's controller (see the module docstring).

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
        pipeline, min_numel, threads: as for compressed_activations.
        eb_min, eb_max, smoothing, max_step, tolerance: the controller's
            bound_update_config (include/ebac/adapt/bound_update.hpp).
    """

    def __init__(self, model, target_relative_error=0.1, window=50, observe_every=10, initial_bound=1e-2,
                 other_bound=1e-2, pipeline="ratio", *, eb_min=1e-5, eb_max=0.1, smoothing=0.5, max_step=4.0,
                 tolerance=0.25, min_numel=4096, threads=None):
        if observe_every < 1 or window < 1:
            raise ValueError("LayerAwareCompression: window and observe_every must be >= 1")
        self.C = _ext.load()
        self.model = model
        self.pipeline = pipeline
        self.other_bound = float(other_bound)
        self.observe_every = int(observe_every)
        self.threads = threads
        self.layers = [(n, m) for n, m in model.named_modules()
                       if isinstance(m, (nn.Conv2d, nn.Linear)) and m.weight is not None]
        if not self.layers:
            raise ValueError("LayerAwareCompression: the model has no Conv2d or Linear layer")
        self.names = [n for n, _ in self.layers]
        self.ctrl = self.C.Controller(len(self.layers), target_relative_error, window, initial_bound, smoothing,
                                      max_step, eb_min, eb_max, tolerance)
        self.session = compressed_activations(initial_bound, "rel", pipeline, model=model, policy=self._policy,
                                              min_numel=min_numel, threads=threads)
        self.step = 0
        self.history = []          # one entry per bound update
        self.consumers = {}        # producer module name -> layer indices (from the previous step)
        self._next_consumers = {}
        self._producer = {}        # layer index -> producer name (this step)
        self._given = {}           # producer name -> bound handed out this step
        self._obs = {}             # layer index -> {"x": input, "dy": output gradient}
        self._handles = []
        self._observing = False

    # -- the policy -----------------------------------------------------------
    def bound(self, layer_name):
        """The controller's current bound for a Conv2d/Linear layer's input."""
        return self.ctrl.bound(self.names.index(layer_name))

    def _policy(self, name, t):
        idx = self.consumers.get(name)
        if idx:
            eb = min(self.ctrl.bound(i) for i in idx)
        else:
            eb = self.other_bound
        self._given[name] = eb
        return eb

    # -- context --------------------------------------------------------------
    def __enter__(self):
        self._observing = self.step % self.observe_every == 0
        self._next_consumers = {}
        self._producer = {}
        self._given = {}
        self._obs = {}
        for i, (name, mod) in enumerate(self.layers):
            self._handles.append(mod.register_forward_pre_hook(
                lambda m, inp, i=i, name=name: self._pre(i, name, inp)))
            if self._observing:
                self._handles.append(mod.register_forward_hook(
                    lambda m, inp, out, i=i: self._post(i, out)))
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

    def _post(self, i, out):
        if i in self._obs and isinstance(out, torch.Tensor) and out.requires_grad:
            rec = self._obs[i]

            def keep(g, rec=rec):
                rec["dy"] = g.detach()
            out.register_hook(keep)

    # -- after backward -------------------------------------------------------
    def end_iteration(self):
        """Feeds this step's observations to the controller; call after backward.

        Returns the controller's report when this step ended a window, else None.
        """
        from . import predict_weight_error  # the package's wrapper (a circular import at load time)

        if self._next_consumers:
            self.consumers = {k: sorted(set(v)) for k, v in self._next_consumers.items()}
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
                blob, strides = self.C.compress(x, eb, "rel", self.pipeline, th, False)
                y = self.C.decompress(blob, list(x.shape), list(strides), {torch.float32: 1, torch.float16: 2,
                                                                           torch.bfloat16: 3}[x.dtype], th)
                eb_abs = self.C.inspect(blob)["eb_abs"]
                if not eb_abs > 0:
                    continue
                grad_rms = _rms(mod.weight.grad)  # this step's gradient, computed with compressed inputs
                pred = predict_weight_error(mod, x, y, rec["dy"], eb_abs, grad_rms=grad_rms)
                ratio = x.numel() * x.element_size() / max(1, blob.numel())
                pm = st["per_module"].get(prod)
                if pm and pm.get("stored_bytes"):
                    ratio = pm["raw_bytes"] / pm["stored_bytes"]
                self.ctrl.observe(i, eb, pred["sigma"], grad_rms, ratio)
            self._obs = {}
        self.step += 1
        if self.ctrl.end_iteration():
            rep = self.ctrl.report()
            for name, layer in zip(self.names, rep["layers"]):
                layer["layer"] = name
            rep["step"] = self.step
            self.history.append(rep)
            return rep
        return None

    # -- reporting ------------------------------------------------------------
    def bounds(self):
        """{layer name: current relative bound of its saved input}."""
        return {n: self.ctrl.bound(i) for i, n in enumerate(self.names)}

    def input_bound(self, layer_name):
        """The bound the layer's saved input gets now (the tightest over the layers sharing it)."""
        i = self.names.index(layer_name)
        for idx in self.consumers.values():
            if i in idx:
                return min(self.ctrl.bound(j) for j in idx)
        return self.ctrl.bound(i)

    def frozen_policy(self):
        """A policy for compressed_activations with the current bounds, fixed (for probes and sweeps)."""
        consumers = {k: list(v) for k, v in self.consumers.items()}
        bounds = [self.ctrl.bound(i) for i in range(len(self.names))]
        other = self.other_bound

        def policy(name, t):
            idx = consumers.get(name)
            return min(bounds[i] for i in idx) if idx else other
        return policy

    def stats(self):
        """compressed_activations statistics of the latest pass."""
        return self.session.stats()

    def plan_batch(self, budget_bytes, batch, **kw):
        """plan_batch() with this session's latest statistics and tau."""
        kw.setdefault("reference_tau", self.history[-1]["layers"][0]["target_relative_error"]
                      if self.history else 0.1)
        return plan_batch(budget_bytes, batch, stats=self.session.stats(), **kw)


def plan_batch(budget_bytes, batch, stats=None, static_bytes=0.0, safety_margin=0.1, target_global_batch=0,
               reference_batch=None, reference_lr=0.1, scaling="linear", warmup_samples=0.0, reference_tau=0.1,
               max_batch=1 << 24):
    """The largest batch whose saved activations fit `budget_bytes` (ebac::adapt::plan_batch).

    `stats` (default: ebac_torch.stats()) is a pass measured at batch size
    `batch`: each compressed tensor contributes raw_bytes / batch per sample
    at its measured ratio, everything kept raw its raw bytes / batch (tensors
    that do not grow with the batch, such as BatchNorm's statistics, are
    counted as if they did, a small over-estimate). `static_bytes` is what
    does not depend on the batch (weights, optimizer state, workspace).
    Learning rate and tau are scaled from `reference_batch` (default: `batch`)
    as the planner does (linear or "sqrt"). Returns a dict with the plan and a
    one-line `description`.
    """
    st = stats if stats is not None else _last_stats()
    if not st.get("details"):
        raise ValueError("plan_batch: the statistics have no per-tensor details (run a pass with keep_details=True)")
    per, ratio, raw = [], [], 0.0
    for d in st["details"]:
        if "eb" in d and d["stored_bytes"] > 0:
            per.append(d["raw_bytes"] / batch)
            ratio.append(d["raw_bytes"] / d["stored_bytes"])
        else:
            raw += d["raw_bytes"] / batch
    return _ext.load().plan_batch(float(budget_bytes), float(static_bytes), raw, per, ratio, safety_margin,
                                  int(target_global_batch), int(max_batch), int(reference_batch or batch),
                                  float(reference_lr), scaling, float(warmup_samples), float(reference_tau))
