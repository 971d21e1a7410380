#!/usr/bin/env python3
"""Every parameter's gradient error in a whole network: predicted against measured (issue 54).

One training step of the study ResNet-20 (studies/study_models.py, Fashion-MNIST,
the initial weights or --steps SGD steps in) is run plain and inside
`ebac_torch.compressed_activations` with its defaults (every saved tensor
compressed at once). For every parameter it prints the RMS of the gradient
change (measured) and what ebac's error model predicts for it:

* Conv2d / Linear weight: the model of the layer's own compressed input plus
  the first-order term a BatchNorm after it passes back
  (accuracy_study.gradient_probe's "model total", docs/error-model.md 3 and 6.1);
* BatchNorm weight (gamma): its own saved input's error,
  d(dgamma_c) = (1/s_c) sum_j dy_j e_j, i.e. the model of a depthwise 1x1
  convolution with dy scaled by 1/s_c (section 6), at the bound the session
  gives a BatchNorm input (batchnorm_bound_scale);
* biases and BatchNorm beta: not modelled. Their gradients (sums of dy) read
  no saved tensor; their error arrives only through dy from later layers.

Rule for gradients too small to matter (as studies/memory_report.py): a
parameter is not judged when its plain gradient norm is below 1e-5 of the
largest parameter-gradient norm (float32 rounding noise of an exactly-zero
gradient lands there: 1e-9 to 2e-5 in these networks), or when it is a bias
feeding a BatchNorm (true gradient 0).

    EBAC_TORCH_PATH=build/ebac_torch_site /usr/bin/python3 studies/param_error.py --batch 256
    EBAC_TORCH_PATH=build/ebac_torch_site /usr/bin/python3 studies/param_error.py --smoke   # seconds
"""

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import accuracy_study as acc  # noqa: E402  (gradient_probe; it imports torch, study_models and ebac_torch)

torch, nn, sm, ebac_torch = acc.torch, acc.nn, acc.sm, acc.ebac_torch

NEGLIGIBLE = 1e-5
UNDER = 1.5  # the limit: no judged, modelled parameter predicted below measured / 1.5


def gamma_predictions(model, x, y, eb, mode, pipeline, threads):
    """{BatchNorm2d name: predicted RMS of its gamma gradient's change} from its own saved input."""
    saved, grads, hooks = {}, {}, []
    bns = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]
    for n, m in bns:
        def fwd(mod, inp, out, n=n):
            saved[n] = inp[0].detach().clone()
            out.register_hook(lambda g, n=n: grads.__setitem__(n, g.detach().clone()))
        hooks.append(m.register_forward_hook(fwd))
    model.zero_grad(set_to_none=True)
    sm.loss_of(model(x), y).backward()
    for h in hooks:
        h.remove()
    out = {}
    bn_eb = eb * ebac_torch.hooks.BATCHNORM_BOUND_SCALE  # what the default session uses for these tensors
    for n, m in bns:
        a, dy = saved[n], grads[n]
        c = ebac_torch.compress(a, bn_eb, mode, pipeline, threads=threads)
        a_hat = ebac_torch.decompress(c, threads=threads)
        # training-mode batch statistics, as BatchNorm's backward uses them
        s = (a.double().var(dim=(0, 2, 3), unbiased=False) + m.eps).sqrt()
        dy_scaled = (dy.double() / s.view(1, -1, 1, 1)).float()
        view = nn.Conv2d(m.num_features, m.num_features, 1, groups=m.num_features, bias=False)
        p = ebac_torch.predict_weight_error(view, a, a_hat, dy_scaled, ebac_torch.inspect(c)["eb_abs"])
        out[n] = p["sigma"]
    return out


