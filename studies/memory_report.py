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
  offload     the forward and loss inside torch.autograd.graph.save_on_cpu()
              (on a CPU-only machine the tensors are already on the CPU: a
              baseline for the hooks' cost; on CUDA the real offload).

Same seed, batch, initial weights and dropout RNG each way. Measured:

* every tensor autograd saved (deduplicated, parameters excluded), raw and
  stored, by layer kind (KIND_RULES). plain: counted by this script's own
  saved_tensors_hooks; ebac: its stats()["details"]; the raw totals must agree;
* peak RSS during a step and its rise over the RSS before the step (VmHWM after
  writing 5 to /proc/self/clear_refs; CUDA: max_memory_allocated);
* step time: median and range of --steps timed steps after one warm-up step;
* gradient fidelity against plain, per parameter (cosine, relative L2 error);
* for some networks (--fit), the largest batch within a memory budget:
  ebac_torch.plan_batch's prediction, and a fit peak = a + b * batch to
  measured peaks at two batch sizes, plain and ebac, verified by one run.

Writes report.md, results.json and PNG plots into --out. --smoke runs small
versions of the three small networks and exits non-zero when a worker fails,
the raw-byte totals disagree, or a gradient cosine of a non-negligible
parameter is below 0.9. docs/pytorch.md ("The whole-network memory report")
describes the outputs. `--report-only DIR` rewrites DIR's report and plots
from its results.json.
"""

import argparse
import json
import math
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

WAYS = ["plain", "ebac", "checkpoint", "offload"]
WAY_TITLE = {"plain": "plain", "ebac": "ebac", "checkpoint": "checkpoint", "offload": "save_on_cpu"}
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
FIT_DEFAULT = ["vgg-cnn", "small-vit", "gpt", "resnet18"]
VERIFY_CAP = 12             # no verification run above this multiple of the report batch
BUDGET_FACTOR = 1.5
SMOKE = {"networks": ["vgg-cnn", "small-vit", "gpt"], "batch": {"vgg-cnn": 32, "small-vit": 32, "gpt": 8},
         "size": {"gpt": 64}, "fit": ["vgg-cnn"]}
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


def worker(spec):
    """Runs one (network, way, batch) in this process; returns a dict."""
    t_start = time.time()
    import torch
    torch.set_num_threads(spec["threads"])
    import study_models as sm

    net, way, batch, size, seed = spec["network"], spec["way"], spec["batch"], spec["size"], spec["seed"]
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    ebac_torch = None
    if way == "ebac":
        sys.path.insert(0, EBAC_TORCH_PATH)
        import ebac_torch
        ebac_torch.load_extension()

    torch.manual_seed(seed)
    model = sm.NETWORKS[net]["build"](size).to(dev).train()
    x, y = sm.network_input(net, batch, size, seed)
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    types = _module_types(model)
    res = {"network": net, "way": way, "batch": batch, "size": size, "threads": torch.get_num_threads(),
           "device": str(dev), "params": sum(p.numel() for p in model.parameters()),
           "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
           "input_shape": list(x.shape), "input_dtype": str(x.dtype).replace("torch.", "")}
    mem = Memory(torch, cuda)
    res["memory_method"] = mem.method

    segment_hook = {"fn": None}

    def forward_loss():
        if way == "checkpoint":
            return sm.loss_of(sm.checkpointed_forward(net, model, x, on_segment=segment_hook["fn"]), y)
        return sm.loss_of(model(x), y)

    def step(collect=None, counter=None):
        torch.manual_seed(seed + 1)
        opt.zero_grad(set_to_none=False)
        session = None
        if way == "ebac":
            with ebac_torch.compressed_activations(error_bound=spec["error_bound"], mode="rel",
                                                   model=model) as session:
                loss = forward_loss()
        elif way == "offload":
            with torch.autograd.graph.save_on_cpu(pin_memory=cuda):
                loss = forward_loss()
        elif counter is not None:
            with counter:
                loss = forward_loss()
            counter.release()
        else:
            loss = forward_loss()
        loss.backward()
        if collect is not None:
            collect["loss"] = float(loss)
            collect["grads"] = {n: (None if p.grad is None else p.grad.detach().cpu().clone())
                                for n, p in model.named_parameters()}
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        return session

    # The warm-up step, which is also the gradient-fidelity step (same weights,
    # batch and RNG each way). For plain it counts what autograd saves; for
    # checkpoint what checkpointing holds from forward to backward: the saves
    # outside its segments plus each segment's input (study_models passes them
    # to on_segment). The counter hands every tensor back unchanged.
    counter = None
    if spec.get("count") and way in ("plain", "checkpoint"):
        counter = SavedCounter(torch, model, held=(x, y))
        if way == "checkpoint":
            segment_hook["fn"] = lambda t: counter.pack(t, ("<checkpoint input>", "<checkpoint>"))
    collect = {} if spec.get("grads") else None
    zero = BiasIntoBatchNorm(torch, model) if collect is not None else None
    t0 = time.perf_counter()
    session = step(collect, counter)
    res["warmup_seconds"] = time.perf_counter() - t0
    if zero is not None:
        res["zero_gradient_params"] = zero.close()
    if counter is not None:
        res["count"] = counter.result()
        segment_hook["fn"] = None
        counter = None
    if session is not None:
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
        res["ebac"] = {k: st[k] for k in ("raw_bytes", "compressed_bytes", "ratio", "tensors", "compressed_tensors",
                                          "kept", "duplicates", "duplicate_bytes", "parameters",
                                          "peak_compressed_bytes", "complete") if k in st}
        res["ebac"]["details"] = det
        res["ebac"]["pack_seconds"] = [st.get("pack_seconds", 0.0)]
        res["ebac"]["unpack_seconds"] = [st.get("unpack_seconds", 0.0)]
    if collect is not None:
        res["loss"] = collect["loss"]
        if way == "plain" and spec.get("save_grads"):
            torch.save(collect["grads"], spec["save_grads"])
        ref_path = spec.get("ref_grads")
        if way != "plain" and ref_path and os.path.exists(ref_path):
            ref = torch.load(ref_path)
            grads = collect["grads"]
            for n, p in model.named_parameters():  # compare the collected gradients, not p.grad after opt.step
                p.grad = grads[n]
            res["grads"] = compare_grads(torch, model, ref)
            del ref, grads
        del collect

    steps = []
    import gc
    for _ in range(spec["steps"]):
        gc.collect()
        before = mem.before()
        c0, t0 = time.process_time(), time.perf_counter()
        session = step()
        sec, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = mem.peak()
        steps.append({"seconds": sec, "cpu_seconds": cpu, "rss_before": before, "peak": peak,
                      "increase": peak - before})
        if session is not None:
            st = session.stats()
            res["ebac"]["pack_seconds"].append(st.get("pack_seconds", 0.0))
            res["ebac"]["unpack_seconds"].append(st.get("unpack_seconds", 0.0))
    res["steps"] = steps

    if way == "ebac" and spec.get("budget") and steps and session is not None:
        static = statistics.median(s["rss_before"] for s in steps)
        rise = statistics.median(s["increase"] for s in steps)
        try:  # this step is the probe (its rise measures the working set); then without it, ebac's and plain's
            st = session.stats()
            res["plan"] = ebac_torch.plan_batch(spec["budget"], batch, stats=st, static_bytes=static,
                                                probe_rise=rise, probe_static_bytes=0.0, safety_margin=0.0)
            res["plan"]["static_bytes"] = static
            res["plan_no_probe"] = ebac_torch.plan_batch(spec["budget"], batch, stats=st, static_bytes=static,
                                                         safety_margin=0.0)
            res["plan_plain_no_probe"] = ebac_torch.plan_batch(spec["budget"], batch, stats=st, static_bytes=static,
                                                               compressed=False, safety_margin=0.0)
        except Exception as e:  # noqa: BLE001
            res["plan"] = {"error": "%s: %s" % (type(e).__name__, e)}
    res["wall_seconds"] = time.time() - t_start
    res["ok"] = True
    return res


def run_worker(script, spec, work, tag, timeout):
    """Runs `script --worker SPEC` in a process of its own (WORKER_ENV, one
    OpenMP thread), SPEC being `spec` written to WORK/TAG.spec.json and its
    output going to WORK/TAG.log; returns the JSON the worker wrote to
    spec["result"], or {"ok": False, "error": ...} when it wrote none."""
    sp = os.path.join(work, tag + ".spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env.update(WORKER_ENV)
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
    def __init__(self, args, log):
        self.args, self.log = args, log
        self.work = os.path.join(args.out, "work")
        self.logs = os.path.join(args.out, "logs")
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.logs, exist_ok=True)
        self.failures = []

    def run(self, network, way, batch, size, steps, **extra):
        tag = "%s-%s-b%d" % (network, way, batch)
        spec = {"network": network, "way": way, "batch": batch, "size": size, "seed": self.args.seed,
                "threads": self.args.threads, "steps": steps, "error_bound": self.args.error_bound,
                "result": os.path.join(self.work, tag + ".json")}
        spec.update(extra)
        spec_path = os.path.join(self.work, tag + ".spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        if os.path.exists(spec["result"]):
            os.remove(spec["result"])
        env = dict(os.environ)
        env.update(WORKER_ENV)
        t0 = time.time()
        logf = os.path.join(self.logs, tag + ".log")
        with open(logf, "w") as lf:
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
        if res is None or not res.get("ok"):
            err = (res or {}).get("error") or "exit %s, no result" % rc
            self.failures.append("%s: %s (log: %s)" % (tag, err, os.path.relpath(logf, self.args.out)))
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


def linear_fit(points):
    """Least-squares a + b * batch through [(batch, peak)]."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    b = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return {"a": my - b * mx, "b": b}


def largest_within(fit, budget):
    if not fit or fit["b"] <= 0:
        return None
    return max(0, int(math.floor((budget - fit["a"]) / fit["b"])))


def study_network(runner, net, args, ways, log):
    import study_models as sm
    spec = sm.NETWORKS[net]
    batch = args.batches.get(net, spec["batch"])
    size = args.sizes.get(net, spec["size"])
    grads_path = os.path.join(runner.work, "grads-%s.pt" % net)
    log("%s: batch %d, input size %d" % (net, batch, size))
    out = {"network": net, "title": spec["title"], "family": spec["family"], "batch": batch, "size": size,
           "segments": sm.SEGMENTS[net], "data": spec["data"], "ways": {}}
    if "plain" in ways:
        out["ways"]["plain"] = runner.run(net, "plain", batch, size, args.steps, count=True, grads=True,
                                          save_grads=grads_path)
    plain = out["ways"].get("plain") or {}
    ps = summarize_way(plain) if plain.get("ok") else {}
    if args.budget_gib:
        budget = args.budget_gib * 2 ** 30
    elif ps:
        budget = BUDGET_FACTOR * ps["peak"]
    else:
        budget = None
    out["budget"] = budget
    for way in ways:
        if way == "plain":
            continue
        out["ways"][way] = runner.run(net, way, batch, size, args.steps, count=(way == "checkpoint"),
                                      grads=True, ref_grads=grads_path if os.path.exists(grads_path) else None,
                                      budget=budget if way == "ebac" else None)
    if os.path.exists(grads_path) and not args.keep_work:
        os.remove(grads_path)

    # The largest batch within the budget: fit peak = a + b * batch per way.
    if net in args.fit and budget and all(w in ways for w in ("plain", "ebac")):
        fit = {"budget": budget, "ways": {}}
        small = max(1, batch // 2)
        for way in ("plain", "ebac"):
            main = out["ways"].get(way) or {}
            pts = []
            if main.get("ok"):
                pts.append((batch, summarize_way(main)["peak"]))
            r = runner.run(net, way, small, size, 1)
            if r.get("ok"):
                pts.append((small, summarize_way(r)["peak"]))
            f = linear_fit(pts)
            entry = {"points": pts, "fit": f, "largest": largest_within(f, budget)}
            if args.verify and entry["largest"]:
                if entry["largest"] > VERIFY_CAP * batch:
                    entry["verify"] = {"skipped": "above %dx the report batch" % VERIFY_CAP}
                else:
                    v = runner.run(net, way, entry["largest"], size, 1)
                    if v.get("ok"):
                        vp = summarize_way(v)["peak"]
                        entry["verify"] = {"batch": entry["largest"], "peak": vp, "fits": vp <= budget,
                                           "seconds": summarize_way(v)["time_median"]}
                    else:
                        entry["verify"] = {"batch": entry["largest"], "error": v.get("error")}
            fit["ways"][way] = entry
        out["fit"] = fit
    return out


# --------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------

def analyze(n, smoke):
    """Derived figures and checks of one network's results (in place)."""
    a = {"checks": [], "problems": [], "warnings": []}
    w = n["ways"]
    plain, eb = w.get("plain") or {}, w.get("ebac") or {}
    for way, r in w.items():
        if r.get("ok"):
            a.setdefault("summary", {})[way] = summarize_way(r)
    count = plain.get("count")
    if count:
        a["plain_kinds"] = by_kind(count["records"])
    if eb.get("ebac"):
        a["ebac_kinds"] = by_kind(eb["ebac"]["details"])
        e = eb["ebac"]
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
    if count and eb.get("ebac"):
        rp, re_ = count["raw_bytes"], eb["ebac"]["raw_bytes"]
        a["raw_agree"] = rp == re_
        if rp != re_:
            a["problems" if smoke else "warnings"].append("raw bytes disagree: plain count %d, ebac %d (%d vs %d tensors)"
                                 % (rp, re_, count["tensors"], eb["ebac"]["tensors"]))
        # Predicted RSS saving: every saved tensor freed at its stored size,
        # except those the caller holds anyway (the input batch and targets),
        # whose stored copies are extra.
        recs, dets = count["records"], eb["ebac"]["details"]
        same = len(recs) == len(dets) and all(r["shape"] == d["shape"] and r["dtype"] == d["dtype"]
                                              for r, d in zip(recs, dets))
        if same:
            pred = sum((d["raw_bytes"] - d["stored_bytes"]) if not r["caller_held"] else -d["stored_bytes"]
                       for r, d in zip(recs, dets))
            a["held_bytes"] = sum(r["raw_bytes"] for r in recs if r["caller_held"])
        else:
            pred = eb["ebac"]["raw_bytes"] - eb["ebac"]["compressed_bytes"]
            a["warnings"].append("plain and ebac tensor lists differ in order or shape: predicted saving "
                                 "is raw - stored without the caller-held correction")
        a["predicted_saving"] = pred
        s = a.get("summary", {})
        if "plain" in s and "ebac" in s:
            a["measured_saving"] = s["plain"]["increase"] - s["ebac"]["increase"]
            a["measured_peak_saving"] = s["plain"]["peak"] - s["ebac"]["peak"]
    # Gradient fidelity per way (negligibility decided here, from plain's norms).
    a["fidelity"] = {}
    for way, r in w.items():
        g = r.get("grads")
        if not g:
            continue
        zero = set(r.get("zero_gradient_params") or plain.get("zero_gradient_params") or [])
        gmax = max((x["norm_plain"] for x in g if "norm_plain" in x), default=0.0)
        for x in g:
            if "norm_plain" not in x:
                continue
            if x["name"] in zero:
                x["negligible"] = True
                x["reason"] = "bias feeding BatchNorm: true gradient 0 (||g_plain|| = %.3g)" % x["norm_plain"]
            else:
                x["negligible"] = x["norm_plain"] < NEGLIGIBLE * gmax
                x["reason"] = ("||g_plain|| = %.3g < %.0e x max %.3g" % (x["norm_plain"], NEGLIGIBLE, gmax)
                               if x["negligible"] else "")
        judged = [x for x in g if not x.get("negligible")]
        a["fidelity"][way] = {
            "min_cosine": min((x["cosine"] for x in judged), default=None),
            "max_rel_l2": max((x["rel_l2"] for x in judged), default=None),
            "median_rel_l2": _median([x["rel_l2"] for x in judged]),
            "judged": len(judged), "excluded": [(x["name"], x.get("reason", "")) for x in g if x.get("negligible")],
            "worst": sorted(judged, key=lambda x: x["cosine"])[:3]}
    for way, r in w.items():
        if not r.get("ok"):
            a["problems"].append("%s failed: %s" % (way, r.get("error")))
    thr = COSINE_SMOKE if smoke else COSINE_TARGET
    for way, f in a["fidelity"].items():
        if f["min_cosine"] is not None and f["min_cosine"] < thr:
            a["problems" if smoke else "checks"].append("%s: min gradient cosine %.5f < %.2f" % (way, f["min_cosine"], thr))
    n["analysis"] = a
    return a


def targets(n):
    """[(target, measured, PASS/FAIL/n/a)] of one network."""
    a, net = n["analysis"], n["network"]
    out = []
    if net in RATIO_TARGET:
        r = a.get("ratio")
        out.append(("ebac ratio over all saved bytes >= %gx" % RATIO_TARGET[net],
                    "n/a" if r is None else "%.2fx" % r,
                    "n/a" if r is None else ("PASS" if r >= RATIO_TARGET[net] else "FAIL")))
    f = a["fidelity"].get("ebac")
    if f and f["min_cosine"] is not None:
        out.append(("every non-negligible parameter's gradient cosine >= %.2f" % COSINE_TARGET,
                    "min %.5f over %d parameters" % (f["min_cosine"], f["judged"]),
                    "PASS" if f["min_cosine"] >= COSINE_TARGET else "FAIL"))
    else:
        out.append(("gradient cosine >= %.2f" % COSINE_TARGET, "not measured", "n/a"))
    p, m = a.get("predicted_saving"), a.get("measured_saving")
    if p is not None and m is not None and p > 0:
        q = m / p
        out.append(("peak RSS lower with ebac by about the saved bytes' prediction (measured/predicted in "
                    "[%.1f, %.1f])" % RSS_AGREEMENT,
                    "predicted %s, measured %s (%.2f)" % (mb(p), mb(m), q),
                    "PASS" if RSS_AGREEMENT[0] <= q <= RSS_AGREEMENT[1] else "FAIL"))
    s = a.get("summary", {})
    if "ebac" in s and "checkpoint" in s:
        te, tc = s["ebac"]["time_median"], s["checkpoint"]["time_median"]
        txt = "ebac %.2fs vs checkpoint %.2fs (%.2fx)" % (te, tc, te / tc)
        if "offload" in s:
            txt += ", vs save_on_cpu %.2fs (%.2fx)" % (s["offload"]["time_median"], te / s["offload"]["time_median"])
        out.append(("step time: ebac no slower than recomputation", txt, "PASS" if te <= tc else "FAIL"))
    return out


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


def plots(results, out, log):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        log("no plots: matplotlib unavailable (%s)" % e)
        return []
    figs = []
    nets = [n for n in results if n.get("analysis")]
    if not nets:
        return figs
    cols = min(4, len(nets))
    rows = (len(nets) + cols - 1) // cols
    colors = plt.get_cmap("tab10")

    # 1. saved bytes by kind, raw (plain) vs stored (ebac)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
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
    figs.append(_save(fig, out, "saved_by_kind.png", plt))

    # 2. peak RSS (rise over the RSS before the step) and 3. step time, per way
    for fname, key, ylabel, title in (
            ("peak_rss.png", "increase", "MB", "Peak memory of a step above the memory before it"),
            ("step_time.png", "time_median", "seconds", "Step time (median; bars: min-max)")):
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
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
        figs.append(_save(fig, out, fname, plt))

    # 4. gradient cosine distribution (1 - cosine, log scale)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(nets)), 4))
    data, labels, pos = [], [], []
    for i, n in enumerate(nets):
        for j, way in enumerate(["ebac", "checkpoint", "offload"]):
            g = (n["ways"].get(way) or {}).get("grads")
            if not g:
                continue
            v = [max(1e-12, 1 - x["cosine"]) for x in g if not x.get("negligible") and "cosine" in x]
            if v:
                data.append(v)
                pos.append(i * 4 + j)
                labels.append((i * 4 + j, way))
    if data:
        bp = ax.boxplot(data, positions=pos, widths=0.8, patch_artist=True, showfliers=True)
        for patch, (_, way) in zip(bp["boxes"], labels):
            patch.set_facecolor(colors(WAYS.index(way)))
        ax.set_yscale("log")
        ax.axhline(1 - COSINE_TARGET, color="red", lw=0.8, ls="--", label="cosine %.2f" % COSINE_TARGET)
        ax.set_xticks([i * 4 + 1 for i in range(len(nets))])
        ax.set_xticklabels([n["network"] for n in nets], rotation=30, fontsize=8)
        ax.set_ylabel("1 - cosine(g, g_plain) per parameter (1e-12 = exact)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=colors(WAYS.index(w))) for w in ("ebac", "checkpoint", "offload")]
        ax.legend(handles + [ax.get_lines()[-1]], ["ebac", "checkpoint", "save_on_cpu", "cosine %.2f" % COSINE_TARGET],
                  fontsize=8)
        ax.set_title("Gradient fidelity against the plain step")
        fig.tight_layout()
        figs.append(_save(fig, out, "grad_cosine.png", plt))
    else:
        plt.close(fig)

    # 5. the batch fits
    fitted = [n for n in nets if n.get("fit")]
    if fitted:
        fig, axes = plt.subplots(1, len(fitted), figsize=(3.4 * len(fitted), 3.2), squeeze=False)
        for ax, n in zip(axes.flat, fitted):
            fit = n["fit"]
            xmax = 1
            for way in ("plain", "ebac"):
                e = fit["ways"].get(way) or {}
                c = colors(WAYS.index(way))
                for b, p in e.get("points", []):
                    ax.plot(b, p / 1e6, "o", color=c)
                    xmax = max(xmax, b)
                v = e.get("verify") or {}
                if "peak" in v:
                    ax.plot(v["batch"], v["peak"] / 1e6, "x", color=c, ms=9)
                    xmax = max(xmax, v["batch"])
                if e.get("largest"):
                    xmax = max(xmax, e["largest"])
            for way in ("plain", "ebac"):
                f = (fit["ways"].get(way) or {}).get("fit")
                if f:
                    xs = [0, xmax * 1.1]
                    ax.plot(xs, [(f["a"] + f["b"] * t) / 1e6 for t in xs], "-", color=colors(WAYS.index(way)),
                            label=way)
            ax.axhline(fit["budget"] / 1e6, color="k", ls="--", lw=0.8, label="budget")
            ax.set_xlabel("batch")
            ax.set_ylabel("peak RSS, MB")
            ax.set_title(n["network"], fontsize=9)
            ax.legend(fontsize=7)
        fig.suptitle("Peak memory against batch (o: measured, x: verification, line: fit)")
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        figs.append(_save(fig, out, "batch_fit.png", plt))
    return figs


def _save(fig, out, name, plt):
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def write_report(results, meta, figs, out):
    L = []
    add = L.append
    add("# Whole-network memory report%s" % (" (smoke)" if meta["smoke"] else ""))
    add("")
    add("Command: `%s`  " % meta["command"])
    add("Wall time: %.1f min; %s; git %s.%s  " % (
        meta["wall_seconds"] / 60, meta["date"], meta["git"],
        " Report re-rendered from results.json on %s (`studies/memory_report.py --report-only DIR`)."
        % meta["rerendered"] if meta.get("rerendered") else ""))
    add("torch %s, torchvision %s, Python %s, %s; %d threads (torch.set_num_threads), device %s; BLAS: %s.  "
        % (meta["torch"], meta["torchvision"], meta["python"], meta["machine"], meta["threads"], meta["device"],
           meta["blas"]))
    add("ebac: relative bound %g, default settings (pipeline `auto`: `max` on the host; min_numel 4096).  " % meta["error_bound"])
    add("Each way runs in a fresh process: one warm-up step (it is also the gradient-fidelity step), then "
        "%d timed step(s); SGD (momentum 0.9) steps between them. Memory: %s; each worker runs with %s "
        "(glibc's initial thresholds, fixed), so freed tensors return to the system and the RSS before a "
        "step holds what the step does not allocate (weights, gradients, momentum, the batch, libraries)."
        % (meta["steps"], meta["memory_method"], ", ".join("%s=%s" % kv for kv in WORKER_ENV.items())))
    add("")
    warns = [(n["network"], w) for n in results for w in n["analysis"]["problems"] + n["analysis"]["warnings"]
             + n["analysis"]["checks"]]
    if warns:
        add("**Warnings:**")
        add("")
        for net, w in warns:
            add("- %s: %s" % (net, w))
        add("")
    if meta["failures"]:
        add("**Failed workers:**")
        add("")
        for f in meta["failures"]:
            add("- %s" % f)
        add("")

    add("## Networks")
    add("")
    add("| network | input | batch | parameters | data | checkpoint segments |")
    add("|---|---|---|---|---|---|")
    for n in results:
        p = next((r for r in n["ways"].values() if r.get("ok")), {})
        shape = "x".join(str(s) for s in p.get("input_shape", [])) or "?"
        data = {"fmnist": "Fashion-MNIST images", "fmnist3": "Fashion-MNIST, bilinear to %dx%d, 3 channels"
                % (n["size"], n["size"]), "text": "bytes of %s, context %d" % (meta["text_file"], n["size"])}[n["data"]]
        add("| %s | %s %s | %d | %.2fM | %s | %s |" % (n["title"], shape, p.get("input_dtype", ""), n["batch"],
                                                     p.get("params", 0) / 1e6, data, n["segments"]))
    add("")
    add("Weights are random (seeded; nothing downloaded). The report batch and input sizes were chosen so that "
        "the default report runs in well under an hour on 2 CPU cores with Debian's reference BLAS "
        "(linear layers run at about 1 GFLOP/s there); they are small for these networks.")
    add("")

    add("## Summary")
    add("")
    add("| network | saved raw MB | ebac stored MB | ratio | peak RSS rise MB: plain / ebac / checkpoint / "
        "save_on_cpu | step s: plain / ebac / checkpoint / save_on_cpu | ebac min cosine |")
    add("|---|---|---|---|---|---|---|")
    for n in results:
        a = n["analysis"]
        s = a.get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}
        c = (n["ways"].get("plain") or {}).get("count") or {}
        f = a["fidelity"].get("ebac") or {}
        add("| %s | %s | %s | %s | %s | %s | %s |" % (
            n["network"], fmt_mb(c.get("raw_bytes", e.get("raw_bytes"))), fmt_mb(e.get("compressed_bytes")),
            "n/a" if a.get("ratio") is None else "%.2fx" % a["ratio"],
            " / ".join(fmt_mb(s[w]["increase"]) if w in s else "n/a" for w in WAYS),
            " / ".join("%.2f" % s[w]["time_median"] if w in s else "n/a" for w in WAYS),
            "n/a" if f.get("min_cosine") is None else "%.5f" % f["min_cosine"]))
    add("")

    add("## Targets")
    add("")
    add("| network | target | measured | result |")
    add("|---|---|---|---|")
    for n in results:
        for t, m, r in targets(n):
            add("| %s | %s | %s | **%s** |" % (n["network"], t, m, r))
    add("")
    add("Step time is judged against recomputation only: on a machine without a GPU, save_on_cpu moves "
        "nothing (the tensors already live on the CPU), so it is the cost of the hooks alone.")
    add("")

    add("## Saved bytes by layer kind")
    add("")
    add("Raw: what the plain step saved (counted by this script's hooks); stored: what ebac held for the "
        "same tensors. Classification (the same for both):")
    add("")
    for r in KIND_RULES:
        add("- %s" % r)
    add("")
    add("| network | " + " | ".join(KINDS) + " | total |")
    add("|---|" + "---|" * (len(KINDS) + 1))
    for n in results:
        a = n["analysis"]
        pk, ek = a.get("plain_kinds"), a.get("ebac_kinds")
        if not pk and not ek:
            continue
        cells = []
        for k in KINDS:
            raw = (pk or ek)[k]["raw_bytes"]
            st = ek[k]["stored_bytes"] if ek else None
            if raw == 0:
                cells.append("-")
            else:
                cells.append("%s → %s" % (fmt_mb(raw), fmt_mb(st)) + (" (%.1fx)" % (raw / st) if st else ""))
        traw = sum((pk or ek)[k]["raw_bytes"] for k in KINDS)
        tst = sum(ek[k]["stored_bytes"] for k in KINDS) if ek else None
        cells.append("%s → %s" % (fmt_mb(traw), fmt_mb(tst)))
        add("| %s | %s |" % (n["network"], " | ".join(cells)))
    add("")
    add("MB raw → MB stored (ratio). Totals check: ")
    add("")
    for n in results:
        a = n["analysis"]
        c = (n["ways"].get("plain") or {}).get("count")
        e = (n["ways"].get("ebac") or {}).get("ebac")
        if c and e:
            add("- %s: plain count %d tensors, %d bytes (%d duplicate saves, %s; %d parameter saves excluded); "
                "ebac %d tensors, %d bytes (%d duplicates) — %s." % (
                    n["network"], c["tensors"], c["raw_bytes"], c["duplicates"], mb(c["duplicate_bytes"]),
                    c["parameters"]["tensors"], e["tensors"], e["raw_bytes"], e["duplicates"],
                    "equal" if a.get("raw_agree") else "**DIFFERENT**"))
    add("")
    add("What ebac kept raw (counted at full size):")
    add("")
    for n in results:
        kept = n["analysis"].get("kept")
        if kept is None:
            continue
        if not kept:
            add("- %s: nothing" % n["network"])
            continue
        add("- %s: %s" % (n["network"], "; ".join(
            "%s: %d tensors, %s (%s)" % (r, k["tensors"], mb(k["bytes"]),
                                         ", ".join("%s %s" % (kd, mb(b)) for kd, b in sorted(k["kinds"].items())))
            for r, k in sorted(kept.items()))))
    add("")
    add("Checkpointing holds from forward to backward only what is saved outside its segments plus each "
        "segment's input:")
    add("")
    for n in results:
        c = (n["ways"].get("checkpoint") or {}).get("count")
        if c:
            seg = sum(r["raw_bytes"] for r in c["records"] if r["type"] == "<checkpoint>")
            add("- %s: %s (%s of it segment inputs)" % (n["network"], mb(c["raw_bytes"]), mb(seg)))
    add("")

    add("## Memory")
    add("")
    add("Predicted saving = Σ (raw − stored) over the saved tensors, minus the stored bytes of those the "
        "caller holds anyway (the input batch and the targets: compressing them frees nothing). Measured = "
        "plain's peak rise over the RSS before the step minus ebac's.")
    add("")
    add("| network | RSS before (plain) MB | peak plain MB | peak ebac MB | predicted saving MB | measured MB | "
        "measured / predicted | ebac peak compressed MB |")
    add("|---|---|---|---|---|---|---|---|")
    for n in results:
        a = n["analysis"]
        s = a.get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}
        p, m = a.get("predicted_saving"), a.get("measured_saving")
        add("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            n["network"], fmt_mb(s.get("plain", {}).get("rss_before")), fmt_mb(s.get("plain", {}).get("peak")),
            fmt_mb(s.get("ebac", {}).get("peak")), fmt_mb(p), fmt_mb(m),
            "%.2f" % (m / p) if p and m is not None else "n/a", fmt_mb(e.get("peak_compressed_bytes"))))
    add("")

    add("## Step time")
    add("")
    add("| network | plain s | ebac s (pack + unpack s) | checkpoint s | save_on_cpu s | ebac / plain | "
        "checkpoint / plain | save_on_cpu / plain | ebac / checkpoint | CPU s: plain / ebac / checkpoint / "
        "save_on_cpu |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for n in results:
        s = n["analysis"].get("summary", {})
        e = (n["ways"].get("ebac") or {}).get("ebac") or {}

        def t(w):
            if w not in s:
                return "n/a"
            return "%.2f (%.2f-%.2f)" % (s[w]["time_median"], s[w]["time_min"], s[w]["time_max"])

        def q(a_, b_):
            return "%.2fx" % (s[a_]["time_median"] / s[b_]["time_median"]) if a_ in s and b_ in s else "n/a"
        pu = ""
        if e.get("pack_seconds") and len(e["pack_seconds"]) > 1:
            pu = " (%.2f + %.2f)" % (_median(e["pack_seconds"][1:]), _median(e["unpack_seconds"][1:]))
        add("| %s | %s | %s%s | %s | %s | %s | %s | %s | %s | %s |" % (
            n["network"], t("plain"), t("ebac"), pu, t("checkpoint"), t("offload"), q("ebac", "plain"),
            q("checkpoint", "plain"), q("offload", "plain"), q("ebac", "checkpoint"),
            " / ".join("%.2f" % s[w]["cpu_median"] if s.get(w, {}).get("cpu_median") is not None else "n/a"
                       for w in WAYS)))
    add("")
    add("Wall-clock medians of %d timed step(s) (range in brackets), after one warm-up step. The last column is "
        "the process's CPU time per step (all threads, median), which other jobs on a shared machine disturb "
        "less than the wall clock." % meta["steps"])
    add("")

    add("## Gradient fidelity")
    add("")
    add("Per parameter, against the plain step's gradient (same weights, batch and dropout masks): cosine and "
        "relative L2 error ||g − g_plain|| / ||g_plain||. A parameter whose plain gradient is below %.0e × the "
        "largest parameter gradient norm, or a bias that feeds BatchNorm directly (its true gradient is exactly "
        "zero; the float32 one is rounding noise), is not judged (listed below)." % NEGLIGIBLE)
    add("")
    add("| network | way | judged | min cosine | median rel. L2 | max rel. L2 | worst parameters (cosine) |")
    add("|---|---|---|---|---|---|---|")
    for n in results:
        for way, f in n["analysis"]["fidelity"].items():
            add("| %s | %s | %d | %s | %s | %s | %s |" % (
                n["network"], WAY_TITLE[way], f["judged"],
                "n/a" if f["min_cosine"] is None else "%.6f" % f["min_cosine"],
                "n/a" if f["median_rel_l2"] is None else "%.2e" % f["median_rel_l2"],
                "n/a" if f["max_rel_l2"] is None else "%.2e" % f["max_rel_l2"],
                ", ".join("%s (%.4f)" % (x["name"], x["cosine"]) for x in f["worst"])))
    add("")
    ex = []
    for n in results:
        f = n["analysis"]["fidelity"].get("ebac")
        if f and f["excluded"]:
            ex.append("- %s: %s" % (n["network"], "; ".join("`%s` (%s)" % e for e in f["excluded"])))
    if ex:
        add("Not judged:")
        add("")
        L.extend(ex)
        add("")

    fitted = [n for n in results if n.get("fit")]
    if fitted:
        add("## Largest batch within a memory budget")
        add("")
        add("Budget: %s. Measured: peak RSS at the report batch and at half of it, each in a fresh process, "
            "fit to a + b·batch; the largest batch under the budget, then one run at that batch to check it "
            "(skipped above %dx the report batch). Predicted: `ebac_torch.plan_batch(budget, batch, "
            "stats=<ebac's pass>, static_bytes=<RSS before the step>, probe_rise=<that step's rise>, "
            "safety_margin=0)` (the step measures the working set; no margin, to compare with the "
            "measurement), and without probe_rise (working set 3.5x the largest saved tensor); for plain, "
            "`compressed=False` without a probe."
            % ("%g GiB" % meta["budget_gib"] if meta["budget_gib"] else "%.1fx the plain step's peak RSS at the "
               "report batch" % BUDGET_FACTOR, VERIFY_CAP))
        add("")
        add("| network | budget MB | way | fit a MB + b MB/sample | largest batch (fit) | planner | verification |")
        add("|---|---|---|---|---|---|---|")
        for n in fitted:
            fit = n["fit"]
            eb = n["ways"].get("ebac") or {}
            plan = eb.get("plan") or {}
            c = (n["ways"].get("plain") or {}).get("count") or {}
            for way in ("plain", "ebac"):
                e = fit["ways"].get(way) or {}
                f = e.get("fit")
                if way == "ebac":
                    pl = ("%d (static %s)" % (plan["max_micro_batch"], mb(plan.get("static_bytes")))
                          if "max_micro_batch" in plan else plan.get("error", "n/a"))
                    if "max_micro_batch" in (eb.get("plan_no_probe") or {}):
                        pl += "; no probe %d" % eb["plan_no_probe"]["max_micro_batch"]
                elif "max_micro_batch" in (eb.get("plan_plain_no_probe") or {}):
                    pl = "no probe %d" % eb["plan_plain_no_probe"]["max_micro_batch"]
                else:  # results from before the planner had a working set: the saved bytes alone
                    st = plan.get("static_bytes")
                    pl = "n/a"
                    if st and c.get("raw_bytes"):
                        pl = "%d" % max(0, int((fit["budget"] * 0.9 - st) / (c["raw_bytes"] / n["batch"])))
                v = e.get("verify") or {}
                if "peak" in v:
                    vt = "batch %d: %s, %s" % (v["batch"], mb(v["peak"]), "fits" if v["fits"] else "**over budget**")
                else:
                    vt = v.get("skipped") or v.get("error") or "n/a"
                add("| %s | %s | %s | %s | %s | %s | %s |" % (
                    n["network"], fmt_mb(fit["budget"]), way,
                    "n/a" if not f else "%.1f + %.3f" % (f["a"] / 1e6, f["b"] / 1e6),
                    e.get("largest", "n/a"), pl, vt))
        add("")

    if figs:
        add("## Plots")
        add("")
        for f in figs:
            add("![%s](%s)" % (f, f))
            add("")
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
    figs = plots(results, out, print)
    write_report(results, meta, figs, out)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "networks": results}, f, indent=1, default=str)
    print("rewrote %s" % os.path.join(out, "report.md"))
    return 0


