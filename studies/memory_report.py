#!/usr/bin/env python3
"""Whole-network memory report: what autograd saves, and what ebac, recomputation
and offloading do to memory, step time and gradients (issue 14, item 4).

    /usr/bin/python3 studies/memory_report.py --out out/memory-report
    /usr/bin/python3 studies/memory_report.py --smoke --out build/memory-report-smoke

For each network (studies/study_models.py: the VGG-style CNN, the small ViT and
a GPT-style byte LM on Debian's data, and torchvision's vgg16_bn, resnet18,
resnet50, mobilenet_v2 and vit_b_16 with random weights) it runs one training
step each way, each way in a fresh process (this script with --worker):

  plain       forward, loss, backward, SGD step;
  ebac        the forward and loss inside
              ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", model=net);
  checkpoint  torch.utils.checkpoint (non-reentrant) over the segments of
              study_models.SEGMENTS;
  ebac-recompute  ebac_torch.checkpoint over the same segments inside the ebac
              session (only the segment inputs kept, compressed);
  offload     (--ways ...,offload) the forward and loss inside
              torch.autograd.graph.save_on_cpu() (on a CPU-only machine the
              tensors are already on the CPU: the hooks' cost; on CUDA the
              real offload).

Same seed, batch, initial weights and dropout RNG each way. Measured:

* every tensor autograd saved (deduplicated, parameters excluded), raw and
  stored, by layer kind (KIND_RULES). plain: counted by this script's own
  saved_tensors_hooks; ebac: its stats()["details"]; the raw totals must agree;
* peak RSS during a step and its rise over the RSS before the step (VmHWM after
  writing 5 to /proc/self/clear_refs; CUDA: max_memory_allocated);
* step time: median and range of --steps timed steps after one warm-up step;
* where the peak is: one more, instrumented step with studies/peak_step.py's
  Sampler and Tracker (RSS every --sample-ms; what is alive at every
  pack/unpack), its timeline plotted by peak_step.plot; the model's static
  bytes; the codec's scratch for the largest saved tensor, measured alone;
* gradient fidelity against plain, per parameter (cosine, relative L2 error),
  and whether the loss falls over a worker's steps;
* then, per network (--budget-networks), studies/batch_budget.py's
  fixed-budget study: the largest batch of each way within a budget of
  peak rise, bisected, against ebac_torch.plan_batch's prediction.

Writes report.md, results.json and PNG plots into --out (after every network).
--smoke runs small versions of the three small networks and the VGG-style
CNN's budget table (plain, ebac), and exits non-zero when a worker fails, the
raw-byte totals disagree, a gradient cosine of a non-negligible parameter is
below 0.9, the budget table fails or the planner is off by more than 20%
there. docs/pytorch.md ("The whole-network memory report") describes the
outputs. `--report-only DIR` rewrites DIR's report and plots from its
results.json; `--budget-only --out DIR` reruns DIR's budget tables.
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
# ebac_torch: the tree's, or an installed copy at $EBAC_TORCH_PATH (docs/pytorch.md).
EBAC_TORCH_PATH = os.environ.get("EBAC_TORCH_PATH") or os.path.join(REPO, "integrations", "pytorch")

WAYS = ["plain", "ebac", "checkpoint", "ebac-recompute", "offload"]
DEFAULT_WAYS = ["plain", "ebac", "checkpoint", "ebac-recompute"]
WAY_TITLE = {"plain": "plain", "ebac": "ebac", "checkpoint": "checkpoint", "ebac-recompute": "ebac-recompute",
             "offload": "save_on_cpu"}
KINDS = ["conv", "linear", "norm", "activation", "attention", "pool indices", "masks", "other"]
KIND_RULES = [
    "bool tensors -> masks",
    "integer tensors saved inside a MaxPool module -> pool indices; other integer tensors (token ids, "
    "labels) -> other",
    "floating-point tensors by the innermost module running when autograd saved them: Dropout -> masks "
    "(torch 1.13 saves the CPU dropout mask as a float tensor of 0 and 1/(1-p)); Conv -> conv; "
    "a module whose class name contains 'Attention', or Softmax -> attention, except 2-D tensors there, "
    "which are the inputs of the projections MultiheadAttention computes with F.linear -> linear; "
    "Linear -> linear; *Norm* -> norm; ReLU/GELU/SiLU/... -> activation; "
    "anything else (the loss, code in a model's or block's own forward, pooling values, embeddings) -> other",
]
ACTIVATIONS = {"ReLU", "ReLU6", "GELU", "SiLU", "Hardswish", "Hardsigmoid", "Sigmoid", "Tanh", "LeakyReLU",
               "ELU", "SELU", "CELU", "Softplus", "Mish", "PReLU", "Hardtanh", "Threshold"}
LINEARS = {"Linear", "LazyLinear", "Bilinear", "NonDynamicallyQuantizableLinear"}

# Targets (../shared/DESIGN.md, "Targets"): ratio over every saved byte.
RATIO_TARGET = {"vgg-cnn": 12.0, "vgg16_bn": 12.0, "resnet50": 12.0,
                "small-vit": 8.0, "gpt": 8.0, "vit_b_16": 8.0}
COSINE_TARGET = 0.99
COSINE_SMOKE = 0.9
# A parameter is not judged when its plain gradient has ||g|| < NEGLIGIBLE *
# max ||g||, or when it is a bias feeding BatchNorm (BiasIntoBatchNorm): true
# gradients that are exactly zero come out as float32 rounding noise (1e-9 to
# 2e-5 of the largest norm in these networks).
NEGLIGIBLE = 1e-5
RSS_AGREEMENT = (0.5, 1.5)  # measured / predicted RSS saving counted as "about" the prediction
PLANNER_TARGET = 0.15       # |predicted / measured largest batch - 1| (issue 50)
PLANNER_SMOKE = 0.2         # the smoke's looser floor (small batches, a 10% bisection)
LARGEST_TENSORS = 3         # issue 50's aim: ebac's rise <= compressed bytes + this many largest saved tensors
SMOKE = {"networks": ["vgg-cnn", "small-vit", "gpt"], "batch": {"vgg-cnn": 32, "small-vit": 32, "gpt": 8},
         "size": {"gpt": 64}, "budget": ["vgg-cnn"], "budget_ways": "plain,ebac", "budget_resolution": 0.1}
# glibc's initial thresholds, with its dynamic adjustment turned off (setting
# them does that): freed tensors of 128 KiB and more go back to the system, so
# the RSS before a step does not include memory an earlier step freed.
WORKER_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "MALLOC_MMAP_THRESHOLD_": "131072",
              "MALLOC_TRIM_THRESHOLD_": "131072"}


def kind_of(module_type, dtype, shape):
    """The layer kind of one saved tensor (KIND_RULES)."""
    if dtype == "bool":
        return "masks"
    if dtype.startswith("int") or dtype.startswith("uint"):
        return "pool indices" if "MaxPool" in module_type else "other"
    t = module_type
    if "Dropout" in t:
        return "masks"
    if t.startswith("Conv") or t.startswith("LazyConv"):
        return "conv"
    if "Attention" in t or t == "Softmax":
        return "linear" if len(shape) == 2 else "attention"
    if t in LINEARS:
        return "linear"
    if "Norm" in t:
        return "norm"
    if t in ACTIVATIONS:
        return "activation"
    return "other"


# ==========================================================================
# worker: one network, one way, in its own process
# ==========================================================================

def _read_status():
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    out[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


class Memory:
    """Peak memory of one step: CUDA's allocator statistics, else VmHWM reset
    through /proc/self/clear_refs, else getrusage (the process's lifetime
    peak, which never goes down)."""

    def __init__(self, torch, cuda):
        self.torch, self.cuda = torch, cuda
        if cuda:
            self.method = "cuda max_memory_allocated"
        elif self._clear() and "VmHWM" in _read_status():
            self.method = "VmHWM after clear_refs"
        else:
            self.method = "getrusage ru_maxrss (lifetime peak; clear_refs unavailable)"

    @staticmethod
    def _clear():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def before(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
            return self.torch.cuda.memory_allocated()
        if self.method.startswith("VmHWM"):
            self._clear()
        s = _read_status()
        return s.get("VmRSS", 0)

    def peak(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            return self.torch.cuda.max_memory_allocated()
        if self.method.startswith("VmHWM"):
            return _read_status().get("VmHWM", 0)
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _storage_ptr(t):
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return s.data_ptr()
    except Exception:  # noqa: BLE001  (tensors without storage)
        return 0


class SavedCounter:
    """Counts what autograd saves, the way ebac_torch does (hooks.py): the
    tensor goes back unchanged; parameters, views of them and the model's
    parameters and buffers are excluded; a tensor saved twice (same data
    pointer, dtype, device, shape, strides, version) counts once, for the
    module that saved it first. It holds every tensor it counted until the
    context exits, so no address is reused while it counts."""

    def __init__(self, torch, model, held=()):
        self.torch = torch
        self.names = {m: (n or "<model>") for n, m in model.named_modules()}
        self.excluded = {_storage_ptr(p) for p in list(model.parameters()) + list(model.buffers())} - {0}
        self.held = {_storage_ptr(t) for t in held} - {0}
        self.anon = {}
        self.stack = []
        self.seen = {}
        self.keep = []
        self.records = []
        self.duplicates = self.duplicate_bytes = self.param_tensors = self.param_bytes = 0

    def __enter__(self):
        torch = self.torch
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self.hooks.__enter__()
        mm = torch.nn.modules.module
        self.handles = [mm.register_module_forward_pre_hook(lambda m, i: self.stack.append(m)),
                        mm.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.hooks.__exit__(*exc)
        self.stack = []
        return False

    def release(self):
        self.keep = []
        self.seen = {}

    def _post(self, m, i, o):
        if self.stack and self.stack[-1] is m:
            self.stack.pop()
        elif m in self.stack:
            del self.stack[self.stack.index(m):]

    def _module(self):
        if not self.stack:
            return "<top>", "<top>"
        m = self.stack[-1]
        n = self.names.get(m)
        if n is None:
            n = self.anon.get(m)
            if n is None:
                n = self.anon[m] = "%s#%d" % (type(m).__name__, len(self.anon))
        return n, type(m).__name__

    def _is_parameter(self, t):
        if t.requires_grad and t.is_leaf:
            return True
        b = t._base
        if b is not None and b.requires_grad and b.is_leaf:
            return True
        return _storage_ptr(t) in self.excluded

    def pack(self, t, module=None):
        n = t.numel() * t.element_size()
        if self._is_parameter(t):
            self.param_tensors += 1
            self.param_bytes += n
            return t
        if t.layout == self.torch.strided:
            key = (t.data_ptr(), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t._version)
            if key in self.seen:
                self.duplicates += 1
                self.duplicate_bytes += n
                return t
            self.seen[key] = True
        self.keep.append(t)
        name, typ = module or self._module()
        self.records.append({"module": name, "type": typ, "dtype": str(t.dtype).replace("torch.", ""),
                             "shape": list(t.shape), "raw_bytes": n, "stored_bytes": n,
                             "caller_held": _storage_ptr(t) in self.held})
        return t

    def result(self):
        return {"tensors": len(self.records), "raw_bytes": sum(r["raw_bytes"] for r in self.records),
                "stored_bytes": sum(r["stored_bytes"] for r in self.records),
                "duplicates": self.duplicates, "duplicate_bytes": self.duplicate_bytes,
                "parameters": {"tensors": self.param_tensors, "bytes": self.param_bytes},
                "records": self.records}


def _module_types(model):
    types = {(n or "<model>"): type(m).__name__ for n, m in model.named_modules()}
    types["<top>"] = "<top>"
    return types


def _type_of_name(types, name):
    if name in types:
        return types[name]
    if "#" in name:
        return name.split("#")[0]
    return "?"


class BiasIntoBatchNorm:
    """Finds the biases of Conv/Linear layers whose output goes straight into
    a training-mode BatchNorm (torchvision's vgg16_bn has 13). BatchNorm
    subtracts the batch mean, so their true gradient is exactly zero, and the
    float32 gradient is rounding noise (in vgg16_bn up to 2e-5 of the largest
    parameter gradient norm): not a fidelity measure."""

    def __init__(self, torch, model):
        nn = torch.nn
        self.names = {m: n for n, m in model.named_modules()}
        self.outputs = {}
        self.found = set()
        layers = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
        norms = nn.modules.batchnorm._BatchNorm
        self.handles = []
        for m in model.modules():
            if isinstance(m, layers) and getattr(m, "bias", None) is not None:
                self.handles.append(m.register_forward_hook(self._post))
            elif isinstance(m, norms):
                self.handles.append(m.register_forward_pre_hook(self._pre))

    def _post(self, m, inputs, out):
        self.outputs[id(out)] = (m, out)  # holds `out`, so its id is not reused meanwhile

    def _pre(self, m, inputs):
        hit = self.outputs.get(id(inputs[0])) if inputs else None
        if m.training and hit is not None and hit[1] is inputs[0]:
            self.found.add(self.names[hit[0]] + ".bias")

    def close(self):
        for h in self.handles:
            h.remove()
        self.outputs = {}
        return sorted(self.found)


def compare_grads(torch, model, ref):
    """Per parameter: cosine and relative L2 error of this run's gradient
    against `ref` (plain's), and whether plain's is negligible."""
    norms = {n: float(g.double().norm()) for n, g in ref.items() if g is not None}
    gmax = max(norms.values()) if norms else 0.0
    out = []
    for n, p in model.named_parameters():
        r = ref.get(n)
        g = p.grad
        rec = {"name": n, "numel": p.numel()}
        if r is None or g is None:
            rec.update(negligible=True, reason="no gradient (plain %s, this way %s)"
                       % ("none" if r is None else "some", "none" if g is None else "some"))
            out.append(rec)
            continue
        a, b = g.detach().double().cpu().flatten(), r.double().flatten()
        na, nb = float(a.norm()), float(b.norm())
        rec["norm_plain"] = nb
        rec["rel_l2"] = float((a - b).norm()) / nb if nb > 0 else (0.0 if na == 0 else float("inf"))
        rec["cosine"] = float(a @ b) / (na * nb) if na > 0 and nb > 0 else (1.0 if na == nb else 0.0)
        rec["negligible"] = nb < NEGLIGIBLE * gmax
        if rec["negligible"]:
            rec["reason"] = "||g_plain|| = %.3g < %.0e x max %.3g" % (nb, NEGLIGIBLE, gmax)
        out.append(rec)
    return out


def _load_ebac_torch():
    sys.path.insert(0, EBAC_TORCH_PATH)
    import ebac_torch
    ebac_torch.load_extension()
    return ebac_torch


class WayStep:
    """One network trained one way in this process: the model, its batch, the
    optimizer, and the training step (forward and loss the way `spec["way"]`
    says, backward, SGD step)."""

    def __init__(self, spec):
        import torch
        torch.set_num_threads(spec["threads"])
        import study_models as sm
        self.torch, self.sm, self.spec = torch, sm, spec
        self.net, self.way, self.seed = spec["network"], spec["way"], spec["seed"]
        self.cuda = torch.cuda.is_available()
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.ebac_torch = _load_ebac_torch() if self.way.startswith("ebac") else None
        torch.manual_seed(self.seed)
        self.model = sm.NETWORKS[self.net]["build"](spec["size"]).to(self.dev).train()
        x, y = sm.network_input(self.net, spec["batch"], spec["size"], self.seed)
        self.x, self.y = x.to(self.dev), y.to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.types = _module_types(self.model)
        self.mem = Memory(torch, self.cuda)
        self.on_segment = None   # checkpoint's segment inputs go here while counting
        self.sampler = None      # peak_step.Sampler during the instrumented step

    def describe(self):
        m, x = self.model, self.x
        return {"network": self.net, "way": self.way, "batch": self.spec["batch"], "size": self.spec["size"],
                "threads": self.torch.get_num_threads(), "device": str(self.dev),
                "params": sum(p.numel() for p in m.parameters()),
                "param_bytes": sum(p.numel() * p.element_size() for p in m.parameters()),
                "input_shape": list(x.shape), "input_dtype": str(x.dtype).replace("torch.", ""),
                "memory_method": self.mem.method}

    def _mark(self, what):
        if self.sampler is not None:
            self.sampler.mark(what)

    def forward_loss(self):
        sm = self.sm
        if self.way == "checkpoint":
            return sm.loss_of(sm.checkpointed_forward(self.net, self.model, self.x, on_segment=self.on_segment), self.y)
        return sm.way_loss(self.net, self.way, self.model, self.x, self.y, self.ebac_torch)

    def _forward(self, counter, track):
        """The loss, under this way's saved-tensor hooks; (loss, session, tracker)."""
        torch = self.torch
        if self.way.startswith("ebac"):
            session = self.ebac_torch.compressed_activations(error_bound=self.spec["error_bound"], mode="rel",
                                                             model=self.model)
            tracker = None
            if track:  # before __enter__, which hands pack/unpack to autograd
                import peak_step
                tracker = peak_step.Tracker(session, session.C, self.sampler)
            with session:
                return self.forward_loss(), session, tracker
        if self.way == "offload":
            with torch.autograd.graph.save_on_cpu(pin_memory=self.cuda):
                return self.forward_loss(), None, None
        if counter is not None:
            with counter:
                loss = self.forward_loss()
            counter.release()
            return loss, None, None
        return self.forward_loss(), None, None

    def step(self, collect=None, counter=None, track=False):
        """One training step; returns (loss, ebac session or None, peak_step.Tracker or None)."""
        torch = self.torch
        torch.manual_seed(self.seed + 1)  # the same dropout masks each way and step
        self.opt.zero_grad(set_to_none=False)
        self._mark("forward")
        loss, session, tracker = self._forward(counter, track)
        self._mark("backward")
        loss.backward()
        if collect is not None:
            collect["grads"] = {n: (None if p.grad is None else p.grad.detach().cpu().clone())
                                for n, p in self.model.named_parameters()}
        self._mark("optimizer")
        self.opt.step()
        if self.cuda:
            torch.cuda.synchronize()
        self._mark("end")
        return float(loss), session, tracker

    def static_bytes(self):
        """Parameters, gradients and optimizer state: what the RSS before a
        step holds for the model (zero_grad keeps the gradients' tensors)."""
        def nbytes(ts):
            return sum(t.numel() * t.element_size() for t in ts if self.torch.is_tensor(t))
        params = list(self.model.parameters())
        return {"parameters": nbytes(params), "gradients": nbytes(p.grad for p in params),
                "optimizer_state": nbytes(v for s in self.opt.state.values() for v in s.values())}


def _ebac_stats(session, types):
    """The parts of a session's stats() the report uses, per tensor included."""
    st = session.stats()
    det = []
    for d in st["details"]:
        e = {k: d[k] for k in ("module", "dtype", "raw_bytes", "stored_bytes") if k in d}
        e["shape"] = list(d.get("shape", ()))
        e["type"] = _type_of_name(types, d.get("module", "?"))
        for k in ("kept", "pipeline", "eb"):
            if k in d:
                e[k] = d[k]
        det.append(e)
    out = {k: st[k] for k in ("raw_bytes", "compressed_bytes", "ratio", "tensors", "compressed_tensors", "kept",
                              "duplicates", "duplicate_bytes", "parameters", "peak_compressed_bytes", "complete",
                              "derived") if k in st}
    out["details"] = det
    out["pack_seconds"] = [st.get("pack_seconds", 0.0)]
    out["unpack_seconds"] = [st.get("unpack_seconds", 0.0)]
    return out


def _fidelity_step(ws, res):
    """The warm-up step, which is also the gradient-fidelity step (same
    weights, batch and RNG each way). For plain it counts what autograd saves;
    for checkpoint what checkpointing holds from forward to backward: the saves
    outside its segments plus each segment's input (study_models passes them to
    on_segment). The counter hands every tensor back unchanged."""
    spec, torch = ws.spec, ws.torch
    counter = None
    if spec.get("count") and ws.way in ("plain", "checkpoint"):
        counter = SavedCounter(torch, ws.model, held=(ws.x, ws.y))
        if ws.way == "checkpoint":
            ws.on_segment = lambda t: counter.pack(t, ("<checkpoint input>", "<checkpoint>"))
    collect = {} if spec.get("grads") else None
    zero = BiasIntoBatchNorm(torch, ws.model) if collect is not None else None
    snapshot = _param_error_snapshot(ws) if collect is not None else None
    t0 = time.perf_counter()
    loss, session, _ = ws.step(collect, counter)
    res["warmup_seconds"] = time.perf_counter() - t0
    res["losses"] = [loss]
    if zero is not None:
        res["zero_gradient_params"] = zero.close()
    if counter is not None:
        res["count"] = counter.result()
        ws.on_segment = None
    if session is not None:
        res["ebac"] = _ebac_stats(session, ws.types)
    if collect is not None:
        res["loss"] = loss
        _compare_with_plain(ws, res, collect["grads"])
        if snapshot is not None:
            torch.save({"grads": collect["grads"], "zero": res.get("zero_gradient_params") or []}, snapshot + ".grads")


def _param_error_snapshot(ws):
    """The ebac way on the CPU with plain's gradients at hand: the weights before the fidelity step go to a
    file beside the spec (not held in memory through the timed steps), for _param_error after them."""
    if ws.way != "ebac" or ws.cuda or not ws.spec.get("ref_grads") or not os.path.exists(ws.spec["ref_grads"]):
        return None
    path = ws.spec["result"] + ".state"
    ws.torch.save(ws.model.state_dict(), path)
    return path


def _param_error(ws, res):
    """Every parameter's predicted and measured gradient change of the fidelity step (studies/param_error.py's
    predict_parameters and judge on the weights before it, the same batch and dropout masks; measured: this
    way's gradient against plain's). Runs after the timed steps, so its passes do not touch their memory."""
    path = ws.spec["result"] + ".state"
    if not os.path.exists(path + ".grads"):
        return
    import copy
    import param_error as pe
    torch = ws.torch
    saved = torch.load(path + ".grads")
    model = copy.deepcopy(ws.model)
    model.load_state_dict(torch.load(path))
    os.remove(path)
    os.remove(path + ".grads")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ws.seed + 1)  # the fidelity step's dropout masks
        predicted = pe.predict_parameters(model, ws.x, ws.y, ws.spec["error_bound"], "rel", "fast")
    rows, under = pe.judge(torch.load(ws.spec["ref_grads"]), saved["grads"], predicted, set(saved["zero"]))
    keys = ("name", "norm_fraction", "grad_rms", "measured", "predicted", "cosine", "status")
    res["param_error"] = {"rows": [dict(zip(keys, r)) for r in rows], "under": under, "limit": pe.UNDER,
                          "negligible": pe.NEGLIGIBLE, "table": pe.table(rows, under)}


def _compare_with_plain(ws, res, grads):
    """plain saves its gradients for the other ways; they compare theirs."""
    spec, torch = ws.spec, ws.torch
    if ws.way == "plain" and spec.get("save_grads"):
        torch.save(grads, spec["save_grads"])
    ref_path = spec.get("ref_grads")
    if ws.way != "plain" and ref_path and os.path.exists(ref_path):
        ref = torch.load(ref_path)
        for n, p in ws.model.named_parameters():  # the collected gradients, not p.grad after opt.step
            p.grad = grads[n]
        res["grads"] = compare_grads(torch, ws.model, ref)


def _timed_steps(ws, res):
    """spec["steps"] steps, each with its peak over the memory before it."""
    import gc
    steps, session = [], None
    for _ in range(ws.spec["steps"]):
        gc.collect()
        before = ws.mem.before()
        c0, t0 = time.process_time(), time.perf_counter()
        loss, session, _ = ws.step()
        sec, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = ws.mem.peak()
        steps.append({"seconds": sec, "cpu_seconds": cpu, "rss_before": before, "peak": peak,
                      "increase": peak - before})
        res["losses"].append(loss)
        if session is not None:
            st = session.stats()
            res["ebac"]["pack_seconds"].append(st.get("pack_seconds", 0.0))
            res["ebac"]["unpack_seconds"].append(st.get("unpack_seconds", 0.0))
    res["steps"] = steps
    return session


def _instrumented_step(ws, res):
    """One more step with studies/peak_step.py's instruments: the RSS every
    spec["sample_ms"] (the timeline) and, for the ebac ways, what is alive at
    every pack and unpack (the breakdown of the peak)."""
    import gc
    import peak_step
    gc.collect()
    res["static"] = ws.static_bytes()
    ws.sampler = peak_step.Sampler(ws.spec["sample_ms"] / 1000.0)
    base = peak_step.rss_now()
    ws.sampler.start()
    loss, session, tracker = ws.step(track=True)
    ws.sampler.stop()
    s, ws.sampler = ws.sampler, None
    res["losses"].append(loss)
    res["timeline"] = {"base": base, "samples": s.samples, "marks": s.marks,
                       "events": tracker.events if tracker else []}
    if session is not None:
        big = sorted((d["raw_bytes"] for d in session.stats()["details"]), reverse=True)
        res["largest_saved"] = big[:3]


def _codec_scratch(ws, res):
    """What the codec itself allocates beyond its output, measured alone: the
    peak over the memory before one compress (and one decompress) of a tensor
    shaped like the largest saved one, minus the stream (the tensor) it
    returns. Drawn from the batch's own values, repeated, so the data is like
    an activation's rather than noise."""
    import gc
    torch, ebac_torch = ws.torch, ws.ebac_torch
    big = max(res["ebac"]["details"], key=lambda d: d["raw_bytes"], default=None)
    if big is None or not big["shape"] or big["dtype"] not in ("float32", "float16", "bfloat16"):
        return
    n = 1
    for s in big["shape"]:
        n *= s
    src = ws.x.detach().float().flatten()
    t = src.repeat(-(-n // src.numel()))[:n].reshape(big["shape"]).to(getattr(torch, big["dtype"])).contiguous()
    pipeline = big.get("pipeline") or "max"
    gc.collect()
    before = ws.mem.before()
    c = ebac_torch.compress(t, error_bound=ws.spec["error_bound"], mode="rel", pipeline=pipeline)
    comp = ws.mem.peak() - before - c.blob.numel()
    gc.collect()
    before = ws.mem.before()
    out = ebac_torch.decompress(c)
    dec = ws.mem.peak() - before - out.numel() * out.element_size()
    res["codec_scratch"] = {"shape": big["shape"], "dtype": big["dtype"], "pipeline": pipeline,
                            "raw_bytes": t.numel() * t.element_size(), "stream_bytes": c.blob.numel(),
                            "compress": max(0, comp), "decompress": max(0, dec)}


def worker(spec):
    """Runs one (network, way, batch) in this process; returns a dict."""
    t_start = time.time()
    ws = WayStep(spec)
    res = ws.describe()
    _fidelity_step(ws, res)
    _timed_steps(ws, res)
    if spec.get("sample_ms") and not ws.cuda:  # the instruments read the host's RSS
        _instrumented_step(ws, res)
    if ws.ebac_torch is not None and "ebac" in res and ws.dev.type == "cpu":
        _codec_scratch(ws, res)
    _param_error(ws, res)
    res["wall_seconds"] = time.time() - t_start
    res["ok"] = True
    return res


def run_worker(script, spec, work, tag, timeout, fixed_malloc=True):
    """Runs `script --worker SPEC` in a process of its own (WORKER_ENV, one
    OpenMP thread), SPEC being `spec` written to WORK/TAG.spec.json and its
    output going to WORK/TAG.log; returns the JSON the worker wrote to
    spec["result"], or {"ok": False, "error": ...} when it wrote none.
    `fixed_malloc` False leaves glibc's mmap and trim thresholds at their
    defaults (step times as a user's process sees them; its peak RSS rise
    then hides the blocks glibc keeps after free)."""
    sp = os.path.join(work, tag + ".spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env.update(WORKER_ENV)
    if not fixed_malloc:
        for k in WORKER_ENV:
            if k.startswith("MALLOC_"):
                env.pop(k)
    env["OMP_NUM_THREADS"] = "1"
    with open(os.path.join(work, tag + ".log"), "w") as lf:
        subprocess.run([sys.executable, os.path.abspath(script), "--worker", sp], cwd=REPO, env=env,
                       stdout=lf, stderr=subprocess.STDOUT, timeout=timeout)
    try:
        with open(spec["result"]) as f:
            return json.load(f)
    except OSError:
        return {"ok": False, "error": "no result (see %s.log)" % tag}


def worker_main(path, run=None):
    """Runs one way's spec file in this process (`run`: the worker, default this
    report's; studies/peak_step.py passes its own) and writes its result file."""
    with open(path) as f:
        spec = json.load(f)
    try:
        res = (run or worker)(spec)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "network": spec["network"],
               "way": spec["way"], "batch": spec["batch"]}
    with open(spec["result"], "w") as f:
        json.dump(res, f)
    return 0 if res.get("ok") else 1


# ==========================================================================
# driver
# ==========================================================================

class Runner:
    """Runs workers, each in a process of its own, and logs what they did."""

    def __init__(self, args, log):
        self.args, self.log = args, log
        self.work = os.path.join(args.out, "work")
        self.logs = os.path.join(args.out, "logs")
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        self.failures = []

    def _spec(self, network, way, batch, size, steps, extra):
        tag = "%s-%s-b%d" % (network, way, batch)
        spec = {"network": network, "way": way, "batch": batch, "size": size, "seed": self.args.seed,
                "threads": self.args.threads, "steps": steps, "error_bound": self.args.error_bound,
                "result": os.path.join(self.work, tag + ".json")}
        spec.update(extra)
        return tag, spec

    def _launch(self, tag, spec):
        """The worker's exit status (or why it has none) and its result, if it wrote one."""
        spec_path = os.path.join(self.work, tag + ".spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        if os.path.exists(spec["result"]):
            os.remove(spec["result"])
        env = dict(os.environ)
        env.update(WORKER_ENV)
        with open(os.path.join(self.logs, tag + ".log"), "w") as lf:
            try:
                rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", spec_path],
                                    cwd=REPO, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                    timeout=self.args.timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %ds" % self.args.timeout
        res = None
        if os.path.exists(spec["result"]):
            with open(spec["result"]) as f:
                res = json.load(f)
        return rc, res

    def run(self, network, way, batch, size, steps, **extra):
        tag, spec = self._spec(network, way, batch, size, steps, extra)
        t0 = time.time()
        rc, res = self._launch(tag, spec)
        if res is None or not res.get("ok"):
            err = (res or {}).get("error") or "exit %s, no result" % rc
            self.failures.append("%s: %s (log: logs/%s.log)" % (tag, err, tag))
            self.log("  %-34s FAILED: %s" % (tag, err))
            return res or {"ok": False, "error": err, "network": network, "way": way, "batch": batch}
        s = res.get("steps") or []
        med = statistics.median(x["seconds"] for x in s) if s else float("nan")
        self.log("  %-34s %6.1fs wall, step %.2fs, peak %s, +%s over before" % (
            tag, time.time() - t0, med, mb(max((x["peak"] for x in s), default=0)),
            mb(max((x["increase"] for x in s), default=0))))
        return res


def mb(n):
    return "n/a" if n is None else "%.1f MB" % (n / 1e6)


def fmt_mb(n):
    return "n/a" if n is None else "%.1f" % (n / 1e6)


def _median(v):
    return statistics.median(v) if v else None


def summarize_way(res):
    """Step time and memory figures of one worker result."""
    s = res.get("steps") or []
    if not s:
        return {}
    t = [x["seconds"] for x in s]
    cpu = [x["cpu_seconds"] for x in s if "cpu_seconds" in x]
    return {"time_median": statistics.median(t), "time_min": min(t), "time_max": max(t),
            "cpu_median": statistics.median(cpu) if cpu else None,
            "peak": max(x["peak"] for x in s), "increase": max(x["increase"] for x in s),
            "rss_before": statistics.median(x["rss_before"] for x in s)}


def by_kind(records):
    out = {k: {"raw_bytes": 0, "stored_bytes": 0, "tensors": 0} for k in KINDS}
    for r in records:
        k = kind_of(r.get("type", "?"), r.get("dtype", "?"), r.get("shape", []))
        out[k]["raw_bytes"] += r["raw_bytes"]
        out[k]["stored_bytes"] += r["stored_bytes"]
        out[k]["tensors"] += 1
    return out


def study_network(runner, net, args, ways, log):
    """Every way of one network at its report batch, plain first (the others
    compare their gradients with plain's)."""
    import study_models as sm
    spec = sm.NETWORKS[net]
    batch = args.batches.get(net, spec["batch"])
    size = args.sizes.get(net, spec["size"])
    grads_path = os.path.join(runner.work, "grads-%s.pt" % net)
    log("%s: batch %d, input size %d" % (net, batch, size))
    out = {"network": net, "title": spec["title"], "family": spec["family"], "batch": batch, "size": size,
           "segments": sm.SEGMENTS[net], "data": spec["data"], "ways": {}}
    for way in ways:
        ref = {} if way == "plain" else {"ref_grads": grads_path if os.path.exists(grads_path) else None}
        out["ways"][way] = runner.run(net, way, batch, size, args.steps, count=way in ("plain", "checkpoint"),
                                      grads=True, save_grads=grads_path if way == "plain" else None,
                                      sample_ms=args.sample_ms, **ref)
    if os.path.exists(grads_path) and not args.keep_work:
        os.remove(grads_path)
    return out


def budget_of(n, args):
    """The fixed budget of a network's budget table: a peak rise over the
    memory before the step (studies/batch_budget.py measures rises), the
    parameters' bytes plus --budget-scale x ebac's rise at the report batch.
    The parameters' bytes were meant for the gradients, but batch_budget's
    rise holds none of them (the previous step's gradients are in the RSS
    before the step, and set to None, then rebuilt, within it), so they make
    the budget roomier than ebac's rise by that much (resnet50 94 MB,
    vit_b_16 343 MB). None without ebac's result."""
    if args.budget_mb.get(n["network"]):
        return args.budget_mb[n["network"]] * 1e6
    eb = n["ways"].get("ebac") or {}
    s = summarize_way(eb) if eb.get("ok") else {}
    if not s:
        return None
    return round((eb["param_bytes"] + args.budget_scale * s["increase"]) / 1e6) * 1e6


def budget_study(n, args, log):
    """studies/batch_budget.py's study of one network (the planner against
    the largest batch that fits, every way bisected; plain also with gradient
    accumulation), at budget_of(n), in n["budget_table"]."""
    import batch_budget
    net, budget = n["network"], budget_of(n, args)
    if budget is None:
        n["budget_table"] = {"error": "no ebac result to set the budget from"}
        return
    ways = [w for w in args.budget_ways if w in batch_budget.WAYS and
            (w in ("plain", "ebac") or net in args.budget_all_ways)]
    bb = argparse.Namespace(out=os.path.join(args.out, "budget"), ways=ways, seed=args.seed,
                            error_bound=args.error_bound, timeout=args.timeout, resume=args.resume_budget,
                            resolution=args.budget_resolution, sizes={net: n["size"]})
    probe = max(1, n["batch"] // args.budget_probe_divisor)
    log("%s: budget %.0f MB, probe batch %d, ways %s" % (net, budget / 1e6, probe, ",".join(ways)))
    try:
        n["budget_table"] = batch_budget.study_network(bb, net, budget, probe, log)
    except Exception as e:  # noqa: BLE001  (a failed worker: reported, the other networks go on)
        n["budget_table"] = {"error": "%s: %s" % (type(e).__name__, e)}
        log("  %s budget study FAILED: %s" % (net, e))


# --------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------

def _kinds_and_kept(a, count, e):
    """Saved bytes by layer kind (plain's count, ebac's details) and what ebac kept raw."""
    if count:
        a["plain_kinds"] = by_kind(count["records"])
    if not e:
        return
    a["ebac_kinds"] = by_kind(e["details"])
    a["ratio"] = e["raw_bytes"] / e["compressed_bytes"] if e["compressed_bytes"] else None
    kept = {}
    for d in e["details"]:
        if "kept" in d:
            k = kept.setdefault(d["kept"], {"tensors": 0, "bytes": 0, "kinds": {}})
            k["tensors"] += 1
            k["bytes"] += d["raw_bytes"]
            kd = kind_of(d["type"], d["dtype"], d["shape"])
            k["kinds"][kd] = k["kinds"].get(kd, 0) + d["raw_bytes"]
    a["kept"] = kept


def _saving_prediction(a, count, e, smoke):
    """Raw totals must agree; the RSS saving the saved bytes predict: every
    saved tensor freed at its stored size, except those the caller holds
    anyway (the input batch and targets), whose stored copies are extra."""
    rp, re_ = count["raw_bytes"], e["raw_bytes"]
    a["raw_agree"] = rp == re_
    if rp != re_:
        a["problems" if smoke else "warnings"].append("raw bytes disagree: plain count %d, ebac %d (%d vs %d tensors)"
                                                      % (rp, re_, count["tensors"], e["tensors"]))
    recs, dets = count["records"], e["details"]
    same = len(recs) == len(dets) and all(r["shape"] == d["shape"] and r["dtype"] == d["dtype"]
                                          for r, d in zip(recs, dets))
    if same:
        pred = sum((d["raw_bytes"] - d["stored_bytes"]) if not r["caller_held"] else -d["stored_bytes"]
                   for r, d in zip(recs, dets))
        a["held_bytes"] = sum(r["raw_bytes"] for r in recs if r["caller_held"])
    else:
        pred = e["raw_bytes"] - e["compressed_bytes"]
        a["warnings"].append("plain and ebac tensor lists differ in order or shape: predicted saving "
                             "is raw - stored without the caller-held correction")
    a["predicted_saving"] = pred
    s = a.get("summary", {})
    if "plain" in s and "ebac" in s:
        a["measured_saving"] = s["plain"]["increase"] - s["ebac"]["increase"]
        a["measured_peak_saving"] = s["plain"]["peak"] - s["ebac"]["peak"]


def _judge_parameters(g, zero):
    """Marks each parameter record negligible (not judged) or not: a bias
    feeding BatchNorm, or a plain gradient below NEGLIGIBLE x the largest."""
    gmax = max((x["norm_plain"] for x in g if "norm_plain" in x), default=0.0)
    for x in g:
        if "norm_plain" not in x:
            continue
        x["norm_fraction"] = x["norm_plain"] / gmax if gmax > 0 else 0.0
        if x["name"] in zero:
            x["negligible"] = True
            x["reason"] = "bias feeding BatchNorm: true gradient 0 (||g_plain|| = %.3g)" % x["norm_plain"]
        else:
            x["negligible"] = x["norm_plain"] < NEGLIGIBLE * gmax
            x["reason"] = ("||g_plain|| = %.3g < %.0e x max %.3g" % (x["norm_plain"], NEGLIGIBLE, gmax)
                           if x["negligible"] else "")


def _fidelity(a, w, plain, smoke):
    """Gradient fidelity per way (negligibility decided here, from plain's norms)."""
    a["fidelity"] = {}
    for way, r in w.items():
        g = r.get("grads")
        if not g:
            continue
        _judge_parameters(g, set(r.get("zero_gradient_params") or plain.get("zero_gradient_params") or []))
        judged = [x for x in g if not x.get("negligible")]
        a["fidelity"][way] = {
            "min_cosine": min((x["cosine"] for x in judged), default=None),
            "max_rel_l2": max((x["rel_l2"] for x in judged), default=None),
            "median_rel_l2": _median([x["rel_l2"] for x in judged]),
            "judged": len(judged), "excluded": [(x["name"], x.get("reason", "")) for x in g if x.get("negligible")],
            "worst": sorted(judged, key=lambda x: x["cosine"])[:3]}
    thr = COSINE_SMOKE if smoke else COSINE_TARGET
    for way, f in a["fidelity"].items():
        if f["min_cosine"] is not None and f["min_cosine"] < thr:
            a["problems" if smoke else "checks"].append("%s: min gradient cosine %.5f < %.2f" % (way, f["min_cosine"], thr))


def _param_error_summary(a, eb, smoke):
    """Counts of the ebac way's every-parameter table (_param_error) and its check: no judged parameter
    predicted below measured / limit. The smoke fails only when the table is missing or not a number."""
    pe = eb.get("param_error")
    if not pe:
        if smoke and eb.get("ok"):
            a["problems"].append("every-parameter table missing from the ebac way")
        return
    rows = pe["rows"]
    judged = [r for r in rows if r["status"] == "judged"]
    q = [r["predicted"] / r["measured"] for r in judged if r["measured"] > 0]
    a["param_error"] = {"parameters": len(rows), "judged": len(judged), "under": pe["under"], "limit": pe["limit"],
                        "not_modelled": sum(1 for r in rows if r["status"] == "not modelled"),
                        "negligible": sum(1 for r in rows if r["status"] == "negligible"),
                        "min_ratio": min(q, default=None), "max_ratio": max(q, default=None)}
    if smoke and (not judged or any(r["measured"] != r["measured"] for r in rows)):
        a["problems"].append("every-parameter table: %d judged, NaN among the measured" % len(judged))
    if pe["under"]:
        a["checks"].append("every parameter: %d judged, under-predicted by more than %.1fx: %s"
                           % (len(judged), pe["limit"], ", ".join(pe["under"])))


def _peak_breakdown(a, w):
    """Per way: what the peak of the instrumented step is made of
    (studies/peak_step.py's breakdown, with the model's static bytes and the
    codec's scratch measured alone)."""
    import peak_step
    a["breakdown"] = {}
    for way, r in w.items():
        if not r.get("ok") or not r.get("timeline"):
            continue
        b = peak_step.breakdown(r)
        if b is None:  # no pack/unpack events (plain, checkpoint): the rise alone
            tl = r["timeline"]
            top = max((v for _, v in tl["samples"]), default=tl["base"])
            b = {"rise": top - tl["base"]}
        b["static"] = r.get("static")
        b["codec_scratch"] = r.get("codec_scratch")
        b["largest_saved"] = sum(r.get("largest_saved") or []) or None
        a["breakdown"][way] = b


def _losses(a, w):
    """Whether the loss fell over each way's steps (the same batch each step)."""
    a["losses"] = {}
    for way, r in w.items():
        ls = r.get("losses") or []
        if len(ls) >= 2:
            a["losses"][way] = {"first": ls[0], "last": ls[-1], "steps": len(ls), "falls": ls[-1] < ls[0]}


def _budget_errors(a, n, smoke):
    """The planner's error against the measured largest batch, per way of the budget table."""
    t = n.get("budget_table")
    if not t:
        return
    if "error" in t:
        a["problems" if smoke else "warnings"].append("budget table: %s" % t["error"])
        return
    a["planner"] = {way: r["error"] for way, r in t["ways"].items()}
    for way, e in a["planner"].items():
        if smoke and (e is None or abs(e) > PLANNER_SMOKE):
            a["problems"].append("budget table: plan_batch's %s error %s beyond %.0f%%" % (
                way, "n/a" if e is None else "%+.1f%%" % (100 * e), 100 * PLANNER_SMOKE))


def analyze(n, smoke):
    """Derived figures and checks of one network's results (in place)."""
    a = {"checks": [], "problems": [], "warnings": []}
    w = n["ways"]
    plain, eb = w.get("plain") or {}, w.get("ebac") or {}
    for way, r in w.items():
        if r.get("ok"):
            a.setdefault("summary", {})[way] = summarize_way(r)
    _kinds_and_kept(a, plain.get("count"), eb.get("ebac"))
    if plain.get("count") and eb.get("ebac"):
        _saving_prediction(a, plain["count"], eb["ebac"], smoke)
    _fidelity(a, w, plain, smoke)
    _param_error_summary(a, eb, smoke)
    _peak_breakdown(a, w)
    _losses(a, w)
    _budget_errors(a, n, smoke)
    for way, r in w.items():
        if not r.get("ok"):
            a["problems"].append("%s failed: %s" % (way, r.get("error")))
    n["analysis"] = a
    return a


def _target_ratio(a, net):
    r = a.get("ratio")
    return [("ebac ratio over all saved bytes >= %gx" % RATIO_TARGET[net], "n/a" if r is None else "%.2fx" % r,
             "n/a" if r is None else ("PASS" if r >= RATIO_TARGET[net] else "FAIL"))] if net in RATIO_TARGET else []


def _target_cosine(a):
    out = []
    for way in ("ebac", "ebac-recompute"):
        f = a["fidelity"].get(way)
        if f and f["min_cosine"] is not None:
            worst = f["worst"][0]
            out.append(("%s: every non-negligible parameter's gradient cosine >= %.2f" % (way, COSINE_TARGET),
                        "min %.5f over %d parameters (%s, ||g_plain|| %.1e of the largest)" % (
                            f["min_cosine"], f["judged"], worst["name"], worst.get("norm_fraction", float("nan"))),
                        "PASS" if f["min_cosine"] >= COSINE_TARGET else "FAIL"))
        elif way == "ebac":
            out.append(("gradient cosine >= %.2f" % COSINE_TARGET, "not measured", "n/a"))
    return out


def _target_loss(a):
    out = []
    for way in ("ebac", "ebac-recompute"):
        l_ = a["losses"].get(way)
        if l_:
            out.append(("%s: the loss falls over its %d steps on the batch" % (way, l_["steps"]),
                        "%.4f -> %.4f" % (l_["first"], l_["last"]), "PASS" if l_["falls"] else "FAIL"))
    return out


def _target_memory(a, n):
    out = []
    p, m = a.get("predicted_saving"), a.get("measured_saving")
    if p is not None and m is not None and p > 0:
        q = m / p
        out.append(("peak RSS lower with ebac by about the saved bytes' prediction (measured/predicted in "
                    "[%.1f, %.1f])" % RSS_AGREEMENT, "predicted %s, measured %s (%.2f)" % (mb(p), mb(m), q),
                    "PASS" if RSS_AGREEMENT[0] <= q <= RSS_AGREEMENT[1] else "FAIL"))
    s, b = a.get("summary", {}), a.get("breakdown", {}).get("ebac") or {}
    stored = ((n["ways"].get("ebac") or {}).get("ebac") or {}).get("compressed_bytes")
    if "ebac" in s and stored is not None and b.get("largest_saved"):
        cap = stored + b["largest_saved"]
        out.append(("ebac's peak rise <= its compressed saved bytes + the %d largest saved tensors" % LARGEST_TENSORS,
                    "%s vs %s + %s" % (mb(s["ebac"]["increase"]), mb(stored), mb(b["largest_saved"])),
                    "PASS" if s["ebac"]["increase"] <= cap else "FAIL"))
    if "ebac" in s and "checkpoint" in s:
        re_, rc = s["ebac"]["increase"], s["checkpoint"]["increase"]
        out.append(("peak rise: ebac at or below checkpointing", "%s vs %s" % (mb(re_), mb(rc)),
                    "PASS" if re_ <= rc else "FAIL"))
    return out


def _target_time(a):
    s = a.get("summary", {})
    if "ebac" not in s or "checkpoint" not in s:
        return []
    te, tc = s["ebac"]["time_median"], s["checkpoint"]["time_median"]
    txt = "ebac %.2fs vs checkpoint %.2fs (%.2fx)" % (te, tc, te / tc)
    if "offload" in s:
        txt += ", vs save_on_cpu %.2fs (%.2fx)" % (s["offload"]["time_median"], te / s["offload"]["time_median"])
    return [("step time: ebac no slower than recomputation", txt, "PASS" if te <= tc else "FAIL")]


def _target_planner(a):
    return [("plan_batch (two probe steps) within %.0f%% of the largest %s batch that fits" % (100 * PLANNER_TARGET, way),
             "n/a" if e is None else "%+.1f%%" % (100 * e),
             "n/a" if e is None else ("PASS" if abs(e) <= PLANNER_TARGET else "FAIL"))
            for way, e in (a.get("planner") or {}).items()]


def targets(n):
    """[(target, measured, PASS/FAIL/n/a)] of one network."""
    a = n["analysis"]
    return (_target_ratio(a, n["network"]) + _target_cosine(a) + _target_loss(a) + _target_memory(a, n)
            + _target_time(a) + _target_planner(a))


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def git_state():
    def git(*a):
        try:
            return subprocess.run(["git", "-C", REPO] + list(a), capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except Exception:  # noqa: BLE001
            return ""
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "include", "integrations")
    return head + (" (with uncommitted changes under include/ or integrations/)" if dirty else "")


def blas_library():
    for p in ("/etc/alternatives/libblas.so.3-x86_64-linux-gnu", "/etc/alternatives/libblas.so.3-aarch64-linux-gnu"):
        if os.path.exists(p):
            return os.path.realpath(p)
    return "unknown"


def _grid(plt, nets, w, h):
    cols = min(4, len(nets))
    rows = (len(nets) + cols - 1) // cols
    return plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)


def _plot_saved_by_kind(plt, nets, out):
    """Saved bytes by kind, raw (plain) vs stored (ebac)."""
    colors = plt.get_cmap("tab10")
    fig, axes = _grid(plt, nets, 3.2, 3.2)
    for ax, n in zip(axes.flat, nets):
        a = n["analysis"]
        bars = [("raw\n(plain)", a.get("plain_kinds"), "raw_bytes"), ("stored\n(ebac)", a.get("ebac_kinds"), "stored_bytes")]
        for i, (lab, kinds, key) in enumerate(bars):
            bottom = 0.0
            for j, k in enumerate(KINDS):
                v = (kinds or {}).get(k, {}).get(key, 0) / 1e6
                ax.bar(i, v, bottom=bottom, color=colors(j), label=k if (i == 0 and ax is axes.flat[0]) else None)
                bottom += v
        ax.set_xticks([0, 1])
        ax.set_xticklabels([b[0] for b in bars], fontsize=8)
        ax.set_ylabel("MB")
        r = a.get("ratio")
        ax.set_title("%s%s" % (n["network"], "" if r is None else " (%.1fx)" % r), fontsize=9)
    for ax in list(axes.flat)[len(nets):]:
        ax.axis("off")
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="lower center", ncol=len(KINDS), fontsize=8)
    fig.suptitle("Saved for backward, by layer kind: raw vs stored by ebac")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    return _save(fig, out, "saved_by_kind.png", plt)


def _plot_per_way(plt, nets, out, fname, key, ylabel, title):
    """One bar per way and network: the peak rise or the step time."""
    colors = plt.get_cmap("tab10")
    fig, axes = _grid(plt, nets, 3.2, 3.0)
    for ax, n in zip(axes.flat, nets):
        s = n["analysis"].get("summary", {})
        ws = [w for w in WAYS if w in s]
        vals = [s[w][key] / (1e6 if key == "increase" else 1) for w in ws]
        err = None
        if key == "time_median":
            err = [[s[w]["time_median"] - s[w]["time_min"] for w in ws],
                   [s[w]["time_max"] - s[w]["time_median"] for w in ws]]
        ax.bar(range(len(ws)), vals, yerr=err, color=[colors(WAYS.index(w)) for w in ws])
        ax.set_xticks(range(len(ws)))
        ax.set_xticklabels([WAY_TITLE[w] for w in ws], rotation=30, fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(n["network"], fontsize=9)
    for ax in list(axes.flat)[len(nets):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return _save(fig, out, fname, plt)


def _plot_cosine(plt, nets, out):
    """Gradient cosine distribution per network and way (1 - cosine, log scale)."""
    colors = plt.get_cmap("tab10")
    compared = [w for w in WAYS if w != "plain"]
    slot = len(compared) + 1
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(nets)), 4))
    data, labels, pos = [], [], []
    for i, n in enumerate(nets):
        for j, way in enumerate(compared):
            g = (n["ways"].get(way) or {}).get("grads")
            v = [max(1e-12, 1 - x["cosine"]) for x in g or [] if not x.get("negligible") and "cosine" in x]
            if v:
                data.append(v)
                pos.append(i * slot + j)
                labels.append(way)
    if not data:
        plt.close(fig)
        return None
    bp = ax.boxplot(data, positions=pos, widths=0.8, patch_artist=True, showfliers=True)
    for patch, way in zip(bp["boxes"], labels):
        patch.set_facecolor(colors(WAYS.index(way)))
    ax.set_yscale("log")
    line = ax.axhline(1 - COSINE_TARGET, color="red", lw=0.8, ls="--")
    ax.set_xticks([i * slot + (slot - 2) / 2 for i in range(len(nets))])
    ax.set_xticklabels([n["network"] for n in nets], rotation=30, fontsize=8)
    ax.set_ylabel("1 - cosine(g, g_plain) per parameter (1e-12 = exact)")
    shown = [w for w in compared if w in labels]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors(WAYS.index(w))) for w in shown]
    ax.legend(handles + [line], [WAY_TITLE[w] for w in shown] + ["cosine %.2f" % COSINE_TARGET], fontsize=8)
    ax.set_title("Gradient fidelity against the plain step")
    fig.tight_layout()
    return _save(fig, out, "grad_cosine.png", plt)


