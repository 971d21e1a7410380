#!/usr/bin/env python3
"""Predicted vs measured weight-gradient error on real layers (issue #6).

Runs `ebac grad-error --json` on every conv/linear layer of one or more
corpora (directories with a layers.tsv written by studies/make_corpus.py
--grad-output, or by `--make-extra` below) at relative bounds 1e-3..1e-1, and
prints a markdown table of predicted/measured sigma plus the share of
(layer, bound) pairs inside 0.8..1.25. With --targets it also checks the
inverse map: for each target relative error it asks `grad-error
--target-rel`, and reports measured/target.

    python3 studies/grad_error_study.py --ebac build/bin/ebac data/corpus
    python3 studies/grad_error_study.py --ebac build/bin/ebac --targets 0.01,0.05,0.2 /tmp/c1

--make-bn DIR trains the corpus models (studies/make_corpus.py, imported, not
copied) for --steps steps and dumps every BatchNorm2d layer's saved input,
output gradient and gamma with a bn.tsv index (needs torch: run it with
/usr/bin/python3 on Debian). --bn DIR then checks the batchnorm model: the
gamma gradient and the input gradient, predicted vs measured.
--make-ln DIR trains the two transformers of studies/study_models.py (the
Fashion-MNIST ViT and the GPT-style byte model on GPL-3) for --steps steps and
dumps every LayerNorm's saved input, output gradient and gamma for one batch
of 16 with an ln.tsv index, every GELU's saved input and output gradient
with an act.tsv index, and every Linear's (attention qkv and proj, MLP fc1
and fc2, the head) with a layers.tsv index, which makes DIR a corpus of the
main study above; --ln DIR checks the layernorm model the same way (and
the inverse map at --targets, default 0.01,0.03,0.1), --act DIR the
elementwise model on the GELUs (input gradient, and its inverse map).
For grouped/dilated convolutions, generate a corpus with
    /usr/bin/python3 studies/make_corpus.py --models mobile --grad-output ...
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys

BOUNDS = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1]


def read_layers(d):
    with open(os.path.join(d, "layers.tsv")) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def grad_error_cmd(ebac, d, row, extra):
    t = row["type"]
    cmd = [ebac, "grad-error", "--json",
           "--activation", os.path.join(d, row["in_file"]),
           "--grad-output", os.path.join(d, row["grad_file"]),
           "--input-shape", row["input_shape"], "--weight-shape", row["weight_shape"]]
    if t == "Linear":
        cmd += ["--layer", "linear"]
    elif t == "Conv2d":
        cmd += ["--layer", "conv2d", "--stride", row["stride"], "--padding", row["padding"],
                "--dilation", row["dilation"], "--groups", row["groups"]]
    else:
        return None
    return cmd + extra


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s\n%s" % (" ".join(cmd), p.stderr.strip()))
    return json.loads(p.stdout)


def depth_class(rows, i):
    """early = the first third (rounded up) of a model's conv/linear layers in forward order."""
    model = rows[i]["in_file"].split("_")[0]
    modules = []
    for r in rows:
        if r["in_file"].split("_")[0] == model and r["module"] not in modules:
            modules.append(r["module"])
    return "early" if modules.index(rows[i]["module"]) < (len(modules) + 2) // 3 else "late"


def study(args):
    results = []
    for d in args.corpora:
        rows = read_layers(d)
        for i, row in enumerate(rows):
            if row["in_file"] == "-" or row["grad_file"] == "-":
                continue
            cls = depth_class(rows, i)
            for b in BOUNDS:
                cmd = grad_error_cmd(args.ebac, d, row, ["--eb", repr(b), "--mode", "rel", "--pipeline", args.pipeline,
                                                         "--trials", str(args.trials)])
                if cmd is None:
                    continue
                r = run(cmd)
                r.update(corpus=os.path.basename(os.path.normpath(d)), module=row["module"], type=row["type"],
                         depth=cls, model=row["in_file"].split("_")[0], bound=b)
                results.append(r)
                if args.verbose:
                    print("%s %s %g ratio %.3f" % (r["corpus"], r["module"], b, r["ratio"]), file=sys.stderr)
    return results


