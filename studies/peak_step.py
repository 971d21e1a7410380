#!/usr/bin/env python3
"""Peak memory and time of one training step, the way issue 50 measures it:
plain, ebac, per-block checkpointing and ebac composed with recomputation.

    /usr/bin/python3 studies/peak_step.py --out build/peak-step
    /usr/bin/python3 studies/peak_step.py --networks resnet20 --ways plain,ebac --rounds 3 --out build/p
    /usr/bin/python3 studies/peak_step.py --smoke --out build/peak-step-smoke   # both networks, small (CI: --networks resnet20)

Networks (studies/study_models.py): `resnet20` (ResNet-20-shaped CNN, 16/32/64
channels, BN, ReLU, 3 stages of 3 basic blocks) and `vit12` (ViT, 12 blocks,
d=96, 4 heads, 4x4 patches: 49 tokens + class token), on a batch of 256
Fashion-MNIST images. Each (network, way) runs in its own process
(this script with --worker), one torch thread, with the glibc thresholds of
memory_report.WORKER_ENV fixed; `--rounds` repeats every way, interleaved
(round 1: all ways, round 2: all ways, ...), for medians on a shared machine.

In a worker: Adam (lr 1e-3), two warm-up steps, then one measured step: the
peak RSS rise over the RSS before it (memory_report.Memory: VmHWM after
clear_refs) and its wall time. Then one more step, instrumented, for the
timeline and the breakdown: a thread samples the RSS every --sample-ms, and
(ebac ways) every pack/unpack records the RSS and what is alive at that
moment: the compressed bytes, the raw saved tensors whose storage is still
alive (what forward still holds after compressing), and the decompressed
tensors still alive in backward (checked through weak storage references,
so the count never keeps a tensor alive).

Ways:
  plain             forward, loss, backward, Adam step;
  ebac              forward and loss inside compressed_activations(error_bound=1e-2, mode="rel")
                    with its defaults (no model=, as a new user writes it);
  checkpoint        torch.utils.checkpoint (non-reentrant) around every residual/transformer block;
  ebac-recompute    ebac_torch.checkpoint around every block, inside compressed_activations:
                    only the block inputs are kept (compressed), the block is recomputed in backward;
  ebac-sliced       ebac with conv_backward_slices=--conv-slices (default "auto"): convolutions
                    compute their backward over batch slices (not in the default ways).

Writes results.json, report.md and timeline.png (RSS over the instrumented
step, every way of a network on one axis) into --out.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
import memory_report as mr  # noqa: E402  (Memory, WORKER_ENV; imports no torch at module level)

WAYS = ["plain", "ebac", "checkpoint", "ebac-recompute"]
NETWORKS = ["resnet20", "vit12"]
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Sampler(threading.Thread):
    """RSS every `period` seconds, with phase marks, until stopped."""

    def __init__(self, period):
        super().__init__(daemon=True)
        self.period, self.t0 = period, time.perf_counter()
        self.samples, self.marks = [], []
        self._stop_evt = threading.Event()

    def mark(self, what):
        self.marks.append((time.perf_counter() - self.t0, what, rss_now()))

    def run(self):
        while not self._stop_evt.is_set():
            self.samples.append((time.perf_counter() - self.t0, rss_now()))
            time.sleep(self.period)

    def stop(self):
        self._stop_evt.set()
        self.join()


class Tracker:
    """Wraps a session's pack/unpack: records at each call the RSS and what
    is alive (compressed bytes, raw saved storages, decompressed storages)."""

    def __init__(self, session, C, sampler):
        self.s, self.C, self.sampler = session, C, sampler
        self.raw = {}     # storage id -> (StorageRef, bytes) of packed raw tensors
        self.dec = {}     # storage id -> (StorageRef, bytes) of unpacked (decompressed) tensors
        self.events = []
        pack, unpack = session._pack, session._unpack
        tr = self

        def _pack(t):
            p = pack(t)
            if p is not t and getattr(p, "blob", None) is not None:
                sid = C.storage_id(t)
                if sid and sid not in tr.raw:
                    tr.raw[sid] = (C.StorageRef(t), t.untyped_storage().nbytes() if hasattr(t, "untyped_storage")
                                   else t.storage().nbytes())
            tr.event("pack", session._module_name() if session._stack else "<top>")
            return p

        def _unpack(p):
            out = unpack(p)
            # A parameter comes back as itself, or as (tensor, version) where the
            # session checks in-place changes.
            param = isinstance(p, (__import__("torch").Tensor, tuple))
            if not param and getattr(p, "blob", None) is not None:
                sid = C.storage_id(out)
                if sid:
                    tr.dec[sid] = (C.StorageRef(out), out.numel() * out.element_size())
            tr.event("unpack", "(parameter)" if param else (p.module or ""))
            return out

        session._pack, session._unpack = _pack, _unpack

    @staticmethod
    def _alive(table):
        dead = [k for k, (r, _) in table.items() if not r.alive()]
        for k in dead:
            del table[k]
        return sum(b for _, b in table.values())

    def event(self, kind, module):
        P = self.s._pass
        self.events.append({"t": time.perf_counter() - self.sampler.t0, "kind": kind, "module": module,
                            "rss": rss_now(),
                            "compressed": P.live_stored_bytes if P is not None else 0,
                            "raw_alive": self._alive(self.raw), "decompressed_alive": self._alive(self.dec)})


class StepRunner:
    """One network trained one way in this process (Adam, one thread): the
    model, its batch and the training step, with phase marks for a Sampler."""

    def __init__(self, spec):
        import torch
        torch.set_num_threads(1)
        import study_models as sm
        self.torch, self.sm, self.spec = torch, sm, spec
        self.net, self.batch, self.seed = spec["network"], spec["batch"], spec["seed"]
        self.way, self.pipeline = spec["way"], spec.get("pipeline") or "auto"
        if "@" in self.way:  # e.g. ebac@fast: that way with another pipeline
            self.way, self.pipeline = self.way.split("@", 1)
        self.ebac_torch = None
        if self.way.startswith("ebac"):
            sys.path.insert(0, mr.EBAC_TORCH_PATH)
            import ebac_torch
            ebac_torch.load_extension()
            self.ebac_torch = ebac_torch
        torch.manual_seed(self.seed)
        size = sm.NETWORKS[self.net]["size"]
        self.model = sm.NETWORKS[self.net]["build"](size).train()
        self.x, self.y = sm.network_input(self.net, self.batch, size, self.seed)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.mem = mr.Memory(torch, False)
        self.sampler = None
        self.session = None

    def _mark(self, what):
        if self.sampler is not None:
            self.sampler.mark(what)

    def _forward_loss(self):
        return self.sm.way_loss(self.net, self.way, self.model, self.x, self.y, self.ebac_torch)

    def step(self, track=False):
        """One training step; returns (loss, Tracker or None)."""
        self.torch.manual_seed(self.seed + 1)  # the same dropout masks each way
        self.opt.zero_grad(set_to_none=True)
        self._mark("forward")
        tracker = None
        if self.way.startswith("ebac"):
            extra = {}
            if self.way == "ebac-sliced":
                k = self.spec.get("conv_slices") or "auto"
                extra["conv_backward_slices"] = k if k == "auto" else int(k)
            s = self.ebac_torch.compressed_activations(error_bound=self.spec["error_bound"], mode="rel",
                                                       pipeline=self.pipeline, **extra)
            if track:  # before __enter__, which hands pack/unpack to autograd
                tracker = Tracker(s, s.C, self.sampler)
            with s:
                loss = self._forward_loss()
            self.session = s
        else:
            loss = self._forward_loss()
        self._mark("backward")
        loss.backward()
        self._mark("optimizer")
        self.opt.step()
        self._mark("end")
        return float(loss), tracker


def _gradients_only(sr, res):
    """One step from the same weights, batch and RNG, without the optimizer's
    update; its gradients go to spec["grads_path"]."""
    sr.model.zero_grad(set_to_none=True)
    orig_step, sr.opt.step = sr.opt.step, lambda: None
    res["losses"].append(sr.step()[0])
    sr.opt.step = orig_step
    sr.torch.save({n: p.grad.detach().clone() for n, p in sr.model.named_parameters() if p.grad is not None},
                  sr.spec["grads_path"])


def _measured_step(sr, res):
    """The peak RSS rise of one step over the RSS before it, and its time."""
    import gc
    gc.collect()
    before = sr.mem.before()
    import resource
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, c0 = time.perf_counter(), time.process_time()
    loss, _ = sr.step()
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = sr.mem.peak()
    res["losses"].append(loss)
    # The kernel's share of the step (page faults of fresh allocations, munmap) apart from user time.
    res.update(rss_before=before, peak=peak, rise=peak - before, seconds=sec, cpu_seconds=cpu,
               user_seconds=r1.ru_utime - r0.ru_utime, sys_seconds=r1.ru_stime - r0.ru_stime,
               minor_faults=r1.ru_minflt - r0.ru_minflt)
    if sr.session is not None:
        st = sr.session.stats()
        res["saved"] = {k: st[k] for k in ("raw_bytes", "compressed_bytes", "ratio", "tensors",
                                           "compressed_tensors", "peak_compressed_bytes", "pack_seconds",
                                           "unpack_seconds", "decompressions", "compress_cpu_seconds",
                                           "decompress_cpu_seconds")}
        big = sorted((d["raw_bytes"] for d in st["details"]), reverse=True)
        res["largest_saved"] = big[:3]


def _timeline_step(sr, res):
    """One more step, instrumented: RSS samples and (ebac ways) what is alive at each pack/unpack."""
    import gc
    gc.collect()
    s = Sampler(sr.spec["sample_ms"] / 1000.0)
    sr.sampler = s
    base = rss_now()
    s.start()
    _, tracker = sr.step(track=True)
    s.stop()
    sr.sampler = None
    res["timeline"] = {"base": base, "samples": s.samples, "marks": s.marks,
                       "events": tracker.events if tracker else []}


def worker(spec):
    sr = StepRunner(spec)
    pbytes = sum(p.numel() * p.element_size() for p in sr.model.parameters())
    res = {"network": sr.net, "way": spec["way"], "batch": sr.batch, "param_bytes": pbytes,
           "static_model_bytes": 4 * pbytes, "memory_method": sr.mem.method, "losses": []}
    if spec.get("grads_path"):
        _gradients_only(sr, res)
        res["ok"] = True
        return res
    for _ in range(2):  # warm-up: Adam's state exists, allocator and caches settled
        res["losses"].append(sr.step()[0])
    _measured_step(sr, res)
    if spec.get("timeline"):
        _timeline_step(sr, res)
    res["ok"] = True
    return res


def batch_of(args, net):
    """--batch, or with --batch 0 the network's own batch (study_models.NETWORKS: gpt 32, vit_b_16 8, ...)."""
    if args.batch:
        return args.batch
    import study_models as sm
    return sm.NETWORKS[net]["batch"]