def _plot_timeline(nets, out, meta):
    """studies/peak_step.py's timeline: RSS over the instrumented step, every way of a network on one axis."""
    import peak_step
    runs = [r for n in nets for r in n["ways"].values() if r.get("ok") and r.get("timeline")]
    if not runs:
        return None
    peak_step.plot(runs, out, title="Memory over one training step (report batch, SGD, %d threads)" % meta["threads"],
                   nets=[n["network"] for n in nets if any(r["network"] == n["network"] for r in runs)], dpi=60)
    return "timeline.png"


def plots(results, out, log, meta):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        log("no plots: matplotlib unavailable (%s)" % e)
        return []
    nets = [n for n in results if n.get("analysis")]
    if not nets:
        return []
    figs = [_plot_timeline(nets, out, meta), _plot_saved_by_kind(plt, nets, out),
            _plot_per_way(plt, nets, out, "peak_rss.png", "increase", "MB",
                          "Peak memory of a step above the memory before it"),
            _plot_per_way(plt, nets, out, "step_time.png", "time_median", "seconds",
                          "Step time (median; bars: min-max)"),
            _plot_cosine(plt, nets, out)]
    return [f for f in figs if f]


def _save(fig, out, name, plt):
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def ebac_pipelines(results):
    """The pipelines the ebac way's workers compressed floating-point tensors
    with (what `auto` resolved to), read from their per-tensor details."""
    used = set()
    for n in results:
        w = n.get("ways", {}).get("ebac") or {}
        for d in (w.get("ebac") or {}).get("details", []):
            if d.get("pipeline") and not d.get("lossless") and d.get("dtype", "").startswith(("float", "bfloat")):
                used.add(d["pipeline"])
    return sorted(used)