def summarize(results, out):
    def band(rs):
        rs = [r["ratio"] for r in rs]
        if not rs:
            return "-"
        inb = sum(1 for x in rs if 0.8 <= x <= 1.25)
        return "%d/%d (%.1f%%), min %.3f, max %.3f" % (inb, len(rs), 100.0 * inb / len(rs), min(rs), max(rs))

    out.write("| corpus | model | layer | type | depth | %s |\n" % " | ".join("%g" % b for b in BOUNDS))
    out.write("|---|---|---|---|---|%s\n" % ("---|" * len(BOUNDS)))
    seen = []
    for r in results:
        k = (r["corpus"], r["model"], r["module"], r["type"])
        if k not in seen:
            seen.append(k)
    n_batch = {}
    for k in seen:
        n_batch[k] = n_batch.get(k, 0)
    for k in seen:
        cells = []
        rs = [r for r in results if (r["corpus"], r["model"], r["module"], r["type"]) == k]
        for b in BOUNDS:
            v = [r for r in rs if r["bound"] == b]
            cells.append(" ".join("%.2f" % r["ratio"] for r in v) if v else "-")
        out.write("| %s | %s | %s | %s | %s | %s |\n" % (k[0], k[1], k[2], k[3], rs[0]["depth"], " | ".join(cells)))
    out.write("\nShare of (layer, bound) pairs with predicted/measured in 0.8..1.25:\n\n")
    out.write("- all: %s\n" % band(results))
    for t in ("Conv2d", "Linear"):
        out.write("- %s: %s\n" % (t, band([r for r in results if r["type"] == t])))
    for dcl in ("early", "late"):
        out.write("- %s layers: %s\n" % (dcl, band([r for r in results if r["depth"] == dcl])))
    iid = [r["iid_sigma"] / r["measured_sigma"] for r in results if r["measured_sigma"] > 0]
    if iid:
        inb = sum(1 for x in iid if 0.8 <= x <= 1.25)
        out.write("- for comparison, the i.i.d. model: %d/%d (%.1f%%), min %.3f, max %.3f\n"
                  % (inb, len(iid), 100.0 * inb / len(iid), min(iid), max(iid)))


