#!/usr/bin/env python3
"""Is a parameter's gradient error rounding noise, sampling noise, or ebac's?

For a network of studies/study_models.py at its own batch and initial
weights, one forward and backward: plain in float32, plain in float64 (the
same weights and batch), plain on a second batch, and inside
`ebac_torch.compressed_activations(error_bound, mode="rel")` with its
defaults. For every parameter whose plain gradient norm is above --floor of
the largest it prints:

  cos ebac     cosine of ebac's gradient with plain float32's;
  err / noise  ||g_ebac - g_plain|| over the batch-to-batch noise
               ||g_plain(batch 0) - g_plain(batch 1)|| / sqrt(2): below 1,
               ebac's change is smaller than what drawing another batch does;
  cos batches  cosine of the two batches' plain gradients;
  cos f32/f64  cosine of plain float32's gradient with float64's: near 1, the
               gradient is above float32 rounding noise.

--sources K1,K2 repeats the ebac step compressing only the tensors saved by
modules of those kinds (policy=; the module that saves a tensor first owns it,
so a ReLU's output that the next convolution also saves counts for the ReLU)
at --source-bounds, to show where a parameter's error comes from.

    EBAC_TORCH_PATH=build/ebac_torch_site /usr/bin/python3 studies/grad_noise.py --network mobilenet_v2 \\
        --sources BatchNorm2d,ReLU6 --source-bounds 1e-2,1e-3,1e-4
    EBAC_TORCH_PATH=build/ebac_torch_site /usr/bin/python3 studies/grad_noise.py --smoke   # CI, seconds

--smoke: the VGG-style CNN at batch 8 with --sources BatchNorm2d; fails unless
every table has its rows and every judged gradient's float32/float64 cosine is
at least 0.999 (a broken float64 replay or batch would show there).
"""

import argparse
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("EBAC_TORCH_PATH"):
    sys.path.insert(0, os.environ["EBAC_TORCH_PATH"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--network", default="mobilenet_v2")
    ap.add_argument("--batch", type=int, default=0, help="0: the network's own (study_models.NETWORKS)")
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--floor", type=float, default=1e-7,
                    help="skip parameters whose plain gradient norm is below this fraction of the largest")
    ap.add_argument("--rows", type=int, default=10, help="the worst rows by err / noise to print")
    ap.add_argument("--sources", default="", help="module kinds (class names) to compress alone, comma-separated")
    ap.add_argument("--source-bounds", default="1e-2", help="rel bounds for the --sources steps, comma-separated")
    ap.add_argument("--smoke", action="store_true", help="CI: vgg-cnn at batch 8, BatchNorm2d alone (see above)")
    args = ap.parse_args()
    if args.smoke:
        args.network, args.batch, args.sources, args.source_bounds = "vgg-cnn", 8, "BatchNorm2d", "1e-2"

    import torch
    import ebac_torch
    import study_models as sm
    torch.set_num_threads(1)
    cfg = sm.NETWORKS[args.network]
    batch = args.batch or cfg["batch"]
    torch.manual_seed(0)
    model = cfg["build"](cfg["size"]).train()
    state = copy.deepcopy(model.state_dict())
    kinds = {n: type(m).__name__ for n, m in model.named_modules()}

    def grads(seed, session=None, dtype=torch.float32):
        net = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
        net.load_state_dict(state)
        net.zero_grad(set_to_none=True)
        x, y = sm.network_input(args.network, batch, cfg["size"], seed)
        torch.manual_seed(1)  # dropout, if any, draws the same masks
        if session is None:
            loss = sm.loss_of(net(x.to(dtype)), y)
        else:
            with session:
                loss = sm.loss_of(net(x), y)
        loss.backward()
        return {n: p.grad.detach().double().clone() for n, p in net.named_parameters() if p.grad is not None}

    def cos(a, b):
        return float(a.flatten() @ b.flatten() / (a.norm() * b.norm() + 1e-300))

    g0, g1, g64 = grads(0), grads(1), grads(0, dtype=torch.float64)
    big = max(float(g.norm()) for g in g0.values())
    judged = [n for n in g0 if float(g0[n].norm()) > args.floor * big]
    noise = {n: float((g0[n] - g1[n]).norm()) / 2 ** 0.5 for n in judged}

    tables = []

    def table(title, g):
        rows = sorted(((float((g[n] - g0[n]).norm()) / max(noise[n], 1e-300), n) for n in judged), reverse=True)
        print("\n%s\n" % title)
        print("| parameter | plain norm / largest | cos ebac | err / noise | cos batches | cos f32/f64 |")
        print("|---|---|---|---|---|---|")
        for r, n in rows[:args.rows]:
            print("| %s | %.1e | %.4f | %.2f | %.3f | %.5f |" % (
                n, float(g0[n].norm()) / big, cos(g[n], g0[n]), r, cos(g1[n], g0[n]), cos(g0[n], g64[n])))
        tables.append(len(rows))
        errs = sorted(r for r, _ in rows)
        print("\n%d parameters above %.0e of the largest gradient norm; err / noise median %.3f, max %.2f; "
              "%d with cos ebac < 0.99" % (len(judged), args.floor, errs[len(errs) // 2], errs[-1],
                                           sum(cos(g[n], g0[n]) < 0.99 for n in judged)))

    print("# %s, batch %d, rel %g, initial weights (seed 0)" % (args.network, batch, args.error_bound))
    table("ebac's defaults", grads(0, ebac_torch.compressed_activations(error_bound=args.error_bound, mode="rel")))
    for kind in [k for k in args.sources.split(",") if k]:
        for eb in [float(b) for b in args.source_bounds.split(",")]:
            def policy(module, t, kind=kind, eb=eb):
                return eb if kinds.get(module) == kind else None
            s = ebac_torch.compressed_activations(error_bound=eb, mode="rel", model=model, policy=policy)
            table("only what %s modules save, rel %g" % (kind, eb), grads(0, s))
    if args.smoke:
        low = [n for n in judged if cos(g0[n], g64[n]) < 0.999]
        if not all(tables) or len(tables) != 2 or low:
            sys.exit("grad_noise smoke failed: rows per table %s, float32/float64 cosine < 0.999: %s" % (tables, low))
        print("grad_noise smoke: %d tables, %d parameters judged" % (len(tables), len(judged)))


if __name__ == "__main__":
    main()