def _r_header(meta, results=()):
    used = ebac_pipelines(results)
    L = ["# Whole-network memory report%s" % (" (smoke)" if meta["smoke"] else ""), "",
         "Command: `%s`  " % meta["command"],
         "Wall time: %.1f min; %s; git %s.%s  " % (
             meta["wall_seconds"] / 60, meta["date"], meta["git"],
             " Report re-rendered from results.json on %s (`studies/memory_report.py --report-only DIR`)."
             % meta["rerendered"] if meta.get("rerendered") else ""),
         "torch %s, torchvision %s, Python %s, %s; %d threads (torch.set_num_threads), device %s; BLAS: %s.  "
         % (meta["torch"], meta["torchvision"], meta["python"], meta["machine"], meta["threads"], meta["device"],
            meta["blas"])]
    if meta.get("budget_command"):
        L.append("Fixed-budget tables rerun by `%s` (%.1f min; `uptime` before `%s`, after `%s`).  " % (
            meta["budget_command"], meta.get("budget_wall_seconds", 0) / 60, meta.get("budget_uptime_before", "?"),
            meta.get("budget_uptime_after", "?")))
    L += ["%s  " % note for note in meta.get("notes", [])]
    if meta.get("uptime_before"):
        L.append("Machine load (`uptime`): before `%s`; after `%s`%s.  " % (
            meta["uptime_before"], meta.get("uptime_after", "?"),
            "; the run's priority: nice %d" % meta["nice"] if meta.get("nice") else ""))
    L += ["ebac: relative bound %g, compressed_activations' defaults (pipeline `auto`: %s on %s; "
          "derive=True: GELU and Dropout outputs rebuilt from recipes; batchnorm_bound_scale 0.5; layernorm_rows; "
          "min_numel 4096), model= given.  " % (
              meta["error_bound"], " and ".join("`%s`" % u for u in used) or "no float tensor compressed",
              "the device %s" % meta["device"] if meta["device"] != "cpu" else "the host"),
          "Each way runs in a fresh process: one warm-up step (it is also the gradient-fidelity step), then "
          "%d timed step(s), then one instrumented step (the timeline and the breakdown); SGD (momentum 0.9) "
          "steps between them. Memory: %s; each worker runs with %s (glibc's initial thresholds, fixed), so freed "
          "tensors return to the system and the RSS before a step holds what the step does not allocate (weights, "
          "gradients, momentum, the batch, libraries)."
          % (meta["steps"], meta["memory_method"], ", ".join("%s=%s" % kv for kv in WORKER_ENV.items())), ""]
    return L


