#!/usr/bin/env python3
"""Accuracy-error study: train the same small network (a ResNet, or with
--model vit a ViT) on Fashion-MNIST with and without ebac-compressed
activations, side by side, in one run.

Every configuration starts from the same initial weights (same seed) and sees
the same mini-batches in the same order; only what autograd saves for backward
differs. Per epoch it records test accuracy, saved-activation bytes (raw vs
compressed, as counted by ebac_torch.stats(): every saved tensor, integer ones
included, each once), step time, and, on a fixed probe batch, per layer the
weight-gradient error predicted by the first-principles error model of
DESIGN.md against the measured one. It writes results.json, report.md and PNG
plots to --out.

    /usr/bin/python3 studies/accuracy_study.py --smoke          # CI: a few minutes on 2 cores (adds the controller)
    /usr/bin/python3 studies/accuracy_study.py --out docs/study --train-n 20000 --epochs 3
    /usr/bin/python3 studies/accuracy_study.py --model vit --configs baseline,ratio@1e-2,controller
    /usr/bin/python3 studies/accuracy_study.py --model gpt --configs baseline,ratio@1e-2,controller

Models (--model): resnet, SmallResNet of studies/make_corpus.py, SGD with
momentum (lr 0.05); vit, SmallViT of studies/study_models.py (d 96, 3 pre-LN
blocks, dropout 0.1), AdamW (lr 1e-3, weight decay 0.05); gpt, TinyGPT of
studies/study_models.py (byte-level, context 128, 4 pre-LN blocks), AdamW,
on the license texts of Debian's base-files (/usr/share/common-licenses, GPL-2
held out for validation; --train-n counts windows), judged by validation loss.
Dropout draws the same masks in every configuration (the same seed), and the
gradient probe replays one RNG state for its uncompressed and compressed pass.

Configurations (--configs, comma-separated):
    baseline          plain training
    baseline+K        plain training with seed + K (the seed-to-seed spread)
    PIPELINE@EB       compressed, value-range relative bound EB (e.g. ratio@1e-2)
    PIPELINE@EB+K     the same with seed + K
    controller[@TAU][/S][+K]
                      per-layer bounds from ebac's controller (include/ebac/adapt)
                      aiming at a weight-gradient error of TAU x its RMS (default
                      0.1) for every Conv2d/Linear/LayerNorm input, starting at
                      rel 1e-2; a BatchNorm reading a Conv2d's output, a
                      GELU/SiLU reading a Linear's, or an attention's own
                      operands (Q, K, softmax output, V) get the share S of
                      that layer's budget (default 0.25; /0: not controlled);
                      all other saved tensors at rel 1e-2; "ratio" pipeline

The extension is built in-tree on first use (torch.utils.cpp_extension), so
this script is the only command needed after cloning. Use Debian's
/usr/bin/python3 (python3-torch).
"""

import argparse
import copy
import json
import math
import os
import platform
import re
import shlex
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # busy-waiting OpenMP collapses on shared CPUs

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# ebac_torch: the tree's, or an installed copy at $EBAC_TORCH_PATH (docs/pytorch.md).
sys.path.insert(0, os.environ.get("EBAC_TORCH_PATH") or os.path.join(REPO, "integrations", "pytorch"))

import make_corpus as mc  # noqa: E402  (data loader, SmallResNet, BatchStream, evaluate)
import study_models as sm  # noqa: E402  (SmallViT)
import ebac_torch  # noqa: E402

MB = 1e6

# --model: what is trained and how ("lr" is the peak of the cosine schedule unless --lr is given).
MODELS = {
    "resnet": {"make": lambda: mc.SmallResNet(), "title": "SmallResNet", "lr": 0.05,
               "optimizer": "SGD momentum 0.9, weight decay 5e-4",
               "describe": "`SmallResNet` from studies/make_corpus.py (stem 16, stages 16/32/64, one basic block "
                           "each)"},
    "vit": {"make": lambda: sm.SmallViT(), "title": "SmallViT", "lr": 1e-3,
            "optimizer": "AdamW, weight decay 0.05",
            "describe": "`SmallViT` from studies/study_models.py (4x4 patches, d 96, 3 pre-LN blocks of 3 heads, "
                        "MLP 384 with GELU, attention and MLP dropout 0.1)"},
    "gpt": {"make": lambda: sm.TinyGPT(context=TEXT_CONTEXT), "title": "TinyGPT", "lr": 1e-3,
            "optimizer": "AdamW, weight decay 0.05",
            "describe": "`TinyGPT` from studies/study_models.py (byte-level, context %d, d 64, 4 pre-LN blocks of "
                        "4 heads, causal attention, GELU MLP, dropout 0.1)" % 128},
}

# --model gpt: a byte-level language model on the license texts Debian's base-files ships. One
# document is held out for validation; training windows start every TEXT_STRIDE bytes of the others.
TEXT_DIR = "/usr/share/common-licenses"
TEXT_VALIDATION = "GPL-2"
TEXT_CONTEXT = 128
TEXT_STRIDE = 16


def text_windows(data, stride):
    """(inputs, next-byte targets) of every window of TEXT_CONTEXT + 1 bytes starting at a multiple of stride."""
    starts = np.arange(0, data.size - TEXT_CONTEXT - 1, stride)
    win = torch.from_numpy(np.stack([data[o:o + TEXT_CONTEXT + 1] for o in starts]).astype(np.int64))
    return win[:, :-1].contiguous(), win[:, 1:].contiguous()


def load_text(directory=TEXT_DIR, held_out=TEXT_VALIDATION):
    """Training windows (every regular file but `held_out`, in name order, each once) and validation
    windows (`held_out`, not overlapping)."""
    names = sorted(n for n in os.listdir(directory)
                   if os.path.isfile(os.path.join(directory, n)) and not os.path.islink(os.path.join(directory, n)))
    if held_out not in names or len(names) < 2:
        raise SystemExit("accuracy_study: %s needs %s and at least one other text (Debian: base-files)"
                         % (directory, held_out))

    def read(n):
        with open(os.path.join(directory, n), "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8)
    train = np.concatenate([read(n) for n in names if n != held_out])
    xtr, ytr = text_windows(train, TEXT_STRIDE)
    xva, yva = text_windows(read(held_out), TEXT_CONTEXT)
    return xtr, ytr, xva, yva, names


class Quality:
    """How a run is judged: test accuracy (images) or validation loss (the language model), and the
    target (issue #5 for the ResNet, issue 17 for the transformers)."""

    def __init__(self, model):
        self.lm = model == "gpt"
        self.label = "final val loss (nats/byte)" if self.lm else "final test acc"
        self.delta_label = "vs baseline (%)" if self.lm else "vs baseline (points)"
        self.min_ratio = 10.0 if model == "resnet" else 8.0
        self.issue = "issue #5" if model == "resnet" else "issue 17"

    def number(self, e):
        """The judged figure: loss, or accuracy in percent."""
        return e["val_loss"] if self.lm else 100 * e["test_acc"]

    def value(self, e):
        return "%.4f" % e["val_loss"] if self.lm else "%.2f%%" % (100 * e["test_acc"])

    def delta(self, e, b):
        """Change against the baseline's epoch b: percent of its loss, or accuracy points."""
        if self.lm:
            return 100 * (e["val_loss"] - b["val_loss"]) / b["val_loss"]
        return 100 * (e["test_acc"] - b["test_acc"])

    def ok(self, d):
        return d <= 1.0 if self.lm else d >= -0.3

    def target(self):
        return ("validation loss within 1%% of the baseline with all saved bytes at least %gx smaller" % self.min_ratio
                if self.lm else "final accuracy within 0.3 points of the baseline with all saved bytes at least "
                "%gx smaller" % self.min_ratio)


def make_optimizer(name, model, lr):
    if name in ("vit", "gpt"):
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)


