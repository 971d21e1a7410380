#!/usr/bin/python3
"""End-to-end tests of the ebac command-line tool.

Every check judges the tool from the outside: reconstructions are compared
element by element in numpy against the bound computed here, NaN/Inf by their
raw bits, and failures by exit status, stderr and the files left behind.

    cli_test.py --ebac build/bin/ebac --corpus data/corpus --workdir DIR --group NAME

Groups: info, roundtrip, eval_json, errors, no_overwrite, adversarial, golden (or all).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import warnings

import numpy as np

# Overflow to infinity and NaN casts are intended here.
np.seterr(all="ignore")
warnings.simplefilter("ignore", RuntimeWarning)

EBAC = None
CORPUS = None
WORK = None
FAILURES = []

PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain"]
JSON_KEYS = {"pipeline", "ratio", "max_abs_error", "bound_held", "psnr", "compress_MBps",
             "decompress_MBps", "bytes_in", "bytes_out", "eb_abs"}


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def run(*args):
    p = subprocess.run([EBAC] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def path(name):
    return os.path.join(WORK, name)


# --- element types -----------------------------------------------------------

def to_bits(x, dtype):
    """Raw storage words of a float32 array converted to dtype (RNE)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x.view(np.uint32).copy()
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16).copy()
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def values(bits, dtype):
    """float64 values of raw storage words."""
    if dtype == "f32":
        return bits.view(np.float32).astype(np.float64)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def word(dtype):
    return np.uint32 if dtype == "f32" else np.uint16


def read_bits(p, dtype):
    return np.fromfile(p, dtype=word(dtype))


def dims_str(dims):
    return ",".join(str(d) for d in dims)


def promised_bound(x, eb, mode):
    if mode == "abs":
        return eb
    f = x[np.isfinite(x)]
    return eb * (f.max() - f.min()) if f.size else 0.0


def verify(xbits, ybits, dtype, eb_abs, sign_preserving, label):
    """The tool's promises, checked in numpy. Returns True when all hold."""
    ok = check(xbits.shape == ybits.shape, f"{label}: size {ybits.shape} != {xbits.shape}")
    if not ok:
        return False
    x, y = values(xbits, dtype), values(ybits, dtype)
    fin = np.isfinite(x)
    ok &= check(np.array_equal(xbits[~fin], ybits[~fin]), f"{label}: NaN/Inf not restored bit-exactly")
    ok &= check(bool(np.all(np.isfinite(y[fin]))), f"{label}: finite values reconstructed as non-finite")
    err = np.abs(x[fin] - y[fin])
    if err.size:
        worst = int(np.argmax(err))
        ok &= check(err[worst] <= eb_abs,
                    f"{label}: bound violated: |x-y| = {err[worst]!r} > {eb_abs!r} "
                    f"(x={x[fin][worst]!r}, y={y[fin][worst]!r})")
    if sign_preserving:
        ok &= check(np.array_equal(x[fin] == 0, y[fin] == 0), f"{label}: zeros not preserved")
        ok &= check(np.array_equal(x[fin] < 0, y[fin] < 0), f"{label}: signs not preserved")
    return ok


def roundtrip(xbits, dtype, dims, eb, mode, pipeline, label):
    """compress + decompress through the CLI and verify the result."""
    src = path(label + ".raw")
    xbits.tofile(src)
    stream, out = path(label + ".ebac"), path(label + ".out")
    rc, so, se = run("compress", "--input", src, "--output", stream, "--dtype", dtype, "--dims", dims_str(dims),
                     "--eb", repr(eb), "--mode", mode, "--pipeline", pipeline)
    if not check(rc == 0, f"{label}: compress exited {rc}: {se.strip()}"):
        return None
    check(se == "", f"{label}: compress wrote to stderr: {se!r}")
    rc, so, se = run("decompress", "--input", stream, "--output", out)
    if not check(rc == 0, f"{label}: decompress exited {rc}: {se.strip()}"):
        return None
    ybits = read_bits(out, dtype)
    eb_abs = promised_bound(values(xbits, dtype), eb, mode)
    verify(xbits, ybits, dtype, eb_abs, ":linear:" not in pipeline, f"{label} [{pipeline}, {mode} {eb}]")
    return stream, ybits


# --- corpus ------------------------------------------------------------------