def _r_warnings(results, meta):
    L = []
    warns = [(n["network"], w) for n in results for w in n["analysis"]["problems"] + n["analysis"]["warnings"]
             + n["analysis"]["checks"]]
    if warns:
        L += ["**Warnings:**", ""] + ["- %s: %s" % nw for nw in warns] + [""]
    if meta["failures"]:
        L += ["**Failed workers:**", ""] + ["- %s" % f for f in meta["failures"]] + [""]
    return L


def _r_networks(results, meta):
    L = ["## Networks", "", "| network | input | batch | parameters | data | checkpoint segments |",
         "|---|---|---|---|---|---|"]
    for n in results:
        p = next((r for r in n["ways"].values() if r.get("ok")), {})
        shape = "x".join(str(s) for s in p.get("input_shape", [])) or "?"
        data = {"fmnist": "Fashion-MNIST images", "fmnist3": "Fashion-MNIST, bilinear to %dx%d, 3 channels"
                % (n["size"], n["size"]), "text": "bytes of %s, context %d" % (meta["text_file"], n["size"])}[n["data"]]
        L.append("| %s | %s %s | %d | %.2fM | %s | %s |" % (n["title"], shape, p.get("input_dtype", ""), n["batch"],
                                                           p.get("params", 0) / 1e6, data, n["segments"]))
    L += ["", "Weights are random (seeded; nothing downloaded). The report batch and input sizes were chosen so that "
          "the default report runs in well under an hour on 2 CPU cores with Debian's reference BLAS "
          "(linear layers run at about 1 GFLOP/s there); they are small for these networks. ebac-recompute is "
          "`ebac_torch.checkpoint` over the same segments inside the session: only the segment inputs are kept "
          "(compressed), each segment is recomputed in backward.", ""]
    return L


