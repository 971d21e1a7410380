#!/usr/bin/env python3
"""Which neighbours a context-modelled entropy coder should look at: the
empirical entropy of quantization codes, alone and conditioned on the codes
already coded beside them, on a corpus of saved activations.

    /usr/bin/python3 studies/context_entropy.py                        # data/training-corpus
    /usr/bin/python3 studies/context_entropy.py --corpus build/training-corpus --bounds 1e-1,1e-2,1e-3,1e-4

For each tensor and value-range-relative bound eb it quantizes x to
q = round(x / (2 eb span)) (the linear quantizer's codes; the sign-preserving
one differs only for values that round to zero), maps q to a symbol
(zigzag, 4096 symbols, larger ones escaped at 32 bits) - or, with
--codes lorenzo2, the 2-D Lorenzo residual of q over the last two axes - and
reports the ratio
raw bytes / entropy bytes for:

  order0     H(s)                       what a static Huffman or order-0 ANS can reach
  left       H(s | b(left))             the previous code along the last axis
  up         H(s | b(up))               the code one row up (same channel)
  left+up    H(s | b(left), b(up))      both
  left+left2 H(s | b(left), b(left2))   two to the left: what a coder sees
                                        that knows no row width
  3-ctx      H(s | b(left), b(up), b(up-left))
  ratio      what ebac's `ratio` pipeline reaches on the same tensor and
             bound (its Huffman codes zero runs as symbols), with --ebac

b() buckets a code's magnitude: 0, 1, 2-3, 4-7, ... (8 buckets). Entropies
are lower bounds: no table cost is counted (contexts x symbols, printed).
Needs numpy only.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALPHABET = 4096


def entropy_bits(counts):
    c = counts[counts > 0].astype(np.float64)
    return float(-(c * np.log2(c / c.sum())).sum())


def conditional_bits(ctx, sym):
    """sum over contexts c of n_c H(s | c), and how many contexts occur."""
    key = ctx.astype(np.int64) * ALPHABET + sym
    counts = np.bincount(key, minlength=int(ctx.max() + 1) * ALPHABET).reshape(-1, ALPHABET)
    used = counts.sum(axis=1) > 0
    return sum(entropy_bits(r) for r in counts[used]), int(used.sum())


def bucket(q):
    m = np.abs(q)
    return np.minimum(np.where(m > 0, np.floor(np.log2(np.maximum(m, 1))).astype(np.int64) + 1, 0), 7)


def conditioned(q, width, height):
    """Ratios (raw f32 bytes / entropy bytes) of the code array q under each context."""
    flat = q.reshape(-1)
    n = flat.size
    zz = np.where(flat >= 0, 2 * flat, -2 * flat - 1)
    escape_bits = 32.0 * float((zz >= ALPHABET).sum())
    sym = np.minimum(zz, ALPHABET - 1)
    col = np.arange(n) % width
    row = (np.arange(n) // width) % height
    left = np.where(col >= 1, np.roll(flat, 1), 0)
    left2 = np.where(col >= 2, np.roll(flat, 2), 0)
    up = np.where(row >= 1, np.roll(flat, width), 0)
    upleft = np.where((row >= 1) & (col >= 1), np.roll(flat, width + 1), 0)
    bl, bl2, bu, bul = bucket(left), bucket(left2), bucket(up), bucket(upleft)
    raw = 4.0 * n

    def ratio(bits):
        return raw / ((bits + escape_bits) / 8)

    out = {"zero_fraction": float(np.mean(flat == 0)), "order0": ratio(entropy_bits(np.bincount(sym)))}
    for name, ctx in [("left", bl), ("up", bu), ("left+up", bl * 8 + bu), ("left+left2", bl * 8 + bl2),
                      ("3-ctx", (bl * 8 + bu) * 8 + bul)]:
        bits, contexts = conditional_bits(ctx, sym)
        out[name] = ratio(bits)
        out[name + "_contexts"] = contexts
    return out


def study(x, rel, codes):
    span = float(x.max() - x.min())
    q = np.round(x / (2 * rel * span)).astype(np.int64)
    width, height = x.shape[-1], x.shape[-2]
    if codes == "lorenzo2":  # the 2-D Lorenzo residual of the codes (dual quantization), per plane
        p = q.reshape(-1, height, width)
        r = p.copy()
        r[:, 1:, :] -= p[:, :-1, :]
        r[:, :, 1:] -= p[:, :, :-1]
        r[:, 1:, 1:] += p[:, :-1, :-1]
        q = r
    return conditioned(q, width, height)


def ebac_ratio(cli, path, dims, rel):
    if not cli:
        return "-"
    out = subprocess.run([cli, "eval", path, "--dtype", "f32", "--dims", dims, "--eb", repr(rel), "--mode", "rel",
                          "--pipeline", "ratio", "--json", "--min-time", "0"], check=True, capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if not r["bound_held"]:
        raise SystemExit("ebac did not hold the bound on %s at %g" % (path, rel))
    return "%.2f" % r["ratio"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=os.path.join(REPO, "data", "training-corpus"))
    ap.add_argument("--bounds", default="1e-1,1e-2,1e-3")
    ap.add_argument("--codes", default="quantized,lorenzo2",
                    help="what to model: quantized (the codes themselves), lorenzo2 (their 2-D Lorenzo residuals)")
    ap.add_argument("--ebac", help="the ebac CLI, for the `ratio` column (e.g. build/release/bin/ebac)")
    args = ap.parse_args(argv)
    rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(args.corpus, "manifest.tsv"))]
    cols = rows[0]
    print("| tensor | kind | rel | codes | zeros | order0 | left | up | left+up (contexts) | left+left2 | 3-ctx (contexts) | ebac ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows[1:]:
        m = dict(zip(cols, r))
        if m.get("dtype") != "f32" or m.get("role", "activation") != "activation":
            continue
        dims = [int(d) for d in m["dims"].split(",")]
        x = np.fromfile(os.path.join(args.corpus, m["file"]), dtype=np.float32).reshape(dims)
        for rel in [float(b) for b in args.bounds.split(",")]:
            ours = ebac_ratio(args.ebac, os.path.join(args.corpus, m["file"]), m["dims"], rel)
            for codes in args.codes.split(","):
                s = study(x, rel, codes)
                print("| %s | %s | %g | %s | %.2f | %.2f | %.2f | %.2f | %.2f (%d) | %.2f | %.2f (%d) | %s |" % (
                    m["file"], m.get("kind", "?"), rel, codes, s["zero_fraction"], s["order0"], s["left"], s["up"],
                    s["left+up"], s["left+up_contexts"], s["left+left2"], s["3-ctx"], s["3-ctx_contexts"], ours))
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
