#!/usr/bin/env python3
"""The largest batch within a memory budget: ebac_torch.plan_batch's
prediction against the largest batch that really fits, and the fixed-budget
table (issue 50 items 1 and 5).

    /usr/bin/python3 studies/batch_budget.py --out build/batch-budget     # resnet20 200 MB, vit12 150 MB; ~40 min, 2 shared cores
    /usr/bin/python3 studies/batch_budget.py --smoke --out build/batch-budget-smoke  # resnet20 plain+ebac, 60 MB, ~5 min

Not in CI (minutes of subprocesses); the planner's arithmetic is tested in
tests/adapt/batch_planner.cpp and integrations/pytorch/tests/test_adaptive.py.

Budget: the peak RSS rise of one training step over the RSS before it (what
studies/peak_step.py measures: VmHWM after clear_refs, glibc thresholds of
memory_report.WORKER_ENV fixed, one torch thread, Adam, one warm-up step),
each batch in its own process.

Per network and way (plain, checkpoint, ebac, ebac-recompute; see peak_step.py):
  1. probe: one process at a small batch (--probe-batch) measures the rise
     and, inside an ebac pass, every saved tensor's raw and stored bytes; the
     plan from it sets a second probe step at 0.8 x its batch (rise only);
  2. predict: ebac_torch.plan_batch(budget, probe batch, stats=<an ebac
     probe's>, compressed=<ebac way?>, probe_rise={probe batch: <rise>,
     second batch: <rise>}) (the line through the way's two probe steps;
     include/ebac/adapt/batch_planner.hpp, docs/pytorch.md "The batch
     planner"), and the same without probe_rise;
  3. measure: bisect the largest batch whose rise stays <= the budget, each
     candidate in a fresh process, starting from the prediction;
  4. time: CPU seconds per sample of a step at that batch; plain also with
     gradient accumulation to the largest global batch of the ways.
Writes results.json and report.md into --out.
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "studies")
sys.path.insert(0, TOOLS)
import memory_report as mr  # noqa: E402  (Memory, WORKER_ENV, EBAC_TORCH_PATH; no torch at module level)

WAYS = ["plain", "checkpoint", "ebac", "ebac-recompute"]
MB = 1e6


def worker(spec):
    """One process: warm-up step(s), then one measured step at spec["batch"]
    (with spec["accumulate"] micro-batches before Adam's step)."""
    import gc
    import torch
    torch.set_num_threads(1)
    import study_models as sm
    net, way, batch, seed = spec["network"], spec["way"], spec["batch"], spec["seed"]
    ebac_torch = None
    if way.startswith("ebac"):
        sys.path.insert(0, mr.EBAC_TORCH_PATH)
        import ebac_torch
        ebac_torch.load_extension()
    torch.manual_seed(seed)
    size = spec.get("size") or sm.NETWORKS[net]["size"]
    model = sm.NETWORKS[net]["build"](size).train()
    x, y = sm.network_input(net, batch, size, seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    mem = mr.Memory(torch, False)
    accumulate = spec.get("accumulate", 1)
    session = [None]

    def forward_loss():
        return sm.way_loss(net, way, model, x, y, ebac_torch)

    def step():
        torch.manual_seed(seed + 1)
        opt.zero_grad(set_to_none=True)
        loss = None
        for _ in range(accumulate):
            if ebac_torch is not None:
                s = ebac_torch.compressed_activations(error_bound=spec["error_bound"], mode="rel",
                                                      keep_details=True)
                with s:
                    loss = forward_loss() / accumulate
                session[0] = s
            else:
                loss = forward_loss() / accumulate
            loss.backward()
        opt.step()
        return float(loss) * accumulate

    res = {"network": net, "way": way, "batch": batch, "accumulate": accumulate,
           "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}
    for _ in range(spec.get("warmup", 1)):  # Adam's state exists after the first step
        step()
    gc.collect()
    before = mem.before()
    t0, c0 = time.perf_counter(), time.process_time()
    loss = step()
    res.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0, loss=loss)
    res.update(rss_before=before, rise=mem.peak() - before)
    del x, y
    if session[0] is not None and spec.get("stats"):
        st = session[0].stats()
        res["stats"] = {"details": [{k: d[k] for k in ("raw_bytes", "stored_bytes", "kept") if k in d}
                                    for d in st["details"]],
                        "raw_bytes": st["raw_bytes"], "compressed_bytes": st["compressed_bytes"]}
    res["ok"] = True
    return res


def run_one(args, net, way, batch, stats=False, accumulate=1):
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    tag = "%s-%s-b%d-a%d%s" % (net, way, batch, accumulate, "-stats" if stats else "")
    result = os.path.join(work, tag + ".json")
    if os.path.exists(result) and args.resume:
        with open(result) as f:
            r = json.load(f)
        if r.get("ok"):
            return r
    spec = {"network": net, "way": way, "batch": batch, "seed": args.seed, "error_bound": args.error_bound,
            "stats": stats, "accumulate": accumulate, "result": result,
            "size": getattr(args, "sizes", {}).get(net)}
    return mr.run_worker(__file__, spec, work, tag, args.timeout)


# Which probe's saved-tensor statistics describe a way, and whether they count compressed:
# plain keeps what ebac compresses, raw; checkpointing keeps ebac_torch.checkpoint's block inputs, raw.
STATS_OF = {"plain": ("ebac", False), "ebac": ("ebac", True),
            "checkpoint": ("ebac-recompute", False), "ebac-recompute": ("ebac-recompute", True)}


def predict(budget, probe, stats_probe, compressed, measured=True, static=0.0, second=None):
    """ebac_torch.plan_batch for a way: the saved tensors of `stats_probe`
    (raw when not `compressed`), and as the working set what the line through
    the way's own two probe steps (`probe`, `second`) measured; with one
    probe, the larger of that and 3.5 x the largest saved tensor
    (measured=False: the latter alone).
    Static 0 by default: the budget is a rise, and the rise is proportional to
    the batch here (the gradients backward allocates are not at the peak's
    moment: a static part of the parameters' bytes made a batch-8 probe
    over-predict resnet20's ebac batch by 64%). `static`: the gradients'
    bytes, for networks whose gradients outweigh the activations (--static
    gradients; studies/memory_report.py's torchvision networks)."""
    sys.path.insert(0, mr.EBAC_TORCH_PATH)
    import ebac_torch
    kw = {}
    if measured:
        kw["probe_rise"] = {probe["batch"]: probe["rise"], second["batch"]: second["rise"]} if second else probe["rise"]
    return ebac_torch.plan_batch(budget, stats_probe["batch"], stats=stats_probe["stats"], compressed=compressed,
                                 static_bytes=float(static), safety_margin=0.0, **kw)


def largest_fitting(args, net, way, budget, guess, log):
    """Bisects the largest batch whose rise is <= budget, each candidate in
    its own process; returns (batch, {batch: rise})."""
    seen = {}

    def fits(b):
        if b not in seen:
            r = run_one(args, net, way, b)
            if not r.get("ok"):
                raise RuntimeError("%s %s batch %d: %s" % (net, way, b, r.get("error")))
            seen[b] = r
            log("  %s %s batch %d: rise %.1f MB (%s)" % (net, way, b, r["rise"] / MB,
                                                       "fits" if r["rise"] <= budget else "over"))
        return seen[b]["rise"] <= budget

    lo, hi = 0, None  # lo fits (0 trivially), hi does not
    b = max(1, guess)
    if fits(b):
        lo = b
        while hi is None:
            b = int(lo * 1.15) + 1
            if fits(b):
                lo = b
            else:
                hi = b
    else:
        hi = b
        while lo == 0:
            b = max(1, int(hi / 1.15))
            if b == hi:
                break
            if fits(b):
                lo = b
            else:
                hi = b
    while hi - lo > max(1, int(lo * args.resolution)):
        m = (lo + hi) // 2
        if fits(m):
            lo = m
        else:
            hi = m
    return lo, {b: r["rise"] for b, r in seen.items()}, seen.get(lo)


def probes_of(args, net, probe_batch):
    """Each way's probe step at `probe_batch` (the ebac ways' also record what
    they saved); the second probe steps are second_probe's."""
    probes = {}
    for way in args.ways:
        for w in {way, STATS_OF[way][0]}:
            if w not in probes:
                probes[w] = run_one(args, net, w, probe_batch, stats=w.startswith("ebac"))
                if not probes[w].get("ok"):
                    raise RuntimeError("%s %s probe at batch %d failed: %s" % (net, w, probe_batch,
                                                                              probes[w].get("error")))
    return probes


def second_probe(args, net, way, probe, first_plan):
    """The way's second probe step, at 0.8 x the batch the first probe's plan
    gives (the batch a trainer would try next, kept under the budget), or at
    half the probe batch when that plan is not above it. Two small probes
    mislead: resnet50 with ebac rose 22.4 MB at batch 4 and 27.7 at 8, then
    3.6 MB per sample from 15 on (codec scratch and other fixed costs set a
    small batch's peak), so the line must reach the batches it predicts."""
    b = int(0.8 * first_plan["max_micro_batch"])
    if b <= probe["batch"]:
        b = probe["batch"] // 2
    if b < 1 or b == probe["batch"]:
        return None
    r = run_one(args, net, way, b)
    if not r.get("ok"):
        raise RuntimeError("%s %s second probe at batch %d failed: %s" % (net, way, b, r.get("error")))
    return r


def way_row(args, net, way, budget, probes, log):
    """One way's planner predictions (with and without its probe), the largest
    batch measured and the step at it."""
    probe = probes[way]
    src, compressed = STATS_OF[way]
    static = probe["param_bytes"] if getattr(args, "static_gradients", False) else 0.0
    first = predict(budget, probe, probes[src], compressed, static=static)
    second = second_probe(args, net, way, probe, first)
    plan = predict(budget, probe, probes[src], compressed, static=static, second=second)
    derived = predict(budget, probe, probes[src], compressed, measured=False, static=static)
    log("%s %s: probe batch %d rise %.1f MB%s; planner: %d, without the probe %d (%s)" % (
        net, way, probe["batch"], probe["rise"] / MB,
        ", batch %d rise %.1f MB" % (second["batch"], second["rise"] / MB) if second else "",
        plan["max_micro_batch"], derived["max_micro_batch"], plan["description"]))
    measured, rises, at = largest_fitting(args, net, way, budget, plan["max_micro_batch"], log)
    return {"probe": {k: probe[k] for k in ("batch", "rise", "cpu_seconds", "param_bytes")},
            "first_plan": first["max_micro_batch"],
            "second_probe": {k: second[k] for k in ("batch", "rise")} if second else None,
            "plan": {k: plan[k] for k in ("max_micro_batch", "bytes_per_sample", "saved_bytes_per_sample",
                                          "working_bytes_per_sample", "description")},
            "derived": {k: derived[k] for k in ("max_micro_batch", "bytes_per_sample", "working_bytes_per_sample")},
            "static_bytes": static, "measured": measured, "rises": rises,
            "error": plan["max_micro_batch"] / measured - 1 if measured else None,
            "derived_error": derived["max_micro_batch"] / measured - 1 if measured else None,
            "step": {k: at[k] for k in ("cpu_seconds", "seconds", "rise", "loss")} if at else None}


def accumulate_plain(args, net, rows, top, log):
    """plain with gradient accumulation to the largest global batch of the ways."""
    r = rows.get("plain")
    if not r or not r["measured"] or r["measured"] >= top:
        return
    k = -(-top // r["measured"])
    micro = -(-top // k)
    a = run_one(args, net, "plain", micro, accumulate=k)
    r["accumulated"] = {"micro": micro, "steps": k, "global": micro * k,
                        **{key: a.get(key) for key in ("cpu_seconds", "seconds", "rise")}}
    log("  %s plain x%d accumulation, micro %d: rise %.1f MB, %.2f cpu s" % (
        net, k, micro, a.get("rise", 0) / MB, a.get("cpu_seconds", 0)))


def study_network(args, net, budget, probe_batch, log):
    """The fixed-budget rows of one network (args.ways) at `budget` bytes of rise."""
    probes = probes_of(args, net, probe_batch)
    rows = {way: way_row(args, net, way, budget, probes, log) for way in args.ways}
    top = max(r["measured"] for r in rows.values())
    accumulate_plain(args, net, rows, top, log)
    return {"budget": budget, "ways": rows, "global": top}


def study(args, log):
    return {net: study_network(args, net, args.budget[net], args.probe_batch, log) for net in args.networks}


def table_lines(res):
    """The fixed-budget table of {network: study_network's result} (markdown lines)."""
    L = ["| network | budget MB | way | largest batch (measured) | planner (two probes) | error | planner (one probe) | "
         "error | planner (no probe) | error | rise at it MB | CPU ms/sample | samples/CPU s |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for net, n in res.items():
        for way, r in n["ways"].items():
            st = r["step"] or {}
            cpu = st.get("cpu_seconds")
            one = r.get("first_plan")
            L.append("| %s | %.0f | %s | %d | %d | %+.1f%% | %s | %s | %d | %+.1f%% | %.1f | %s | %s |" % (
                net, n["budget"] / MB, way, r["measured"], r["plan"]["max_micro_batch"], 100 * (r["error"] or 0),
                one if one else "-", "%+.1f%%" % (100 * (one / r["measured"] - 1)) if one and r["measured"] else "-",
                r["derived"]["max_micro_batch"], 100 * (r["derived_error"] or 0),
                (st.get("rise") or 0) / MB, "%.2f" % (1e3 * cpu / r["measured"]) if cpu else "-",
                "%.0f" % (r["measured"] / cpu) if cpu else "-"))
            acc = r.get("accumulated")
            if acc and acc.get("cpu_seconds"):
                L.append("| %s | %.0f | plain, %d x %d accumulated | (global %d) | | | | | | | %.1f | %.2f | %.0f |" % (
                    net, n["budget"] / MB, acc["steps"], acc["micro"], acc["global"], (acc["rise"] or 0) / MB,
                    1e3 * acc["cpu_seconds"] / acc["global"], acc["global"] / acc["cpu_seconds"]))
    return L


def tried_lines(res):
    """Per network and way: the probe's rise, every batch tried and the planner's line."""
    L = []
    for net, n in res.items():
        for way, r in n["ways"].items():
            two = r.get("second_probe")
            L.append("- %s %s: probe %.1f MB%s; %s; planner: %s" % (
                net, way, r["probe"]["rise"] / MB,
                " (batch %d: %.1f MB)" % (two["batch"], two["rise"] / MB) if two else "",
                ", ".join("%s: %.1f" % (b, v / MB) for b, v in sorted(r["rises"].items(), key=lambda kv: int(kv[0]))),
                r["plan"]["description"]))
    return L


def report(args, res, meta):
    L = ["# Largest batch within a memory budget: planner against measurement",
         "",
         "`%s` (git %s, %s; %s). Budget: peak RSS rise of one step (VmHWM after clear_refs, %s), Adam, "
         "one warm-up step, one torch thread, rel %g; each batch in its own process. Measured: the largest batch "
         "whose rise is <= the budget, bisected to %.0f%%. Planner (probe): `ebac_torch.plan_batch(budget, %d, "
         "stats=<the ebac probe's>, compressed=<ebac way>, probe_rise={<batch>: <rise>, <second>: <rise>}, "
         "static_bytes=0, safety_margin=0)`, the line through the way's two probe steps (the second at 0.8 x the batch "
         "the first one's plan gives); plain counts ebac's saved "
         "tensors raw, checkpoint those of ebac-recompute raw. Planner (no probe): the "
         "same without probe_rise (working set 3.5 x the largest saved tensor; not meant for recomputation). Errors: predicted / measured - 1. The machine was shared with "
         "other jobs: CPU seconds are steadier than wall seconds." % (
             meta["command"], meta["git"], meta["date"], meta["torch"], ", ".join("%s=%s" % kv for kv in mr.WORKER_ENV.items()
                                                                                  if kv[0].startswith("MALLOC")),
             args.error_bound, 100 * args.resolution, args.probe_batch),
         ""]
    L += table_lines(res)
    L += ["", "Probe rises (batch %d) and the batches tried (batch: rise MB):" % args.probe_batch, ""]
    L += tried_lines(res)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    return "\n".join(L)


def main(argv=None):
    if argv and argv[0] == "--worker" or (argv is None and sys.argv[1:2] == ["--worker"]):
        return mr.worker_main((argv or sys.argv[1:])[1], worker)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/batch-budget")
    ap.add_argument("--networks", default="resnet20,vit12")
    ap.add_argument("--ways", default=",".join(WAYS))
    ap.add_argument("--budget", default="resnet20=200,vit12=150",
                    help="rise budget in MB per network (net=MB,...; default resnet20=200,vit12=150)")
    ap.add_argument("--probe-batch", type=int, default=32)
    ap.add_argument("--resolution", type=float, default=0.03, help="bisect until hi - lo <= this x lo")
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--resume", action="store_true", help="reuse results already in --out/work")
    ap.add_argument("--smoke", action="store_true", help="resnet20, plain and ebac, 60 MB budget, probe batch 8")
    ap.add_argument("--max-error", type=float, default=0.15, help="exit 1 when a planner error exceeds this")
    args = ap.parse_args(argv)
    if args.smoke:
        args.networks, args.ways, args.budget, args.probe_batch = "resnet20", "plain,ebac", "resnet20=60", 8
        args.resolution = 0.05
    args.networks = args.networks.split(",")
    args.ways = args.ways.split(",")
    args.budget = {k: float(v) * MB for k, v in (kv.split("=") for kv in args.budget.split(","))}
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    def log(s):
        print("[%6.0fs] %s" % (time.time() - t0, s), flush=True)

    res = study(args, log)
    import torch
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    meta = {"command": " ".join(["python3", "studies/batch_budget.py"] + (argv or sys.argv[1:])), "git": git,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": "torch " + torch.__version__,
            "wall_seconds": time.time() - t0}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": res}, f, indent=1)
    print(report(args, res, meta))
    bad = [(net, way, r["error"]) for net, n in res.items() for way, r in n["ways"].items()
           if r["error"] is None or abs(r["error"]) > args.max_error]
    for net, way, e in bad:
        print("planner error above %.0f%%: %s %s: %s" % (100 * args.max_error, net, way, e))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