def _ways_of(results):
    return [w for w in WAYS if any(w in n["analysis"].get("summary", {}) for n in results)]


def _r_summary(results):
    ways = _ways_of(results)
    names = " / ".join(WAY_TITLE[w] for w in ways)
    L = ["## Summary", "",
         "| network | saved raw MB | ebac stored MB | ratio | peak RSS rise MB: %s | step s: %s | ebac min cosine | "
         "ebac loss falls |" % (names, names), "|---|---|---|---|---|---|---|---|"]
    for n in results:
        a = n["analysis"]
        s = a.get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}
        c = (n["ways"].get("plain") or {}).get("count") or {}
        f = a["fidelity"].get("ebac") or {}
        lo = a["losses"].get("ebac")
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            n["network"], fmt_mb(c.get("raw_bytes", e.get("raw_bytes"))), fmt_mb(e.get("compressed_bytes")),
            "n/a" if a.get("ratio") is None else "%.2fx" % a["ratio"],
            " / ".join(fmt_mb(s[w]["increase"]) if w in s else "n/a" for w in ways),
            " / ".join("%.2f" % s[w]["time_median"] if w in s else "n/a" for w in ways),
            "n/a" if f.get("min_cosine") is None else "%.5f" % f["min_cosine"],
            "n/a" if not lo else "%s (%.3f -> %.3f)" % ("yes" if lo["falls"] else "**no**", lo["first"], lo["last"])))
    return L + [""]


