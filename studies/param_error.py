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
  in a network with several BatchNorms, a BatchNorm weight's from every
  BatchNorm's saved input at once, whose error reaches its dy through the
  later BatchNorms' input gradients (batchnorm_chain_predictions);
* attention's own saved operands (Q, K, the softmax output, V: section 6.4)
  reach the gradient the attention hands its qkv projection, dY = [dQ, dK, dV],
  and from there the qkv weight gradient (dY^T X) and, through dX = dY W, the
  gamma gradient of the LayerNorm that feeds it (attention_operand_predictions);
  combined with the terms above as independent (root sum of squares);
* biases, norm betas, embeddings: not modelled. Their gradients (sums of dy)
  read no saved tensor; their error arrives only through dy from later layers.
  Nor are errors that reach dy from later blocks through the residual stream.
  (A LayerNorm's saved per-row mean and 1/sigma need no term: the session
  keeps them raw, docs/error-model.md 6.6.)

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


def norm_weight_predictions(model, x, y, eb, mode, pipeline, threads, skip=()):
    """{BatchNorm2d / LayerNorm name: predicted RMS of its gamma gradient's change} from its own saved
    input, compressed as a default session stores it.

    BatchNorm2d: d(dgamma_c) = (1/s_c) sum_j dy_j e_j, a depthwise 1x1 convolution with dy scaled by
    1/s_c (docs/error-model.md 6), at the session's BatchNorm bound (batchnorm_bound_scale x eb).
    LayerNorm (one normalized dimension): the session stores each row divided by its sigma_r at one
    absolute bound (hooks._row_normalized, ``layernorm_rows``) and backward's xhat = (x - mu) / sigma_r,
    so d(dgamma_j) = sum_r dy_rj (x'_hat - x')_rj with x' = x / sigma_r: the same depthwise view over the
    rows, with dy unscaled and x' what was compressed (a tensor that does not qualify for the row path is
    compressed whole, as the session does, and its error divided by sigma_r). Modules named in `skip`
    are left out (predict_parameters: the BatchNorms batchnorm_chain_predictions covers)."""
    saved, grads, hooks = {}, {}, []
    norms = [(n, m) for n, m in model.named_modules()
             if (isinstance(m, nn.BatchNorm2d) or (isinstance(m, nn.LayerNorm) and len(m.normalized_shape) == 1))
             and m.weight is not None and n not in skip]
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


ATTENTIONS = (sm.Attention, nn.MultiheadAttention)  # modules whose own forward saves Q, K, P, V


def model_error(t, eb_abs, gen, first_bin=True):
    """t as the error model stores it under eb_abs (never a compressor's output): zeros exact; a value
    within 2 eb_abs of zero at its first bin's centre, sign(x) eb_abs (the sign-keeping quantizer's
    first-bin error is a bias fixed by x, docs/error-model.md 6.4; first_bin=False: uniform there too);
    any other value with i.i.d. uniform noise in [-eb_abs, eb_abs] drawn from `gen`."""
    t = t.detach()
    u = (torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1) * eb_abs
    td = t.double()
    if first_bin:
        u = torch.where(td.abs() <= 2 * eb_abs, td.sign() * eb_abs - td, u)
    return torch.where(t == 0, t, (td + u).to(t.dtype))


def batchnorm_chain_predictions(model, x, y, eb, mode="rel", samples=2, seed=0):
    """{BatchNorm2d weight name: predicted RMS of its gradient's change} from the error of every
    BatchNorm's saved input at once, not only its own.

    What and why. A BatchNorm's input gradient reads its saved input: dx = (gamma / s) (dy - mean(dy) -
    xhat mean(dy xhat)), so the session's error in that input changes dx, and through the layers before
    it (a depthwise convolution, a ReLU6) the output gradient dy' of every earlier BatchNorm. Its gamma
    gradient sum(dy' xhat') is a cancelling sum, small at initialisation (mobilenet_v2's expansion
    BatchNorms: 1e-5 to 1e-4 of the largest gradient), the error it gets this way is not: on
    mobilenet_v2 (the memory report's step, rel 1e-2) the own-input term is about half of the measured
    change, a replay with every BatchNorm input perturbed by the model's error gives 0.97-1.15 of it, one
    with only the own input 0.5-0.6 (docs/error-model.md 6.6).

    How: first order, a small Monte Carlo. The step runs once exact and `samples` times with every
    training-mode BatchNorm2d's saved input replaced by model_error at the session's BatchNorm bound
    (batchnorm_bound_scale x eb, x its value range for mode "rel"), nothing else perturbed (the other
    saved tensors' paths are the other terms; ReLU outputs leave BatchNorm weights exact, 6.6), the same
    RNG state (dropout masks) each run. The prediction is the RMS over the runs of the change, own input
    included, so it replaces the own-input term. {} for fewer than two BatchNorms: the own-input term is
    then the whole of it."""
    bns = [(n, m) for n, m in model.named_modules()
           if isinstance(m, nn.BatchNorm2d) and m.training and m.weight is not None and m.weight.requires_grad]
    if len(bns) < 2:
        return {}
    scale = eb * ebac_torch.hooks.BATCHNORM_BOUND_SCALE
    gen = torch.Generator().manual_seed(seed)
    rng = torch.get_rng_state()
    state = {k: v.clone() for k, v in model.state_dict().items()}  # BatchNorm running statistics move each run
    inputs = {}
    hooks = [m.register_forward_pre_hook(lambda mod, inp: inputs.__setitem__(id(inp[0]), inp[0])) for _, m in bns]

    def pack(t):
        if inputs.get(id(t)) is t:
            lo, hi = torch.aminmax(t.detach())
            return model_error(t, scale * float(hi - lo) if mode == "rel" else scale, gen)
        return t

    def weight_grads(noise):
        inputs.clear()
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        with torch.autograd.graph.saved_tensors_hooks(pack if noise else (lambda t: t), lambda t: t):
            loss = sm.loss_of(model(x), y)
        loss.backward()
        return [None if m.weight.grad is None else m.weight.grad.detach().double().clone() for _, m in bns]
    try:
        g0 = weight_grads(False)
        runs = [weight_grads(True) for _ in range(samples)]
    finally:
        for h in hooks:
            h.remove()
        inputs.clear()
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
    out = {}
    for i, (n, _) in enumerate(bns):
        if g0[i] is not None and all(r[i] is not None for r in runs):
            out[n + ".weight"] = math.sqrt(sum(float((r[i] - g0[i]).pow(2).mean()) for r in runs) / samples)
    return out