def _per_network(s):
    """'N' (every network) or 'net=N,net=N' -> {net: N} (key '*' for every one)."""
    out = {}
    if not s:
        return out
    for part in s.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = int(v)
        else:
            out["*"] = int(part)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        sys.path.insert(0, TOOLS)
        return worker_main(argv[1])
    if argv[:1] == ["--report-only"]:
        return rerender(argv[1])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="output directory (default out/memory-report, "
                                                "build/memory-report-smoke with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="small, quick versions of the 3 small networks")
    ap.add_argument("--full", action="store_true", help="fit the largest batch for every network")
    ap.add_argument("--networks", default=None, help="comma-separated subset (default: all)")
    ap.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of %s" % ",".join(WAYS))
    ap.add_argument("--batch", default=None, help="N for every network, or net=N,net=N")
    ap.add_argument("--size", default=None, help="input size: N for every network, or net=N,... "
                                                 "(image side; GPT context)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: all cores)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per way (default 3; smoke 1)")
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--budget-gib", type=float, default=None,
                    help="memory budget for the batch fit (default %.1fx plain's peak)" % BUDGET_FACTOR)
    ap.add_argument("--fit", default=None, help="networks to fit the largest batch for: list, 'all' or 'none' "
                                                "(default %s; --full: all)" % ",".join(FIT_DEFAULT))
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="no run at the fitted batch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per worker")
    ap.add_argument("--keep-work", action="store_true", help="keep the plain gradients under OUT/work")
    args = ap.parse_args(argv)

    sys.path.insert(0, TOOLS)
    import study_models as sm
    all_nets = list(sm.NETWORKS)
    default_nets = [n for n in all_nets if sm.NETWORKS[n].get("report", True)]
    nets = args.networks.split(",") if args.networks else (SMOKE["networks"] if args.smoke else default_nets)
    bad = [n for n in nets if n not in sm.NETWORKS]
    if bad:
        ap.error("unknown network(s) %s; known: %s" % (", ".join(bad), ", ".join(all_nets)))
    ways = [w for w in args.ways.split(",") if w]
    if any(w not in WAYS for w in ways):
        ap.error("--ways: choose from %s" % ", ".join(WAYS))
    ways = [w for w in WAYS if w in ways]
    args.out = args.out or ("build/memory-report-smoke" if args.smoke else "out/memory-report")
    args.steps = args.steps if args.steps is not None else (1 if args.smoke else 3)
    b, s = _per_network(args.batch), _per_network(args.size)
    base_b = SMOKE["batch"] if args.smoke else {}
    base_s = SMOKE["size"] if args.smoke else {}
    args.batches = {n: b.get(n, b.get("*", base_b.get(n, sm.NETWORKS[n]["batch"]))) for n in nets}
    args.sizes = {n: s.get(n, s.get("*", base_s.get(n, sm.NETWORKS[n]["size"]))) for n in nets}
    if args.fit == "all" or (args.fit is None and args.full):
        args.fit = nets
    elif args.fit == "none":
        args.fit = []
    elif args.fit is None:
        args.fit = SMOKE["fit"] if args.smoke else FIT_DEFAULT
    else:
        args.fit = args.fit.split(",")
    os.makedirs(args.out, exist_ok=True)

    t0 = time.time()
    logf = open(os.path.join(args.out, "log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    cmd = " ".join(shlex.quote(a) for a in [sys.executable, os.path.relpath(os.path.abspath(__file__), REPO)] + argv)
    log("memory report: %s" % cmd)
    log("networks %s; ways %s; %d threads; %d timed step(s); out %s" % (
        ",".join(nets), ",".join(ways), args.threads, args.steps, args.out))
    env = dict(os.environ)
    env.update(WORKER_ENV)
    # Build (or find) the extension once, before any timed worker.
    if "ebac" in ways:
        tb = time.time()
        r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import ebac_torch; "
                            "ebac_torch.load_extension(); print(ebac_torch._ext.origin())"
                            % EBAC_TORCH_PATH],
                           cwd=REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            log("the ebac_torch extension did not load:\n" + r.stdout + r.stderr)
            return 1
        log("ebac_torch extension: %s (%.0fs)" % (r.stdout.strip().splitlines()[-1], time.time() - tb))
    info = subprocess.run([sys.executable, "-c", "import torch, json, platform\n"
                           "try:\n import torchvision; tv = torchvision.__version__\nexcept Exception: tv = 'absent'\n"
                           "print(json.dumps({'torch': torch.__version__, 'torchvision': tv, "
                           "'cuda': torch.cuda.is_available(), 'python': platform.python_version()}))"],
                          env=env, capture_output=True, text=True)
    try:
        versions = json.loads(info.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        versions = {"torch": "?", "torchvision": "?", "cuda": False, "python": platform.python_version()}

    runner = Runner(args, log)
    results = []
    for net in nets:
        n = study_network(runner, net, args, ways, log)
        analyze(n, args.smoke)
        results.append(n)
        for p in n["analysis"]["problems"]:
            log("  problem: %s" % p)
        for p in n["analysis"]["warnings"] + n["analysis"]["checks"]:
            log("  WARNING: %s" % p)
        for t, m, r in targets(n):
            log("  %-4s %s: %s" % (r, t, m))

    mm = next((r.get("memory_method") for n in results for r in n["ways"].values() if r.get("memory_method")), "?")
    meta = {"smoke": args.smoke, "command": cmd, "wall_seconds": time.time() - t0,
            "date": time.strftime("%Y-%m-%d %H:%M %Z"), "git": git_state(), "torch": versions["torch"],
            "torchvision": versions["torchvision"], "python": versions["python"],
            "machine": "%s, %d cores" % (platform.machine(), os.cpu_count() or 0), "threads": args.threads,
            "device": "cuda" if versions.get("cuda") else "cpu", "blas": blas_library(),
            "error_bound": args.error_bound, "steps": args.steps, "memory_method": mm, "failures": runner.failures,
            "budget_gib": args.budget_gib, "text_file": sm.TEXT_FILE, "kind_rules": KIND_RULES}
    figs = plots(results, args.out, log)
    meta["wall_seconds"] = time.time() - t0
    write_report(results, meta, figs, args.out)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "networks": results}, f, indent=1, default=str)
    log("wrote %s (%.1f min)" % (os.path.join(args.out, "report.md"), meta["wall_seconds"] / 60))

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


if __name__ == "__main__":
    sys.exit(main())