def run_one(args, net, way, rnd, timeline, grads_path=None):
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    tag = "%s-%s-r%d" % (net, way, rnd)
    spec = {"network": net, "way": way, "batch": batch_of(args, net), "seed": args.seed, "error_bound": args.error_bound,
            "timeline": timeline, "sample_ms": args.sample_ms, "result": os.path.join(work, tag + ".json"),
            "grads_path": grads_path, "pipeline": args.pipeline, "conv_slices": args.conv_slices}
    r = mr.run_worker(__file__, spec, work, tag, args.timeout, fixed_malloc=args.malloc == "fixed")
    if not r.get("ok", True) and "network" not in r:
        r.update(network=net, way=way)
    return r


NEGLIGIBLE = mr.NEGLIGIBLE


def grad_fidelity(args):
    """Per network and way: the gradients of one step against plain's (same
    weights, batch, RNG): min cosine over the parameters whose plain gradient
    is above NEGLIGIBLE x the largest norm, and the loss."""
    import torch
    out = {}
    for net in args.networks:
        paths = {}
        for way in args.ways:
            paths[way] = os.path.join(args.out, "work", "grads-%s-%s.pt" % (net, way))
            r = run_one(args, net, way, 99, False, grads_path=paths[way])
            if not r.get("ok"):
                out[(net, way)] = {"error": r.get("error")}
                continue
            out[(net, way)] = {"loss": r["losses"][0]}
        if "plain" not in args.ways or not os.path.exists(paths["plain"]):
            continue
        ref = torch.load(paths["plain"])
        gmax = max(float(g.double().norm()) for g in ref.values())
        for way in args.ways:
            if way == "plain" or not os.path.exists(paths[way]):
                continue
            g = torch.load(paths[way])
            cos, judged, missing = [], 0, [n for n in ref if n not in g]
            for n, r0 in ref.items():
                if n not in g or float(r0.double().norm()) < NEGLIGIBLE * gmax:
                    continue
                a, b = g[n].double().flatten(), r0.double().flatten()
                cos.append((float(a @ b) / (float(a.norm()) * float(b.norm()) or 1.0), n))
                judged += 1
            worst = min(cos) if cos else (float("nan"), "")
            out[(net, way)].update(min_cosine=worst[0], worst=worst[1], judged=judged, missing=missing)
    return out