def evaluate(model, x, y, n):
    """(accuracy, mean cross entropy) over the first n samples: a class, or every next byte."""
    model.eval()
    n = min(n, x.shape[0])
    correct, loss, count = 0, 0.0, 0
    with torch.no_grad():
        for i in range(0, n, 250):
            j = min(n, i + 250)
            out = model(x[i:j])
            correct += (out.argmax(-1) == y[i:j]).sum().item()
            loss += F.cross_entropy(out.reshape(-1, out.shape[-1]), y[i:j].reshape(-1), reduction="sum").item()
            count += y[i:j].numel()
    model.train()
    return (correct / count, loss / count) if count else (float("nan"), float("nan"))


# --------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------

def parse_config(s):
    s = s.strip()
    if s == "baseline":
        return {"name": s, "compress": False, "seed_offset": 0}
    if s.startswith("baseline+"):
        return {"name": s, "compress": False, "seed_offset": int(s[len("baseline+"):])}
    m = re.match(r"^controller(?:@([0-9.]+(?:[eE][-+]?[0-9]+)?))?(?:/([0-9.]+))?(?:\+([0-9]+))?$", s)
    if m:  # controller[@TAU][/SHARE][+K]: per-layer bounds from ebac's controller, target tau (default 0.1),
        # BatchNorm share of the budget (default: ebac_torch's, 0.25; /0: BatchNorm inputs stay at rel 1e-2)
        share = float(m.group(2)) if m.group(2) is not None else 0.25
        if not 0.0 <= share < 1.0:
            raise SystemExit("accuracy_study: the BatchNorm share of %r must be in [0, 1)" % s)
        return {"name": s, "compress": True, "controller": True, "pipeline": "ratio", "eb": 1e-2, "mode": "rel",
                "tau": float(m.group(1) or 0.1), "propagated_share": share, "seed_offset": int(m.group(3) or 0)}
    if "@" in s:
        pipe, eb = s.split("@", 1)
        m = re.match(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)(?:\+([0-9]+))?$", eb)
        if not m:
            raise SystemExit("accuracy_study: cannot parse the bound of %r" % s)
        eb, off = m.group(1), int(m.group(2) or 0)
        return {"name": s, "compress": True, "pipeline": pipe, "eb": float(eb), "mode": "rel",
                "seed_offset": off}
    raise SystemExit("accuracy_study: cannot parse configuration %r" % s)


# --------------------------------------------------------------------------
# gradient probe: predicted vs measured weight-gradient error per layer
# --------------------------------------------------------------------------

def _weight_grad(mod, a, delta):
    """dL/dW of a Conv2d/Linear for saved input a and output gradient delta (float64)."""
    if isinstance(mod, nn.Conv2d):
        return torch.nn.grad.conv2d_weight(a.double(), mod.weight.shape, delta.double(), mod.stride,
                                           mod.padding, mod.dilation, mod.groups)
    return delta.double().reshape(-1, delta.shape[-1]).t() @ a.double().reshape(-1, a.shape[-1])


def _rms(t):
    return float(t.double().pow(2).mean().sqrt())


