#!/usr/bin/python3
"""Build a corpus of real-size saved activations: what autograd keeps for the
backward pass at a training batch size (>= 32), tensors of 8 MB and more.

The bundled corpus (data/corpus, studies/make_corpus.py) holds batch-4 slices of
0.05-0.4 MB, where an entropy coder has little to learn; this one holds the
tensors a trainer actually saves. On a fresh machine with no weights it:

  1. builds each network of the whole-network study (studies/study_models.py,
     the definitions studies/memory_report.py uses) with seeded random weights;
  2. trains it briefly on the CPU (--steps SGD/AdamW steps at batch
     --train-batch; enough that the activations are no longer those of the
     random init: the README records the loss before and after);
  3. runs one more forward + backward at the network's capture batch inside
     torch.autograd.graph.saved_tensors_hooks and writes every float tensor
     autograd saved whose size is at least --min-mb (default 8 MB), up to
     --max-mb in total;
  4. classifies each as post_relu (the output of a ReLU, or a max-pool of one:
     non-negative, many exact zeros) or dense (BatchNorm/LayerNorm inputs,
     GELU inputs and outputs, attention probabilities, ...);
  5. writes manifest.tsv in studies/make_corpus.py's format (file dtype dims
     model module kind role pair), so studies/compare.py reads it, and a
     README.md saying how it was made;
  6. with --slice DIR, also writes a small slice for the repository: for each
     (network, kind) of --slice-plan, the first written tensor of that kind,
     cut to its leading samples (batch >= 32) of at least --slice-mb.

Run it with the Debian interpreter (python3-torch, python3-torchvision):

    /usr/bin/python3 studies/make_training_corpus.py --out build/training-corpus
    /usr/bin/python3 studies/make_training_corpus.py --out build/training-corpus \\
        --slice data/training-corpus
    /usr/bin/python3 studies/make_training_corpus.py --smoke --out build/training-corpus-smoke   # CI, ~30 s

Data: Fashion-MNIST from /usr/share/datasets/fashion-mnist (image networks;
upsampled to 3 channels for torchvision's), the bytes of
/usr/share/common-licenses/GPL-3 (GPT). Nothing is downloaded. One thread by
default (--threads), deterministic for a given seed on one machine.
"""

import argparse
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
import make_corpus  # noqa: E402  (Fashion-MNIST reader, BatchStream, manifest format)
import study_models as sm  # noqa: E402  (the network definitions of studies/memory_report.py)

# Per network (input size: study_models' default): the batch of the captured
# step, the optimizer and its peak learning rate. The capture batches give each
# network saved tensors of >= 8 MB, of both kinds where it has both (a
# transformer has no ReLU); the training steps run at --train-batch (default
# 32), which keeps the default set near 8 minutes on 2 busy cores with
# Debian's reference BLAS (the transformers' time is almost all GEMM).
NETS = {
    "vgg-cnn": dict(batch=128, opt="sgd", lr=0.05),
    "resnet18": dict(batch=64, opt="sgd", lr=0.05),
    "small-vit": dict(batch=256, opt="adamw", lr=1e-3),
    "gpt": dict(batch=64, opt="adamw", lr=1e-3),
}
DEFAULT_NETS = "vgg-cnn,resnet18,small-vit,gpt"
DEFAULT_SLICE = "vgg-cnn:post_relu,resnet18:post_relu,resnet18:dense,gpt:dense"
KINDS = ("post_relu", "dense")


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

class Batches:
    """Training batches for one network: Fashion-MNIST loaded once (as
    study_models.fashion_mnist_batch prepares it: normalized, bilinear resize,
    channels repeated) or GPL-3 byte windows (study_models.text_batch)."""

    def __init__(self, net, size, seed, data_dir):
        self.kind = sm.NETWORKS[net]["data"]
        self.size, self.seed, self.calls = size, seed, 0
        if self.kind != "text":
            self.x, self.y = make_corpus.load_split(data_dir, "train")
            self.stream = make_corpus.BatchStream(self.x.shape[0], seed)

    def next(self, batch):
        self.calls += 1
        if self.kind == "text":
            return sm.text_batch(batch, self.size, self.seed * 100003 + self.calls)
        idx = self.stream.next(batch)
        x = self.x[idx]
        if self.size != x.shape[-1]:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        if self.kind == "fmnist3":
            x = x.repeat(1, 3, 1, 1)
        return x.contiguous(), self.y[idx]


