#!/usr/bin/env python3
"""Peak GPU memory and step time of ResNet training, plain vs ebac-compressed
activations (issue #5, item 4). Needs a CUDA GPU and ebac_torch built with
its CUDA backend (the in-tree build does that when torch is a CUDA build and
nvcc is present).

For ResNet-18 and ResNet-50 (torchvision's when installed, else the
same-architecture definitions below) at 224x224 on synthetic data, batch 64
and 128: torch.cuda.max_memory_allocated() over a training step, the median
step time, and ebac_torch.stats() (saved-activation bytes raw and stored).
Then, for a fixed memory budget (the plain run's peak at batch 128 unless
--budget-gib is given), the largest batch that fits each way, found by
doubling and bisection on measured peaks (an out-of-memory error counts as
not fitting).

    /usr/bin/python3 studies/gpu_memory_study.py --out out/gpu-study
writes results.json and report.md there.
"""

import argparse
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ebac_torch: the tree's, or an installed copy at $EBAC_TORCH_PATH (docs/pytorch.md).
sys.path.insert(0, os.environ.get("EBAC_TORCH_PATH") or os.path.join(REPO, "integrations", "pytorch"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# --- models: torchvision's ResNet-18/50 or the same architectures -----------
class _Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.down = None
        if stride != 1 or cin != c:
            self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, 4 * c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * c)
        self.down = None
        if stride != 1 or cin != 4 * c:
            self.down = nn.Sequential(nn.Conv2d(cin, 4 * c, 1, stride, bias=False), nn.BatchNorm2d(4 * c))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class _ResNet(nn.Module):
    def __init__(self, block, layers, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for i, n in enumerate(layers):
            c = 64 * 2 ** i
            for j in range(n):
                blocks.append(block(cin, c, 2 if (j == 0 and i > 0) else 1))
                cin = c * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def make_model(name):
    try:
        import torchvision
        return getattr(torchvision.models, name)(), "torchvision"
    except Exception:  # torchvision absent or too old
        if name == "resnet18":
            return _ResNet(_Basic, [2, 2, 2, 2]), "built-in"
        return _ResNet(_Bottleneck, [3, 4, 6, 3]), "built-in"


# --- measurement --------------------------------------------------------------
def step_once(model, opt, x, y, ctx):
    opt.zero_grad(set_to_none=True)
    if ctx is not None:
        with ctx:
            loss = F.cross_entropy(model(x), y)
    else:
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def measure(name, batch, compress, args, steps=None):
    """Peak memory (bytes) and median step time of `steps` training steps; None on OOM."""
    import ebac_torch
    steps = steps or args.steps
    torch.manual_seed(0)
    model, origin = make_model(name)
    model = model.cuda().to(memory_format=torch.channels_last if args.channels_last else torch.contiguous_format)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ctx = ebac_torch.compressed_activations(args.eb, "rel", args.pipeline, model=model) if compress else None
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    times = []
    try:
        step_once(model, opt, x, y, ctx)  # warm-up (cuDNN autotune, allocator)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(steps):
            t0 = time.perf_counter()
            step_once(model, opt, x, y, ctx)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        peak = torch.cuda.max_memory_allocated()
        st = ebac_torch.stats() if compress else None
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one; so is ebac's failed allocation
        msg = str(e).lower()
        if "out of memory" not in msg and "allocation" not in msg:
            raise
        peak, st = None, None
    finally:
        del model, opt, x, y
        torch.cuda.empty_cache()
    if peak is None:
        return None
    r = {"model": name, "origin": origin, "batch": batch, "compressed": compress, "peak_bytes": peak,
         "step_seconds": statistics.median(times)}
    if st:
        r.update({"saved_raw_bytes": st["raw_bytes"], "saved_stored_bytes": st["compressed_bytes"],
                  "saved_ratio": st["ratio"], "tensors": st["tensors"]})
    return r


def largest_batch(name, compress, budget, args):
    """Largest batch whose measured peak stays within budget (doubling, then bisection)."""
    fits = lambda b: (lambda r: r is not None and r["peak_bytes"] <= budget)(measure(name, b, compress, args, steps=1))
    lo, hi = 0, 16
    while hi <= args.max_batch and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, args.max_batch + 1)
    while hi - lo > max(1, lo // 16):  # within ~6%
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "out", "gpu-study"))
    ap.add_argument("--models", default="resnet18,resnet50")
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--eb", type=float, default=1e-2, help="value-range relative bound (the study's default)")
    ap.add_argument("--pipeline", default="fast")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--budget-gib", type=float, default=0, help="fixed budget (default: plain peak at batch 128)")
    ap.add_argument("--max-batch", type=int, default=2048)
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("gpu_memory_study: no CUDA device")
    import ebac_torch
    C = ebac_torch.load_extension()
    if not C.has_cuda():
        sys.exit("gpu_memory_study: ebac_torch was built without its CUDA backend (torch CUDA build + nvcc needed)")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    rows, search = [], []
    for name in args.models.split(","):
        for b in [int(v) for v in args.batches.split(",")]:
            for comp in (False, True):
                r = measure(name, b, comp, args)
                rows.append(r or {"model": name, "batch": b, "compressed": comp, "oom": True})
                print(json.dumps(rows[-1]), flush=True)
        base = next((r for r in rows if r.get("model") == name and r.get("batch") == 128 and not r["compressed"]
                     and "peak_bytes" in r), None)
        budget = args.budget_gib * 2 ** 30 if args.budget_gib > 0 else (base["peak_bytes"] if base else 0)
        if budget:
            s = {"model": name, "budget_bytes": budget, "plain": largest_batch(name, False, budget, args),
                 "compressed": largest_batch(name, True, budget, args)}
            search.append(s)
            print(json.dumps(s), flush=True)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "eb": args.eb, "pipeline": args.pipeline,
           "rows": rows, "largest_batch": search, "wall_seconds": time.time() - t0, "cmd": " ".join(sys.argv)}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    L = ["# GPU memory: plain vs ebac-compressed activations\n",
         "`%s` on %s, torch %s; rel bound %g, pipeline `%s`; 224x224 synthetic data, SGD.\n" % (
             res["cmd"], res["device"], res["torch"], args.eb, args.pipeline),
         "| model | batch | peak GiB plain | peak GiB ebac | peak ratio | saved activations ratio | step s plain | step s ebac |",
         "|---|---|---|---|---|---|---|---|"]
    for name in args.models.split(","):
        for b in [int(v) for v in args.batches.split(",")]:
            p = next((r for r in rows if r["model"] == name and r["batch"] == b and not r["compressed"]), {})
            c = next((r for r in rows if r["model"] == name and r["batch"] == b and r["compressed"]), {})
            g = lambda r: "%.2f" % (r["peak_bytes"] / 2 ** 30) if "peak_bytes" in r else "OOM"
            ratio = "%.2fx" % (p["peak_bytes"] / c["peak_bytes"]) if "peak_bytes" in p and "peak_bytes" in c else "-"
            L.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
                name, b, g(p), g(c), ratio, ("%.1fx" % c["saved_ratio"]) if "saved_ratio" in c else "-",
                ("%.3f" % p["step_seconds"]) if "step_seconds" in p else "-",
                ("%.3f" % c["step_seconds"]) if "step_seconds" in c else "-"))
    L.append("\n| model | budget GiB | largest batch plain | largest batch ebac |\n|---|---|---|---|")
    for s in search:
        L.append("| %s | %.2f | %d | %d |" % (s["model"], s["budget_bytes"] / 2 ** 30, s["plain"], s["compressed"]))
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