def gradient_probe(model, xb, yb, cfg, threads, policy=None, layer_bound=None):
    """Per Conv2d/Linear layer: gradient error predicted by the model vs measured.

    Predictions:
      model: ebac's error model (include/ebac/error_model, via
             ebac_torch.predict_weight_error): error statistics of the
             compressed input (flat-region / mean-error coherent term + an
             energy-pyramid residual) combined with statistics of delta;
      iid:   its i.i.d. baseline, the first-principles form of DESIGN.md: with
             a replaced by a + e, e independent and zero-mean,
             sigma^2 = MSE(a) * ||delta||^2 / O per weight entry (O outputs);
      prior: the same from the bound alone, MSE = nz * eb_abs^2 / 3 (uniform
             error on the nz fraction of non-zero elements; zeros are exact),
             which is what a controller can use before compressing.
    Measured:
      direct: the layer's own input compressed, exact delta (what the formula models);
      total:  every saved tensor compressed, as in training (errors upstream
              also perturb delta).
    Propagation (Conv2d layers whose output a BatchNorm2d reads, Conv2d or
    Linear layers whose output a GELU/SiLU reads): the error the follower's
    compressed input adds to the layer's weight gradient through the gradient
    it passes back (ebac_torch.propagated_weight_error, first order, this
    batch's tensors); "model total" combines it with the model's own-input
    prediction in quadrature (independent errors).

    Both passes replay the same RNG state, so dropout draws the same masks.
    """
    m = copy.deepcopy(model)
    m.train()
    state = copy.deepcopy(m.state_dict())
    layers = [(n, mod) for n, mod in m.named_modules() if isinstance(mod, (nn.Conv2d, nn.Linear))]
    if layer_bound is None and policy is None:
        # The session's default bound, but a BatchNorm's input under batchnorm_bound_scale x it (hooks.py),
        # so that the propagated term below sees the error the compressed pass has.
        kinds = dict(m.named_modules())
        layer_bound = (lambda n: cfg["eb"] * ebac_torch.hooks.BATCHNORM_BOUND_SCALE
                       if isinstance(kinds.get(n), nn.BatchNorm2d) else cfg["eb"])
    bns = [(n, mod) for n, mod in m.named_modules()
           if isinstance(mod, nn.BatchNorm2d) or ebac_torch.propagation.elementwise_name(mod) is not None]
    rec, bn_after = {}, {}
    conv_out = ebac_torch.propagation.ConvOutputs()
    layer_mod = dict(layers)

    def pre(mod, inp, name):
        rec.setdefault(name, {})["a"] = inp[0].detach().clone()
        if name in layer_mod:
            return
        prod = conv_out.producer(inp[0])
        if prod is not None and (isinstance(layer_mod[prod], nn.Conv2d) or not isinstance(mod, nn.BatchNorm2d)):
            bn_after[prod] = name  # this follower reads that layer's output (a BatchNorm after a Conv2d only)

    def post(mod, inp, out, name):
        if name in layer_mod:
            conv_out.record(name, out)

        def g(grad):
            rec[name]["delta"] = grad.detach().clone()
        out.register_hook(g)

    hs = []
    for n, mod in layers + bns:
        hs.append(mod.register_forward_pre_hook(lambda mod, i, n=n: pre(mod, i, n)))
        hs.append(mod.register_forward_hook(lambda mod, i, o, n=n: post(mod, i, o, n)))
    rng = torch.get_rng_state()
    m.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(rng)
        sm.loss_of(m(xb), yb).backward()
    for h in hs:
        h.remove()
    g_base = {n: mod.weight.grad.detach().double().clone() for n, mod in layers}

    m.load_state_dict(state)
    m.zero_grad(set_to_none=True)
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(rng)
        with ebac_torch.compressed_activations(cfg["eb"], cfg["mode"], cfg["pipeline"], model=m, threads=threads,
                                               measure_error=True, policy=policy):
            loss = sm.loss_of(m(xb), yb)
        loss.backward()
    st = ebac_torch.stats()
    g_comp = {n: mod.weight.grad.detach().double().clone() for n, mod in layers}

    out = []
    for n, mod in layers:
        if "delta" not in rec.get(n, {}):
            # Its forward never ran as a module call: nn.MultiheadAttention hands out_proj's weight to
            # F.multi_head_attention_forward (torchvision's vit_b_16). No input or output gradient to model.
            continue
        a, delta = rec[n]["a"], rec[n]["delta"]
        eb = layer_bound(n) if layer_bound else cfg["eb"]
        c = ebac_torch.compress(a, eb, cfg["mode"], cfg["pipeline"], threads=threads)
        a_hat = ebac_torch.decompress(c, threads=threads)
        eb_abs = ebac_torch.inspect(c)["eb_abs"]
        e = (a_hat.double() - a.double())
        mse = float(e.pow(2).mean())
        nz = float((a != 0).double().mean())
        O = mod.weight.shape[0]
        dsq = float(delta.double().pow(2).sum())
        g_rms = _rms(g_base[n])
        direct = _weight_grad(mod, a_hat, delta) - _weight_grad(mod, a, delta)
        # the model gauges coherence by the true gradient's RMS; mod.weight.grad is the compressed pass's
        model_pred = ebac_torch.predict_weight_error(mod, a, a_hat, delta, eb_abs, grad_rms=g_rms)
        prop, bn_eb = 0.0, None
        if n in bn_after:
            k = bn_after[n]
            bn_eb = layer_bound(k) if layer_bound else cfg["eb"]
            z = rec[k]["a"]
            z_hat = ebac_torch.decompress(ebac_torch.compress(z, bn_eb, cfg["mode"], cfg["pipeline"], threads=threads),
                                          threads=threads)
            prop = ebac_torch.propagated_weight_error(mod, a, dict(bns)[k], z, z_hat, rec[k]["delta"])
        out.append({
            "layer": n,
            "eb": eb,
            "input_shape": list(a.shape),
            "eb_abs": eb_abs,
            "nonzero_fraction": nz,
            "mse": mse,
            "mse_prior": nz * eb_abs ** 2 / 3.0,
            "grad_rms": g_rms,
            "predicted": model_pred["sigma"],
            "predicted_iid": model_pred["iid_sigma"],
            "coherent_share": model_pred["coherent_share"],
            "flat_share": model_pred["flat_share"],
            "predicted_formula": math.sqrt(mse * dsq / O),
            "predicted_prior": math.sqrt(nz * eb_abs ** 2 / 3.0 * dsq / O),
            "batchnorm_after": bn_after.get(n),
            "batchnorm_eb": bn_eb,
            "predicted_propagated": prop,
            "predicted_total": math.hypot(model_pred["sigma"], prop),
            "measured_direct": _rms(direct),
            "measured_total": _rms(g_comp[n] - g_base[n]),
        })
    return out, st["bound_violations"]


PIPELINES = ("fast", "ratio", "ratio-flat", "rle", "plain", "max")
DEFAULT_CONFIGS = "baseline,ratio@1e-1,ratio@1e-2,ratio@1e-3"


def pipeline_sweep(model, xb, yb, cfg, threads, policy=None):
    """Ratio and speed of every named pipeline at this configuration's bound.

    All pipelines share the quantizer, so at the same bound they reconstruct
    exactly the same values and training is identical; they differ only in
    how small the stream is and how fast it is made.
    """
    out = {}
    for pipe in PIPELINES:
        m = copy.deepcopy(model)
        m.train()
        with ebac_torch.compressed_activations(cfg["eb"], cfg["mode"], pipe, model=m, threads=threads, policy=policy):
            loss = sm.loss_of(m(xb), yb)
        loss.backward()
        st = ebac_torch.stats()
        comp_raw = sum(d["raw_bytes"] for d in st["details"] if "eb" in d)
        out[pipe] = {"ratio": st["ratio"], "raw_bytes": st["raw_bytes"], "compressed_bytes": st["compressed_bytes"],
                     "pack_MBps": comp_raw / MB / st["pack_seconds"] if st["pack_seconds"] else float("nan"),
                     "unpack_MBps": comp_raw / MB / st["unpack_seconds"] if st["unpack_seconds"] else float("nan")}
    return out


# --------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------

def bound_label(c):
    """How a configuration's bound reads in the report's tables."""
    if not c["compress"]:
        return "none"
    if c.get("controller"):
        return "controller, tau %g, share %g (per-layer bounds)" % (c["tau"], c.get("propagated_share", 0))
    return "rel %g" % c["eb"]


