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
* BatchNorm2d and LayerNorm weights (gamma): their own saved input's error,
  d(dgamma_c) = (1/s_c) sum_j dy_j e_j, i.e. the model of a depthwise 1x1
  convolution with dy scaled by 1/s_c (section 6), at the bound the session
  gives a BatchNorm input (batchnorm_bound_scale); a LayerNorm's the same view
  over its rows, as the session stores them (divided by each row's sigma);
* biases, norm betas, embeddings: not modelled. Their gradients (sums of dy)
  read no saved tensor; their error arrives only through dy from later layers.
  Nor is the path from attention's own saved operands (Q, K, softmax, V) into
  the qkv projection's weight gradient and the LayerNorm before it (section 9).

predict_parameters and judge are what studies/memory_report.py calls for its
every-parameter table.

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


def _depthwise_view_sigma(x4, x4_hat, dy4, eb_abs):
    """The model's sigma for a per-channel sum g_c = sum_n dy[n, c] x[n, c] (a depthwise 1x1
    convolution's weight gradient), the x given as (N, C, 1, 1) or (N, C, H, W) views."""
    c = x4.shape[1]
    view = nn.Conv2d(c, c, 1, groups=c, bias=False)
    return ebac_torch.predict_weight_error(view, x4, x4_hat, dy4.float(), eb_abs)["sigma"]


def norm_weight_predictions(model, x, y, eb, mode, pipeline, threads):
    """{BatchNorm2d / LayerNorm name: predicted RMS of its gamma gradient's change} from its own saved
    input, compressed as a default session stores it.

    BatchNorm2d: d(dgamma_c) = (1/s_c) sum_j dy_j e_j, a depthwise 1x1 convolution with dy scaled by
    1/s_c (docs/error-model.md 6), at the session's BatchNorm bound (batchnorm_bound_scale x eb).
    LayerNorm (one normalized dimension): the session stores each row divided by its sigma_r at one
    absolute bound (hooks._row_normalized, ``layernorm_rows``) and backward's xhat = (x - mu) / sigma_r,
    so d(dgamma_j) = sum_r dy_rj (x'_hat - x')_rj with x' = x / sigma_r: the same depthwise view over the
    rows, with dy unscaled and x' what was compressed (a tensor that does not qualify for the row path is
    compressed whole, as the session does, and its error divided by sigma_r)."""
    saved, grads, hooks = {}, {}, []
    norms = [(n, m) for n, m in model.named_modules()
             if (isinstance(m, nn.BatchNorm2d) or (isinstance(m, nn.LayerNorm) and len(m.normalized_shape) == 1))
             and m.weight is not None]
    for n, m in norms:
        def fwd(mod, inp, out, n=n):
            saved[n] = inp[0].detach().clone()
            out.register_hook(lambda g, n=n: grads.__setitem__(n, g.detach().clone()))
        hooks.append(m.register_forward_hook(fwd))
    model.zero_grad(set_to_none=True)
    sm.loss_of(model(x), y).backward()
    for h in hooks:
        h.remove()
    out = {}
    for n, m in norms:
        if n not in grads:
            continue
        a, dy = saved[n], grads[n]
        if isinstance(m, nn.BatchNorm2d):
            c = ebac_torch.compress(a, eb * ebac_torch.hooks.BATCHNORM_BOUND_SCALE, mode, pipeline, threads=threads)
            a_hat = ebac_torch.decompress(c, threads=threads)
            # training-mode batch statistics, as BatchNorm's backward uses them
            s = (a.double().var(dim=(0, 2, 3), unbiased=False) + m.eps).sqrt()
            out[n] = _depthwise_view_sigma(a, a_hat, dy.double() / s.view(1, -1, 1, 1), ebac_torch.inspect(c)["eb_abs"])
            continue
        d = m.normalized_shape[0]
        rows = ebac_torch.hooks._row_normalized(a, m, eb, mode)
        if rows is not None:
            xr, _, row_eb = rows
            c = ebac_torch.compress(xr.contiguous(), row_eb, "abs", pipeline, threads=threads)
            xr_hat, eb_abs = ebac_torch.decompress(c, threads=threads), ebac_torch.inspect(c)["eb_abs"]
        else:  # compressed whole; in x' units the bound is largest on the row of least sigma
            c = ebac_torch.compress(a, eb, mode, pipeline, threads=threads)
            sig = (a.reshape(-1, d).double().var(dim=1, unbiased=False) + m.eps).sqrt()[:, None]
            xr = (a.reshape(-1, d).double() / sig).float()
            xr_hat = (ebac_torch.decompress(c, threads=threads).reshape(-1, d).double() / sig).float()
            eb_abs = ebac_torch.inspect(c)["eb_abs"] / float(sig.min())
        r4 = lambda t: t.reshape(-1, d, 1, 1)  # noqa: E731
        out[n] = _depthwise_view_sigma(r4(xr), r4(xr_hat), r4(dy), eb_abs)
    return out


def predict_parameters(model, x, y, eb, mode, pipeline, threads=1):
    """{parameter name: predicted RMS of its gradient's change} for every parameter the model covers:
    Conv2d / Linear weights (accuracy_study.gradient_probe's "model total": own input plus what a
    BatchNorm or GELU/SiLU after the layer passes back) and BatchNorm2d / LayerNorm weights
    (norm_weight_predictions). `model`'s state and the RNG are left as they were."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    probe, _ = acc.gradient_probe(model, x, y, {"eb": eb, "mode": mode, "pipeline": pipeline}, threads)
    predicted = {r["layer"] + ".weight": r["predicted_total"] for r in probe}
    torch.set_rng_state(rng)
    with torch.random.fork_rng(devices=[]):
        predicted.update({n + ".weight": v for n, v in
                          norm_weight_predictions(model, x, y, eb, mode, pipeline, threads).items()})
    model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    return predicted


def biases_into_batchnorm(model):
    """Names of the biases of layers whose output the next module of a Sequential, a BatchNorm2d,
    reads: their true gradient is 0 (BatchNorm subtracts the batch mean)."""
    into_bn = set()
    for n, m in model.named_modules():
        if isinstance(m, nn.Sequential):
            kids = list(m.named_children())
            for (a, ma), (_, mb) in zip(kids, kids[1:]):
                if isinstance(mb, nn.BatchNorm2d) and getattr(ma, "bias", None) is not None:
                    into_bn.add(("%s.%s" % (n, a)).lstrip(".") + ".bias")
    return into_bn


def judge(plain, comp, predicted, zero=()):
    """Rows (name, norm / max norm, RMS of g, measured RMS change, predicted or None, cosine, status) for
    every parameter with a plain gradient, and the names under-predicted by more than UNDER. status:
    "negligible" (in `zero`, or ||g|| < NEGLIGIBLE x the largest ||g||: the stated rule), "not modelled"
    (no prediction: biases, BatchNorm/LayerNorm beta, embeddings), else "judged"."""
    plain = {n: g.double() for n, g in plain.items() if g is not None}
    gmax = max(float(g.norm()) for g in plain.values())
    rows, under = [], []
    for n, g0 in plain.items():
        if comp.get(n) is None:
            continue
        g1 = comp[n].double()
        meas = float((g1 - g0).pow(2).mean().sqrt())
        cos = float(g1.flatten() @ g0.flatten()) / max(1e-300, float(g1.norm() * g0.norm()))
        norm = float(g0.norm())
        if n in zero or norm < NEGLIGIBLE * gmax:
            status = "negligible"
        elif predicted.get(n) is None:
            status = "not modelled"
        else:
            status = "judged"
            if predicted[n] * UNDER < meas:
                under.append(n)
        rows.append((n, norm / gmax, float(g0.pow(2).mean().sqrt()), meas, predicted.get(n), cos, status))
    return rows, under


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
    model.load_state_dict(state)
    predicted = predict_parameters(model, x, y, args.error_bound, "rel", args.pipeline)
    rows, under = judge(plain, comp, predicted, biases_into_batchnorm(model))
    return rows, sum(1 for r in rows if r[-1] == "judged"), under


def table(rows, under):
    """The markdown table and its summary line for judge()'s rows."""
    out = ["| parameter | norm / max | RMS of g | measured RMS change | predicted | predicted / measured | cosine | |",
           "|---|---|---|---|---|---|---|---|"]
    for n, rel, rms, meas, pred, cos, status in rows:
        q = "%.2f" % (pred / meas) if pred is not None and meas > 0 else "-"
        out.append("| %s | %.2e | %.3g | %.3g | %s | %s | %.5f | %s |"
                   % (n, rel, rms, meas, "-" if pred is None else "%.3g" % pred, q, cos, status))
    counts = {s: sum(1 for r in rows if r[-1] == s) for s in ("judged", "not modelled", "negligible")}
    out.append("")
    out.append("%d parameters: %d judged (modelled, non-negligible), %d not modelled (biases, norm betas, "
               "embeddings), %d negligible; under-predicted by more than %.1fx: %s"
               % (len(rows), counts["judged"], counts["not modelled"], counts["negligible"], UNDER,
                  ", ".join(under) if under else "none"))
    return "\n".join(out)


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
    print(table(rows, under))
    if args.smoke and (judged == 0 or any(math.isnan(r[3]) for r in rows)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
