"""Which pipeline for ebac_torch: stored bytes and CPU time of whole training steps.

For each network of studies/peak_step.py and each pipeline, one forward and
backward at batch 256 inside compressed_activations (rel 1e-2 unless told
otherwise), one torch thread, after a warm-up step of the same pipeline; the
CPU seconds of forward and backward are the minimum over --reps steps (CPU
time, not wall: steadier on a shared machine), beside plain training's and
per-block checkpointing's (torch.utils.checkpoint, study_models.way_loss). The
last columns: the codec's own CPU seconds in the step (the session's
compress_cpu_seconds + decompress_cpu_seconds) and ebac's cost (its step
minus plain's) over them: what the hooks add beyond the codec.

    /usr/bin/python3 studies/pipeline_step.py                       # resnet20, vit12; fast, ratio, max
    /usr/bin/python3 studies/pipeline_step.py --networks resnet20 --pipelines max --reps 1 --batch 32  # smoke

Needs $EBAC_TORCH_PATH (an installed ebac_torch) or the tree's package.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.environ.get("EBAC_TORCH_PATH") or os.path.join(HERE, "..", "integrations", "pytorch"))

import torch  # noqa: E402

import study_models as sm  # noqa: E402


def one_step(model, x, y, session, way="plain", net=None):
    """CPU seconds of forward and of backward; the session's stats (or None). `way` "checkpoint":
    torch.utils.checkpoint around every block (study_models.way_loss), no session."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same dropout masks for every pipeline
    c0 = time.process_time()
    if session is None:
        loss = sm.way_loss(net, way, model, x, y)
    else:
        with session:
            loss = sm.loss_of(model(x), y)
    c1 = time.process_time()
    loss.backward()
    c2 = time.process_time()
    return c1 - c0, c2 - c1, (session.stats() if session is not None else None)


def measure(model, x, y, make_session, reps, way="plain", net=None):
    """Minimum forward and backward CPU seconds over reps steps, the stats of the step with the
    smallest forward+backward, and that step's codec CPU seconds (compress + decompress)."""
    one_step(model, x, y, make_session(), way, net)  # warm-up: first-touch page faults, thread pools
    best_f = best_b = float("inf")
    best_total, st = float("inf"), None
    for _ in range(reps):
        f, b, s = one_step(model, x, y, make_session(), way, net)
        best_f, best_b = min(best_f, f), min(best_b, b)
        if f + b < best_total:
            best_total, st = f + b, s
    return best_f, best_b, st


def codec_seconds(st):
    return st["compress_cpu_seconds"] + st["decompress_cpu_seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--networks", default="resnet20,vit12")
    ap.add_argument("--pipelines", default="fast,ratio,max")
    ap.add_argument("--error-bound", type=float, default=1e-2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import ebac_torch
    # ebac's cost of a step (its forward+backward CPU seconds minus plain training's) against the
    # codec's own CPU seconds in that step (the extension's compress and decompress calls): the
    # hooks' share is the rest (issue 50 asks for cost <= 1.25x codec).
    print("| network | pipeline | stored MB | ratio | derived MB | forward CPU s | backward CPU s "
          "| codec CPU s (compress + decompress) | cost / codec |")
    print("|---|---|---|---|---|---|---|---|---|")
    for net in args.networks.split(","):
        torch.manual_seed(0)
        model = sm.NETWORKS[net]["build"](sm.NETWORKS[net]["size"]).train()
        x, y = sm.network_input(net, args.batch, sm.NETWORKS[net]["size"], 0)
        f0, b0, _ = measure(model, x, y, lambda: None, args.reps, "plain", net)
        print("| %s | plain training | | | | %.2f | %.2f | | |" % (net, f0, b0), flush=True)
        f, b, _ = measure(model, x, y, lambda: None, args.reps, "checkpoint", net)
        print("| %s | checkpoint every block | | | | %.2f | %.2f | | |" % (net, f, b), flush=True)
        for p in args.pipelines.split(","):
            f, b, st = measure(model, x, y, lambda: ebac_torch.compressed_activations(
                error_bound=args.error_bound, mode="rel", pipeline=p), args.reps)
            codec = codec_seconds(st)
            cost = (f + b) - (f0 + b0)
            print("| %s | `%s` | %.1f | %.2fx | %.1f | %.2f | %.2f | %.2f (%.2f + %.2f) | %s |"
                  % (net, p, st["compressed_bytes"] / 1e6, st["ratio"], st["derived"]["bytes"] / 1e6, f, b, codec,
                     st["compress_cpu_seconds"], st["decompress_cpu_seconds"],
                     "%.2fx" % (cost / codec) if codec > 0 else "n/a"),
                  flush=True)


if __name__ == "__main__":
    main()