def attention_operand_predictions(model, x, y, eb, mode="rel", samples=4, min_numel=4096, seed=0, first_bin=True):
    """{parameter name: predicted RMS of its gradient's change} from the error of attention's own saved
    operands, for the weights of each attention module's direct Linear children (the qkv projection) and the
    gamma of a LayerNorm whose output is the attention's input.

    What and why. In a session every float tensor the attention's own code saves (Q, K^T, the softmax output
    P, the dropped P, V; for nn.MultiheadAttention the same, as its functional form saves them) is stored
    within eb_abs = eb x its value range (mode "rel"; "abs": eb). Backward reads them in dV = P^T dO,
    dP = dO V^T, dS = P (dP - rowsum(dP P)), dQ = scale dS K, dK = scale dS^T Q, so the gradient the qkv
    projection receives, dY = [dQ, dK, dV], is off by dY_err even where dO is exact. That changes the
    projection's weight gradient by dY_err^T X and its input gradient by dX_err = dY_err W, the output
    gradient of the LayerNorm before it, whose gamma gradient changes by sum_rows dX_err xhat (xhat its
    normalized input). The per-layer model sees only a layer's own saved input, so it misses this path
    (docs/error-model.md 6.4, 9).

    How: first order, a small Monte Carlo on this step's tensors. The model runs once (each attention's
    arguments, RNG state and output gradient kept), then each attention module is replayed on its arguments
    `samples` times with the model's error added to every float tensor of at least `min_numel` elements its
    own code saves (its children's saved inputs stay exact: they are the own-input terms), and autograd's
    backward gives the changes. The model's error, never a compressor's output: zeros exact; a value within
    2 eb_abs of zero lands on its first bin's centre, sign(x) eb_abs (the sign-keeping quantizer of
    DESIGN.md, whose first-bin error sign(x) eb_abs - x is a bias, not noise: docs/error-model.md 6.4; 85% of
    the study GPT's non-zero probabilities lie there; first_bin=False drops this and is uniform everywhere);
    any other value gets i.i.d. uniform noise in [-eb_abs, eb_abs].
    A dropout output that the session rebuilds from P gets noise of its own (first order, sharing P's
    error would only couple dV with dQ/dK). Dropout replays the step's masks; the noise draws use a
    generator of their own. (nn.MultiheadAttention's out_proj runs without a module call, so its entry here
    has its own input's noise; predict_parameters does not predict that weight and ignores it.)"""
    attns = [(n, m) for n, m in model.named_modules() if isinstance(m, ATTENTIONS)]
    if not attns:
        return {}
    calls, ln_of, hooks = {}, {}, []
    for n, m in model.named_modules():
        if isinstance(m, nn.LayerNorm) and m.weight is not None and len(m.normalized_shape) == 1:
            hooks.append(m.register_forward_hook(
                lambda mod, inp, out, n=n: ln_of.__setitem__(id(out), (n, mod, inp[0].detach(), out))))
    for n, m in attns:  # an instance forward that keeps the call (this torch's hooks do not see kwargs)
        def keep(*args, n=n, m=m, **kwargs):
            calls[n] = {"args": args, "kwargs": kwargs, "rng": torch.get_rng_state()}
            out = type(m).forward(m, *args, **kwargs)
            o = out[0] if isinstance(out, tuple) else out
            o.register_hook(lambda g: calls[n].__setitem__("dout", g.detach().clone()))
            return out
        m.forward = keep
    try:
        model.zero_grad(set_to_none=True)
        sm.loss_of(model(x), y).backward()
    finally:
        for h in hooks:
            h.remove()
        for _, m in attns:
            del m.forward
    gen = torch.Generator().manual_seed(seed)
    depth = [0]

    def noisy(t):  # a saved tensor as the model stores it (see above)
        if (depth[0] or not t.is_floating_point() or t.numel() < min_numel or (t.requires_grad and t.is_leaf)):
            return t
        lo, hi = torch.aminmax(t.detach())
        return model_error(t, eb * float(hi - lo) if mode == "rel" else eb, gen, first_bin)

    def replay(mod, call, weights, noise):
        """(weight gradients, input gradients) of one run of `mod` on its kept arguments."""
        leaves = {}

        def leaf(a):
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                return leaves.setdefault(id(a), (a, a.detach().requires_grad_()))[1]
            return a
        args = [leaf(a) for a in call["args"]]
        kwargs = {k: leaf(v) for k, v in call["kwargs"].items()}
        torch.set_rng_state(call["rng"])
        with torch.autograd.graph.saved_tensors_hooks(noisy if noise else (lambda t: t), lambda t: t):
            out = mod(*args, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        ins = list(leaves.values())
        g = torch.autograd.grad(out, weights + [v for _, v in ins], call["dout"], allow_unused=True)
        return g[:len(weights)], {id(a): gi for (a, _), gi in zip(ins, g[len(weights):])}

    out = {}
    for n, m in attns:
        call = calls.get(n)
        if call is None or "dout" not in call:
            continue
        kids = [(c, k.weight) for c, k in m.named_children()
                if isinstance(k, nn.Linear) and k.weight.requires_grad]
        weights = [w for _, w in kids]
        subs = [s for s in m.modules() if s is not m]
        handles = [s.register_forward_pre_hook(lambda *a: depth.__setitem__(0, depth[0] + 1)) for s in subs]
        handles += [s.register_forward_hook(lambda *a: depth.__setitem__(0, depth[0] - 1)) for s in subs]
        try:
            with torch.random.fork_rng(devices=[]):
                w0, x0 = replay(m, call, weights, False)
                runs = [replay(m, call, weights, True) for _ in range(samples)]
        finally:
            for h in handles:
                h.remove()
        ms = lambda a, b: float((a.double() - b.double()).pow(2).mean())  # noqa: E731
        for i, (c, _) in enumerate(kids):
            if w0[i] is not None:
                out["%s.%s.weight" % (n, c)] = math.sqrt(sum(ms(w[i], w0[i]) for w, _ in runs) / samples)
        for key, g0 in x0.items():
            if g0 is None or key not in ln_of:
                continue
            ln_name, ln, a, _ = ln_of[key]
            d = ln.normalized_shape[0]
            a = a.reshape(-1, d).double()
            xhat = (a - a.mean(1, keepdim=True)) / (a.var(1, unbiased=False, keepdim=True) + ln.eps).sqrt()
            dg = [((g[key].double() - g0.double()).reshape(-1, d) * xhat).sum(0) for _, g in runs]
            out[ln_name + ".weight"] = math.sqrt(sum(float(v.pow(2).mean()) for v in dg) / samples)
    model.zero_grad(set_to_none=True)
    return out


def predict_parameters(model, x, y, eb, mode, pipeline, threads=1):
    """{parameter name: predicted RMS of its gradient's change} for every parameter the model covers:
    Conv2d / Linear weights (accuracy_study.gradient_probe's "model total": own input plus what a
    BatchNorm or GELU/SiLU after the layer passes back) and BatchNorm2d / LayerNorm weights
    (norm_weight_predictions; a BatchNorm2d weight of a network with several from every BatchNorm's saved
    input at once, batchnorm_chain_predictions), each with the error attention's own saved operands add to
    a qkv projection's weight and the LayerNorm gamma before it (attention_operand_predictions) in
    quadrature. `model`'s state and the RNG are left as they were."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    probe, _ = acc.gradient_probe(model, x, y, {"eb": eb, "mode": mode, "pipeline": pipeline}, threads)
    predicted = {r["layer"] + ".weight": r["predicted_total"] for r in probe}
    torch.set_rng_state(rng)
    with torch.random.fork_rng(devices=[]):
        chain = batchnorm_chain_predictions(model, x, y, eb, mode)  # own input included: replaces that term
    with torch.random.fork_rng(devices=[]):
        covered = {n[:-len(".weight")] for n in chain}
        predicted.update({n + ".weight": v for n, v in
                          norm_weight_predictions(model, x, y, eb, mode, pipeline, threads, covered).items()})
    predicted.update(chain)
    with torch.random.fork_rng(devices=[]):
        for n, v in attention_operand_predictions(model, x, y, eb, mode).items():
            if n in predicted:  # independent of the own-input term
                predicted[n] = math.hypot(predicted[n], v)
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