def summarize(runs):
    ok = [r for r in runs if r.get("ok")]
    if not ok:
        return None
    rise = [r["rise"] for r in ok]
    sec = [r["seconds"] for r in ok]
    out = {"n": len(ok), "rise_median": statistics.median(rise), "rise_min": min(rise), "rise_max": max(rise),
           "sec_median": statistics.median(sec), "sec_min": min(sec), "sec_max": max(sec),
           "cpu_median": statistics.median(r.get("cpu_seconds", float("nan")) for r in ok),
           "sys_median": statistics.median(r.get("sys_seconds", float("nan")) for r in ok),
           "faults_median": statistics.median(r.get("minor_faults", float("nan")) for r in ok),
           "rss_before": statistics.median(r["rss_before"] for r in ok)}
    if "saved" in ok[0]:
        out["saved"] = ok[0]["saved"]
        out["largest_saved"] = ok[0].get("largest_saved")
    return out


def breakdown(res):
    """What is alive at the instrumented step's sampled RSS peak (ebac ways):
    the counts of the last pack/unpack before it (nothing is packed or
    unpacked between two events, so compressed bytes are exact; raw and
    decompressed tensors can only have been freed since), and the rest."""
    tl = res.get("timeline") or {}
    ev = tl.get("events") or []
    if not ev or not tl.get("samples"):
        return None
    t_peak, v_peak = max(tl["samples"], key=lambda s: s[1])
    prior = [e for e in ev if e["t"] <= t_peak] or ev[:1]
    top = prior[-1]
    backward = next((t for t, what, _ in tl["marks"] if what == "backward"), None)
    base = tl["base"]
    rise = v_peak - base
    other = rise - top["compressed"] - top["raw_alive"] - top["decompressed_alive"]
    return {"phase": "forward" if backward is None or t_peak < backward else "backward", "rise": rise,
            "after": "%s %s" % (top["kind"], top.get("module", "")),
            "compressed": top["compressed"], "raw_alive": top["raw_alive"],
            "decompressed_alive": top["decompressed_alive"], "other": other}