# --------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------

def train(model, batches, steps, batch, opt_name, lr):
    """`steps` steps with a linear warm-up over the first 10% and cosine decay;
    returns the per-step losses."""
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    model.train()
    warm = max(1, steps // 10)
    losses = []
    for step in range(steps):
        f = (step + 1) / warm if step < warm else 0.5 * (1 + np.cos(np.pi * (step - warm) / max(1, steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr * f
        x, y = batches.next(batch)
        opt.zero_grad(set_to_none=True)
        loss = sm.loss_of(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


# --------------------------------------------------------------------------
# capture
# --------------------------------------------------------------------------

def capture(model, x, y):
    """One forward + backward in train mode; every distinct tensor autograd
    saved (parameters and buffers excluded), in order of first save, each as
    a dict: t, module (innermost module whose forward saved it; for a
    post-ReLU tensor the ReLU or max-pool that made it), type (that module's
    class), kind (post_relu, dense, mask: dropout noise, integer)."""
    model.train()
    skip = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    names = {m: n for n, m in model.named_modules() if n}
    stack, hooks, relu_keys = [], [], {}   # relu_keys: tensor key -> the ReLU or max-pool that made it

    def post_relu_hook(m, inp, out):
        relu_keys[make_corpus.tkey(out)] = names[m]

    def pool_hook(m, inp, out):
        # a max-pool of a ReLU output is as sparse and non-negative as its input
        if make_corpus.tkey(inp[0]) in relu_keys:
            relu_keys[make_corpus.tkey(out[0] if isinstance(out, tuple) else out)] = names[m]

    for mod, name in names.items():
        hooks.append(mod.register_forward_pre_hook(lambda m, inp, name=name: stack.append((name, m))))
        hooks.append(mod.register_forward_hook(lambda m, inp, out: (stack.pop(), None)[1]))
        if isinstance(mod, nn.ReLU):
            hooks.append(mod.register_forward_hook(post_relu_hook))
        elif isinstance(mod, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
            hooks.append(mod.register_forward_hook(pool_hook))

    entries, seen = [], set()

    def pack(t):
        k = make_corpus.tkey(t)
        if k not in seen and not (t.data_ptr() in skip and t.is_floating_point()):
            seen.add(k)
            name, m = stack[-1] if stack else ("loss", None)
            entries.append({"t": t, "module": name, "type": type(m).__name__ if m is not None else "-"})
        return t

    try:
        model.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = sm.loss_of(model(x), y)
        loss.backward()
    finally:
        for h in hooks:
            h.remove()
    for e in entries:
        t = e["t"]
        if not t.is_floating_point():
            e["kind"] = "integer"
        elif make_corpus.tkey(t) in relu_keys and bool((t >= 0).all()):
            e["kind"] = "post_relu"
            e["module"] = relu_keys[make_corpus.tkey(t)]   # its producer, not the layer that saved it
            e["type"] = type(dict(model.named_modules())[e["module"]]).__name__
        elif t.numel() and bool(((t == 0) | (t == t.max())).all()):
            e["kind"] = "mask"   # dropout's float noise: 0 or 1/(1-p)
        else:
            e["kind"] = "dense"
    return entries, float(loss)


def storage_span(t):
    """(storage pointer, first byte, end byte) of the bytes a tensor covers."""
    try:
        base = t.untyped_storage().data_ptr()
    except AttributeError:  # torch < 2.0
        base = t.storage().data_ptr()
    if t.numel() == 0:
        return base, 0, 0
    lo = t.data_ptr() - base
    hi = lo + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0) * t.element_size() + t.element_size()
    return base, lo, hi


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def git_commit():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_manifest(path, rows):
    with open(path, "w") as f:
        f.write("\t".join(make_corpus.MANIFEST_HEADER) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--out", required=True, help="output directory of the corpus")
    ap.add_argument("--nets", default=DEFAULT_NETS,
                    help="comma-separated subset of %s (default: %s)" % (",".join(NETS), DEFAULT_NETS))
    ap.add_argument("--steps", type=int, default=30, help="training steps per network before the capture (default 30)")
    ap.add_argument("--train-batch", type=int, default=32, help="batch of the training steps (default 32)")
    ap.add_argument("--batch", type=int, default=0,
                    help="batch of the captured step, for every network (default: per network, "
                         + ", ".join("%s %d" % (n, v["batch"]) for n, v in NETS.items()) + ")")
    ap.add_argument("--min-mb", type=float, default=8.0,
                    help="write only saved tensors of at least this many MB (1e6 bytes; default 8)")
    ap.add_argument("--max-mb", type=float, default=1500.0,
                    help="cap on the bytes written in all (MB; default 1500): later tensors are left out")
    ap.add_argument("--max-mb-per-net", type=float, default=400.0,
                    help="cap per network (MB; default 400), so that one network does not fill the corpus")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    ap.add_argument("--slice", metavar="DIR", help="also write the bundled slice (see --slice-plan) to DIR")
    ap.add_argument("--slice-plan", default=DEFAULT_SLICE,
                    help="NET:KIND[:MODULE],... tensors of the slice, one each: the first written tensor of that "
                         "network and kind (whose module name contains MODULE) that can be cut as --slice-mb "
                         "says (default %s)" % DEFAULT_SLICE)
    ap.add_argument("--slice-mb", type=float, default=8.0,
                    help="each slice tensor: the fewest leading samples with at least this many MB (default 8); "
                         "at least 32 samples, and at most 1.25 x this many MB")
    ap.add_argument("--data-dir", default=make_corpus.DATA_DIR, help="Fashion-MNIST IDX directory")
    ap.add_argument("--smoke", action="store_true",
                    help="CI check in under a minute: vgg-cnn and small-vit, 1 step, capture batch 64, tensors of "
                         ">= 2 MB, a slice of 2.5 MB tensors into OUT/slice; then the corpus and the slice are read "
                         "back and checked (exit 1 on a problem)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.nets, args.steps, args.batch, args.min_mb = "vgg-cnn,small-vit", 1, 64, 2.0
        args.slice, args.slice_plan, args.slice_mb = os.path.join(args.out, "slice"), \
            "vgg-cnn:post_relu,vgg-cnn:dense,small-vit:dense", 2.5

    nets = [n.strip() for n in args.nets.split(",") if n.strip()]
    for n in nets:
        if n not in NETS:
            ap.error("unknown network %r (choose from %s)" % (n, ",".join(NETS)))
    plan = []
    for item in (args.slice_plan.split(",") if args.slice else []):
        net, kind, module = (item.strip().split(":") + ["", ""])[:3]
        if kind not in KINDS or net not in nets:
            ap.error("--slice-plan: %r is not NET:post_relu[:MODULE] or NET:dense[:MODULE] with NET in --nets" % item)
        plan.append((net, kind, module))

    args.commit = git_commit()  # at the start: the code that ran
    torch.set_num_threads(args.threads)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except TypeError:
        torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    cap, cap_net, min_bytes = int(args.max_mb * 1e6), int(args.max_mb_per_net * 1e6), int(args.min_mb * 1e6)
    rows, info, total, nets_info, left_out, masks = [], [], 0, [], 0, []
    for ni, net in enumerate(nets):
        spec = sm.NETWORKS[net]
        batch = args.batch or NETS[net]["batch"]
        size = spec["size"]
        torch.manual_seed(args.seed + ni)
        np.random.seed(args.seed + ni)
        model = spec["build"](size)
        batches = Batches(net, size, args.seed + 1000 * (ni + 1), args.data_dir)
        t1 = time.time()
        losses = train(model, batches, args.steps, args.train_batch, NETS[net]["opt"], NETS[net]["lr"])
        t2 = time.time()
        x, y = batches.next(batch)
        entries, cap_loss = capture(model, x, y)
        t3 = time.time()
        written_net, spans = 0, []
        for i, e in enumerate(entries):
            t = e["t"]
            nbytes = t.numel() * 4
            if t.dtype != torch.float32 or nbytes < min_bytes:
                continue
            if e["kind"] == "mask":
                masks.append((net, e["module"], nbytes))
                continue
            span = storage_span(t)
            if any(s[0] == span[0] and s[1] < span[2] and span[1] < s[2] for s in spans):
                continue  # a view of bytes already written (e.g. q, k, v of one qkv)
            if total + nbytes > cap or written_net + nbytes > cap_net:
                left_out += 1
                print("make_training_corpus: %s: %s (%.1f MB) left out by the --max-mb caps"
                      % (net, e["module"], nbytes / 1e6), file=sys.stderr)
                continue
            spans.append(span)
            name = "%s_%03d_%s.f32" % (net, i, e["module"].replace(".", "_") or "input")
            data = make_corpus.tensor_bytes(t, "f32")
            with open(os.path.join(args.out, name), "wb") as f:
                f.write(data)
            total += nbytes
            written_net += nbytes
            a = t.detach()
            rec = {"file": name, "net": net, "module": e["module"], "type": e["type"], "kind": e["kind"],
                   "dims": [int(d) for d in t.shape], "bytes": nbytes,
                   "zero": float((a == 0).sum()) / a.numel(), "min": float(a.min()), "max": float(a.max())}
            info.append(rec)
            rows.append([name, "f32", make_corpus.dims_str(t.shape), net, e["module"], e["kind"], "activation", "-"])
        k = max(1, args.steps // 10)
        nets_info.append({"net": net, "title": spec["title"], "size": size, "batch": batch,
                          "opt": NETS[net]["opt"], "lr": NETS[net]["lr"],
                          "params": sum(p.numel() for p in model.parameters()),
                          "loss_first": float(np.mean(losses[:k])) if losses else float("nan"),
                          "loss_last": float(np.mean(losses[-k:])) if losses else float("nan"),
                          "loss_capture": cap_loss, "k": k,
                          "saved_float_bytes": sum(e["t"].numel() * e["t"].element_size() for e in entries
                                                   if e["t"].is_floating_point()),
                          "written": written_net, "train_s": t2 - t1, "capture_s": time.time() - t2})
        print("make_training_corpus: %s: %d steps at batch %d in %.0f s (loss %.3f -> %.3f), capture at batch %d + "
              "write %.0f s, %.1f MB written" % (net, args.steps, args.train_batch, t2 - t1, nets_info[-1]["loss_first"],
                                   nets_info[-1]["loss_last"], batch, time.time() - t2, written_net / 1e6), file=sys.stderr)
        del entries, model, batches
    write_manifest(os.path.join(args.out, "manifest.tsv"), rows)
    elapsed = time.time() - t0
    cmd = "/usr/bin/python3 studies/make_training_corpus.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    write_readme(os.path.join(args.out, "README.md"), args, cmd, nets_info, info, total, left_out, masks, elapsed)
    print("make_training_corpus: %d tensors, %.1f MB in %s (%d left out by the caps), %.0f s in all"
          % (len(rows), total / 1e6, args.out, left_out, elapsed), file=sys.stderr)
    if plan:
        write_slice(args, cmd, plan, info, nets_info)
    if args.smoke:
        problems = check_corpus(args.out, {"post_relu", "dense"}) + check_corpus(args.slice, {"post_relu", "dense"})
        for p in problems:
            print("make_training_corpus: smoke: " + p, file=sys.stderr)
        if problems:
            return 1
        print("make_training_corpus: smoke: corpus and slice read back and checked", file=sys.stderr)
    return 0


def check_corpus(path, kinds):
    """Problems with a written corpus: manifest columns, file sizes against dims, the kinds present, post_relu
    tensors non-negative with zeros, nothing non-finite."""
    problems, seen = [], set()
    with open(os.path.join(path, "manifest.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        if header != make_corpus.MANIFEST_HEADER:
            return ["%s: manifest header %s" % (path, header)]
        for line in f:
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            n = int(np.prod([int(d) for d in r["dims"].split(",")]))
            a = np.fromfile(os.path.join(path, r["file"]), dtype="<f4")
            seen.add(r["kind"])
            if r["dtype"] != "f32" or r["role"] != "activation" or a.size != n:
                problems.append("%s: dtype %s, role %s, %d values for dims %s"
                                % (r["file"], r["dtype"], r["role"], a.size, r["dims"]))
            elif not np.isfinite(a).all():
                problems.append("%s: non-finite values" % r["file"])
            elif r["kind"] == "post_relu" and (a.min() < 0 or not (a == 0).any()):
                problems.append("%s: post_relu but min %g, %d zeros" % (r["file"], a.min(), (a == 0).sum()))
    if not kinds <= seen:
        problems.append("%s: kinds %s, expected %s" % (path, sorted(seen), sorted(kinds)))
    return problems


def write_slice(args, cmd, plan, info, nets_info):
    os.makedirs(args.slice, exist_ok=True)
    rows, chosen = [], []
    target = int(args.slice_mb * 1e6)
    batch_of = {n["net"]: n["batch"] for n in nets_info}
    for net, kind, module in plan:
        for rec in info:
            if rec["net"] != net or rec["kind"] != kind or module not in rec["module"]:
                continue
            if rec["dims"][0] != batch_of[net]:
                continue  # batch folded into another axis (a bmm operand): no samples to cut
            per_sample = rec["bytes"] // rec["dims"][0]
            n = max(32, -(-target // per_sample))
            if n > rec["dims"][0] or n * per_sample > 1.25 * target:
                continue  # too few samples, or 32 of them are far more than --slice-mb
            dims = [n] + rec["dims"][1:]
            name = rec["file"]
            with open(os.path.join(args.out, name), "rb") as f:
                data = f.read(n * per_sample)
            with open(os.path.join(args.slice, name), "wb") as f:
                f.write(data)
            a = np.frombuffer(data, dtype="<f4")
            chosen.append(dict(rec, dims=dims, bytes=len(data), of=rec["dims"][0],
                               zero=float(np.count_nonzero(a == 0)) / a.size, min=float(a.min()), max=float(a.max())))
            rows.append([name, "f32", ",".join(map(str, dims)), net, rec["module"], kind, "activation", "-"])
            break
        else:
            print("make_training_corpus: --slice-plan %s:%s:%s: no written tensor of that kind with a slice of "
                  "%g-%g MB at batch >= 32" % (net, kind, module, args.slice_mb, 1.25 * args.slice_mb),
                  file=sys.stderr)
    write_manifest(os.path.join(args.slice, "manifest.tsv"), rows)
    L = ["# ebac training-size corpus: the bundled slice\n",
         "A slice of the corpus `studies/make_training_corpus.py` generates (saved tensors at training batch size, "
         "see below): for each (network, kind) of `--slice-plan`, the first tensor of that kind that the "
         "generator wrote (with the batch as its first axis), cut to its first N samples (the fewest with "
         ">= %g MB; N >= 32, and a tensor whose 32 samples exceed 1.25 times that is passed over). The samples "
         "are those of the captured batch (BatchNorm used the statistics of the whole batch). "
         "`studies/compare.py --corpus` reads it like the full corpus.\n" % args.slice_mb,
         "Generated with:\n", "```\n%s\n```\n" % cmd]
    L += readme_common(args, nets_info)
    L += tensor_table(chosen, sliced=True)
    L.append("\nTotal: %d tensors, %.1f MB.\n" % (len(chosen), sum(c["bytes"] for c in chosen) / 1e6))
    L.append(FORMAT)
    with open(os.path.join(args.slice, "README.md"), "w") as f:
        f.write("\n".join(L))
    print("make_training_corpus: slice: %d tensors, %.1f MB in %s"
          % (len(chosen), sum(c["bytes"] for c in chosen) / 1e6, args.slice), file=sys.stderr)


def readme_common(args, nets_info):
    L = ["- git commit %s; torch %s, torchvision %s, numpy %s; %d thread(s), CPU; seed %d"
         % (args.commit, torch.__version__, _torchvision_version(), np.__version__, args.threads, args.seed),
         "- each network: seeded random init (nothing downloaded), %d training steps at batch %d (linear "
         "warm-up over the first 10%%, cosine decay; SGD momentum 0.9, weight decay 5e-4, or AdamW, weight decay "
         "0.05), then one forward + backward on a new batch of the size below, in train mode (dropout on, "
         "BatchNorm on batch statistics), inside `torch.autograd.graph.saved_tensors_hooks`"
         % (args.steps, args.train_batch),
         "- data: Fashion-MNIST training images (%s), normalized as studies/make_corpus.py does, bilinearly "
         "upsampled and repeated to 3 channels for torchvision's networks; GPT: byte windows of "
         "/usr/share/common-licenses/GPL-3" % args.data_dir,
         "- loss: mean over the first and over the last %s of the training steps (the activations are those of "
         "a network that has started to learn, not of its random init), and of the captured step" %
         ("10%" if args.steps >= 10 else "step"),
         "",
         "| network | input | captured batch | optimizer, peak lr | parameters | loss first | loss last | captured | "
         "saved floats (MB) | train s |",
         "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for n in nets_info:
        L.append("| %s | %dx%d | %d | %s %g | %d | %.3f | %.3f | %.3f | %.1f | %.0f |" % (
            n["net"], n["size"], n["size"], n["batch"], n["opt"], n["lr"], n["params"], n["loss_first"],
            n["loss_last"], n["loss_capture"], n["saved_float_bytes"] / 1e6, n["train_s"]))
    L.append("")
    return L


def tensor_table(recs, sliced=False):
    L = ["| file | module (type) | kind | dims | MB | zeros | min | max |", "|---|---|---|---|---:|---:|---:|---:|"]
    for r in recs:
        dims = "x".join(map(str, r["dims"]))
        if sliced:
            dims += " (of %d)" % r["of"]
        L.append("| %s | %s (%s) | %s | %s | %.2f | %.1f%% | %.4g | %.4g |" % (
            r["file"], r["module"], r["type"], r["kind"], dims, r["bytes"] / 1e6, 100 * r["zero"], r["min"], r["max"]))
    return L


def _torchvision_version():
    try:
        import torchvision
        return torchvision.__version__
    except ImportError:
        return "absent"


FORMAT = """## Format

`manifest.tsv` is studies/make_corpus.py's format (tab-separated, one header line:
`file dtype dims model module kind role pair`): raw little-endian float32, dims
outermost first (the batch first), `module` the innermost module whose forward
saved the tensor (for a ReLU output saved by the next layer: the ReLU, or the
max-pool that pooled it), `role` always `activation`, `pair` always `-`.
`kind`: `post_relu` for the output of a ReLU or a max-pool of one (checked
non-negative), `dense` for everything else (BatchNorm and LayerNorm inputs,
GELU inputs and outputs, attention probabilities with their dropout, ...).
Only float tensors of at least the `--min-mb` size are written; a view of
bytes already written (q, k, v of one projection) is not written again.
"""


def write_readme(path, args, cmd, nets_info, info, total, left_out, masks, elapsed):
    L = ["# ebac training-size corpus\n",
         "Tensors autograd saves for the backward pass at a training batch size, captured with "
         "`torch.autograd.graph.saved_tensors_hooks` after a short training run; every float tensor of at least "
         "%g MB (1 MB = 1e6 bytes).\n" % args.min_mb,
         "Generated by `studies/make_training_corpus.py` in %.0f s with:\n" % elapsed, "```\n%s\n```\n" % cmd]
    L += readme_common(args, nets_info)
    L += tensor_table(info)
    kinds = {}
    for r in info:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    L.append("\nTotal: %d tensors (%s), %.1f MB; %d left out by the caps (--max-mb %g, --max-mb-per-net %g).\n"
             % (len(info), ", ".join("%d %s" % (v, k) for k, v in sorted(kinds.items())), total / 1e6, left_out,
                args.max_mb, args.max_mb_per_net))
    if masks:
        L.append("Not written: %d dropout masks of that size (%.1f MB; float tensors of two values, 0 and 1/(1-p), "
                 "that CPU dropout saves beside its input: a palette, not an activation).\n"
                 % (len(masks), sum(m[2] for m in masks) / 1e6))
    L.append(FORMAT)
    with open(path, "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