def _r_targets(results):
    L = ["## Targets", "", "| network | target | measured | result |", "|---|---|---|---|"]
    for n in results:
        L += ["| %s | %s | %s | **%s** |" % (n["network"], t, m, r) for t, m, r in targets(n)]
    return L + ["", "Step time is judged against recomputation only: on a machine without a GPU, save_on_cpu moves "
                "nothing (the tensors already live on the CPU), so it is the cost of the hooks alone. The gradient "
                "cosine line names the worst judged parameter and its plain gradient's norm as a fraction of the "
                "largest (parameters below %.0e of it are rounding noise, not judged)." % NEGLIGIBLE, ""]


def _r_breakdown(results):
    L = ["## Where the peak is", "",
         "From the instrumented step (studies/peak_step.py's instruments): the RSS sampled every few ms, and at "
         "every pack and unpack of the ebac ways what is alive: the compressed bytes, the raw saved tensors whose "
         "storage is still alive (forward still holds them after they were compressed) and the decompressed tensors "
         "still alive in backward (weak storage references). At the highest sample: the rise over the step's start, "
         "split by the last pack/unpack before it; *other* is the rest (gradients of activations, the ops' own "
         "temporaries, codec scratch in use at that moment, allocator slack). Parameters, their gradients and SGD's "
         "momentum are held before the step (zero_grad keeps the gradient tensors), so they are not in the rise. "
         "Codec scratch: the peak over the memory before one `ebac_torch.compress` (and one `decompress`) of a "
         "tensor shaped like the largest saved one, minus the stream (the tensor) it returns, measured alone in "
         "the worker after its steps.", "",
         "| network | way | phase | after | rise MB | compressed | raw alive (fwd) | decompressed alive (bwd) | other | "
         "3 largest saved MB | params / grads / momentum MB | codec scratch MB: compress / decompress (largest tensor) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in results:
        for way, b in n["analysis"].get("breakdown", {}).items():
            st, cs = b.get("static") or {}, b.get("codec_scratch")
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n["network"], WAY_TITLE[way], b.get("phase", "-"), b.get("after", "-"), fmt_mb(b["rise"]),
                *(fmt_mb(b[k]) if k in b else "-" for k in ("compressed", "raw_alive", "decompressed_alive", "other")),
                fmt_mb(b.get("largest_saved")) if b.get("largest_saved") else "-",
                " / ".join(fmt_mb(st.get(k)) for k in ("parameters", "gradients", "optimizer_state")) if st else "-",
                "%s / %s (%s %s, %s)" % (fmt_mb(cs["compress"]), fmt_mb(cs["decompress"]),
                                         "x".join(map(str, cs["shape"])), cs["dtype"], cs["pipeline"]) if cs else "-"))
    return L + ["", "![memory over one step](timeline.png)", "",
                "The timeline: RSS above the step's start over the instrumented step (time as a fraction of the "
                "step; dotted: backward starts), every way of a network on one axis, and on the right the same "
                "without plain's scale; dashed: the ebac ways' compressed bytes alive.", ""]


def _r_budget(results, meta):
    import batch_budget
    tables = {n["network"]: n["budget_table"] for n in results if n.get("budget_table")}
    if not tables:
        return []
    ok = {k: v for k, v in tables.items() if "error" not in v}
    L = ["## Largest batch within a fixed budget", "",
         "studies/batch_budget.py's study, per network: the budget is a peak RSS rise of one step over the RSS "
         "before it (VmHWM after clear_refs), set to the network's parameter bytes + %g x ebac's rise at the report "
         "batch (the parameter bytes were meant for the gradients, which are in fact in the RSS before a step "
         "here, so the budget is roomier than ebac's rise by them: much so for vgg16_bn and vit_b_16). Each batch "
         "runs in its own process, one torch thread, one warm-up step. Measured: the largest batch whose rise is "
         "<= the budget, bisected to %.0f%%. Planner (probe): `ebac_torch.plan_batch(budget, probe batch, "
         "stats=<an ebac probe's>, compressed=<ebac way>, probe_rise={<probe batch>: <rise>, <second>: <rise>}, "
         "static_bytes=0, safety_margin=0)`, the line through the way's two probe steps, the second at 0.8 x the "
         "batch the first one's plan gives (the rise grows with the batch: the gradients backward allocates are mostly not yet "
         "there at the peak; a static part of the gradients' bytes made the planner under-predict resnet18 and "
         "resnet50 by 50-73%%); plain counts ebac's saved tensors raw, checkpoint those of "
         "ebac-recompute raw. Planner (no probe): the same without probe_rise (working set 3.5 x the largest saved "
         "tensor; not meant for recomputation). Errors: predicted / measured - 1 (target: within %.0f%% with the "
         "probe). plain is also run with gradient accumulation to the largest global batch of the ways. CPU "
         "seconds are steadier than wall seconds on a shared machine."
         % (meta.get("budget_scale", 1.0), 100 * meta.get("budget_resolution", 0.05), 100 * PLANNER_TARGET), ""]
    L += batch_budget.table_lines(ok) if ok else []
    L += [""] + ["- %s: **failed**: %s" % (k, v["error"]) for k, v in tables.items() if "error" in v]
    L += ["- %s: not run (not in --budget-networks)" % n["network"] for n in results if not n.get("budget_table")]
    L += ["", "Probe rises and the batches tried (batch: rise MB):", ""] + batch_budget.tried_lines(ok) + [""]
    return L