def targets(args, out):
    ts = [float(t) for t in args.targets.split(",")]
    rows_out = []
    for d in args.corpora:
        rows = read_layers(d)
        for row in rows:
            for t in ts:
                cmd = grad_error_cmd(args.ebac, d, row, ["--target-rel", repr(t), "--mode", "rel", "--pipeline", args.pipeline])
                if cmd is None:
                    continue
                r = run(cmd)
                rows_out.append((os.path.basename(os.path.normpath(d)), row["module"], row["type"], t, r["eb"],
                                 r["measured_over_target"], r["solver_evaluations"]))
    out.write("\nInverse map: measured sigma / target sigma (target = T x gradient RMS):\n\n")
    out.write("| corpus | layer | type | T | eb (rel) | measured/target |\n|---|---|---|---|---|---|\n")
    for c, m, ty, t, eb, q, ev in rows_out:
        out.write("| %s | %s | %s | %g | %.3g | %.2f |\n" % (c, m, ty, t, eb, q))
    qs = [q for *_, q, ev in rows_out]
    if qs:
        inb = sum(1 for q in qs if 0.8 <= q <= 1.25)
        out.write("\nInside 0.8..1.25: %d/%d (%.1f%%), min %.3f, max %.3f\n" % (inb, len(qs), 100.0 * inb / len(qs), min(qs), max(qs)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="*", help="directories holding layers.tsv")
    ap.add_argument("--ebac", default="build/bin/ebac")
    ap.add_argument("--pipeline", default="fast")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--targets", default="", help="comma-separated target relative errors for the inverse-map check")
    ap.add_argument("--json-out", default="", help="also write every result as JSON lines here")
    ap.add_argument("--make-bn", default="", help="dump BatchNorm2d (input, grad_output, gamma) triples here, then exit")
    ap.add_argument("--bn", default="", help="check the batchnorm model on a --make-bn directory")
    ap.add_argument("--make-ln", default="", help="dump LayerNorm (input, grad_output, gamma), GELU (input, grad_output) and attention matmul operands of two transformers here, then exit")
    ap.add_argument("--ln", default="", help="check the layernorm model on a --make-ln directory")
    ap.add_argument("--act", default="", help="check the elementwise (GELU) model on a --make-ln directory")
    ap.add_argument("--mm", default="", help="check the matmul model on the attention operands of a --make-ln directory")
    ap.add_argument("--sgd-noise", action="store_true", help="print minibatch (SGD) noise / gradient RMS per layer (needs torch)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.make_bn:
        return make_bn(args.make_bn, args.seed, args.steps)
    if args.bn:
        return check_bn(args, sys.stdout)
    if args.make_ln:
        return make_ln(args.make_ln, args.seed, args.steps)
    if args.ln:
        return check_ln(args, sys.stdout)
    if args.act:
        return check_act(args, sys.stdout)
    if args.mm:
        return check_mm(args, sys.stdout)
    if not args.corpora:
        ap.error("no corpus directory given")
    if args.sgd_noise:
        return sgd_noise(args.corpora, sys.stdout)
    results = study(args)
    if args.json_out:
        with open(args.json_out, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    summarize(results, sys.stdout)
    if args.targets:
        targets(args, sys.stdout)
    return 0


def write_tsv(path, header, rows):
    """A tab-separated index: the header row, then one row per dumped layer."""
    with open(path, "w") as f:
        for r in [header] + rows:
            f.write("\t".join(r) + "\n")


def dump_saved_layers(model, tags, step, out, mname):
    """Runs step() (one forward and backward) with hooks on every module of
    `model` whose type is a key of `tags` (type -> file tag) and writes each
    one's saved input, output gradient and (if it has one) gamma as raw f32
    under `out`. Returns (module name, module, file stem, input shape) per
    layer, in forward order, numbered per tag."""
    saved, grads, hooks = {}, {}, []
    for name, mod in model.named_modules():
        if isinstance(mod, tuple(tags)):
            def fwd(m, inp, outp, name=name):
                saved[name] = inp[0].detach().clone()
                outp.register_hook(lambda g, name=name: grads.__setitem__(name, g.detach().clone()))
            hooks.append(mod.register_forward_hook(fwd))
    step()
    for h in hooks:
        h.remove()
    mods = dict(model.named_modules())
    layers, count = [], {}
    for name in saved:
        tag = tags[type(mods[name])]
        k = count[tag] = count.get(tag, -1) + 1
        base = "%s_%s%02d_%s" % (mname, tag, k, name.replace(".", "_"))
        files = [("input", saved[name]), ("grad_output", grads[name])]
        if getattr(mods[name], "weight", None) is not None and hasattr(mods[name], "eps"):  # a normalization's gamma
            files.append(("gamma", mods[name].weight.detach()))
        for suffix, t in files:
            t.contiguous().numpy().astype("<f4").tofile(os.path.join(out, "%s_%s.f32" % (base, suffix)))
        layers.append((name, mods[name], base, ",".join(str(d) for d in saved[name].shape)))
    return layers


def tap_attention(model, out, mname):
    """Sets a tap on every study Attention module so that the next forward and
    backward write its two matmuls' saved operands and output gradients under
    `out`, each as the saved operand A of C = A B (ebac grad-error --layer
    matmul): P (after dropout) with dO, whose error reaches dV; V^T with dO^T
    (reaches dP); Q with dS, S = Q K^T before the scale (reaches dK); K with
    dS^T (reaches dQ). Returns one callable per case giving its mm.tsv row,
    valid after the backward."""
    import study_models as sm
    rows = []
    for name, mod in model.named_modules():
        if not isinstance(mod, sm.Attention):
            continue
        got = {}

        def tap(got=got, **t):
            got.update({k: v.detach().clone() for k, v in t.items()})
            t["scores"].register_hook(lambda g: got.__setitem__("d_scores", g.detach().clone()))
            t["out"].register_hook(lambda g: got.__setitem__("d_out", g.detach().clone()))
        mod.tap = tap
        for case, a, dc, reaches in (("pv", "probs", "d_out", "dV"), ("vp", "v^T", "d_out^T", "dP"),
                                     ("qk", "q", "d_scores", "dK"), ("kq", "k", "d_scores^T", "dQ")):
            def row(name=name, got=got, mod=mod, case=case, a=a, dc=dc, reaches=reaches):
                mod.tap = None
                def tensor(key):
                    if key.endswith("^T"):
                        return got[key[:-2]].transpose(-2, -1)
                    return got[key]
                A, C = tensor(a).contiguous(), tensor(dc).contiguous()
                base = "%s_mm_%s_%s" % (mname, name.replace(".", "_"), case)
                A.numpy().astype("<f4").tofile(os.path.join(out, base + "_input.f32"))
                C.numpy().astype("<f4").tofile(os.path.join(out, base + "_grad_output.f32"))
                return [mname, name, "%s (%s -> %s)" % (case, a, reaches), base + "_input.f32", base + "_grad_output.f32",
                        ",".join(str(d) for d in A.shape), "%d,%d" % (A.shape[-1], C.shape[-1])]
            rows.append(row)
    return rows


def make_bn(out, seed, steps):
    """Train the corpus models briefly and dump each BatchNorm2d layer of one batch of 16."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_corpus as mc  # the corpus models and data loader, reused
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    xtr, ytr = mc.load_split(mc.DATA_DIR, "train")
    rows = []
    for mi, mname in enumerate(("vgg", "resnet")):
        torch.manual_seed(seed + mi)
        model = mc.MODELS[mname]()
        stream = mc.BatchStream(xtr.shape[0], seed + 1000 * (mi + 1))
        mc.train(model, xtr, ytr, stream, steps, 16, 0.02)
        model.train()
        idx = stream.next(16)

        def step():
            model.zero_grad(set_to_none=True)
            F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
        for name, mod, base, shape in dump_saved_layers(model, {nn.BatchNorm2d: "bn"}, step, out, mname):
            rows.append([mname, name, base + "_input.f32", base + "_grad_output.f32", base + "_gamma.f32", shape, repr(mod.eps)])
    write_tsv(os.path.join(out, "bn.tsv"), ["model", "module", "in_file", "grad_file", "gamma_file", "input_shape", "eps"], rows)
    print("make_bn: %d BatchNorm2d layers in %s" % (len(rows), out), file=sys.stderr)
    return 0


def check_bn(args, out):
    with open(os.path.join(args.bn, "bn.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    out.write("| model | layer | %s |\n|---|---|%s\n" % (" | ".join("%g" % b for b in BOUNDS), "---|" * len(BOUNDS)))
    gam, inp = [], []
    for row in rows:
        cells = []
        for b in BOUNDS:
            r = run([args.ebac, "grad-error", "--json", "--layer", "batchnorm2d",
                     "--activation", os.path.join(args.bn, row["in_file"]),
                     "--grad-output", os.path.join(args.bn, row["grad_file"]),
                     "--gamma", os.path.join(args.bn, row["gamma_file"]), "--eps", row["eps"],
                     "--input-shape", row["input_shape"], "--eb", repr(b), "--mode", "rel", "--pipeline", args.pipeline])
            gam.append(r["ratio"])
            inp.append(r["input_grad_ratio"])
            cells.append("%.2f / %.2f" % (r["ratio"], r["input_grad_ratio"]))
        out.write("| %s | %s | %s |\n" % (row["model"], row["module"], " | ".join(cells)))
    for name, v in (("gamma gradient", gam), ("input gradient", inp)):
        inb = sum(1 for x in v if 0.8 <= x <= 1.25)
        out.write("\n%s: %d/%d inside 0.8..1.25, min %.3f, max %.3f\n" % (name, inb, len(v), min(v), max(v)))
    return 0


def make_ln(out, seed, steps):
    """Train the study transformers briefly (AdamW, batch 16) and dump each
    LayerNorm (ln.tsv), GELU with the input of the Linear before it (act.tsv),
    Linear (layers.tsv) and attention operand (mm.tsv) of one training-mode batch of 16 (dropout
    on, as in training)."""
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import study_models as sm  # the transformers and their data, reused
    import make_corpus as mc  # layers.tsv's columns
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    rows, act_rows, mm_rows, lin_rows = [], [], [], []
    for mi, (mname, build, size) in enumerate((("vit", sm.SmallViT, 28), ("gpt", sm.TinyGPT, 128))):
        torch.manual_seed(seed + mi)
        model = build()
        kind = "text" if mname == "gpt" else "fmnist"
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model.train()
        batch_of = (lambda s: sm.text_batch(16, size, s)) if kind == "text" else (lambda s: sm.fashion_mnist_batch(16, s))
        for step in range(steps):
            x, y = batch_of(seed * 100003 + 7919 * mi + step)
            opt.zero_grad(set_to_none=True)
            sm.loss_of(model(x), y).backward()
            opt.step()
        x, y = batch_of(seed * 100003 + 7919 * mi + steps + 1)
        losses = []

        def step():
            model.zero_grad(set_to_none=True)
            losses.append(sm.loss_of(model(x), y))
            losses[-1].backward()
        mm_rows.extend(tap_attention(model, out, mname))
        layers = dump_saved_layers(model, {nn.LayerNorm: "ln", nn.GELU: "act", nn.Linear: "lin"}, step, out, mname)
        dumped = {name: (mod, base) for name, mod, base, _ in layers}
        for name, mod, base, shape in layers:
            if isinstance(mod, nn.Linear):
                # A Linear reads every leading extent (batch, tokens) as rows: [rows, in_features].
                dims = [int(d) for d in shape.split(",")]
                rows_n = math.prod(dims[:-1])
                lin_rows.append([name, "Linear", base + "_input.f32", base + "_grad_output.f32",
                                 "%d,%d" % (rows_n, dims[-1]), "%d,%d" % (mod.out_features, mod.in_features),
                                 "-", "-", "-", "-"])
                continue
            if isinstance(mod, nn.GELU):
                # The Linear before it (mlp.fc1 -> mlp.act), whose weight gradient the GELU's error reaches:
                # its saved input is already dumped as a Linear of layers.tsv.
                fc1, fc1_base = dumped[name[:-len("act")] + "fc1"]
                act_rows.append([mname, name, "gelu", base + "_input.f32", base + "_grad_output.f32", shape,
                                 fc1_base + "_input.f32", str(fc1.in_features)])
                continue
            rows.append([mname, name, base + "_input.f32", base + "_grad_output.f32", base + "_gamma.f32", shape,
                         str(mod.normalized_shape[-1]), repr(mod.eps)])
        print("make_ln: %s trained %d steps, loss %.3f" % (mname, steps, losses[-1].item()), file=sys.stderr)
    write_tsv(os.path.join(out, "ln.tsv"),
              ["model", "module", "in_file", "grad_file", "gamma_file", "input_shape", "weight_shape", "eps"], rows)
    write_tsv(os.path.join(out, "act.tsv"), ["model", "module", "function", "in_file", "grad_file", "input_shape",
                                             "producer_file", "producer_features"], act_rows)
    write_tsv(os.path.join(out, "mm.tsv"), ["model", "module", "case", "in_file", "grad_file", "input_shape", "weight_shape"],
              [r() for r in mm_rows])
    # The Linear layers (attention qkv and proj, MLP fc1 and fc2, the head) as a corpus of the main
    # study: the columns of studies/make_corpus.py's layers.tsv, the model named by the file stem.
    write_tsv(os.path.join(out, "layers.tsv"), mc.LAYERS_HEADER, lin_rows)
    print("make_ln: %d LayerNorm, %d GELU, %d Linear layers and %d attention matmul cases in %s"
          % (len(rows), len(act_rows), len(lin_rows), len(mm_rows), out), file=sys.stderr)
    return 0


def band_summary(out, name, v):
    """One line: how many predicted/measured ratios lie in 0.8..1.25, the extremes, and how many fall below 0.67."""
    inb = sum(1 for x in v if 0.8 <= x <= 1.25)
    out.write("\n%s: %d/%d inside 0.8..1.25, min %.3f, max %.3f, below 0.67: %d\n"
              % (name, inb, len(v), min(v), max(v), sum(1 for x in v if x < 0.67)))


def inverse_map_table(args, out, rows, cmd, what, labels):
    """measured/target of `grad-error --target-rel T` for every row and target
    (--targets, default 0.01,0.03,0.1); `labels` are (row key, column title) of the label columns."""
    ts = [float(t) for t in (args.targets or "0.01,0.03,0.1").split(",")]
    out.write("\nmeasured / target sigma%s, bound from `--target-rel T`\n\n" % what)
    out.write("| %s | %s |\n|%s%s\n" % (" | ".join(t for _, t in labels), " | ".join("T=%g" % t for t in ts),
                                          "---|" * len(labels), "---|" * len(ts)))
    mt = []
    for row in rows:
        cells = []
        for t in ts:
            r = run(cmd(row, ["--target-rel", repr(t), "--mode", "rel"]))
            mt.append(r["measured_over_target"])
            cells.append("%.2f (eb %.3g)" % (r["measured_over_target"], r["eb"]))
        out.write("| %s | %s |\n" % (" | ".join(row[k] for k, _ in labels), " | ".join(cells)))
    inb = sum(1 for x in mt if 0.8 <= x <= 1.25)
    out.write("\ninverse map: %d/%d inside 0.8..1.25, min %.3f, max %.3f\n" % (inb, len(mt), min(mt), max(mt)))


def check_ln(args, out):
    """Predicted/measured gamma- and input-gradient sigma of every dumped
    LayerNorm at each relative bound, then measured/target of the inverse map."""
    with open(os.path.join(args.ln, "ln.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))

    def cmd(row, extra):
        return [args.ebac, "grad-error", "--json", "--layer", "layernorm",
                "--activation", os.path.join(args.ln, row["in_file"]),
                "--grad-output", os.path.join(args.ln, row["grad_file"]),
                "--gamma", os.path.join(args.ln, row["gamma_file"]), "--eps", row["eps"],
                "--input-shape", row["input_shape"], "--weight-shape", row["weight_shape"],
                "--pipeline", args.pipeline] + extra

    out.write("predicted / measured sigma, gamma gradient / input gradient\n\n")
    out.write("| model | layer | %s |\n|---|---|%s\n" % (" | ".join("%g" % b for b in BOUNDS), "---|" * len(BOUNDS)))
    gam, inp = [], []
    for row in rows:
        cells = []
        for b in BOUNDS:
            r = run(cmd(row, ["--eb", repr(b), "--mode", "rel"]))
            gam.append(r["ratio"])
            inp.append(r["input_grad_ratio"])
            cells.append("%.2f / %.2f" % (r["ratio"], r["input_grad_ratio"]))
        out.write("| %s | %s | %s |\n" % (row["model"], row["module"], " | ".join(cells)))
    for name, v in (("gamma gradient", gam), ("input gradient", inp)):
        band_summary(out, name, v)
    inverse_map_table(args, out, rows, cmd, " of the gamma gradient", (("model", "model"), ("module", "layer")))
    return 0


def check_act(args, out):
    """Predicted/measured input-gradient sigma of every dumped GELU at each
    relative bound, then measured/target of the inverse map."""
    with open(os.path.join(args.act, "act.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))

    def cmd(row, extra):
        producer = (["--producer-input", os.path.join(args.act, row["producer_file"]),
                     "--producer-features", row["producer_features"]] if row.get("producer_file") else [])
        return [args.ebac, "grad-error", "--json", "--layer", row["function"],
                "--activation", os.path.join(args.act, row["in_file"]),
                "--grad-output", os.path.join(args.act, row["grad_file"]),
                "--input-shape", row["input_shape"], "--pipeline", args.pipeline] + producer + extra

    out.write("predicted / measured sigma: input gradient / weight gradient of the Linear before it (fc1)\n\n")
    out.write("| model | layer | %s |\n|---|---|%s\n" % (" | ".join("%g" % b for b in BOUNDS), "---|" * len(BOUNDS)))
    ratios, prod = [], []
    for row in rows:
        cells = []
        for b in BOUNDS:
            r = run(cmd(row, ["--eb", repr(b), "--mode", "rel"]))
            ratios.append(r["ratio"])
            if "producer_weight_grad_ratio" in r:
                prod.append(r["producer_weight_grad_ratio"])
                cells.append("%.2f / %.2f" % (r["ratio"], r["producer_weight_grad_ratio"]))
            else:
                cells.append("%.2f" % r["ratio"])
        out.write("| %s | %s | %s |\n" % (row["model"], row["module"], " | ".join(cells)))
    for name, v in (("input gradient", ratios), ("fc1 weight gradient", prod)):
        if not v:
            continue
        band_summary(out, name, v)
    inverse_map_table(args, out, rows, cmd, " of the input gradient", (("model", "model"), ("module", "layer")))
    return 0


def check_mm(args, out):
    """Predicted/measured sigma of the gradient each saved attention operand's
    error reaches (mm.tsv cases), at each relative bound, then the inverse map."""
    with open(os.path.join(args.mm, "mm.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))

    def cmd(row, extra):
        return [args.ebac, "grad-error", "--json", "--layer", "matmul",
                "--activation", os.path.join(args.mm, row["in_file"]),
                "--grad-output", os.path.join(args.mm, row["grad_file"]),
                "--input-shape", row["input_shape"], "--weight-shape", row["weight_shape"],
                "--pipeline", args.pipeline] + extra

    out.write("predicted / measured sigma of the other operand's gradient\n\n")
    out.write("| model | module | case | %s |\n|---|---|---|%s\n" % (" | ".join("%g" % b for b in BOUNDS), "---|" * len(BOUNDS)))
    ratios, iid = {}, {}
    for row in rows:
        cells = []
        for b in BOUNDS:
            r = run(cmd(row, ["--eb", repr(b), "--mode", "rel"]))
            case = row["case"].split()[0]
            ratios.setdefault(case, []).append(r["ratio"])
            iid.setdefault(case, []).append(r["iid_sigma"] / r["measured_sigma"] if r["measured_sigma"] > 0 else float("nan"))
            cells.append("%.2f" % r["ratio"])
        out.write("| %s | %s | %s | %s |\n" % (row["model"], row["module"], row["case"], " | ".join(cells)))
    allr = [x for v in ratios.values() for x in v]
    for name, v in sorted(ratios.items()) + [("all", allr)]:
        band_summary(out, name, v)
    # The i.i.d. baseline (iid_sigma: no coherence terms) on the same pairs, for comparison.
    for name, v in sorted(iid.items()):
        inb = sum(1 for x in v if 0.8 <= x <= 1.25)
        out.write("\ni.i.d. baseline, %s: %d/%d inside 0.8..1.25, min %.3f, max %.3f\n" % (name, inb, len(v), min(v), max(v)))
    inverse_map_table(args, out, rows, cmd, "", (("model", "model"), ("module", "module"), ("case", "case")))
    return 0


def sgd_noise(corpora, out):
    """Minibatch noise of the weight gradient vs its RMS: per-sample gradients
    (torch, double) g_n; noise RMS = sqrt(N * mean var_n(g_n)). The default
    tau of adapt/bound_update.hpp is chosen against this."""
    import numpy as np
    import torch
    out.write("| corpus | layer | batch | grad RMS | SGD noise RMS | noise / grad |\n|---|---|---|---|---|---|\n")
    for d in corpora:
        for row in read_layers(d):
            dims = [int(v) for v in row["input_shape"].split(",")]
            ws = [int(v) for v in row["weight_shape"].split(",")]
            a = torch.from_numpy(np.fromfile(os.path.join(d, row["in_file"]), dtype="<f4").reshape(dims)).double()
            g = torch.from_numpy(np.fromfile(os.path.join(d, row["grad_file"]), dtype="<f4")).double()
            n = dims[0]
            g = g.reshape([n, ws[0], -1])
            per = []
            for i in range(n):
                if row["type"] == "Linear":
                    per.append(torch.outer(g[i, :, 0], a[i]))
                else:
                    st = [int(v) for v in row["stride"].split(",")]
                    pd = [int(v) for v in row["padding"].split(",")]
                    dl = [int(v) for v in row["dilation"].split(",")]
                    ho = int(round(math.sqrt(g.shape[2])))
                    per.append(torch.nn.grad.conv2d_weight(a[i:i + 1], ws, g[i:i + 1].reshape(1, ws[0], ho, -1), stride=st,
                                                           padding=pd, dilation=dl, groups=int(row["groups"])))
            per = torch.stack(per)
            grad = per.sum(0)
            noise = math.sqrt(n * per.var(0, unbiased=True).mean().item())
            rms = math.sqrt((grad ** 2).mean().item())
            out.write("| %s | %s | %d | %.3g | %.3g | %.2f |\n" % (os.path.basename(os.path.normpath(d)), row["module"], n, rms, noise,
                                                                  noise / rms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