def manifest():
    m = os.path.join(CORPUS, "manifest.tsv")
    if not check(os.path.isfile(m), f"corpus manifest {m} is missing"):
        return []
    rows = []
    with open(m) as f:
        header = f.readline().rstrip("\n").split("\t")
        check(header == ["file", "dtype", "dims", "model", "module", "kind", "role", "pair"],
              f"unexpected manifest header {header}")
        for line in f:
            c = line.rstrip("\n").split("\t")
            if len(c) < 8 or c[0] == "-" or c[1] not in ("f32", "f16", "bf16"):
                continue
            rows.append({"file": c[0], "dtype": c[1], "dims": [int(d) for d in c[2].split(",")], "kind": c[5]})
    check(len(rows) > 0, "the corpus manifest lists no float files")
    return rows


def corpus_picks():
    """A post-ReLU f32 file, an 'other' f32 file, and any f16/bf16 files."""
    rows = manifest()
    picks = []
    for want in (("f32", "post_relu"), ("f32", "other"), ("f16", None), ("bf16", None)):
        for r in rows:
            if r["dtype"] == want[0] and (want[1] is None or r["kind"] == want[1]) and np.prod(r["dims"]) >= 1000:
                picks.append(r)
                break
    check(any(r["dtype"] == "f32" for r in picks), "no f32 corpus file of >= 1000 elements")
    return picks


# --- groups ------------------------------------------------------------------

def group_roundtrip():
    for r in corpus_picks():
        xbits = np.fromfile(os.path.join(CORPUS, r["file"]), dtype=word(r["dtype"]))
        check(xbits.size == np.prod(r["dims"]), f"{r['file']}: size does not match its dims")
        for pipeline, eb, mode in (("fast", 1e-3, "rel"), ("ratio", 1e-2, "abs"), ("rle", 1e-4, "rel"),
                                   ("plain", 1e-1, "rel"), ("lorenzo3:linear:huffman", 1e-3, "abs")):
            roundtrip(xbits, r["dtype"], r["dims"], eb, mode, pipeline, "corpus-" + r["dtype"])
    rng = np.random.default_rng(1)
    dims = [3, 17, 40]
    base = (np.sin(np.arange(np.prod(dims)) * 0.05) * 3 + rng.normal(0, 0.1, np.prod(dims))).astype(np.float32)
    base[base < 0] = 0
    for dtype in ("f16", "bf16", "f32"):
        xbits = to_bits(base, dtype)
        for pipeline in PIPELINES + ["none:linear:rle", "lorenzo2:sign:huffman"]:
            for mode, eb in (("abs", 1e-2), ("rel", 1e-3)):
                res = roundtrip(xbits, dtype, dims, eb, mode, pipeline, "synthetic-" + dtype)
        # info describes the stream.
        if res:
            rc, so, se = run("info", "--input", res[0])
            check(rc == 0 and f"dtype {dtype} " in so and "dims 3,17,40" in so and "checksum yes" in so,
                  f"info output unexpected: {so!r} {se!r}")