def _r_kinds(results):
    L = ["## Saved bytes by layer kind", "",
         "Raw: what the plain step saved (counted by this script's hooks); stored: what ebac held for the "
         "same tensors. Classification (the same for both):", ""]
    L += ["- %s" % r for r in KIND_RULES] + ["", "| network | " + " | ".join(KINDS) + " | total |",
                                            "|---|" + "---|" * (len(KINDS) + 1)]
    for n in results:
        a = n["analysis"]
        pk, ek = a.get("plain_kinds"), a.get("ebac_kinds")
        if not pk and not ek:
            continue
        cells = []
        for k in KINDS:
            raw = (pk or ek)[k]["raw_bytes"]
            st = ek[k]["stored_bytes"] if ek else None
            cells.append("-" if raw == 0 else "%s → %s" % (fmt_mb(raw), fmt_mb(st)) + (" (%.1fx)" % (raw / st) if st else ""))
        traw = sum((pk or ek)[k]["raw_bytes"] for k in KINDS)
        tst = sum(ek[k]["stored_bytes"] for k in KINDS) if ek else None
        cells.append("%s → %s" % (fmt_mb(traw), fmt_mb(tst)))
        L.append("| %s | %s |" % (n["network"], " | ".join(cells)))
    return L + [""] + _r_totals(results) + _r_kept(results) + _r_checkpoint_holds(results)


def _r_totals(results):
    L = ["MB raw → MB stored (ratio). Totals check: ", ""]
    for n in results:
        c = (n["ways"].get("plain") or {}).get("count")
        e = (n["ways"].get("ebac") or {}).get("ebac")
        if c and e:
            L.append("- %s: plain count %d tensors, %d bytes (%d duplicate saves, %s; %d parameter saves excluded); "
                     "ebac %d tensors, %d bytes (%d duplicates) — %s." % (
                         n["network"], c["tensors"], c["raw_bytes"], c["duplicates"], mb(c["duplicate_bytes"]),
                         c["parameters"]["tensors"], e["tensors"], e["raw_bytes"], e["duplicates"],
                         "equal" if n["analysis"].get("raw_agree") else "**DIFFERENT**"))
    return L + [""]


def _r_kept(results):
    L = ["What ebac kept raw (counted at full size):", ""]
    for n in results:
        kept = n["analysis"].get("kept")
        if kept is None:
            continue
        if not kept:
            L.append("- %s: nothing" % n["network"])
            continue
        L.append("- %s: %s" % (n["network"], "; ".join(
            "%s: %d tensors, %s (%s)" % (r, k["tensors"], mb(k["bytes"]),
                                         ", ".join("%s %s" % (kd, mb(b)) for kd, b in sorted(k["kinds"].items())))
            for r, k in sorted(kept.items()))))
    return L + [""]


def _r_checkpoint_holds(results):
    L = ["Checkpointing holds from forward to backward only what is saved outside its segments plus each "
         "segment's input:", ""]
    for n in results:
        c = (n["ways"].get("checkpoint") or {}).get("count")
        if c:
            seg = sum(r["raw_bytes"] for r in c["records"] if r["type"] == "<checkpoint>")
            L.append("- %s: %s (%s of it segment inputs)" % (n["network"], mb(c["raw_bytes"]), mb(seg)))
    return L + [""]


def _r_memory(results):
    L = ["## Memory", "",
         "Predicted saving = Σ (raw − stored) over the saved tensors, minus the stored bytes of those the "
         "caller holds anyway (the input batch and the targets: compressing them frees nothing). Measured = "
         "plain's peak rise over the RSS before the step minus ebac's.", "",
         "| network | RSS before (plain) MB | peak plain MB | peak ebac MB | predicted saving MB | measured MB | "
         "measured / predicted | ebac peak compressed MB |", "|---|---|---|---|---|---|---|---|"]
    for n in results:
        a = n["analysis"]
        s = a.get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}
        p, m = a.get("predicted_saving"), a.get("measured_saving")
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            n["network"], fmt_mb(s.get("plain", {}).get("rss_before")), fmt_mb(s.get("plain", {}).get("peak")),
            fmt_mb(s.get("ebac", {}).get("peak")), fmt_mb(p), fmt_mb(m),
            "%.2f" % (m / p) if p and m is not None else "n/a", fmt_mb(e.get("peak_compressed_bytes"))))
    return L + [""]


def _r_time(results, meta):
    ways = _ways_of(results)
    others = [w for w in ways if w != "plain"]
    L = ["## Step time", "",
         "| network | %s | %s | ebac / checkpoint | CPU s: %s |" % (
             " | ".join("%s s%s" % (WAY_TITLE[w], " (pack + unpack s)" if w == "ebac" else "") for w in ways),
             " | ".join("%s / plain" % WAY_TITLE[w] for w in others), " / ".join(WAY_TITLE[w] for w in ways)),
         "|---|" + "---|" * (len(ways) + len(others) + 2)]
    for n in results:
        s = n["analysis"].get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}

        def t(w):
            return "n/a" if w not in s else "%.2f (%.2f-%.2f)" % (s[w]["time_median"], s[w]["time_min"], s[w]["time_max"])

        def q(a_, b_):
            return "%.2fx" % (s[a_]["time_median"] / s[b_]["time_median"]) if a_ in s and b_ in s else "n/a"
        pu = ""
        if e.get("pack_seconds") and len(e["pack_seconds"]) > 1:
            pu = " (%.2f + %.2f)" % (_median(e["pack_seconds"][1:]), _median(e["unpack_seconds"][1:]))
        L.append("| %s | %s | %s | %s | %s |" % (
            n["network"], " | ".join(t(w) + (pu if w == "ebac" else "") for w in ways),
            " | ".join(q(w, "plain") for w in others), q("ebac", "checkpoint"),
            " / ".join("%.2f" % s[w]["cpu_median"] if s.get(w, {}).get("cpu_median") is not None else "n/a"
                       for w in ways)))
    return L + ["", "Wall-clock medians of %d timed step(s) (range in brackets), after one warm-up step. The last "
                "column is the process's CPU time per step (all threads, median), which other jobs on a shared "
                "machine disturb less than the wall clock." % meta["steps"], ""]


def _r_fidelity(results):
    L = ["## Gradient fidelity", "",
         "Per parameter, against the plain step's gradient (same weights, batch and dropout masks): cosine and "
         "relative L2 error ||g − g_plain|| / ||g_plain||. A parameter whose plain gradient is below %.0e × the "
         "largest parameter gradient norm, or a bias that feeds BatchNorm directly (its true gradient is exactly "
         "zero; the float32 one is rounding noise), is not judged (listed below)." % NEGLIGIBLE, "",
         "| network | way | judged | min cosine | median rel. L2 | max rel. L2 | worst parameters (cosine) |",
         "|---|---|---|---|---|---|---|"]
    for n in results:
        for way, f in n["analysis"]["fidelity"].items():
            L.append("| %s | %s | %d | %s | %s | %s | %s |" % (
                n["network"], WAY_TITLE[way], f["judged"],
                "n/a" if f["min_cosine"] is None else "%.6f" % f["min_cosine"],
                "n/a" if f["median_rel_l2"] is None else "%.2e" % f["median_rel_l2"],
                "n/a" if f["max_rel_l2"] is None else "%.2e" % f["max_rel_l2"],
                ", ".join("%s (%.4f)" % (x["name"], x["cosine"]) for x in f["worst"])))
    L.append("")
    ex = ["- %s: %s" % (n["network"], "; ".join("`%s` (%s)" % tuple(e) for e in f["excluded"]))
          for n in results for f in [n["analysis"]["fidelity"].get("ebac")] if f and f["excluded"]]
    return L + (["Not judged:", ""] + ex + [""] if ex else [])


def _r_param_error(results, out):
    """The every-parameter summary for report.md; the full tables go to params.md."""
    L = ["## Every parameter's gradient error: predicted and measured", "",
         "The ebac way's fidelity step, per parameter: the measured RMS change of its gradient against plain's and "
         "what ebac's error model predicts for it (studies/param_error.py: Conv2d / Linear weights from their own "
         "compressed input plus what a BatchNorm or GELU after them passes back; LayerNorm weights from their own "
         "input; BatchNorm2d weights from every BatchNorm's saved input at once, their own and the later ones' "
         "whose error reaches them through those BatchNorms' input gradients; the qkv projection and the LayerNorm "
         "before an attention also from attention's own saved operands; biases, norm betas and embeddings are not "
         "modelled: their error arrives through the output gradient from later layers). Not judged: negligible gradients by the rule above. CPU only. "
         "Every row: [params.md](params.md).", "",
         "| network | parameters | judged | not modelled | negligible | predicted / measured, judged | "
         "under-predicted by more than 1.5x |", "|---|---|---|---|---|---|---|"]
    P = ["# Every parameter's gradient error", "", "Written by studies/memory_report.py (see report.md).", ""]
    header = len(L)
    for n in results:
        s = n["analysis"].get("param_error")
        if not s:
            continue
        L.append("| %s | %d | %d | %d | %d | %s | %s |" % (
            n["network"], s["parameters"], s["judged"], s["not_modelled"], s["negligible"],
            "n/a" if s["min_ratio"] is None else "%.2f-%.2f" % (s["min_ratio"], s["max_ratio"]),
            ", ".join(s["under"]) or "none"))
        P += ["## %s" % n["network"], "", n["ways"]["ebac"]["param_error"]["table"], ""]
    if len(L) == header:
        return []
    with open(os.path.join(out, "params.md"), "w") as f:
        f.write("\n".join(P))
    return L + [""]


def write_report(results, meta, figs, out):
    L = (_r_header(meta, results) + _r_warnings(results, meta) + _r_networks(results, meta) + _r_summary(results)
         + _r_targets(results) + _r_breakdown(results) + _r_budget(results, meta) + _r_kinds(results)
         + _r_memory(results) + _r_time(results, meta) + _r_fidelity(results) + _r_param_error(results, out))
    others = [f for f in figs if f != "timeline.png"]
    if others:
        L += ["## Plots", ""]
        for f in others:
            L += ["![%s](%s)" % (f, f), ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def rerender(out):
    """Rewrites report.md, the plots and results.json of `out` from its
    results.json (after a change to the analysis or the report)."""
    with open(os.path.join(out, "results.json")) as f:
        data = json.load(f)
    meta, results = data["meta"], data["networks"]
    for n in results:
        n.pop("analysis", None)
        analyze(n, meta["smoke"])
    meta["rerendered"] = time.strftime("%Y-%m-%d %H:%M %Z")
    _write_outputs(results, meta, out, print)
    print("rewrote %s" % os.path.join(out, "report.md"))
    return 0


def _write_outputs(results, meta, out, log):
    figs = plots(results, out, log, meta)
    write_report(results, meta, figs, out)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "networks": results}, f, indent=1, default=str)