def run(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = (sm.ResNet20(widths=(4, 8, 8), blocks=1) if args.smoke else sm.ResNet20()).train()
    if args.steps:
        opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
        for i in range(args.steps):
            xb, yb = sm.fashion_mnist_batch(args.batch, args.seed * 1000 + i)
            opt.zero_grad(set_to_none=True)
            sm.loss_of(model(xb), yb).backward()
            opt.step()
    x, y = sm.fashion_mnist_batch(args.batch, args.seed * 1000 + 999)
    cfg = {"eb": args.error_bound, "mode": "rel", "pipeline": args.pipeline}
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def grads(compress):
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        if compress:
            # min_numel=1 in the smoke only: its tiny tensors would otherwise stay raw while the
            # predictions compress them (at --batch 64 and up every saved tensor is far above 4096)
            with ebac_torch.compressed_activations(args.error_bound, "rel", args.pipeline, model=model, threads=1,
                                                   min_numel=1 if args.smoke else 4096):
                loss = sm.loss_of(model(x), y)
        else:
            loss = sm.loss_of(model(x), y)
        loss.backward()
        return {n: p.grad.detach().double().clone() for n, p in model.named_parameters()}
    plain, comp = grads(False), grads(True)
    probe, _ = acc.gradient_probe(model, x, y, cfg, 1)
    model.load_state_dict(state)
    gam = gamma_predictions(model, x, y, args.error_bound, "rel", args.pipeline, 1)
    model.load_state_dict(state)

    mods = dict(model.named_modules())
    into_bn = set()  # biases of layers whose output a BatchNorm reads: true gradient 0
    for n, m in mods.items():
        if isinstance(m, nn.Sequential):
            kids = list(m.named_children())
            for (a, ma), (_, mb) in zip(kids, kids[1:]):
                if isinstance(mb, nn.BatchNorm2d) and getattr(ma, "bias", None) is not None:
                    into_bn.add(("%s.%s" % (n, a)).lstrip(".") + ".bias")
    predicted = {r["layer"] + ".weight": r["predicted_total"] for r in probe}
    predicted.update({n + ".weight": v for n, v in gam.items()})
    gmax = max(float(g.norm()) for g in plain.values())
    rows, judged, under = [], 0, []
    for n, g0 in plain.items():
        d = comp[n] - g0
        meas = float(d.pow(2).mean().sqrt())
        cos = float(comp[n].flatten() @ g0.flatten()) / max(1e-300, float(comp[n].norm() * g0.norm()))
        norm = float(g0.norm())
        if n in into_bn or norm < NEGLIGIBLE * gmax:
            status = "negligible"
        elif n not in predicted:
            status = "not modelled"
        else:
            status = "judged"
            judged += 1
            if predicted[n] * UNDER < meas:
                under.append(n)
        rows.append((n, norm / gmax, float(g0.pow(2).mean().sqrt()), meas, predicted.get(n), cos, status))
    return rows, judged, under


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=0, help="SGD steps before the measured one (0: initial weights)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--pipeline", default="ratio")
    ap.add_argument("--smoke", action="store_true", help="ResNet-20 of widths 4/8/8, one block a stage, batch 8")
    args = ap.parse_args(argv)
    if args.smoke:
        args.batch = 8
    rows, judged, under = run(args)
    print("| parameter | norm / max | RMS of g | measured RMS change | predicted | predicted / measured | cosine | |")
    print("|---|---|---|---|---|---|---|---|")
    for n, rel, rms, meas, pred, cos, status in rows:
        q = "%.2f" % (pred / meas) if pred is not None and meas > 0 else "-"
        print("| %s | %.2e | %.3g | %.3g | %s | %s | %.5f | %s |"
              % (n, rel, rms, meas, "-" if pred is None else "%.3g" % pred, q, cos, status))
    counts = {s: sum(1 for r in rows if r[-1] == s) for s in ("judged", "not modelled", "negligible")}
    print("\n%d parameters: %d judged (modelled, non-negligible), %d not modelled (biases, BatchNorm beta), "
          "%d negligible; under-predicted by more than %.1fx: %s"
          % (len(rows), counts["judged"], counts["not modelled"], counts["negligible"], UNDER,
             ", ".join(under) if under else "none"))
    if args.smoke and (judged == 0 or any(math.isnan(r[3]) for r in rows)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