def group_eval_json():
    rows = corpus_picks()
    if not rows:
        return
    r = rows[0]
    f = os.path.join(CORPUS, r["file"])
    size = os.path.getsize(f)
    rc, so, se = run("eval", "--input", f, "--dtype", r["dtype"], "--dims", dims_str(r["dims"]), "--eb", "1e-3",
                     "--mode", "abs", "--pipeline", "all", "--json", "--min-time", "0")
    check(rc == 0, f"eval exited {rc}: {se.strip()}")
    lines = so.splitlines()
    check(len(lines) == len(PIPELINES), f"eval --json printed {len(lines)} lines, expected {len(PIPELINES)}: {so!r}")
    seen = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError as e:
            check(False, f"eval --json line is not JSON ({e}): {line!r}")
            continue
        if not check(isinstance(obj, dict), f"not a JSON object: {line!r}"):
            continue
        check(set(obj) == JSON_KEYS, f"eval --json keys {sorted(obj)} != {sorted(JSON_KEYS)}")
        seen.append(obj.get("pipeline"))
        check(obj.get("bound_held") is True, f"bound_held is not true: {line}")
        check(obj.get("bytes_in") == size, f"bytes_in {obj.get('bytes_in')} != file size {size}")
        check(isinstance(obj.get("bytes_out"), int) and obj["bytes_out"] > 0, f"bad bytes_out: {line}")
        if isinstance(obj.get("bytes_out"), int) and obj["bytes_out"] > 0:
            check(abs(obj["ratio"] - size / obj["bytes_out"]) <= 1e-6 * obj["ratio"], f"ratio inconsistent: {line}")
        check(obj.get("eb_abs") == 1e-3, f"eb_abs {obj.get('eb_abs')} != 1e-3 in abs mode")
        check(isinstance(obj.get("max_abs_error"), (int, float)) and 0 <= obj["max_abs_error"] <= 1e-3,
              f"max_abs_error out of range: {line}")
        for k in ("compress_MBps", "decompress_MBps"):
            check(isinstance(obj.get(k), (int, float)) and obj[k] > 0, f"{k} not a positive number: {line}")
        check(obj.get("psnr") is None or isinstance(obj.get("psnr"), (int, float)), f"psnr not a number/null: {line}")
        # max_abs_error agrees with an independent measurement of the same stream.
        p = obj.get("pipeline")
        if p in PIPELINES:
            xbits = np.fromfile(f, dtype=word(r["dtype"]))
            res = roundtrip(xbits, r["dtype"], r["dims"], 1e-3, "abs", p, "eval-" + p)
            if res:
                x, y = values(xbits, r["dtype"]), values(res[1], r["dtype"])
                fin = np.isfinite(x)
                m = float(np.max(np.abs(x[fin] - y[fin]))) if fin.any() else 0.0
                check(abs(m - obj["max_abs_error"]) <= 1e-9 * max(m, 1e-30) + 1e-300,
                      f"{p}: eval max_abs_error {obj['max_abs_error']!r} != measured {m!r}")
                check(obj["bytes_out"] == os.path.getsize(res[0]),
                      f"{p}: eval bytes_out {obj['bytes_out']} != compressed file size {os.path.getsize(res[0])}")
    check(seen == PIPELINES, f"eval --pipeline all reported {seen}, expected {PIPELINES}")
    # One explicit pipeline, relative mode.
    rc, so, se = run("eval", "--input", f, "--dtype", r["dtype"], "--dims", dims_str(r["dims"]), "--eb", "1e-2",
                     "--mode", "rel", "--pipeline", "lorenzo2:linear:huffman", "--json", "--min-time", "0")
    check(rc == 0 and len(so.splitlines()) == 1, f"single-pipeline eval: rc {rc}, stdout {so!r}, stderr {se!r}")
    if rc == 0 and so.strip():
        obj = json.loads(so)
        check(set(obj) == JSON_KEYS and obj["pipeline"] == "lorenzo2:linear:huffman", f"unexpected {so!r}")
        x = values(np.fromfile(f, dtype=word(r["dtype"])), r["dtype"])
        want = 1e-2 * (x[np.isfinite(x)].max() - x[np.isfinite(x)].min())
        check(obj["eb_abs"] <= want * (1 + 1e-9), f"eb_abs {obj['eb_abs']} exceeds 1e-2 * range = {want}")


def expect_failure(label, args, *needles):
    """The command fails with a non-zero status and exactly one stderr line
    that mentions every needle (case-insensitive)."""
    rc, so, se = run(*args)
    check(rc != 0, f"{label}: exit status 0, expected failure")
    lines = se.strip("\n").splitlines()
    check(len(lines) == 1, f"{label}: expected one line on stderr, got {len(lines)}: {se!r}")
    text = se.lower()
    for n in needles:
        check(n.lower() in text, f"{label}: stderr does not mention {n!r}: {se.strip()!r}")
    return rc