def plot(results, out, title="Memory over one training step (batch 256, Adam, one thread)", name="timeline.png",
         nets=None, dpi=100):
    """RSS over the instrumented step: one row per network (`nets`, default
    sorted), every way on one axis, and beside it the same without plain's
    scale. Writes OUT/NAME."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nets = nets or sorted({r["network"] for r in results})
    ways = []
    for r in results:
        if r["way"] not in ways:
            ways.append(r["way"])
    fig, axes = plt.subplots(len(nets), 2, figsize=(15, 3.8 * len(nets)), squeeze=False)
    for (ax, zoom), net in zip(axes, nets):
        top = 0.0
        for i, way in enumerate(ways):
            r = next((r for r in results if r["network"] == net and r["way"] == way and r.get("timeline")), None)
            if r is None:
                continue
            tl = r["timeline"]
            if way != "plain":
                top = max([top] + [(v - tl["base"]) / 1e6 for _, v in tl["samples"]])
            for a in (ax, zoom):
                _draw(a, tl, i, way)
        zoom.set_ylim(-5, 1.15 * top if top > 0 else None)
        ax.set_title(net)
        zoom.set_title("%s, without plain's scale" % net)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=dpi)
    plt.close(fig)


def _draw(ax, tl, i, way):
    """One way's RSS samples over the step (time as a fraction of the step),
    where backward starts, and (ebac ways) the compressed bytes alive."""
    ts = [t for t, _ in tl["samples"]]
    end = max(ts) if ts else 1.0
    ax.plot([t / end for t in ts], [(v - tl["base"]) / 1e6 for _, v in tl["samples"]],
            color="C%d" % i, lw=1.1, label="%s (%.1f s)" % (way, end))
    for t, what, _ in tl["marks"]:
        if what == "backward":
            ax.axvline(t / end, color="C%d" % i, lw=0.6, ls=":")
    if tl["events"]:
        ax.plot([e["t"] / end for e in tl["events"]], [e["compressed"] / 1e6 for e in tl["events"]],
                color="C%d" % i, lw=0.8, ls="--", label="%s: compressed bytes alive" % way)
    ax.set_xlabel("fraction of the step (dotted: backward starts)")
    ax.set_ylabel("RSS above the step's start, MB")
    ax.legend(fontsize=7)


def report(results, args, out, grads=None):
    L = ["# Peak memory of one training step (issue 50)", "",
         "Command: `%s`  " % " ".join(sys.argv), "git %s; %s  " % (mr.git_state(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
         "ebac: rel %g, pipeline `%s`, otherwise compressed_activations' defaults.  " % (args.error_bound, args.pipeline),
         "Batch %s, Adam, two warm-up steps, then one measured step: peak RSS rise over the RSS before it "
         "(VmHWM after clear_refs, %s), one torch thread, each run in its own process; %d round(s), ways "
         "interleaved; median [min-max]. The machine is shared with other jobs: times are noisy. "
         "Step CPU s: user + sys; sys and minor page faults are the kernel's share (with the thresholds fixed "
         "every large block is a fresh mapping whose pages fault in)." % (
             args.batch or "per network (%s)" % ", ".join("%s %d" % (n, batch_of(args, n)) for n in args.networks),
             ", ".join("%s=%s" % kv for kv in mr.WORKER_ENV.items()) if args.malloc == "fixed" else
             "--malloc default: glibc's own mmap and trim thresholds, so the rise hides blocks kept after free",
             args.rounds), ""]
    L += ["| network | way | peak rise MB | plain/way | step s (wall) | step CPU s (sys) | minor faults | codec CPU s "
          "| saved raw MB | stored MB | ratio |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    summ = {}
    for net in args.networks:
        for way in args.ways:
            summ[(net, way)] = summarize([r for r in results if r["network"] == net and r["way"] == way])
    for net in args.networks:
        p = summ.get((net, "plain"))
        for way in args.ways:
            s = summ.get((net, way))
            if not results:
                continue
            if s is None:
                L.append("| %s | %s | failed | | | | | | | | |" % (net, way))
                continue
            sv = s.get("saved") or {}
            codec = [sv.get("compress_cpu_seconds"), sv.get("decompress_cpu_seconds")]
            L.append("| %s | %s | %.1f [%.1f-%.1f] | %s | %.2f [%.2f-%.2f] | %.2f (%.2f) | %.0fk | %s | %s | %s | %s |" % (
                net, way, s["rise_median"] / 1e6, s["rise_min"] / 1e6, s["rise_max"] / 1e6,
                "%.2fx" % (p["rise_median"] / s["rise_median"]) if p and s["rise_median"] > 0 else "",
                s["sec_median"], s["sec_min"], s["sec_max"], s["cpu_median"], s["sys_median"], s["faults_median"] / 1e3,
                "%.2f (%.2f + %.2f)" % (codec[0] + codec[1], codec[0], codec[1]) if None not in codec else "",
                "%.1f" % (sv["raw_bytes"] / 1e6) if sv else "", "%.1f" % (sv["compressed_bytes"] / 1e6) if sv else "",
                "%.2fx" % sv["ratio"] if sv else ""))
    L += ["", "## Where the peak is (instrumented step, ebac ways)", "",
          "At the highest RSS sample of the instrumented step (every %g ms), with the counts of the last "
          "pack/unpack before it: compressed bytes alive, raw saved tensors whose storage is still alive "
          "(forward still holds them after they were compressed), decompressed tensors still alive, and the "
          "rest (gradients of activations, the ops' own temporaries, codec scratch, allocator slack). "
          "Parameters, gradients and Adam's state are in the RSS before the step (4 x parameter bytes)." % args.sample_ms,
          "", "| network | way | phase | after | rise MB | compressed | raw alive | decompressed alive | other | "
          "3 largest saved tensors MB | model+grads+Adam MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = breakdown(r) if r.get("ok") else None
        if b is None:
            continue
        L.append("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
            r["network"], r["way"], b["phase"], b["after"], b["rise"] / 1e6, b["compressed"] / 1e6, b["raw_alive"] / 1e6,
            b["decompressed_alive"] / 1e6, b["other"] / 1e6, sum(r.get("largest_saved") or []) / 1e6,
            r["static_model_bytes"] / 1e6))
    if grads:
        L += ["", "## Gradients against plain", "",
              "One step from the same weights, batch and RNG each way (studies/peak_step.py --grads); cosine "
              "per parameter whose plain gradient is above %g x the largest norm." % NEGLIGIBLE, "",
              "| network | way | loss | min cosine | worst parameter | parameters judged |", "|---|---|---|---|---|---|"]
        for (net, way), g in grads.items():
            if "error" in g:
                L.append("| %s | %s | failed: %s | | | |" % (net, way, g["error"]))
                continue
            L.append("| %s | %s | %.5f | %s | %s | %s |" % (
                net, way, g["loss"], "%.5f" % g["min_cosine"] if "min_cosine" in g else "(reference)",
                g.get("worst", ""), g.get("judged", "")))
    L += ["", "![memory over one step](timeline.png)", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L))
    return summ


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(mr.worker_main(sys.argv[2], worker))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--networks", default=",".join(NETWORKS))
    ap.add_argument("--ways", default=",".join(WAYS))
    ap.add_argument("--batch", type=int, default=256, help="0: each network's own (study_models.NETWORKS)")
    ap.add_argument("--smoke", action="store_true",
                    help="CI: both networks at batch 32, one round, with --grads; fails when a worker fails or a "
                         "recomputing way's gradient cosine is below 0.99 (ebac's own below 0.9, as the memory "
                         "report's smoke)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--sample-ms", type=float, default=2.0)
    ap.add_argument("--no-timeline", dest="timeline", action="store_false",
                    help="no instrumented step (timing runs)")
    ap.add_argument("--pipeline", default="auto", help="the ebac ways' pipeline (default: the session's, auto)")
    ap.add_argument("--conv-slices", default="auto",
                    help="the ebac-sliced way's conv_backward_slices (an int, or auto)")
    ap.add_argument("--timeout", type=int, default=1200)
    ap.add_argument("--malloc", choices=("fixed", "default"), default="fixed",
                    help="fixed (default): glibc's mmap and trim thresholds fixed at 128 KiB, so that the peak RSS rise "
                         "shows every block (every large allocation is then a fresh mapping, its pages faulted in: "
                         "the step's sys seconds); default: glibc's own thresholds, step times as a user's process "
                         "sees them (the rise then hides blocks glibc keeps after free)")
    ap.add_argument("--report-only", action="store_true", help="rewrite report.md and the plot from results.json")
    ap.add_argument("--grads", action="store_true",
                    help="also (or, with --rounds 0, only) compare one step's gradients of every way against plain's")
    args = ap.parse_args()
    if args.smoke:
        args.batch, args.rounds, args.grads = 32, 1, True
    args.networks = args.networks.split(",")
    args.ways = args.ways.split(",")
    os.makedirs(args.out, exist_ok=True)
    rpath = os.path.join(args.out, "results.json")
    if args.report_only:
        with open(rpath) as f:
            results = json.load(f)
    else:
        results = []
        for rnd in range(args.rounds):
            for net in args.networks:
                for way in args.ways:
                    r = run_one(args, net, way, rnd, timeline=(rnd == 0 and args.timeline))
                    results.append(r)
                    print("%s %s r%d: %s" % (net, way, rnd, "rise %.1f MB, %.2f s" % (r["rise"] / 1e6, r["seconds"])
                                             if r.get("ok") else "FAILED " + r.get("error", "")), flush=True)
                    with open(rpath, "w") as f:
                        json.dump(results, f)
    grads = None
    gpath = os.path.join(args.out, "grads.json")
    if args.grads and not args.report_only:
        grads = grad_fidelity(args)
        with open(gpath, "w") as f:
            json.dump([[k[0], k[1], v] for k, v in grads.items()], f)
    elif os.path.exists(gpath):
        with open(gpath) as f:
            grads = {(a, b): v for a, b, v in json.load(f)}
    report(results, args, args.out, grads)
    if any(r.get("timeline") for r in results):
        plot([r for r in results if r.get("ok")], args.out)
    print(open(os.path.join(args.out, "report.md")).read())
    def floor(way):  # ebac's own defaults are judged like the memory report's smoke (see docs/pytorch.md)
        return mr.COSINE_SMOKE if args.smoke and way.split("@")[0] in ("ebac", "ebac-sliced") else mr.COSINE_TARGET
    bad = [k for k, v in (grads or {}).items() if "error" in v or v.get("min_cosine", 1.0) < floor(k[1])]
    if bad:
        print("gradient check failed: %s" % bad)
    return 0 if all(r.get("ok") for r in results) and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