def _per_network(s):
    """'N' (every network) or 'net=N,net=N' -> {net: N} (key '*' for every one)."""
    out = {}
    if not s:
        return out
    for part in s.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = float(v) if "." in v else int(v)
        else:
            out["*"] = float(part) if "." in part else int(part)
    return out


def _parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="output directory (default out/memory-report, "
                                                "build/memory-report-smoke with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="small, quick versions of the 3 small networks")
    ap.add_argument("--networks", default=None, help="comma-separated subset (default: all)")
    ap.add_argument("--ways", default=",".join(DEFAULT_WAYS), help="comma-separated subset of %s (default %s)"
                    % (",".join(WAYS), ",".join(DEFAULT_WAYS)))
    ap.add_argument("--batch", default=None, help="N for every network, or net=N,net=N")
    ap.add_argument("--size", default=None, help="input size: N for every network, or net=N,... "
                                                 "(image side; GPT context)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: all cores)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per way (default 3; smoke 1)")
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--sample-ms", type=float, default=2.0, help="RSS sampling period of the instrumented step")
    ap.add_argument("--budget-networks", default=None, help="networks given a fixed-budget table: list, 'all' or "
                                                            "'none' (default all; smoke %s)" % ",".join(SMOKE["budget"]))
    ap.add_argument("--budget-ways", default=None,
                    help="the budget table's ways (default plain,checkpoint,ebac,ebac-recompute, smoke %s; "
                         "checkpoint and ebac-recompute only for --budget-all-ways)" % SMOKE["budget_ways"])
    ap.add_argument("--budget-all-ways", default="vgg-cnn,small-vit,gpt",
                    help="networks whose budget table has every way of --budget-ways (the others: plain, ebac)")
    ap.add_argument("--budget-scale", type=float, default=1.0,
                    help="budget = gradient bytes + this x ebac's rise at the report batch")
    ap.add_argument("--budget-mb", default=None, help="explicit budget (MB of rise): N or net=N,...")
    ap.add_argument("--budget-probe-divisor", type=int, default=2, help="probe batch = report batch / this")
    ap.add_argument("--budget-resolution", type=float, default=None,
                    help="bisect until hi - lo <= this x lo (default 0.05, smoke %g)" % SMOKE["budget_resolution"])
    ap.add_argument("--resume-budget", action="store_true", help="reuse budget workers' results in OUT/budget/work")
    ap.add_argument("--note", action="append", default=[], help="a line for the report's header (--budget-only)")
    ap.add_argument("--budget-only", action="store_true",
                    help="(re)run only the fixed-budget tables of OUT/results.json's networks (implies --resume-budget)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per worker")
    ap.add_argument("--keep-work", action="store_true", help="keep the plain gradients under OUT/work")
    return ap


def _parse(argv):
    """Arguments, with the per-network batches, sizes and budget settings resolved."""
    ap = _parser()
    args = ap.parse_args(argv)
    import study_models as sm
    all_nets = list(sm.NETWORKS)
    default_nets = [n for n in all_nets if sm.NETWORKS[n].get("report", True)]
    args.nets = args.networks.split(",") if args.networks else (SMOKE["networks"] if args.smoke else default_nets)
    bad = [n for n in args.nets if n not in sm.NETWORKS]
    if bad:
        ap.error("unknown network(s) %s; known: %s" % (", ".join(bad), ", ".join(all_nets)))
    ways = [w for w in args.ways.split(",") if w]
    if any(w not in WAYS for w in ways):
        ap.error("--ways: choose from %s" % ", ".join(WAYS))
    args.way_list = [w for w in WAYS if w in ways]
    args.out = args.out or ("build/memory-report-smoke" if args.smoke else "out/memory-report")
    args.steps = args.steps if args.steps is not None else (1 if args.smoke else 3)
    b, s = _per_network(args.batch), _per_network(args.size)
    base_b = SMOKE["batch"] if args.smoke else {}
    base_s = SMOKE["size"] if args.smoke else {}
    args.batches = {n: b.get(n, b.get("*", base_b.get(n, sm.NETWORKS[n]["batch"]))) for n in args.nets}
    args.sizes = {n: s.get(n, s.get("*", base_s.get(n, sm.NETWORKS[n]["size"]))) for n in args.nets}
    bn = args.budget_networks or ("none" if "ebac" not in ways else ",".join(SMOKE["budget"]) if args.smoke else "all")
    args.budget_nets = args.nets if bn == "all" else [] if bn == "none" else [n for n in bn.split(",") if n in args.nets]
    args.budget_ways = (args.budget_ways or (SMOKE["budget_ways"] if args.smoke else
                                             "plain,checkpoint,ebac,ebac-recompute")).split(",")
    if args.budget_resolution is None:
        args.budget_resolution = SMOKE["budget_resolution"] if args.smoke else 0.05
    args.budget_all_ways = args.budget_all_ways.split(",")
    mbs = _per_network(args.budget_mb)
    args.budget_mb = {n: mbs.get(n, mbs.get("*")) for n in args.nets}
    return args


def _versions(env):
    info = subprocess.run([sys.executable, "-c", "import torch, json, platform\n"
                           "try:\n import torchvision; tv = torchvision.__version__\nexcept Exception: tv = 'absent'\n"
                           "print(json.dumps({'torch': torch.__version__, 'torchvision': tv, "
                           "'cuda': torch.cuda.is_available(), 'python': platform.python_version()}))"],
                          env=env, capture_output=True, text=True)
    try:
        return json.loads(info.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        return {"torch": "?", "torchvision": "?", "cuda": False, "python": platform.python_version()}


def _build_extension(env, log):
    """Builds (or finds) the extension once, before any timed worker; False when it does not load."""
    tb = time.time()
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import ebac_torch; "
                        "ebac_torch.load_extension(); print(ebac_torch._ext.origin())" % EBAC_TORCH_PATH],
                       cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        log("the ebac_torch extension did not load:\n" + r.stdout + r.stderr)
        return False
    log("ebac_torch extension: %s (%.0fs)" % (r.stdout.strip().splitlines()[-1], time.time() - tb))
    return True


def _uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return "load average %.2f, %.2f, %.2f" % os.getloadavg()


def _log_network(n, log):
    for p in n["analysis"]["problems"]:
        log("  problem: %s" % p)
    for p in n["analysis"]["warnings"] + n["analysis"]["checks"]:
        log("  WARNING: %s" % p)
    for t, m, r in targets(n):
        log("  %-4s %s: %s" % (r, t, m))


def _meta(args, cmd, versions, runner, results, t0):
    import study_models as sm
    mm = next((r.get("memory_method") for n in results for r in n["ways"].values() if r.get("memory_method")), "?")
    return {"smoke": args.smoke, "command": cmd, "wall_seconds": time.time() - t0,
            "date": time.strftime("%Y-%m-%d %H:%M %Z"), "git": git_state(), "torch": versions["torch"],
            "torchvision": versions["torchvision"], "python": versions["python"],
            "machine": "%s, %d cores" % (platform.machine(), os.cpu_count() or 0), "threads": args.threads,
            "device": "cuda" if versions.get("cuda") else "cpu", "blas": blas_library(),
            "error_bound": args.error_bound, "steps": args.steps, "memory_method": mm, "failures": runner.failures,
            "budget_scale": args.budget_scale, "budget_resolution": args.budget_resolution,
            "text_file": sm.TEXT_FILE, "kind_rules": KIND_RULES, "nice": os.nice(0)}


def _verdict(args, runner, results, log):
    problems = list(runner.failures)
    for n in results:
        problems += ["%s: %s" % (n["network"], p) for p in n["analysis"]["problems"]]
    if problems:
        log("%s:" % ("SMOKE FAILED" if args.smoke else "problems"))
        for p in problems:
            log("  " + p)
        return 1
    if args.smoke:
        log("smoke passed")
    return 0


def _budget_only(args, cmd, uptime_before, log):
    """The fixed-budget tables again, for the networks of an earlier run's
    results.json (its workers' results kept; budget workers already run reused)."""
    with open(os.path.join(args.out, "results.json")) as f:
        data = json.load(f)
    meta, results = data["meta"], data["networks"]
    t0 = time.time()
    args.resume_budget = True
    meta.update(budget_command=cmd.split(" --note ")[0] + (" --note ... (below)" if args.note else ""),
                budget_uptime_before=uptime_before, budget_scale=args.budget_scale,
                budget_resolution=args.budget_resolution)
    meta["notes"] = meta.get("notes", []) + args.note
    for n in results:
        n.pop("budget_table", None)
        if n["network"] in args.budget_nets:
            budget_study(n, args, log)
        analyze(n, meta["smoke"])
        _log_network(n, log)
        meta.update(budget_wall_seconds=time.time() - t0, budget_uptime_after=_uptime())
        _write_outputs(results, meta, args.out, log)
    log("wrote %s (budget tables: %.1f min)\n%s" % (os.path.join(args.out, "report.md"),
                                                     meta["budget_wall_seconds"] / 60, meta["budget_uptime_after"]))
    return 0 if not any(n["analysis"]["problems"] for n in results if not meta["smoke"]) else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, TOOLS)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1])
    if argv[:1] == ["--report-only"]:
        return rerender(argv[1])
    args = _parse(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    logf = open(os.path.join(args.out, "log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    cmd = " ".join(shlex.quote(a) for a in [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)] + argv)
    uptime_before = _uptime()
    log("memory report: %s\n%s" % (cmd, uptime_before))
    log("networks %s; ways %s; %d threads; %d timed step(s); out %s" % (
        ",".join(args.nets), ",".join(args.way_list), args.threads, args.steps, args.out))
    env = dict(os.environ)
    env.update(WORKER_ENV)
    if "ebac" in args.way_list and not _build_extension(env, log):
        return 1
    versions = _versions(env)
    runner = Runner(args, log)
    if args.budget_only:
        return _budget_only(args, cmd, uptime_before, log)
    results = []

    def checkpoint_outputs():
        meta = _meta(args, cmd, versions, runner, results, t0)
        meta.update(uptime_before=uptime_before, uptime_after=_uptime())
        _write_outputs(results, meta, args.out, log)
        return meta

    for net in args.nets:  # every way at the report batch, then (below) the fixed-budget tables
        n = study_network(runner, net, args, args.way_list, log)
        analyze(n, args.smoke)
        results.append(n)
        _log_network(n, log)
        checkpoint_outputs()
    for n in results:
        if n["network"] in args.budget_nets:
            budget_study(n, args, log)
            analyze(n, args.smoke)
            _log_network(n, log)
            checkpoint_outputs()
    meta = checkpoint_outputs()
    log("wrote %s (%.1f min)\n%s" % (os.path.join(args.out, "report.md"), meta["wall_seconds"] / 60,
                                     meta["uptime_after"]))
    return _verdict(args, runner, results, log)


if __name__ == "__main__":
    sys.exit(main())