def make_inputs():
    x = np.linspace(-3, 3, 4000, dtype=np.float32)
    raw = path("in.f32")
    x.tofile(raw)
    stream = path("in.ebac")
    rc, _, se = run("compress", "--input", raw, "--output", stream, "--dtype", "f32", "--dims", "40,100", "--eb", "1e-3")
    check(rc == 0, f"setup compress failed: {se}")
    data = open(stream, "rb").read()
    trunc = path("truncated.ebac")
    open(trunc, "wb").write(data[: len(data) // 2])
    corrupt = path("corrupt.ebac")
    b = bytearray(data)
    b[len(b) // 2] ^= 0x5A
    open(corrupt, "wb").write(bytes(b))
    notebac = path("not-ebac.bin")
    open(notebac, "wb").write(b"PK\x03\x04 this is a zip file header and then some text, not an ebac stream" * 4)
    empty = path("empty.ebac")
    open(empty, "wb").close()
    return raw, stream, trunc, corrupt, notebac, empty


def group_errors():
    raw, stream, trunc, corrupt, notebac, empty = make_inputs()
    out = path("out.bin")
    c = ["compress", "--input", raw, "--output", out, "--dtype", "f32", "--dims", "40,100"]
    missing = path("no-such-file.f32")
    expect_failure("missing input", ["compress", "--input", missing, "--output", out, "--dtype", "f32", "--dims", "4000",
                                     "--eb", "1e-3"], "no-such-file.f32")
    expect_failure("missing stream", ["decompress", "--input", missing, "--output", out], "no-such-file.f32")
    expect_failure("size mismatch (dims)", ["compress", "--input", raw, "--output", out, "--dtype", "f32", "--dims",
                                            "40,101", "--eb", "1e-3"], "16000", "16160")
    expect_failure("size mismatch (dtype)", ["compress", "--input", raw, "--output", out, "--dtype", "f16", "--dims",
                                             "40,100", "--eb", "1e-3"], "bytes")
    expect_failure("eb = 0", c + ["--eb", "0"], "--eb")
    expect_failure("eb < 0", c + ["--eb", "-1e-3"], "--eb")
    expect_failure("eb NaN", c + ["--eb", "nan"], "--eb")
    expect_failure("eb inf", c + ["--eb", "inf"], "--eb")
    expect_failure("eb not a number", c + ["--eb", "abc"], "--eb")
    expect_failure("unknown pipeline", c + ["--eb", "1e-3", "--pipeline", "zstd-max"], "pipeline", "zstd-max")
    expect_failure("unknown pipeline triple", c + ["--eb", "1e-3", "--pipeline", "lorenzo9:sign:rle"], "lorenzo9:sign:rle")
    expect_failure("unknown dtype", ["compress", "--input", raw, "--output", out, "--dtype", "f64", "--dims", "40,100",
                                     "--eb", "1e-3"], "dtype", "f64")
    expect_failure("unknown mode", c + ["--eb", "1e-3", "--mode", "relative-ish"], "mode")
    expect_failure("bad dims", ["compress", "--input", raw, "--output", out, "--dtype", "f32", "--dims", "40,x",
                                "--eb", "1e-3"], "dims")
    expect_failure("truncated stream", ["decompress", "--input", trunc, "--output", out], "stream")
    expect_failure("corrupted stream", ["decompress", "--input", corrupt, "--output", out], "checksum")
    expect_failure("not an ebac stream", ["decompress", "--input", notebac, "--output", out], "not an ebac stream")
    expect_failure("empty stream", ["decompress", "--input", empty, "--output", out], "stream")
    expect_failure("info on garbage", ["info", "--input", notebac], "not an ebac stream")
    expect_failure("eval unknown pipeline", ["eval", "--input", raw, "--dtype", "f32", "--dims", "4000", "--eb", "1e-3",
                                             "--pipeline", "nope"], "nope")
    expect_failure("eval size mismatch", ["eval", "--input", raw, "--dtype", "bf16", "--dims", "4000", "--eb", "1e-3"],
                   "bytes")
    expect_failure("output directory missing", ["compress", "--input", raw, "--output", path("no-dir/x.ebac"), "--dtype",
                                                "f32", "--dims", "4000", "--eb", "1e-3"], "no-dir")
    expect_failure("output is a directory", ["compress", "--input", raw, "--output", WORK, "--dtype", "f32", "--dims",
                                             "4000", "--eb", "1e-3"], "directory")
    expect_failure("output is the input", ["compress", "--input", raw, "--output", raw, "--dtype", "f32", "--dims",
                                           "4000", "--eb", "1e-3"], "--output")
    expect_failure("missing option", ["compress", "--input", raw, "--output", out, "--dtype", "f32", "--dims", "4000"],
                   "--eb")
    expect_failure("unknown command", ["squash", "--input", raw], "squash")
    check(not os.path.exists(out), "a failing command created its output file")


def group_no_overwrite():
    raw, stream, trunc, corrupt, notebac, empty = make_inputs()
    target = path("precious.bin")
    content = b"known content that must survive a failing command\n" * 10

    def reset():
        with open(target, "wb") as f:
            f.write(content)

    def intact(label):
        with open(target, "rb") as f:
            check(f.read() == content, f"{label}: the existing output file was modified")
        leftovers = [n for n in os.listdir(WORK) if n.startswith(".ebac-tmp")]
        check(not leftovers, f"{label}: temporary files left behind: {leftovers}")

    cases = [
        ("compress eb<0", ["compress", "--input", raw, "--output", target, "--dtype", "f32", "--dims", "4000", "--eb", "-1"]),
        ("compress size mismatch", ["compress", "--input", raw, "--output", target, "--dtype", "f32", "--dims", "4001",
                                    "--eb", "1e-3"]),
        ("compress missing input", ["compress", "--input", path("nope.f32"), "--output", target, "--dtype", "f32",
                                    "--dims", "4000", "--eb", "1e-3"]),
        ("compress unknown pipeline", ["compress", "--input", raw, "--output", target, "--dtype", "f32", "--dims", "4000",
                                       "--eb", "1e-3", "--pipeline", "bogus"]),
        ("decompress truncated", ["decompress", "--input", trunc, "--output", target]),
        ("decompress corrupted", ["decompress", "--input", corrupt, "--output", target]),
        ("decompress not ebac", ["decompress", "--input", notebac, "--output", target]),
        ("decompress missing", ["decompress", "--input", path("nope.ebac"), "--output", target]),
    ]
    for label, args in cases:
        reset()
        rc, so, se = run(*args)
        check(rc != 0, f"{label}: expected failure, got exit 0")
        intact(label)
    # Output == input is refused and leaves the input alone.
    reset()
    rc, so, se = run("decompress", "--input", target, "--output", target)
    check(rc != 0, "decompress onto its own input: expected failure")
    intact("decompress onto its own input")
    # A successful command does replace the file.
    reset()
    rc, so, se = run("compress", "--input", raw, "--output", target, "--dtype", "f32", "--dims", "4000", "--eb", "1e-3")
    check(rc == 0, f"compress over an existing file failed: {se}")
    with open(target, "rb") as f:
        check(f.read(4) == b"EBAC", "a successful compress did not replace the existing file")


def group_adversarial():
    rng = np.random.default_rng(7)
    n = 6000
    x = (rng.normal(0, 1, n)).astype(np.float32)
    x[rng.random(n) < 0.3] = 0
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 1e-40, -0.0, 0.0,
                         65504, 65520, 1e30, -1e-30], dtype=np.float32)
    idx = rng.choice(n, 600, replace=False)
    x[idx] = specials[rng.integers(0, specials.size, idx.size)]
    for dtype in ("f32", "f16", "bf16"):
        xbits = to_bits(x, dtype)
        # NaN payloads set directly in the storage words.
        payloads = {"f32": [0x7FC12345, 0xFF800001, 0x7F800001, 0x7FFFFFFF],
                    "f16": [0x7C01, 0xFE00, 0x7FFF, 0xFD55],
                    "bf16": [0x7F81, 0xFFC0, 0x7FFF, 0xFFA5]}[dtype]
        for k, p in enumerate(payloads):
            xbits[10 + 97 * k] = p
        for pipeline in PIPELINES + ["lorenzo3:linear:huffman", "none:sign:rle"]:
            for eb, mode in ((1e-3, "abs"), (1e-30, "abs"), (1e-6, "rel"), (1e30, "abs")):
                roundtrip(xbits, dtype, [2, 3, 1000], eb, mode, pipeline, "adversarial-" + dtype)
    # Constant tensor under a relative bound: exact.
    c = np.full(1000, 0.1, dtype=np.float32)
    res = roundtrip(to_bits(c, "f32"), "f32", [1000], 1e-2, "rel", "fast", "constant")
    if res:
        check(np.array_equal(res[1], to_bits(c, "f32")), "constant tensor under a relative bound is not exact")


def group_info():
    """info prints one line of "key value" pairs describing the stream."""
    x = np.linspace(0, 1, 2 * 3 * 40, dtype=np.float32)
    raw = path("info.f32")
    x.tofile(raw)
    for pipeline, want in (("plain", "none"), ("fast", "lorenzo"), ("ratio", "lorenzo"),
                           ("lorenzo1:linear:rle", "lorenzo")):
        stream = path("info.ebac")
        rc, _, se = run("compress", "--input", raw, "--output", stream, "--dtype", "f32", "--dims", "2,3,40",
                        "--eb", "1e-3", "--pipeline", pipeline)
        if not check(rc == 0, f"info setup ({pipeline}): {se}"):
            continue
        rc, so, se = run("info", "--input", stream)
        check(rc == 0 and se == "" and len(so.splitlines()) == 1, f"info ({pipeline}): rc {rc} {so!r} {se!r}")
        tok = so.split()
        for key, val in (("dtype", "f32"), ("dims", "2,3,40"), ("mode", "abs"), ("checksum", "yes"),
                         ("predictor", want), ("bytes", str(os.path.getsize(stream)))):
            check(key in tok and tok.index(key) + 1 < len(tok) and tok[tok.index(key) + 1] == val,
                  f"info ({pipeline}): expected '{key} {val}' in {so.strip()!r}")


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_streams.txt")
GOLDEN_CONFIGS = [(p, mode, eb) for p in PIPELINES + ["lorenzo3:linear:huffman", "none:sign:rle"]
                  for mode, eb in (("rel", 1e-2), ("rel", 1e-4), ("abs", 1e-3))]
WRITE_GOLDEN = None


def group_golden():
    """Every float corpus tensor, compressed by every named pipeline at three
    bounds, gives the stream recorded in golden_streams.txt (its SHA-256),
    on one thread and on two (the first 16 hex digits). The CUDA backend promises the host's bytes, so
    this pins what both must write; a deliberate format change rewrites the
    file with --write-golden and says so in its commit."""
    import hashlib
    got = []
    for r in manifest():
        if r["dtype"] not in ("f32", "f16", "bf16"):
            continue
        raw = os.path.join(CORPUS, r["file"])
        dims = ",".join(str(d) for d in r["dims"])
        for pipeline, mode, eb in GOLDEN_CONFIGS:
            digests = []
            for threads in (1, 2):
                out = path(f"golden-{threads}.ebac")
                rc, _, se = run("compress", "--input", raw, "--output", out, "--dtype", r["dtype"], "--dims", dims,
                                "--eb", eb, "--mode", mode, "--pipeline", pipeline, "--threads", threads)
                if not check(rc == 0, f"golden: {r['file']} {pipeline} {mode} {eb}: {se.strip()}"):
                    break
                with open(out, "rb") as f:
                    digests.append(hashlib.sha256(f.read()).hexdigest()[:16])
                os.remove(out)
            if len(digests) != 2:
                continue
            check(digests[0] == digests[1], f"golden: {r['file']} {pipeline} {mode} {eb}: 1 and 2 threads differ")
            got.append(f"{r['file']} {pipeline} {mode} {eb:g} {digests[0]}")
    if WRITE_GOLDEN:
        with open(WRITE_GOLDEN, "w") as f:
            f.write("\n".join(got) + "\n")
        print(f"wrote {len(got)} digests to {WRITE_GOLDEN}", flush=True)
        return
    with open(GOLDEN) as f:
        want = [line.rstrip("\n") for line in f if line.strip()]
    check(len(got) == len(want), f"golden: {len(got)} streams, {len(want)} recorded")
    for g, w in zip(got, want):
        check(g == w, f"golden: stream changed: {w!r} -> {g!r}")


GROUPS = {"info": group_info, "golden": group_golden, "roundtrip": group_roundtrip, "eval_json": group_eval_json, "errors": group_errors,
          "no_overwrite": group_no_overwrite, "adversarial": group_adversarial}


def main():
    global EBAC, CORPUS, WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--ebac", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--group", default="all", choices=sorted(GROUPS) + ["all"])
    ap.add_argument("--write-golden", metavar="FILE", help="golden group: record the digests in FILE instead of checking")
    a = ap.parse_args()
    global WRITE_GOLDEN
    EBAC, CORPUS, WRITE_GOLDEN = a.ebac, a.corpus, a.write_golden
    if not os.access(EBAC, os.X_OK):
        print(f"FAIL: ebac binary {EBAC} is not executable", flush=True)
        return 1
    for g in (sorted(GROUPS) if a.group == "all" else [a.group]):
        WORK = os.path.join(a.workdir, g)
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        print(f"--- {g}", flush=True)
        GROUPS[g]()
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