def run_config(cfg, args, data, log):
    xtr, ytr, xte, yte, xprobe, yprobe = data
    seed = args.seed + cfg["seed_offset"]
    torch.manual_seed(seed)
    np.random.seed(seed)
    model = MODELS[args.model]["make"]()
    stream = mc.BatchStream(xtr.shape[0], seed + 1000)
    opt = make_optimizer(args.model, model, args.lr)
    steps_per_epoch = args.steps_per_epoch or max(1, xtr.shape[0] // args.batch)
    total = steps_per_epoch * args.epochs
    threads = torch.get_num_threads()
    ctx = None
    la = None
    if cfg.get("controller"):
        la = ebac_torch.LayerAwareCompression(model, target_relative_error=cfg["tau"], window=args.window,
                                              observe_every=args.observe_every, initial_bound=cfg["eb"],
                                              other_bound=cfg["eb"], pipeline=cfg["pipeline"], threads=threads,
                                              propagated_share=cfg["propagated_share"])
        ctx = la
    elif cfg["compress"]:
        ctx = ebac_torch.compressed_activations(cfg["eb"], cfg["mode"], cfg["pipeline"], model=model,
                                                threads=threads)
    res = {"config": cfg, "epochs": [], "per_module": None, "probe": [], "diverged_at_step": None,
           "pipelines": None}
    step = 0
    for ep in range(args.epochs):
        times, losses, raw, comp, pack_s, unpack_s = [], [], [], [], [], []
        bad = 0
        for _ in range(steps_per_epoch):
            idx = stream.next(args.batch)
            xb, yb = xtr[idx], ytr[idx]
            for g in opt.param_groups:
                g["lr"] = args.lr * 0.5 * (1.0 + math.cos(math.pi * step / total))
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            if ctx is not None:
                with ctx:
                    loss = sm.loss_of(model(xb), yb)
            else:
                loss = sm.loss_of(model(xb), yb)
            loss.backward()
            if la is not None:
                la.end_iteration()
            opt.step()
            times.append(time.perf_counter() - t0)
            lv = loss.item()
            bad += int(not math.isfinite(lv))
            if bad and res.get("diverged_at_step") is None:
                res["diverged_at_step"] = step + 1
            losses.append(lv)
            if ctx is not None:
                st = ctx.stats()
                raw.append(st["raw_bytes"])
                comp.append(st["compressed_bytes"])
                pack_s.append(st["pack_seconds"])
                unpack_s.append(st["unpack_seconds"])
            step += 1
            if bad:  # diverged: further steps only move NaNs around
                break
        acc, val_loss = evaluate(model, xte, yte, args.eval_n)
        e = {"epoch": ep + 1, "steps": step, "test_acc": acc, "val_loss": val_loss, "loss_mean": float(np.mean(losses)),
             "loss_last": losses[-1], "nonfinite_losses": bad,
             "step_seconds": float(np.median(times)), "step_seconds_mean": float(np.mean(times))}
        if raw:
            e.update({"raw_bytes": float(np.mean(raw)), "compressed_bytes": float(np.mean(comp)),
                      "ratio": float(np.sum(raw) / np.sum(comp)),
                      "pack_seconds": float(np.median(pack_s)), "unpack_seconds": float(np.median(unpack_s))})
        finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
        policy = la.frozen_policy() if la is not None else None
        if la is not None:
            e["bounds"] = la.bounds()
            e["controller_updates"] = len(la.history)
        if cfg["compress"] and args.probe_n > 0 and finite:
            probe, viol = gradient_probe(model, xprobe, yprobe, cfg, threads, policy=policy,
                                         layer_bound=la.input_bound if la is not None else None)
            res["probe"].append({"epoch": ep + 1, "layers": probe, "bound_violations": viol})
            if ep + 1 == args.epochs:
                res["pipelines"] = pipeline_sweep(model, xprobe, yprobe, cfg, threads, policy=policy)
        res["epochs"].append(e)
        log("  %-14s epoch %d/%d: acc %.4f  val loss %.4f  loss %.4f  step %.3fs%s" % (
            cfg["name"], ep + 1, args.epochs, acc, val_loss, e["loss_mean"], e["step_seconds"],
            ("  saved %.2f -> %.2f MB (%.1fx)" % (e["raw_bytes"] / MB, e["compressed_bytes"] / MB, e["ratio"]))
            if raw else ""))
        if bad:
            log("  %-14s DIVERGED at step %d (non-finite loss); training stopped" % (
                cfg["name"], res["diverged_at_step"]))
            break
    if ctx is not None:
        st = ctx.stats()
        res["per_module"] = {k: {"raw_bytes": v["raw_bytes"], "stored_bytes": v["stored_bytes"]}
                             for k, v in st["per_module"].items()}
        res["last_pass"] = {k: st[k] for k in ("raw_bytes", "compressed_bytes", "ratio", "tensors",
                                                "compressed_tensors", "duplicates", "kept", "parameters")}
        # ebac's batch planner: the largest batch whose saved activations fit in
        # what plain training saves at this batch size (no margin, activations only)
        res["plan"] = ebac_torch.plan_batch(st["raw_bytes"], args.batch, stats=st, safety_margin=0.0,
                                            reference_lr=args.lr, reference_tau=cfg.get("tau", 0.1))
        if la is not None:
            res["controller"] = {"history": la.history, "bounds": la.bounds(),
                                 "window": args.window, "observe_every": args.observe_every}
    return res


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def _plot_accuracy(plt, matplotlib, results, out, qual, model_title):
    """Quality per epoch, one line per configuration: accuracy.png."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for r in results:
        ep = [e["epoch"] for e in r["epochs"]]
        ax.plot(ep, [qual.number(e) for e in r["epochs"]], marker="o", label=r["config"]["name"],
                linestyle="--" if not r["config"]["compress"] else "-")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("validation loss (nats/byte)" if qual.lm else "test accuracy (%)")
    ax.set_title("%s, %s: %s per epoch" % ("license texts" if qual.lm else "Fashion-MNIST", model_title,
                                           "validation loss" if qual.lm else "accuracy"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "accuracy.png"), dpi=110)
    plt.close(fig)
    return "accuracy.png"


def _plot_memory_per_layer(plt, results, out):
    """Saved bytes per module, raw and per compressed run: memory_per_layer.png (None: no such run)."""
    comp = [r for r in results if r["config"]["compress"] and r["per_module"] and not r["diverged_at_step"]]
    if comp:
        mods = [k for k, v in comp[0]["per_module"].items() if v["raw_bytes"] > 0]
        fig, ax = plt.subplots(figsize=(max(6.4, 0.42 * len(mods) + 2), 4.6))
        w = 0.8 / (len(comp) + 1)
        xs = np.arange(len(mods))
        ax.bar(xs, [comp[0]["per_module"][m]["raw_bytes"] / MB for m in mods], w, label="raw (baseline)",
               color="0.6")
        for i, r in enumerate(comp):
            ax.bar(xs + (i + 1) * w, [r["per_module"].get(m, {"stored_bytes": 0})["stored_bytes"] / MB for m in mods],
                   w, label=r["config"]["name"])
        ax.set_yscale("log")
        ax.set_xticks(xs + 0.4 - w / 2)
        ax.set_xticklabels(mods, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("saved bytes per step (MB, log)")
        ax.set_title("Saved-activation memory per module (last training step)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "memory_per_layer.png"), dpi=110)
        plt.close(fig)
        return "memory_per_layer.png"
    return None


def _plot_predicted_vs_measured(plt, results, out):
    """Predicted against measured weight-gradient errors of the probes: predicted_vs_measured.png
    (None: no probe)."""
    pts = [(r["config"]["name"], L) for r in results if r["probe"] for L in r["probe"][-1]["layers"]]
    if pts:
        fig, axs = plt.subplots(1, 2, figsize=(10, 4.4))
        names = sorted({p[0] for p in pts})
        # Right panel: the training-time prediction (own input + BatchNorm propagation),
        # or the own-input one for results written before it existed.
        for ax, pk, key, title, xl in (
                (axs[0], "predicted", "measured_direct", "own input compressed (the model's setting)",
                 "predicted by ebac's error model"),
                (axs[1], "predicted_total", "measured_total", "all saved tensors compressed (training)",
                 "predicted: error model + BatchNorm propagation")):
            P_all = [L for _, L in pts]
            pk = pk if all(pk in L for L in P_all) else "predicted"
            for nm in names:
                P = [L for n, L in pts if n == nm and L[pk] > 0 and L[key] > 0]
                ax.scatter([L[pk] / L["grad_rms"] for L in P], [L[key] / L["grad_rms"] for L in P],
                           label=nm, s=18)
            vals = [L[k] / L["grad_rms"] for _, L in pts for k in (pk, key) if L[k] > 0]
            if vals:
                lo, hi = min(vals) / 2, max(vals) * 2
                ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
                ax.set_xlim(lo, hi)
                ax.set_ylim(lo, hi)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel((xl if pk != "predicted" or key == "measured_direct" else "predicted by ebac's error model")
                          + " (RMS error / RMS gradient)", fontsize=8)
            ax.set_ylabel("measured")
            ax.set_title(title, fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle("Weight-gradient error per Conv2d/Linear layer, last epoch's probe batch", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "predicted_vs_measured.png"), dpi=110)
        plt.close(fig)
        return "predicted_vs_measured.png"
    return None


def plots(results, out, log, model):
    qual = Quality(model)
    model_title = MODELS[model]["title"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        log("accuracy_study: no plots (matplotlib: %s)" % exc)
        return []
    files = []
    files.append(_plot_accuracy(plt, matplotlib, results, out, qual, model_title))
    files += [f for f in (_plot_memory_per_layer(plt, results, out), _plot_predicted_vs_measured(plt, results, out)) if f]
    return files


def source_state():
    """The commit the ebac headers came from, and whether include/ had local changes."""
    import subprocess
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "include"], capture_output=True,
                               text=True, check=True).stdout.strip()
        return "%s%s" % (head, " + uncommitted changes under include/" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown (not a git checkout)"


def _report_setup(L, results, args, qual, wall, cmd):
    """The command, the model, the data and the machine."""
    L.append("# Accuracy-error study%s\n" % (" (smoke run)" if args.smoke else ""))
    L.append("Generated by `studies/accuracy_study.py`:\n")
    L.append("```\n%s\n```\n" % cmd)
    L.append("- model: %s, %s, peak lr %g, cosine decay, batch %d" % (
        MODELS[args.model]["describe"], MODELS[args.model]["optimizer"], args.lr, args.batch))
    if qual.lm:
        L.append("- data: the license texts of Debian's base-files (%s), bytes; %s held out for validation; "
                 "%d training windows of %d bytes (every %d bytes of the others; %d steps per epoch), %d epoch(s), "
                 "validation loss and next-byte accuracy on %d windows (all of %s's, not overlapping)" % (
                     TEXT_DIR, TEXT_VALIDATION, args.train_n, TEXT_CONTEXT, TEXT_STRIDE,
                     results[0]["epochs"][0]["steps"], args.epochs, args.eval_count,
                     TEXT_VALIDATION))
    else:
        L.append("- data: Fashion-MNIST, %d training images (seeded subset; %d steps per epoch), %d epoch(s), "
                 "test accuracy on %d test images" % (args.train_n, results[0]["epochs"][0]["steps"],
                                                      args.epochs, args.eval_count))
    L.append("- every configuration: seed %d, same initial weights, same mini-batches in the same order" % args.seed)
    L.append("- torch %s, %d thread(s), CPU (%s), OMP_WAIT_POLICY=%s; total wall time %.1f min" % (
        torch.__version__, torch.get_num_threads(), platform.processor() or platform.machine(),
        os.environ.get("OMP_WAIT_POLICY", ""), wall / 60))
    L.append("- ebac headers: %s (ebac_torch extension: %s)" % (args.source_state, getattr(args, "ext_origin", "?")))
    L.append("- saved-activation bytes: `ebac_torch.stats()` after every step: every tensor autograd saved for "
             "backward, counted once, integer tensors (max-pool indices, labels) and tensors too small to "
             "compress included at their raw size; parameters excluded (they are saved by reference)")
    L.append("- step time: median wall time of forward + backward + optimizer step on a shared machine; "
             "CPU host backend only (no GPU figure is claimed here)\n")


def _report_results(L, results, args, qual, base, default_name):
    """One row per configuration, and the target checked on the default one."""
    L.append("## Results\n")
    L.append("| configuration | %s | %s | saved MB/step raw | compressed | ratio | "
             "batch in the same memory | step s | vs baseline | pack s | unpack s |" % (qual.label, qual.delta_label))
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        e = r["epochs"][-1]
        d = qual.delta(e, base["epochs"][-1]) if base else float("nan")
        raw = e.get("raw_bytes")
        ref_raw = next((x["epochs"][-1].get("raw_bytes") for x in results if x["epochs"][-1].get("raw_bytes")), None)
        if raw is None:
            raw_s, comp_s, ratio_s, ps, us = ("%.1f" % (ref_raw / MB) if ref_raw else "-"), "-", "1.0", "-", "-"
        else:
            raw_s, comp_s = "%.1f" % (raw / MB), "%.2f" % (e["compressed_bytes"] / MB)
            ratio_s, ps, us = "%.1fx" % e["ratio"], "%.3f" % e["pack_seconds"], "%.3f" % e["unpack_seconds"]
        st = "%.3f" % e["step_seconds"]
        rel = ("%.2fx" % (e["step_seconds"] / base["epochs"][-1]["step_seconds"])) if base else "-"
        name = r["config"]["name"] + (" **(default)**" if r["config"]["name"] == default_name else "")
        if r["diverged_at_step"]:
            name += " (diverged at step %d)" % r["diverged_at_step"]
        plan = r.get("plan")
        if not r["config"]["compress"]:
            fit = str(args.batch)  # the budget is this configuration's own memory at this batch
        elif plan and plan.get("ok"):
            fit = str(plan["max_micro_batch"])
        elif plan:
            fit = plan.get("state", "-")
        else:
            fit = "-"  # a run from before the planner column (re-rendered with --from-json)
        L.append("| %s | %s | %+.2f | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, qual.value(e), d, raw_s, comp_s, ratio_s, fit, st, rel, ps, us))
    L.append("")
    L.append("*batch in the same memory*: ebac's batch planner (`ebac_torch.plan_batch`, include/ebac/adapt) "
             "given the saved-activation bytes plain training needs at batch %d as the budget (no safety margin, "
             "activations only) and the configuration's measured per-tensor ratios from its last step.\n"
             % args.batch)
    if base and default_name:
        r = next(x for x in results if x["config"]["name"] == default_name)
        e = r["epochs"][-1]
        d = qual.delta(e, base["epochs"][-1])
        ok_acc, ok_mem = qual.ok(d), e["ratio"] >= qual.min_ratio
        L.append("**Target** (DESIGN.md, %s): %s. Default `%s`: %+.2f %s, %.1fx -> "
                 "quality %s, memory %s.\n" % (qual.issue, qual.target(), default_name, d,
                                               "%" if qual.lm else "points", e["ratio"], "met" if ok_acc else "NOT met",
                                               "met" if ok_mem else "NOT met"))


def _report_per_seed(L, results, qual):
    """Each seed's runs against that seed's baseline (runs of several seeds)."""
    seeds = sorted({r["config"]["seed_offset"] for r in results})
    bases = {r["config"]["seed_offset"]: r for r in results if not r["config"]["compress"]
             and r["config"]["name"] in ("baseline", "baseline+%d" % r["config"]["seed_offset"])}
    labels = [k for k in dict.fromkeys(bound_label(r["config"]) for r in results) if k != "none"]
    if len(seeds) > 1 and bases and labels:
        L.append("### Per seed, against the baseline of the same seed\n")
        L.append("Each compressed run starts from its seed's initial weights and sees its seed's mini-batches "
                 "and dropout masks, like that seed's baseline: %s, and the ratio of all saved bytes. The "
                 "target (%s) holds on a seed when every entry of its row meets it.\n" % (qual.delta_label, qual.target()))
        L.append("| seed | baseline | " + " | ".join(labels) + " |")
        L.append("|---|---|" + "---|" * len(labels))
        for k in seeds:
            b = bases.get(k)
            if b is None:
                continue
            cells = []
            for lab in labels:
                r = next((x for x in results if x["config"]["seed_offset"] == k and bound_label(x["config"]) == lab),
                         None)
                if r is None:
                    cells.append("-")
                    continue
                e = r["epochs"][-1]
                d = qual.delta(e, b["epochs"][-1])
                met = qual.ok(d) and e.get("ratio", 0) >= qual.min_ratio
                cells.append("%+.2f, %.1fx%s" % (d, e.get("ratio", float("nan")), "" if met else " (missed)"))
            L.append("| +%d | %s | %s |" % (k, qual.value(b["epochs"][-1]), " | ".join(cells)))
        L.append("")


def _report_across_seeds(L, results, qual, base):
    """The baselines' spread over seeds, and each bound's runs over seeds."""
    spread = [r for r in results if r["config"]["name"].startswith("baseline+")]
    if base and spread:
        L.append("Seed-to-seed spread of plain training (baseline vs %s): %s %s; differences of that "
                 "size between configurations are noise, not an effect of compression.\n" % (
                     ", ".join(r["config"]["name"] for r in spread),
                     ", ".join("%+.2f" % qual.delta(r["epochs"][-1], base["epochs"][-1])
                               for r in spread), "%" if qual.lm else "points"))
    groups = {}
    for r in results:
        c = r["config"]
        groups.setdefault(bound_label(c), []).append(r)
    if any(len(v) > 1 for v in groups.values()):
        L.append("### Across seeds\n")
        L.append("Configurations with the same bound but different seeds (the pipeline does not change "
                 "training, see below). %s:\n" % qual.label.replace("final", "Final"))
        L.append("| bound | runs | mean | min | max | mean vs no compression (%s) |" % ("%" if qual.lm else "points"))
        L.append("|---|---|---|---|---|---|")
        ref = groups.get("none")
        ref_mean = np.mean([qual.number(x["epochs"][-1]) for x in ref]) if ref else None
        for k, v in groups.items():
            accs = [qual.number(x["epochs"][-1]) for x in v]
            fmt = "%.4f" if qual.lm else "%.2f%%"
            d = (100 * (np.mean(accs) - ref_mean) / (ref_mean if qual.lm else 100.0)) if ref_mean is not None else None
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                k, ", ".join(x["config"]["name"] for x in v), fmt % np.mean(accs), fmt % min(accs),
                fmt % max(accs), ("%+.2f" % d) if d is not None else "-"))
        L.append("")


def _report_pipelines(L, results, args, qual):
    """Every pipeline's ratio and speed at a configuration's bound."""
    sweeps = [r for r in results if r.get("pipelines")]
    if sweeps:
        L.append("### Pipelines at the same bound\n")
        L.append("Every pipeline uses the same zero/sign-preserving quantizer, so at one bound they reconstruct "
                 "identical values and train identically (the runs above are bit-for-bit the same whichever "
                 "pipeline is chosen); they differ in stream size and speed. Measured on the probe batch of %d "
                 "%s with the final weights of each run; MB/s are of compressed tensors' raw bytes, on %d "
                 "thread(s) of a shared machine.\n" % (args.probe_n, "text windows" if qual.lm else "images",
                                                       torch.get_num_threads()))
        L.append("| configuration | bound | pipeline | ratio | compress MB/s | decompress MB/s |")
        L.append("|---|---|---|---|---|---|")
        for r in sweeps:
            for p in (p for p in PIPELINES if p in r["pipelines"]):  # runs from before a pipeline existed lack it
                x = r["pipelines"][p]
                L.append("| %s | %s | %s | %.1fx | %.0f | %.0f |" % (r["config"]["name"], bound_label(r["config"]), p,
                                                                   x["ratio"], x["pack_MBps"], x["unpack_MBps"]))
        L.append("")


def _report_per_epoch(L, results, args, qual):
    """Each configuration's quality after every epoch."""
    L.append("### %s per epoch\n" % ("Validation loss" if qual.lm else "Test accuracy"))
    L.append("| configuration | " + " | ".join("epoch %d" % (i + 1) for i in range(args.epochs)) + " |")
    L.append("|---|" + "---|" * args.epochs)
    for r in results:
        cells = [qual.value(e) for e in r["epochs"]]
        cells += ["-"] * (args.epochs - len(cells))
        L.append("| %s | %s |" % (r["config"]["name"], " | ".join(cells)))
    L.append("")


def _report_controllers(L, results):
    """The bounds the controller chose, per layer and epoch."""
    for r in results:
        c = r.get("controller")
        if not c:
            continue
        L.append("## Controller: %s\n" % r["config"]["name"])
        share = r["config"].get("propagated_share", 0.0)
        L.append("`ebac_torch.LayerAwareCompression`: ebac's controller (include/ebac/adapt) sets the relative bound "
                 "of every Conv2d/Linear input so that the layer's predicted weight-gradient error (ebac's error "
                 "model) is tau = %g of its gradient RMS (a LayerNorm's input: the larger of its weight- and "
                 "input-gradient errors, observed exactly); it observes every %d steps and updates every %d steps "
                 "(%d updates in this run). " % (r["config"]["tau"], c["observe_every"], c["window"],
                                                 len(c["history"])))
        if share > 0:
            L.append("Propagation-aware budget, share s = %g: a Conv2d whose output a BatchNorm reads (a Linear "
                     "whose output a GELU reads, an attention's qkv projection) aims at tau sqrt(1 - s) = %.3g for "
                     "its own input, and the BatchNorm's input (the GELU's input, the attention's own saved "
                     "operands; listed by that module's name) at tau sqrt(s) = %.3g of the layer's gradient RMS, "
                     "measured as the error it adds through the gradient it passes back "
                     "(`ebac_torch.propagated_weight_error`, `ebac_torch.propagation.operand_error`). All "
                     "other saved tensors stay at rel %g. " % (share, r["config"]["tau"] * math.sqrt(1 - share),
                                                               r["config"]["tau"] * math.sqrt(share),
                                                               r["config"]["eb"]))
        else:
            L.append("All other saved tensors (BatchNorm inputs among them) stay at rel %g. " % r["config"]["eb"])
        L.append("The bound a layer's input gets is the tightest of the layers that read it.\n")
        last = {lw.get("layer"): lw for lw in (c["history"][-1]["layers"] if c["history"] else [])}
        L.append("| layer | " + " | ".join("bound after epoch %d" % e["epoch"] for e in r["epochs"]) +
                 " | achieved / tau (last window) | warning |")
        L.append("|---|" + "---|" * len(r["epochs"]) + "---|---|")
        for name in c["bounds"]:
            cells = ["%.3g" % e["bounds"].get(name, float("nan")) for e in r["epochs"] if "bounds" in e]
            lw = last.get(name, {})
            ach = ("%.2f" % (lw["achieved_relative_error"] / lw["target_relative_error"])
                   if lw.get("observations") else "-")
            L.append("| %s | %s | %s | %s |" % (name, " | ".join(cells), ach, lw.get("warning", "") or "-"))
        L.append("")


def _report_probes(L, results, args):
    """Predicted against measured gradient errors on the probe batch."""
    if any(r["probe"] for r in results):
        L.append("## Gradient error: predicted vs measured\n")
        L.append("On a fixed probe batch of %d training samples, after the last epoch, with that configuration's "
                 "weights, for every Conv2d/Linear layer: the RMS error of its weight gradient, relative to the "
                 "layer's RMS weight gradient. *model*: ebac's error model (include/ebac/error_model, through "
                 "`ebac_torch.predict_weight_error`), from the compressor's error statistics and the output "
                 "gradient's; *iid*: its i.i.d. baseline, DESIGN.md's first-principles form "
                 "sigma^2 = MSE(a) ||delta||^2 / O; *prior*: the same from the bound alone "
                 "(MSE = nonzero share x eb_abs^2 / 3). *direct*: measured with only that layer's input "
                 "compressed and the exact delta (the setting the model describes); *total*: measured with "
                 "every saved tensor compressed, as in training (errors in BatchNorm's saved inputs also "
                 "perturb delta upstream). *prop*: for a Conv2d whose output a BatchNorm reads, the error "
                 "that BatchNorm's compressed input adds through the gradient it passes back "
                 "(`ebac_torch.propagated_weight_error`, first order); *model total*: model and prop combined "
                 "in quadrature, the prediction for *total*. *flat*: share of input positions the model treats "
                 "as a flat (repeated-value) region; *coh*: share of the predicted variance from its coherent "
                 "term.\n"
                 % args.probe_n)
        for r in results:
            if r["config"]["compress"] and not r["probe"]:
                L.append("**%s**: no probe (training diverged, the weights are not finite)\n" % r["config"]["name"])
            if not r["probe"]:
                continue
            p = r["probe"][-1]
            L.append("**%s** (bound violations while probing: %d)\n" % (r["config"]["name"], p["bound_violations"]))
            L.append("| layer | eb_abs | nonzero | flat | coh | model | iid | prior | direct | direct / model | "
                     "prop | model total | total | total / model total |")
            L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for x in p["layers"]:
                g = x["grad_rms"] or float("nan")
                tot = x.get("predicted_total", x["predicted"])
                L.append("| %s | %.3g | %.2f | %.2f | %.2f | %.2e | %.2e | %.2e | %.2e | %.2f | %s | %.2e | %.2e | "
                         "%.2f |" % (
                    x["layer"] + (" (rel %.3g)" % x["eb"] if r["config"].get("controller") else ""), x["eb_abs"], x["nonzero_fraction"], x["flat_share"], x["coherent_share"],
                    x["predicted"] / g, x["predicted_iid"] / g, x["predicted_prior"] / g,
                    x["measured_direct"] / g,
                    x["measured_direct"] / x["predicted"] if x["predicted"] > 0 else float("nan"),
                    "%.2e" % (x["predicted_propagated"] / g) if x.get("batchnorm_after") else "-",
                    tot / g, x["measured_total"] / g,
                    x["measured_total"] / tot if tot > 0 else float("nan")))
            L.append("")


def write_report(results, args, out, figures, wall, cmd, default_name):
    base = next((r for r in results if r["config"]["name"] == "baseline"), None)
    qual = Quality(args.model)
    L = []
    _report_setup(L, results, args, qual, wall, cmd)
    _report_results(L, results, args, qual, base, default_name)
    _report_per_seed(L, results, qual)
    _report_across_seeds(L, results, qual, base)
    _report_pipelines(L, results, args, qual)
    _report_per_epoch(L, results, args, qual)
    _report_controllers(L, results)
    _report_probes(L, results, args)
    if figures:
        L.append("## Figures\n")
        for f in figures:
            L.append("![%s](%s)\n" % (f[:-4], f))
    L.append("## Not covered\n")
    if not any(r.get("controller") for r in results):
        L.append("- The model-driven controller (configuration `controller`, ebac_torch.LayerAwareCompression) "
                 "is not part of this run.")
    L.append("- GPU figures (peak memory, step time on CUDA): this study trains on the CPU; "
             "studies/gpu_memory_study.py measures ResNet-18/50 on a GPU.")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")


def check_smoke(results, default_name, model="resnet"):
    """Sanity checks a CI smoke run must pass; returns a list of failures.

    A loose bound that makes training diverge is a finding, not a failure;
    the error bound being broken, the baseline or the default configuration
    not learning, or the default not compressing are failures.

    On the ResNet the training-time prediction (own input + BatchNorm
    propagation) must explain every layer's measured error with everything
    compressed. On the ViT the errors of attention's operands (Q, K, the
    softmax output, V) reach the qkv projections and everything upstream, and
    nothing predicts them yet (docs/error-model.md 6.4): there the check is
    on the setting the model describes, the layer's own input compressed.
    """
    fails = []
    pred_key, meas_key, what = (("predicted_total", "measured_total", "training-time") if model == "resnet"
                                else ("predicted", "measured_direct", "own-input"))
    for r in results:
        name = r["config"]["name"]
        for p in r["probe"]:
            if p["bound_violations"]:
                fails.append("%s: %d error-bound violations" % (name, p["bound_violations"]))
        # Within a factor of 2 (the full runs land within 0.8-1.25; 2 leaves
        # room for a 64-image probe).
        for p in r["probe"][-1:]:
            for L in p["layers"]:
                pred, meas = L.get(pred_key, 0.0), L[meas_key]
                if pred > 0 and meas > 0 and not 0.5 <= meas / pred <= 2.0:
                    fails.append("%s: %s measured / predicted %s gradient error %.2f outside 0.5..2"
                                 % (name, L["layer"], what, meas / pred))
        if name not in ("baseline", default_name):
            continue
        if r["diverged_at_step"]:
            fails.append("%s: non-finite loss at step %d" % (name, r["diverged_at_step"]))
        if model == "gpt" and not r["epochs"][-1]["val_loss"] < 3.5:  # uniform over 256 bytes: 5.55
            fails.append("%s: validation loss %.3f >= 3.5" % (name, r["epochs"][-1]["val_loss"]))
        if model != "gpt" and r["epochs"][-1]["test_acc"] < 0.4:
            fails.append("%s: test accuracy %.3f < 0.4" % (name, r["epochs"][-1]["test_acc"]))
        if r["config"]["compress"] and not r["epochs"][-1]["ratio"] > 4:
            fails.append("%s: ratio %.2f <= 4" % (name, r["epochs"][-1]["ratio"]))
    return fails


def rewrite_report(path, out):
    """report.md and plots again from a results.json (e.g. after a change to the report's wording)."""
    with open(path) as f:
        doc = json.load(f)
    args = argparse.Namespace(**doc["args"])
    args.model = getattr(args, "model", "resnet")  # results written before --model existed
    args.ext_origin = getattr(args, "ext_origin", "in-tree")
    if not hasattr(args, "eval_count"):  # results written before it was recorded
        args.eval_count = min(args.eval_n, (load_text()[2] if args.model == "gpt" else mc.load_split(args.data_dir, "t10k")[0]).shape[0])
    torch.set_num_threads(args.threads)
    out = out or os.path.dirname(os.path.abspath(path))
    os.makedirs(out, exist_ok=True)
    results = doc["results"]
    figures = plots(results, out, lambda m: print(m, file=sys.stderr), args.model)
    default_name = args.default if any(r["config"]["name"] == args.default for r in results) else None
    write_report(results, args, out, figures, doc.get("wall_seconds", float("nan")),
                 doc.get("cmd", "(not recorded)"), default_name)
    print("accuracy_study: rewrote %s/report.md from %s" % (out, path), file=sys.stderr)
    return 0


def parse_args(argv=None):
    """The command line (the module docstring is its help)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--smoke", action="store_true",
                    help="short CI run: 2 epochs of 40 steps at batch 64 per configuration, 1000 test images")
    ap.add_argument("--out", default=None, help="output directory (default: docs/study, or build/study-smoke "
                                                "with --smoke)")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help="comma-separated configurations (see below)")
    ap.add_argument("--default", default="ratio@1e-2", help="the configuration the target is checked on")
    ap.add_argument("--epochs", type=int, default=None, help="default 3 (2 with --smoke)")
    ap.add_argument("--train-n", type=int, default=60000, help="training images (a seeded subset)")
    ap.add_argument("--steps-per-epoch", type=int, default=None, help="0: train-n / batch (default; 40 with --smoke)")
    ap.add_argument("--eval-n", type=int, default=10000, help="test images for accuracy")
    ap.add_argument("--probe-n", type=int, default=256, help="probe batch for the gradient check (0: off)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet", help="the network trained (see below)")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the model's, see below)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=50, help="controller: steps between bound updates")
    ap.add_argument("--observe-every", type=int, default=10, help="controller: steps between observations")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=mc.DATA_DIR)
    ap.add_argument("--from-json", default=None, metavar="RESULTS",
                    help="no training: rewrite report.md and the plots from an earlier run's results.json "
                         "(into --out, default: that file's directory)")
    return ap.parse_args(argv)


def apply_defaults(args):
    """The settings a --smoke run implies, and the defaults that depend on the model."""
    if args.smoke:
        if args.configs == DEFAULT_CONFIGS:
            args.configs += ",controller"  # the smoke run exercises the controller too
        # --epochs and --steps-per-epoch given explicitly still apply (a shorter CI smoke).
        args.batch = 64
        args.epochs = 2 if args.epochs is None else args.epochs
        args.steps_per_epoch = 40 if args.steps_per_epoch is None else args.steps_per_epoch
        args.train_n, args.eval_n, args.probe_n = min(args.train_n, 5120), min(args.eval_n, 1000), 64
        args.window, args.observe_every = 20, 5
    args.epochs = 3 if args.epochs is None else args.epochs
    args.steps_per_epoch = 0 if args.steps_per_epoch is None else args.steps_per_epoch
    if args.lr is None:
        args.lr = MODELS[args.model]["lr"]


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        return rewrite_report(args.from_json, args.out)
    apply_defaults(args)
    default_dir = "docs/study" if args.model == "resnet" else "docs/study-" + args.model
    out = args.out or os.path.join(REPO, "build" if args.smoke else "", "study-smoke" if args.smoke else default_dir)
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(args.threads)
    configs = [parse_config(c) for c in args.configs.split(",") if c.strip()]
    args.source_state = source_state()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t0 = time.time()
    cmd = "/usr/bin/python3 " + " ".join(shlex.quote(a) for a in ([os.path.relpath(sys.argv[0], REPO)]
                                                                    + sys.argv[1:]))
    log("accuracy_study: loading the ebac_torch extension (built in-tree on first use) ...")
    ext = ebac_torch.load_extension()
    args.ext_origin = ebac_torch._ext.origin()
    log("accuracy_study: extension ready (%s, ebac %s)" % (args.ext_origin, ext.ebac_version()))
    if args.model == "gpt":
        xtr, ytr, xte, yte, args.text_files = load_text()
    else:
        xtr, ytr = mc.load_split(args.data_dir, "train")
        xte, yte = mc.load_split(args.data_dir, "t10k")
    args.eval_count = min(args.eval_n, int(xte.shape[0]))  # what evaluate() reads, for the report
    g = torch.Generator().manual_seed(args.seed + 7)
    perm = torch.randperm(xtr.shape[0], generator=g)
    probe_idx, train_idx = perm[:max(args.probe_n, 1)], perm[max(args.probe_n, 1):][:args.train_n]
    args.train_n = int(train_idx.numel())
    data = (xtr[train_idx].contiguous(), ytr[train_idx], xte, yte, xtr[probe_idx].contiguous(), ytr[probe_idx])
    results = []
    for cfg in configs:
        log("accuracy_study: %s" % cfg["name"])
        results.append(run_config(cfg, args, data, log))
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"args": vars(args), "results": results, "cmd": cmd}, f, indent=1)
    wall = time.time() - t0
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"args": vars(args), "results": results, "cmd": cmd, "wall_seconds": wall}, f, indent=1)
    figures = plots(results, out, log, args.model)
    default_name = args.default if any(r["config"]["name"] == args.default for r in results) else None
    write_report(results, args, out, figures, time.time() - t0, cmd, default_name)
    log("accuracy_study: wrote %s/report.md, results.json, %s (%.1f min)" % (out, ", ".join(figures),
                                                                            (time.time() - t0) / 60))
    if args.smoke:
        fails = check_smoke(results, default_name, args.model)
        for f in fails:
            log("accuracy_study: SMOKE FAILURE: " + f)
        return 1 if fails else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
