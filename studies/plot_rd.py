#!/usr/bin/python3
"""Rate-distortion plots from studies/compare.py's compare.json.

    /usr/bin/python3 studies/plot_rd.py out/compare.json --out out

Writes, per tensor kind (post_relu, dense, other):
  rd_ratio_<kind>.png  compression ratio vs relative error bound (log-log)
  rd_psnr_<kind>.png   PSNR vs bit rate (bits per value)
one line per compressor, from compare.json's aggregates (ratio of total
bytes, mean PSNR over tensors). A dense bound sweep makes better curves:
  /usr/bin/python3 studies/compare.py --bounds 1e-1,3e-2,1e-2,3e-3,1e-3,3e-4,1e-4,3e-5,1e-5 --out out/sweep
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KINDS = ["post_relu", "dense", "other"]
EBAC_PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain", "max"]
PEER_STYLE = {"sz3": ("tab:red", "s"), "zfp": ("tab:purple", "^"), "quant+zstd": ("tab:gray", "D")}
EBAC_COLORS = ["tab:blue", "tab:green", "tab:cyan", "tab:olive", "tab:orange", "tab:brown", "tab:pink", "black"]
ZSTD_STYLES = ["--", ":", "-."]  # quant+zstd -L: one line style per level, in order of appearance


def style(name, ebac_names, zstd_names=()):
    if name in PEER_STYLE:
        color, marker = PEER_STYLE[name]
        return {"color": color, "marker": marker, "linestyle": "--", "linewidth": 1.6}
    if name.startswith("quant+zstd"):
        color, marker = PEER_STYLE["quant+zstd"]
        i = zstd_names.index(name) if name in zstd_names else 0
        return {"color": color, "marker": marker, "linestyle": ZSTD_STYLES[i % len(ZSTD_STYLES)], "linewidth": 1.6}
    i = ebac_names.index(name) if name in ebac_names else 0
    return {"color": EBAC_COLORS[i % len(EBAC_COLORS)], "marker": "o", "linestyle": "-", "linewidth": 1.6}


def save(fig, path, dpi):
    """Saves a PNG, then shrinks it to a 64-colour palette (about 4x smaller, same look) when PIL is there."""
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=64)
    small.save(path, optimize=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("json", nargs="?", default="out/compare.json", help="compare.json (default out/compare.json)")
    ap.add_argument("--out", default=None, help="output directory (default: next to the JSON)")
    ap.add_argument("--dpi", type=int, default=80)
    args = ap.parse_args(argv)
    with open(args.json) as f:
        data = json.load(f)
    out = args.out or os.path.dirname(os.path.abspath(args.json))
    os.makedirs(out, exist_ok=True)
    summary = data["summary"]
    meta = data.get("meta", {})
    written = []
    for kind in KINDS:
        rows = [a for a in summary if a["kind"] == kind and a["ratio"]]
        if not rows:
            continue
        names = []
        for a in rows:
            if a["compressor"] not in names:
                names.append(a["compressor"])
        order = ["ebac " + p for p in EBAC_PIPELINES]
        ebac_names = sorted((n for n in names if n.startswith("ebac")),
                            key=lambda n: order.index(n) if n in order else len(order))
        names = ebac_names + [n for n in names if n not in ebac_names]
        zstd_names = [n for n in names if n.startswith("quant+zstd")]
        files = max(a["files"] for a in rows)
        mb = max(a["bytes_in"] for a in rows) / 1e6

        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for n in names:
            pts = sorted((a["bound_rel"], a["ratio"]) for a in rows if a["compressor"] == n)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=n, **style(n, ebac_names, zstd_names))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("relative error bound (eb / value range)")
        ax.set_ylabel("compression ratio (total bytes)")
        ax.set_title("%s activations: ratio vs bound (%d tensors, %.1f MB)" % (kind, files, mb), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, "rd_ratio_%s.png" % kind)
        save(fig, path, args.dpi)
        written.append(path)

        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for n in names:
            pts = sorted((a["bits_per_value"], a["psnr_mean"]) for a in rows
                         if a["compressor"] == n and a["psnr_mean"] is not None)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=n, **style(n, ebac_names, zstd_names))
        ax.set_xlabel("bit rate (bits per value)")
        ax.set_ylabel("PSNR (dB, mean over tensors)")
        ax.set_title("%s activations: rate-distortion (%d tensors)" % (kind, files), fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, "rd_psnr_%s.png" % kind)
        save(fig, path, args.dpi)
        written.append(path)
    if not written:
        print("plot_rd: no aggregates in %s" % args.json, file=sys.stderr)
        return 1
    for p in written:
        print(p)
    if meta.get("source"):
        print("plot_rd: %s, bounds %s" % (meta["source"], ",".join("%g" % b for b in meta.get("bounds", []))),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
