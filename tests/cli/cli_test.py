#!/usr/bin/python3
"""End-to-end tests of the ebac command-line tool.

Every check judges the tool from the outside: reconstructions are compared
element by element in numpy against the bound computed here, NaN/Inf by their
raw bits, and failures by exit status, stderr and the files left behind.

    cli_test.py --ebac build/bin/ebac --corpus data/corpus --workdir DIR --group NAME

Groups: info, roundtrip, eval_json, errors, no_overwrite, adversarial, golden,
streams, outputs, limits, arguments, integers, grad_error, host_isa, hostile, decode_memory (or all).
Exit status: 0 all checks passed, 1 a check failed, 77 a check could not run
here (it says which; ctest shows the test as skipped).
"""

import argparse
import json
import math
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

PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain", "max", "max-bound", "balanced", "balanced-bound"]


def keeps_signs(pipeline):
    """Whether the pipeline promises zeros and signs: not with the linear
    quantizer (balanced-bound), nor max-bound (which may choose it per tensor)."""
    return ":linear:" not in pipeline and pipeline not in ("max-bound", "balanced-bound")


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
    verify(xbits, ybits, dtype, eb_abs, keeps_signs(pipeline), f"{label} [{pipeline}, {mode} {eb}]")
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
        for pipeline in PIPELINES + ["none:linear:rle", "lorenzo2:sign:huffman", "lorenzo2:sign:ans"]:
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



# --- reliability: streams, outputs, limits, arguments (issue 18) -------------

SANITIZED = False  # --sanitized: ASan reserves terabytes of address space, so no RLIMIT_AS runs


def run_bytes(args, stdin=None, input=None, timeout=60, preexec_fn=None, pass_fds=(), stdout=subprocess.PIPE, env=None):
    """Runs ebac with bytes I/O (env: the environment, None for ours); returns (rc, stdout bytes, stderr text)."""
    p = subprocess.run([EBAC] + [str(a) for a in args], stdin=stdin, input=input, stdout=stdout,
                       stderr=subprocess.PIPE, timeout=timeout, preexec_fn=preexec_fn, pass_fds=pass_fds, env=env)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def one_error_line(label, rc, se, *needles):
    """A failure: non-zero status, not a signal, exactly one 'ebac: ...' line naming every needle."""
    ok = check(rc is not None and rc > 0, f"{label}: exit status {rc}, expected a failure (not a signal)")
    lines = se.strip("\n").splitlines()
    ok &= check(len(lines) == 1 and lines[0].startswith("ebac: "), f"{label}: expected one 'ebac:' line on stderr, got {se!r}")
    for n in needles:
        ok &= check(n.lower() in se.lower(), f"{label}: stderr does not mention {n!r}: {se.strip()!r}")
    return ok


def temporaries(directory=None):
    d = directory or WORK
    return [n for n in os.listdir(d) if n.startswith(".ebac-tmp")]


def small_input(name="io.f32", n=4000):
    x = np.linspace(-3, 3, n, dtype=np.float32)
    x[::17] = 0
    p = path(name)
    x.tofile(p)
    return p, x


def compress_args(src, out, n=4000, extra=()):
    return ["compress", "--input", src, "--output", out, "--dtype", "f32", "--dims", str(n), "--eb", "1e-3"] + list(extra)


def reference_stream(src, n=4000):
    ref = path("reference.ebac")
    rc, so, se = run(*compress_args(src, ref, n))
    check(rc == 0, f"reference compress failed: {se}")
    return open(ref, "rb").read()


def writer_thread(fifo, data, delay=0.0):
    import threading
    import time

    def go():
        time.sleep(delay)
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        except BrokenPipeError:
            pass  # the reader gave up; its own check reports it
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def reader_thread(fifo, sink):
    import threading

    def go():
        with open(fifo, "rb") as f:
            sink.append(f.read())
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def compress_to_file(label, args, **kw):
    """Runs a compress whose --output is a file; returns the file's bytes (None on failure)."""
    out = path("via-file.ebac")
    if os.path.exists(out):
        os.remove(out)
    rc, so, se = run_bytes(args + ["--output", out], **kw)
    if not check(rc == 0, f"{label}: rc {rc}: {se.strip()!r}"):
        return None
    return open(out, "rb").read()


def streams_pipes_and_stdin(src, data, want_stream, want_raw):
    """A shell pipeline, standard input as `-`, --input - and /dev/stdin, standard output by
    default. Returns the pipeline's decoded elements."""
    # A shell-style pipeline: ... | ebac compress - ... | ebac decompress - -o -
    with open(src, "rb") as fin:
        p1 = subprocess.Popen([EBAC, "compress", "-", "--dtype", "f32", "--dims", "4000", "--eb", "1e-3"], stdin=fin,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p2 = subprocess.Popen([EBAC, "decompress", "-", "-o", "-"], stdin=p1.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        p1.stdout.close()
        out2, err2 = p2.communicate(timeout=60)
        p1.wait(timeout=60)
        err1 = p1.stderr.read()
    check(p1.returncode == 0 and p2.returncode == 0, f"pipeline: exit {p1.returncode}/{p2.returncode}: {err1!r} {err2!r}")
    y = np.frombuffer(out2, dtype=np.uint32)
    verify(want_raw, y, "f32", 1e-3, True, "pipeline compress - | decompress - -o -")
    # Standard input through `-`, --input -, and /dev/stdin give the file's stream, byte for byte.
    for label, args in (("-", ["compress", "-", "-o", "-"]), ("--input -", ["compress", "--input", "-", "--output", "-"])):
        rc, so, se = run_bytes(args + ["--dtype", "f32", "--dims", "4000", "--eb", "1e-3"], input=data)
        check(rc == 0 and so == want_stream, f"stdin as {label}: rc {rc}, {len(so)} bytes, {se!r}")

    got = compress_to_file("/dev/stdin (a pipe)", ["compress", "--input", "/dev/stdin", "--dtype", "f32", "--dims", "4000", "--eb",
                                           "1e-3"], input=data)
    check(got in (None, want_stream), "/dev/stdin: not the file's stream")
    # The output defaults to standard output.
    rc, so, se = run_bytes(["compress", src, "--dtype", "f32", "--dims", "4000", "--eb", "1e-3"])
    check(rc == 0 and so == want_stream, f"compress without -o: rc {rc}, {len(so)} bytes, {se!r}")
    rc, so, se = run_bytes(["decompress", path("reference.ebac")])
    check(rc == 0 and np.array_equal(np.frombuffer(so, dtype=np.uint32), y), f"decompress without -o: rc {rc}, {se!r}")
    return y


def streams_fifo_with_writer(data, want_stream, y):
    """A FIFO with a writer, for compress, decompress and info. Returns the FIFO's path."""
    # A FIFO with a writer, for compress and for decompress and info.
    fifo = path("in.fifo")
    os.mkfifo(fifo)
    writer_thread(fifo, data, delay=0.2)
    rc, so, se = run_bytes(["compress", "--input", fifo, "--output", path("fifo.ebac"), "--dtype", "f32", "--dims", "4000",
                            "--eb", "1e-3"], timeout=60)
    check(rc == 0 and open(path("fifo.ebac"), "rb").read() == want_stream, f"FIFO input: rc {rc}, {se!r}") if rc == 0 else \
        check(False, f"FIFO input: rc {rc}, {se!r}")
    writer_thread(fifo, want_stream)
    rc, so, se = run_bytes(["decompress", "--input", fifo, "--output", path("fifo.out")], timeout=60)
    check(rc == 0 and np.array_equal(np.fromfile(path("fifo.out"), dtype=np.uint32), y), f"FIFO stream input: rc {rc}, {se!r}") \
        if rc == 0 else check(False, f"FIFO stream input: rc {rc}, {se!r}")
    writer_thread(fifo, want_stream)
    rc, so, se = run_bytes(["info", "--input", fifo], timeout=60)
    check(rc == 0 and b"dims 4000" in so, f"info on a FIFO: rc {rc}, {so!r}, {se!r}")
    return fifo


def streams_special_files(data, want_stream):
    """Process substitution (/dev/fd/N of a pipe) and a /proc file, whose size is reported as 0."""
    # Process substitution: /dev/fd/N of a pipe.
    r, w = os.pipe()
    import threading

    def feed():
        with os.fdopen(w, "wb") as f:
            f.write(data)
    t = threading.Thread(target=feed, daemon=True)
    t.start()
    got = compress_to_file("/dev/fd/N pipe input", ["compress", "--input", f"/dev/fd/{r}", "--dtype", "f32", "--dims", "4000",
                                            "--eb", "1e-3"], pass_fds=(r,), timeout=60)
    os.close(r)
    check(got in (None, want_stream), "/dev/fd/N pipe input: not the file's stream")
    # A /proc file: its size is reported as 0, its content is not empty.
    proc = "/proc/sys/kernel/ostype"
    content = open(proc, "rb").read() if os.path.exists(proc) else b""
    if len(content) >= 2 and len(content) % 2 == 0:
        got = compress_to_file("/proc file input", ["compress", "--input", proc, "--dtype", "f16", "--dims", str(len(content) // 2),
                                            "--eb", "1e-3", "--mode", "rel"])
        if got is not None:
            rc, _, se = run_bytes(["decompress", "--input", path("via-file.ebac"), "--output", path("proc.out")])
            back = open(path("proc.out"), "rb").read() if rc == 0 else b""
            verify(np.frombuffer(content, dtype=np.uint16), np.frombuffer(back, dtype=np.uint16), "f16",
                   promised_bound(values(np.frombuffer(content, dtype=np.uint16), "f16"), 1e-3, "rel"), True, "/proc file")
    else:
        print(f"note: {proc} unusable here ({len(content)} bytes); /proc input not checked", flush=True)


def streams_refused(src, data):
    """Endless and short inputs are refused, and binary data is not written to a terminal."""
    # Endless inputs: refused as too long (compress), or by the magic (decompress, info).
    rc, so, se = run_bytes(compress_args("/dev/zero", path("zero.ebac")), timeout=30)
    one_error_line("compress /dev/zero", rc, se, "/dev/zero", "more than 16000 bytes")
    check(not os.path.exists(path("zero.ebac")), "compress /dev/zero created its output")
    rc, so, se = run_bytes(["decompress", "--input", "/dev/zero", "--output", path("zero.out")], timeout=30)
    one_error_line("decompress /dev/zero", rc, se, "not an ebac stream")
    rc, so, se = run_bytes(["info", "--input", "/dev/zero"], timeout=30)
    one_error_line("info /dev/zero", rc, se, "not an ebac stream")
    rc, so, se = run_bytes(compress_args("-", "-", n=5000), input=data)
    one_error_line("short standard input", rc, se, "standard input", "16000", "20000")
    # Binary data is not written to a terminal.
    import pty
    master, slave = pty.openpty()
    try:
        rc, so, se = run_bytes(["compress", src, "--dtype", "f32", "--dims", "4000", "--eb", "1e-3"], stdout=slave)
        one_error_line("stdout is a terminal", rc, se, "terminal")
    finally:
        os.close(master)
        os.close(slave)


def streams_fifo_without_writer(fifo):
    """A FIFO without a writer waits, like cat; SIGINT and SIGTERM end the wait, leaving nothing behind."""
    # A FIFO without a writer waits, like cat; SIGINT (Ctrl-C) and SIGTERM end it, leaving nothing behind.
    import signal
    import time
    for sig in (signal.SIGINT, signal.SIGTERM):
        out = path("waiting.ebac")
        p = subprocess.Popen([EBAC] + compress_args(fifo, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        time.sleep(0.5)
        check(p.poll() is None, f"FIFO without a writer: ebac did not wait (exit {p.poll()})")
        pending = temporaries()
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            check(False, f"{signal.Signals(sig).name} did not end the wait for a FIFO writer")
        check(p.returncode == -sig, f"after {signal.Signals(sig).name}: exit status {p.returncode}, expected {-sig}")
        check(len(pending) == 1, f"while waiting for input the output's temporary file should exist: {pending}")
        check(not temporaries(), f"{signal.Signals(sig).name}: temporary files left behind: {temporaries()}")
        check(not os.path.exists(out), f"{signal.Signals(sig).name}: the output was created")


def group_streams():
    """Inputs of unknown size (pipes, FIFOs, /dev/stdin, /proc files,
    process substitution) are read to their end; `-` is standard input and
    standard output; endless inputs are refused; a FIFO without a writer
    waits and SIGINT ends the wait."""
    src, x = small_input()
    data = open(src, "rb").read()
    want_stream = reference_stream(src)
    want_raw = read_bits(src, "f32")
    y = streams_pipes_and_stdin(src, data, want_stream, want_raw)
    fifo = streams_fifo_with_writer(data, want_stream, y)
    streams_special_files(data, want_stream)
    streams_refused(src, data)
    streams_fifo_without_writer(fifo)


def outputs_not_regular(src, want):
    """A FIFO, device nodes and a link to standard output are written directly and stay what they are."""
    import stat
    # A FIFO output receives the stream and stays a FIFO.
    fifo = path("out.fifo")
    os.mkfifo(fifo)
    got = []
    t = reader_thread(fifo, got)
    rc, so, se = run_bytes(compress_args(src, fifo), timeout=60)
    t.join(timeout=20)
    check(rc == 0, f"FIFO output: rc {rc}: {se!r}")
    check(got == [want], f"FIFO output: the reader got {[len(g) for g in got]} bytes, expected {len(want)}")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "FIFO output: the FIFO was replaced by a regular file")
    # Private device nodes (root only): a null device stays one, a full one gives ENOSPC.
    nodes = {"null": (1, 3), "full": (1, 7)}
    made = {}
    for name, (ma, mi) in nodes.items():
        try:
            os.mknod(path(name), 0o666 | stat.S_IFCHR, os.makedev(ma, mi))
            made[name] = path(name)
        except (PermissionError, OSError) as e:
            print(f"note: cannot create a {name} device node here ({e}); device outputs not checked", flush=True)
    if "null" in made:
        rc, so, se = run_bytes(compress_args(src, made["null"]))
        check(rc == 0 and se == "", f"null device output: rc {rc}: {se!r}")
        check(stat.S_ISCHR(os.lstat(made["null"]).st_mode), "null device output: the device was replaced by a regular file")
    if "full" in made:
        rc, so, se = run_bytes(compress_args(src, made["full"]))
        one_error_line("full device output", rc, se, "no space left")
        check(stat.S_ISCHR(os.lstat(made["full"]).st_mode), "full device output: the device was replaced")
    # A link to standard output (what /dev/stdout is) writes to standard output; the link stays.
    link = path("stdout-link")
    os.symlink("/proc/self/fd/1", link)
    rc, so, se = run_bytes(compress_args(src, link))
    check(rc == 0 and so == want, f"output through a link to /proc/self/fd/1: rc {rc}, {len(so)} bytes on stdout, {se!r}")
    check(os.path.islink(link), "output through a link to /proc/self/fd/1: the link was replaced")


def outputs_links_and_modes(src, want):
    """Links to regular files are followed, a dangling one refused; modes and hard links as documented."""
    import stat
    # A link to a regular file: the target is replaced, the link stays.
    target, link = path("target.bin"), path("target-link")
    open(target, "wb").write(b"old")
    os.symlink("target.bin", link)
    rc, so, se = run_bytes(compress_args(src, link))
    check(rc == 0, f"output link: rc {rc}: {se!r}")
    check(os.path.islink(link) and os.readlink(link) == "target.bin", "output link: the link itself was replaced")
    check(open(target, "rb").read() == want, "output link: its target did not receive the stream")
    # A link to nothing is refused, and creates nothing.
    dangling = path("dangling-link")
    os.symlink("no-such-target.bin", dangling)
    rc, so, se = run_bytes(compress_args(src, dangling))
    one_error_line("dangling output link", rc, se, "symbolic link")
    check(not os.path.exists(path("no-such-target.bin")), "dangling output link: its target was created")
    # The replaced file keeps its mode; a new file gets 0666 minus the umask.
    for mode in (0o600, 0o640, 0o755):
        out = path(f"mode-{mode:o}.ebac")
        open(out, "wb").write(b"old")
        os.chmod(out, mode)
        rc, so, se = run_bytes(compress_args(src, out))
        got_mode = stat.S_IMODE(os.stat(out).st_mode)
        check(rc == 0 and got_mode == mode, f"replacing a {mode:o} file: rc {rc}, mode now {got_mode:o}")
    out = path("new-file.ebac")
    rc, so, se = run_bytes(compress_args(src, out), preexec_fn=lambda: os.umask(0o027))
    check(rc == 0 and stat.S_IMODE(os.stat(out).st_mode) == 0o640,
          f"new file under umask 027: mode {stat.S_IMODE(os.stat(out).st_mode):o}, expected 640")
    # Hard links (documented): the named link gets the new file, the others keep the old content.
    a, b = path("hard-a.ebac"), path("hard-b.ebac")
    open(a, "wb").write(b"old content")
    os.link(a, b)
    rc, so, se = run_bytes(compress_args(src, a))
    check(rc == 0 and open(a, "rb").read() == want, "hard link: the named output was not replaced")
    check(open(b, "rb").read() == b"old content", "hard link: the other link changed (documented: it keeps the old file)")


def outputs_unpredictable_temporary(src, want):
    """A symlink planted where a predictable temporary name would be is never written through."""
    # The temporary file's name cannot be predicted: a symlink planted where
    # the old name (.ebac-tmp-<pid>-<name>) would be is never written through.
    victim, out = path("victim.txt"), path("hijack.ebac")
    open(victim, "wb").write(b"must not change")
    pid = os.fork()
    if pid == 0:
        try:
            os.symlink(victim, os.path.join(WORK, f".ebac-tmp-{os.getpid()}-hijack.ebac"))
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.execv(EBAC, [EBAC] + compress_args(src, out))
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"planted temporary symlink: exit status {status}")
    check(open(victim, "rb").read() == b"must not change", "planted temporary symlink: ebac wrote through it into another file")
    check(not os.path.islink(out) and open(out, "rb").read() == want, "planted temporary symlink: the output is not the stream")
    for n in temporaries():
        os.remove(path(n))  # the planted link


def outputs_checked_first(src):
    """The output is checked before the input is read, and bad outputs leave no temporary file."""
    import time
    # The output is checked before the input is read: with a missing
    # directory and a FIFO input nobody writes, the error comes at once.
    fifo_in = path("never-written.fifo")
    os.mkfifo(fifo_in)
    start = time.time()
    try:
        rc, so, se = run_bytes(compress_args(fifo_in, path("no-dir/out.ebac")), timeout=15)
        one_error_line("missing output directory, input not read", rc, se, "no-dir", "does not exist")
    except subprocess.TimeoutExpired:
        check(False, "missing output directory: ebac read (waited for) its input before checking the output")
    check(time.time() - start < 15, "missing output directory: not reported at once")
    for label, out, needle in (("output names a directory", WORK + "/", "directory"),
                               ("output under a file", os.path.join(src, "x.ebac"), "not a directory")):
        rc, so, se = run_bytes(compress_args(src, out))
        one_error_line(label, rc, se, needle)
    check(not temporaries(), f"temporary files left behind: {temporaries()}")


def group_outputs():
    """Regular outputs are replaced atomically through an unpredictable
    temporary file (mode kept, links followed, hard links documented);
    anything else is written directly; the output is checked first."""
    src, x = small_input()
    want = reference_stream(src)

    outputs_not_regular(src, want)
    outputs_links_and_modes(src, want)
    outputs_unpredictable_temporary(src, want)
    outputs_checked_first(src)


def group_limits():
    """--max-output refuses bombs before decoding; --threads is capped and
    thread creation failures are one-line errors; running out of memory,
    inside parallel regions included, is a one-line error, never an abort."""
    import resource
    src, x = small_input()
    stream = path("limits.ebac")
    rc, so, se = run(*compress_args(src, stream))
    check(rc == 0, f"setup: {se}")
    out = path("limits.out")
    for limit, ok in (("15999", False), ("16000", True), ("15K", False), ("16K", True), ("1M", True), ("4G", True)):
        rc, so, se = run_bytes(["decompress", "--input", stream, "--output", out, "--max-output", limit])
        if ok:
            check(rc == 0 and os.path.getsize(out) == 16000, f"--max-output {limit}: rc {rc} {se!r}")
        else:
            one_error_line(f"--max-output {limit}", rc, se, "--max-output", "16000 bytes")
    for bad in ("-1", "12Q", "", "1e9", "99999999999999999999"):
        rc, so, se = run_bytes(["decompress", "--input", stream, "--output", out, "--max-output", bad])
        one_error_line(f"--max-output {bad!r}", rc, se, "--max-output")
    rc, so, se = run_bytes(compress_args(src, path("t.ebac"), extra=["--threads", "4096"]))
    one_error_line("--threads 4096", rc, se, "--threads", "1024")
    rc, so, se = run_bytes(compress_args(src, path("t.ebac"), extra=["--threads", "1024"]))
    check(rc == 0, f"--threads 1024: rc {rc}: {se!r}")
    if SANITIZED:
        print("note: sanitized build, the RLIMIT_AS checks are not run", flush=True)
        return

    def limited(mb):
        return lambda: resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    # 1024 threads cannot start in 400 MB of address space (8 MiB stacks): one line, not libgomp's message.
    rc, so, se = run_bytes(compress_args(src, path("t.ebac"), extra=["--threads", "1024"]), preexec_fn=limited(400))
    one_error_line("--threads 1024 under a 400 MB limit", rc, se, "threads")
    # Out of memory anywhere (parallel regions included): exit 1 with one
    # line, never a signal. 16M elements, 2 threads, limits from far too
    # little to enough.
    n = 1 << 24
    big = path("big.f32")
    rng = np.random.default_rng(3)
    rng.normal(0, 1, n).astype(np.float32).tofile(big)
    streams = {}
    for pipeline in ("fast", "ratio"):
        streams[pipeline] = path(f"big-{pipeline}.ebac")
        rc, so, se = run("compress", "--input", big, "--output", streams[pipeline], "--dtype", "f32", "--dims", "16,1024,1024", "--eb", "1e-3",
                         "--pipeline", pipeline)
        check(rc == 0, f"setup big {pipeline}: {se}")
    outcomes = {}
    # decompress holds a window of the stream and of its output (host::decompress_stream): it
    # succeeds in 50 MB of address space and fails in 40, so it is tried below 100 MB too.
    for mb in [40, 60, 80] + list(range(100, 420, 20)):
        for label, args in (("compress fast", compress_args(big, path("big.out"), n, ["--threads", "2"])),
                            ("compress ratio", ["compress", "--input", big, "--output", path("big.out"), "--dtype", "f32", "--dims",
                                                "16,1024,1024", "--eb", "1e-4", "--pipeline", "ratio", "--threads", "2"]),
                            ("decompress fast", ["decompress", "--input", streams["fast"], "--output", path("big.out"), "--threads", "2"]),
                            ("decompress ratio", ["decompress", "--input", streams["ratio"], "--output", path("big.out"), "--threads", "2"])):
            if mb < 100 and label.startswith("compress"):
                continue
            rc, so, se = run_bytes(args, preexec_fn=limited(mb), timeout=120)
            outcomes.setdefault(label, []).append(rc)
            if rc == 0:
                continue
            lines = se.strip("\n").splitlines()
            check(rc == 1 and len(lines) == 1 and lines[0].startswith("ebac: error:") and "memory" in se,
                  f"{label} under {mb} MB: exit {rc}, stderr {se.strip()!r} (expected success or one 'out of memory' line)")
    for label, rcs in outcomes.items():
        check(0 in rcs and 1 in rcs, f"{label}: the limits tried did not cover both failure and success: {rcs}")
    check(not temporaries(), f"temporary files left behind: {temporaries()}")


def arguments_refused(src):
    """Bad bounds, tensors the format cannot hold, --json where it means nothing, an input named twice."""
    c = compress_args(src, path("a.ebac"))[:-2]  # without --eb
    rc, so, se = run_bytes(c + ["--eb", "1e-320"])
    small = se
    one_error_line("--eb 1e-320", rc, se, "--eb", "too small")
    rc, so, se = run_bytes(c + ["--eb", "1e400"])
    one_error_line("--eb 1e400", rc, se, "--eb", "out of range")
    check(small != se, "--eb 1e-320 and 1e400 give the same message")
    for bad in ("nan", "inf", "-1", "0", "abc", " 1"):
        rc, so, se = run_bytes(c + ["--eb", bad])
        one_error_line(f"--eb {bad!r}", rc, se, "--eb")
    # A tensor the format cannot hold is refused before reading (here: an endless input).
    rc, so, se = run_bytes(["compress", "--input", "/dev/zero", "--output", path("huge.ebac"), "--dtype", "f32",
                            "--dims", "1000000,1000000,1000", "--eb", "1e-3"], timeout=30)
    one_error_line("more than 2^48 elements", rc, se, "2^48")
    rc, so, se = run_bytes(c + ["--eb", "1e-3", "--pipeline", "zstd-max"])
    one_error_line("unknown pipeline", rc, se, "zstd-max")
    check(se.count("see ebac --help") == 1, f"unknown pipeline: the hint is not printed once: {se!r}")
    # --json only where it means something.
    stream = path("a.ebac")
    run(*compress_args(src, stream))
    for args in (compress_args(src, path("b.ebac")) + ["--json"], ["decompress", "--input", stream, "--output", path("b.out"), "--json"],
                 ["info", "--input", stream, "--json"]):
        rc, so, se = run_bytes(args)
        one_error_line(f"{args[0]} --json", rc, se, "--json")
    ev = ["eval", "--input", src, "--dtype", "f32", "--dims", "4000", "--eb", "1e-3", "--pipeline", "fast", "--json"]
    for bad in ("-5", "nan", "inf", "x", "1e9"):
        rc, so, se = run_bytes(ev + ["--min-time", bad])
        one_error_line(f"--min-time {bad}", rc, se, "--min-time")
    rc, so, se = run_bytes(ev + ["--min-time", "0"])
    check(rc == 0 and json.loads(so)["pipeline"] == "fast", f"eval --min-time 0: rc {rc} {so!r} {se!r}")
    # The input once: positional or --input, not both; options once.
    rc, so, se = run_bytes(["info", stream, "--input", stream])
    one_error_line("input given twice", rc, se, "--input")
    rc, so, se = run_bytes(c + ["--eb", "1e-3", "--eb", "1e-2"])
    one_error_line("--eb given twice", rc, se, "--eb")


def arguments_eval_json_names(src):
    """eval --json escapes file names: every line is valid JSON naming its file."""
    names = ['quote"d.f32', 'back\\slash.f32', "tab\u00e9-\u03bb.f32", "bad-\udcff-utf8.f32"]
    man = path("manifest.tsv")
    with open(man, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("file\tdtype\tdims\tmodel\tmodule\tkind\trole\tpair\n")
        for nm in names:
            shutil.copyfile(src, os.path.join(WORK, os.fsencode(nm).decode("utf-8", "surrogateescape")))
            f.write(f"{nm}\tf32\t4000\tm\tx\tother\tactivation\t-\n")
    rc, so, se = run_bytes(["eval", "--manifest", man, "--eb", "1e-3", "--pipeline", "fast", "--json", "--min-time", "0"])
    check(rc == 0, f"eval --manifest with odd names: rc {rc}: {se!r}")
    lines = so.decode("utf-8", errors="replace").splitlines()
    check(len(lines) == len(names), f"eval --manifest: {len(lines)} lines for {len(names)} files")
    for nm, line in zip(names, lines):
        try:
            obj = json.loads(line)
        except ValueError as e:
            check(False, f"eval --json line is not JSON ({e}): {line!r}")
            continue
        if "\udcff" in nm:
            check(obj.get("file") == nm.replace("\udcff", "\ufffd"), f"non-UTF-8 name: {obj.get('file')!r}")
        else:
            check(obj.get("file") == nm, f"file name {nm!r} came back as {obj.get('file')!r}")


def arguments_documented(src):
    """Negative zero decodes as +0.0, and lorenzoK on low ranks predicts as documented."""
    # Documented: zeros of either sign decode as +0.0 ("signs are kept" is
    # about negative and positive values; NaN and +-Inf keep every bit).
    z = np.array([-0.0, 0.0, -1.0, 1.0, -0.0, 2.5, -1e-3, 0.0] * 50, dtype=np.float32)
    for dtype in ("f32", "f16", "bf16"):
        xb = to_bits(z, dtype)
        for pipeline in ("fast", "none:linear:rle", "lorenzo2:sign:huffman"):
            res = roundtrip(xb, dtype, [20, 20], 1e-2, "abs", pipeline, f"negzero-{dtype}")
            if res:
                ybits = res[1]
                neg0 = xb == to_bits(np.array([-0.0], dtype=np.float32), dtype)[0]
                pos0 = to_bits(np.array([0.0], dtype=np.float32), dtype)[0]
                check(np.all(ybits[neg0] == pos0), f"-0.0 [{dtype}, {pipeline}]: not decoded as +0.0 (documented)")
    # Documented: lorenzoK predicts along the last min(K, rank - 1) axes from
    # rank 3 on, along the flattened tensor below; info shows what was used.
    for pipeline, dims, want in (("lorenzo3:sign:bitpack", "2,5,20,20", "lorenzo_dims 3"),
                                 ("lorenzo3:sign:bitpack", "10,20,20", "lorenzo_dims 2"),
                                 ("lorenzo3:sign:bitpack", "200,20", "lorenzo_dims 1 axes flat"),
                                 ("lorenzo2:sign:bitpack", "200,20", "lorenzo_dims 1 axes flat"),
                                 ("lorenzo1:sign:bitpack", "200,20", "lorenzo_dims 1 axes 1 ")):
        s = path("lk.ebac")
        rc, so, se = run("compress", "--input", src, "--output", s, "--dtype", "f32", "--dims", dims, "--eb", "1e-3", "--pipeline", pipeline)
        rc2, so2, se2 = run("info", "--input", s)
        check(rc == 0 and rc2 == 0 and want in so2, f"{pipeline} on {dims}: expected '{want}' in info: {so2!r} {se!r}")


def group_arguments():
    """Argument checks from issue 18, and two documented behaviours
    (negative zero, lorenzoK on low ranks)."""
    src, x = small_input()
    arguments_refused(src)
    arguments_eval_json_names(src)
    arguments_documented(src)


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
                # Through standard output: the same bytes as a file, without
                # an fsync per stream (hundreds of them).
                rc, so, se = run_bytes(["compress", "--input", raw, "--output", "-", "--dtype", r["dtype"], "--dims", dims,
                                        "--eb", eb, "--mode", mode, "--pipeline", pipeline, "--threads", threads])
                if not check(rc == 0, f"golden: {r['file']} {pipeline} {mode} {eb}: {se.strip()}"):
                    break
                digests.append(hashlib.sha256(so).hexdigest()[:16])
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

def run_isa(isa, args, input=None):
    """run_bytes with EBAC_HOST_ISA=isa."""
    return run_bytes(args, input=input, timeout=300, env=dict(os.environ, EBAC_HOST_ISA=isa))


SKIPPED = []


def group_host_isa():
    """The two builds of the codec the CLI may carry (ebac/host/isa_codec.hpp):
    --version names the one EBAC_HOST_ISA chooses and an unknown value is
    refused; where the x86-64-v3 build runs, it writes the baseline build's
    streams byte for byte (f32, f16, bf16; every named pipeline and two
    explicit ones; relative and absolute bounds), each build decodes the
    other's streams to the same bits within the bound, and a damaged stream
    fails with the same message and status from both."""
    rc, so, se = run_isa("baseline", ["--version"])
    check(rc == 0 and b"host codec baseline" in so, f"host_isa: EBAC_HOST_ISA=baseline --version: {rc} {so!r} {se!r}")
    rc, so, se = run_isa("avx9000", ["--version"])
    one_error_line("host_isa: EBAC_HOST_ISA=avx9000", rc, se, "EBAC_HOST_ISA", "avx9000", "auto, baseline or x86-64-v3")
    rc, so, se = run_isa("x86-64-v3", ["--version"])
    if rc != 0:
        # Not built in (EBAC_CLI_X86_64_V3=OFF) or a CPU without it: the refusal must say which.
        one_error_line("host_isa: EBAC_HOST_ISA=x86-64-v3 where it cannot run", rc, se, "x86-64-v3")
        rc, so, _ = run_isa("auto", ["--version"])
        check(rc == 0 and b"host codec baseline" in so, f"host_isa: auto must fall back to baseline: {so!r}")
        SKIPPED.append(f"host_isa: the x86-64-v3 build does not run here ({se.strip()}): streams not compared")
        return
    check(b"host codec x86-64-v3" in so, f"host_isa: EBAC_HOST_ISA=x86-64-v3 --version: {so!r}")
    rc, so, _ = run_isa("auto", ["--version"])
    check(rc == 0 and b"host codec x86-64-v3" in so, f"host_isa: auto must take x86-64-v3 where it runs: {so!r}")

    compared = 0
    for r in corpus_picks():
        x32 = np.fromfile(os.path.join(CORPUS, r["file"]), dtype=word(r["dtype"]))
        sources = [(r["dtype"], x32)]
        if r["dtype"] == "f32":  # the same values as f16 and bf16 too
            sources += [(t, to_bits(x32.view(np.float32), t)) for t in ("f16", "bf16")]
        for dtype, xbits in sources:
            src = path(f"{r['file']}.{dtype}.raw")
            xbits.tofile(src)
            for pipeline in PIPELINES + ["lorenzo2:linear:ans", "none:sign:huffman"]:
                for mode, eb in (("rel", 1e-2), ("abs", 1e-3)):
                    label = f"host_isa: {r['file']} as {dtype} [{pipeline}, {mode} {eb}]"
                    args = ["compress", "--input", src, "--output", "-", "--dtype", dtype, "--dims", dims_str(r["dims"]),
                            "--eb", repr(eb), "--mode", mode, "--pipeline", pipeline, "--threads", "1"]
                    streams = {}
                    for isa in ("baseline", "x86-64-v3"):
                        rc, so, se = run_isa(isa, args)
                        if check(rc == 0, f"{label}: {isa} compress: {se.strip()}"):
                            streams[isa] = so
                    if len(streams) != 2:
                        continue
                    compared += 1
                    if not check(streams["baseline"] == streams["x86-64-v3"], f"{label}: the two builds write different streams"):
                        continue
                    eb_abs = promised_bound(values(xbits, dtype), eb, mode)
                    outs = {}
                    for isa in ("baseline", "x86-64-v3"):
                        rc, so, se = run_isa(isa, ["decompress", "--input", "-", "--output", "-"], input=streams["baseline"])
                        if check(rc == 0, f"{label}: {isa} decompress: {se.strip()}"):
                            outs[isa] = so
                    if len(outs) == 2:
                        check(outs["baseline"] == outs["x86-64-v3"], f"{label}: the two builds decode different bits")
                        verify(xbits, np.frombuffer(outs["x86-64-v3"], dtype=word(dtype)), dtype, eb_abs, keeps_signs(pipeline), label)
                    # A damaged stream: the payload's last byte flipped (the checksum catches it).
                    bad = bytearray(streams["baseline"])
                    bad[-1] ^= 0x5A
                    fails = [run_isa(isa, ["decompress", "--input", "-", "--output", "-"], input=bytes(bad)) for isa in ("baseline", "x86-64-v3")]
                    if one_error_line(f"{label}: damaged stream, baseline", fails[0][0], fails[0][2]):
                        check((fails[1][0], fails[1][2]) == (fails[0][0], fails[0][2]),
                              f"{label}: damaged stream: x86-64-v3 says {fails[1][2].strip()!r} ({fails[1][0]}), "
                              f"baseline {fails[0][2].strip()!r} ({fails[0][0]})")
    check(compared >= 3 * 2 * 9 * 2, f"host_isa: only {compared} stream pairs compared")
    print(f"host_isa: {compared} stream pairs compared", flush=True)


def group_integers():
    """Integer and bool tensors: lossless round trips for every dtype (the
    bytes compared here), max-pool indices with --pool (offsets inside their
    windows: about 2 bits an index for 2x2 windows, measured against the raw
    size here), eval's exact check, and clear refusals."""
    rng = np.random.default_rng(7)
    kinds = {"bool": np.uint8, "u8": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}
    dims = [8, 3, 50]
    for dt, npt in kinds.items():
        info = np.iinfo(npt)
        cases = {"mask": (rng.random(1200) > 0.1).astype(npt),
                 "wide": rng.integers(0 if dt == "bool" else info.min, 2 if dt == "bool" else info.max, 1200, dtype=np.int64,
                                      endpoint=True).astype(npt)}
        for name, x in cases.items():
            src, out, back = path(f"{dt}_{name}.raw"), path(f"{dt}_{name}.ebac"), path(f"{dt}_{name}.back")
            x.tofile(src)
            for pipe in ("fast", "ratio", "plain"):
                rc, so, se = run("compress", src, "-o", out, "--dtype", dt, "--dims", dims_str(dims), "--pipeline", pipe)
                if not check(rc == 0, f"integers: compress {dt} {name} {pipe}: rc {rc}: {se.strip()}"):
                    continue
                raw = x.nbytes
                # Never more than the raw bytes, the header (112 + 8 a dimension) and a checksum.
                check(os.path.getsize(out) <= raw + 112 + 8 * len(dims) + 8,
                      f"integers: {dt} {name} {pipe}: {os.path.getsize(out)} bytes, more than raw + header + checksum")
                rc, so, se = run("decompress", out, "-o", back)
                check(rc == 0 and np.array_equal(np.fromfile(back, dtype=npt), x),
                      f"integers: {dt} {name} {pipe}: not restored exactly (rc {rc}: {se.strip()})")
            rc, so, se = run("info", out)
            check(rc == 0 and f"dtype {dt} " in so and "mode lossless" in so, f"integers: info {dt}: {so.strip()!r}")
    # Max-pool indices: 32 x 16 channels, 28x28 pooled 2x2/2 to 14x14.
    N, C, H, W = 32, 16, 14, 14
    r, c = np.arange(H)[:, None], np.arange(W)[None, :]
    idx = ((2 * r + rng.integers(0, 2, (N, C, H, W))) * 28 + 2 * c + rng.integers(0, 2, (N, C, H, W))).astype(np.int64)
    src, out, back = path("pool.i64"), path("pool.ebac"), path("pool.back")
    idx.tofile(src)
    rc, so, se = run("compress", src, "-o", out, "--dtype", "i64", "--dims", "32,16,14,14", "--pool", "28,28:2:2")
    if check(rc == 0, f"integers: compress --pool: {se.strip()}"):
        bits = 8 * os.path.getsize(out) / idx.size
        # 2 bits an offset, plus the fast pipeline's per-block widths and the header.
        check(bits < 2.5, f"integers: pool indices take {bits:.2f} bits each with --pool, expected about 2 (4 offsets a window)")
        rc, so, se = run("decompress", out, "-o", back)
        check(rc == 0 and np.array_equal(np.fromfile(back, dtype=np.int64), idx.ravel()), "integers: pool indices not restored exactly")
        rc, so, se = run("info", out)
        check("quantizer pool_window" in so, f"integers: info of a --pool stream: {so.strip()!r}")
    # An index outside its window (a wrong geometry) must still come back exactly.
    bad = idx.copy()
    bad.flat[::97] = 783 - bad.flat[::97]
    bad.tofile(src)
    rc, so, se = run("compress", src, "-o", out, "--dtype", "i64", "--dims", "32,16,14,14", "--pool", "28,28:2:2")
    rc2, so2, se2 = run("decompress", out, "-o", back)
    check(rc == 0 and rc2 == 0 and np.array_equal(np.fromfile(back, dtype=np.int64), bad.ravel()),
          f"integers: indices outside their windows not restored exactly ({se.strip()} {se2.strip()})")
    # eval judges integers exactly and says so.
    rc, so, se = run("eval", src, "--dtype", "i64", "--dims", "32,16,14,14", "--pool", "28,28:2:2", "--json", "--min-time", "0")
    rows = [json.loads(l) for l in so.splitlines() if l.strip()] if rc == 0 else []
    check(rc == 0 and rows and all(r["bound_held"] and r["max_abs_error"] == 0 for r in rows), f"integers: eval: rc {rc}: {se.strip()}")
    # Refusals: one clear line each.
    expect_failure("integers: --pool on floats", ["compress", src, "-o", out, "--dtype", "f32", "--dims", "32,16,14,28", "--eb", "1",
                                                  "--pool", "28,28:2:2"], "--pool", "integer")
    expect_failure("integers: --pool malformed", ["compress", src, "-o", out, "--dtype", "i64", "--dims", "32,16,14,14",
                                                  "--pool", "28,28:2"], "--pool")
    expect_failure("integers: --pool kernel list", ["compress", src, "-o", out, "--dtype", "i64", "--dims", "32,16,14,14",
                                                    "--pool", "28,28:2,2,2:2"], "--pool", "kernel")
    expect_failure("integers: --pool zero input", ["compress", src, "-o", out, "--dtype", "i64", "--dims", "32,16,14,14",
                                                   "--pool", "0,28:2:2"], "--pool")
    expect_failure("integers: floats need --eb", ["compress", src, "-o", out, "--dtype", "f32", "--dims", "32,16,14,28"], "--eb")
    expect_failure("integers: unknown dtype", ["compress", src, "-o", out, "--dtype", "u16", "--dims", "4"], "--dtype", "i64")


def layernorm_backward(x, mu, inv, dy, gamma):
    """LayerNorm's backward over the last axis with the forward's saved statistics, in float64."""
    xh = (x.astype(np.float64) - mu[:, None]) * inv[:, None]
    g = gamma[None, :].astype(np.float64) * dy
    dgamma = (dy * xh).sum(axis=0)
    dx = inv[:, None] * (g - g.mean(axis=1, keepdims=True) - xh * (g * xh).mean(axis=1, keepdims=True))
    return dgamma, dx


def fast_round_trip(src, label, dims, eb, original):
    """`ebac compress --pipeline fast` + `decompress` of the f32 file src (the
    stream grad-error checks), as float64 in the original's shape; checks the
    bound against `original`. The outputs go next to src (label.ebac, label-back.f32)."""
    stream, back = path(label + ".ebac"), path(label + "-back.f32")
    for f in (stream, back):
        if os.path.exists(f):
            os.remove(f)
    rc1, _, se1 = run("compress", "--input", src, "--output", stream, "--dtype", "f32", "--dims", ",".join(map(str, dims)),
                      "--eb", eb, "--pipeline", "fast")
    rc2, _, se2 = run("decompress", "--input", stream, "--output", back)
    check(rc1 == 0 and rc2 == 0, f"{label} eb {eb}: compress/decompress failed: {se1} {se2}")
    y = np.fromfile(back, dtype=np.float32).reshape(original.shape).astype(np.float64)
    check(np.abs(y - original.astype(np.float64)).max() <= eb, f"{label} eb {eb}: reconstruction breaks the bound")
    return y


def gelu_grad(v):
    """GELU's derivative at v, in float64."""
    erf = np.frompyfunc(math.erf, 1, 1)
    return 0.5 * (1 + erf(v / math.sqrt(2)).astype(np.float64)) + v * np.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)


def layernorm_saved(a, eps=1e-5):
    """The input in double with the row mean and 1/s a LayerNorm saves."""
    a64 = a.astype(np.float64)
    m = a64.mean(axis=1)
    return a64, m, 1 / np.sqrt(((a64 - m[:, None]) ** 2).mean(axis=1) + eps)


def grad_error_json(label, *cmd):
    """`ebac CMD... --json`'s report (None, and a failed check, when it fails)."""
    rc, so, se = run(*cmd, "--json")
    check(rc == 0, f"grad-error {label}: {se.strip()}")
    return json.loads(so) if rc == 0 else None


def grad_error_layernorm_repeated_rows(rng, x, dy, shape):
    """grad-error --layer layernorm on repeated rows: every other row of x is one of 4 patterns
    whose output gradients are alike (a ViT's background patches)."""
    n, t, d = shape
    rows = n * t
    # Repeated rows (a ViT's background patches): every other row is one of 4
    # patterns whose output gradients are alike. Their errors add coherently;
    # the model reads them merged (distinct_rows.hpp) and still lands near the
    # measurement (without the merge: 0.28-0.34 of it).
    xr, dyr = x.copy(), (0.2 * dy).astype(np.float32)
    pattern_dy = rng.normal(0, 1, (4, d)).astype(np.float32)
    for r in range(0, rows, 2):
        xr[r] = x[(r // 2) % 4]
        dyr[r] += pattern_dy[(r // 2) % 4]
    xrp, dyrp = path("ln-rep.f32"), path("ln-rep-dy.f32")
    xr.tofile(xrp)
    dyr.tofile(dyrp)
    xr64, mur, invr = layernorm_saved(xr)
    rbase = ["grad-error", "--activation", xrp, "--grad-output", dyrp, "--layer", "layernorm", "--input-shape", f"{n},{t},{d}",
             "--weight-shape", str(d)]
    for eb in (0.01, 0.1):
        j = grad_error_json(f"layernorm, repeated rows, eb {eb}", *rbase, "--eb", eb)
        if j is None:
            continue
        check(j["distinct_rows"] == len(np.unique(xr, axis=0)), f"layernorm: distinct_rows {j['distinct_rows']}")
        y = fast_round_trip(xrp, "ln-rep", (n, t, d), eb, xr)
        dg0r, _ = layernorm_backward(xr64, mur, invr, dyr.astype(np.float64), np.ones(d, np.float32))
        dg1r, _ = layernorm_backward(y, mur, invr, dyr.astype(np.float64), np.ones(d, np.float32))
        mg = np.sqrt(((dg1r - dg0r) ** 2).mean())
        check(abs(j["measured_sigma"] / mg - 1) < 1e-6, f"layernorm, repeated rows, eb {eb}: measured {j['measured_sigma']} != numpy {mg}")
        check(0.67 <= j["predicted_sigma"] / mg <= 1.5, f"layernorm, repeated rows, eb {eb}: predicted {j['predicted_sigma']} vs {mg}")


def grad_error_layernorm(rng):
    """grad-error --layer layernorm: distinct and repeated rows, and the shapes it refuses.
    Returns the arguments of its first runs (the producer checks reuse them)."""
    n, t, d = 16, 24, 96  # batch, tokens, features
    rows = n * t
    x = (rng.normal(0, 3, (rows, 1)) + (0.5 + np.abs(rng.normal(0, 1, (rows, 1)))) * rng.normal(0, 1, (rows, d))).astype(np.float32)
    dy = rng.normal(0, 1, (rows, d)).astype(np.float32)
    gamma = rng.normal(0, 1, d).astype(np.float32)
    xp, dyp, gp = path("ln.f32"), path("ln-dy.f32"), path("ln-gamma.f32")
    x.tofile(xp)
    dy.tofile(dyp)
    gamma.tofile(gp)
    x64, mu, inv = layernorm_saved(x)
    dg0, dx0 = layernorm_backward(x64, mu, inv, dy.astype(np.float64), gamma)
    base = ["grad-error", "--activation", xp, "--grad-output", dyp, "--layer", "layernorm", "--input-shape", f"{n},{t},{d}",
            "--weight-shape", str(d), "--gamma", gp]
    for eb in (0.01, 0.1):
        j = grad_error_json(f"layernorm eb {eb}", *base, "--eb", eb)
        if j is None:
            continue
        y = fast_round_trip(xp, "ln", (n, t, d), eb, x)
        dg1, dx1 = layernorm_backward(y, mu, inv, dy.astype(np.float64), gamma)
        mg = np.sqrt(((dg1 - dg0) ** 2).mean())
        mx = np.sqrt(((dx1 - dx0) ** 2).mean())
        check(abs(j["measured_sigma"] / mg - 1) < 1e-6, f"layernorm eb {eb}: measured_sigma {j['measured_sigma']} != numpy {mg}")
        check(abs(j["input_grad_measured_sigma"] / mx - 1) < 1e-6,
              f"layernorm eb {eb}: input_grad_measured_sigma {j['input_grad_measured_sigma']} != numpy {mx}")
        check(abs(j["grad_rms"] / np.sqrt((dg0 ** 2).mean()) - 1) < 1e-9, f"layernorm eb {eb}: grad_rms differs from numpy")
        check(j["weights"] == d, f"layernorm: weights {j['weights']} != {d}")
        # gamma has 96 entries: chance alone moves a correct prediction by about +-25%.
        for key, m in (("predicted_sigma", mg), ("input_grad_predicted_sigma", mx)):
            check(0.67 <= j[key] / m <= 1.5, f"layernorm eb {eb}: {key} {j[key]} vs measured {m}")
    rc, so, se = run(*base, "--target-rel", "0.01", "--mode", "rel", "--json")
    check(rc == 0, f"grad-error layernorm --target-rel: {se.strip()}")
    if rc == 0:
        j = json.loads(so)
        check(0.67 <= j["measured_over_target"] <= 1.5, f"layernorm target 0.01: measured/target {j['measured_over_target']}")
    check(json.loads(run(*base, "--eb", 0.01, "--json")[1]).get("distinct_rows") == rows, "layernorm: distinct_rows of distinct rows")
    grad_error_layernorm_repeated_rows(rng, x, dy, (n, t, d))
    expect_failure("layernorm: weight shape", base[:9] + ["--weight-shape", str(d + 1), "--eb", "0.01"], "--weight-shape", str(d))
    expect_failure("layernorm: 2-D weight", base[:9] + ["--weight-shape", f"{d},{d}", "--eb", "0.01"], "--weight-shape")
    expect_failure("layernorm: stride", base + ["--stride", "2", "--eb", "0.01"], "--stride", "layernorm")
    expect_failure("layernorm: 1-D input", ["grad-error", "--activation", xp, "--grad-output", dyp, "--layer", "layernorm",
                                           "--input-shape", str(rows * d), "--weight-shape", str(d), "--eb", "0.01"],
                   "--input-shape")
    short = path("ln-gamma-short.f32")
    gamma[:-1].tofile(short)
    expect_failure("layernorm: short gamma", base[:9] + ["--weight-shape", str(d), "--gamma", short, "--eb", "0.01"],
                   "--gamma")
    expect_failure("unknown layer", ["grad-error", "--activation", xp, "--grad-output", dyp, "--layer", "rmsnorm",
                                     "--input-shape", f"{rows},{d}", "--eb", "0.01"], "rmsnorm", "layernorm")
    return base


def grad_error_elementwise(rng):
    """grad-error of the elementwise kinds (gelu, tanh): no weight, the sigmas are the input
    gradient's, dx = dy g(saved). Returns the GELU's pre-activation, the output gradient and its file."""
    shape = (16, 24, 256)
    pre = (rng.normal(0, 1.5, shape)).astype(np.float32)
    edy = rng.normal(0, 1, shape).astype(np.float32)
    edyp = path("act-dy.f32")
    edy.tofile(edyp)

    for fn, saved, grad in (("gelu", pre, gelu_grad), ("tanh", np.tanh(pre).astype(np.float32), lambda t: 1 - t * t)):
        sp = path(f"act-{fn}.f32")
        saved.tofile(sp)
        s64 = saved.astype(np.float64)
        ebase = ["grad-error", "--activation", sp, "--grad-output", edyp, "--layer", fn, "--input-shape", ",".join(map(str, shape))]
        for eb in (0.003, 0.03):
            rc, so, se = run(*ebase, "--eb", eb, "--json")
            check(rc == 0, f"grad-error {fn} eb {eb}: {se.strip()}")
            if rc != 0:
                continue
            j = json.loads(so)
            y = fast_round_trip(sp, f"act-{fn}", shape, eb, saved)
            d64 = edy.astype(np.float64)
            measured = np.sqrt(((d64 * (grad(y) - grad(s64))) ** 2).mean())
            check(j["gradient"] == "input" and j["weights"] == 0, f"{fn}: reports {j['gradient']} gradient, {j['weights']} weights")
            check(abs(j["measured_sigma"] / measured - 1) < 1e-6, f"{fn} eb {eb}: measured_sigma {j['measured_sigma']} != numpy {measured}")
            check(abs(j["grad_rms"] / np.sqrt(((d64 * grad(s64)) ** 2).mean()) - 1) < 1e-9, f"{fn} eb {eb}: grad_rms differs from numpy")
            # 98304 independent terms: a correct prediction lands within a few percent.
            check(0.9 <= j["predicted_sigma"] / measured <= 1.1, f"{fn} eb {eb}: predicted {j['predicted_sigma']} vs measured {measured}")
        rc, so, se = run(*ebase, "--target-rel", "0.02", "--mode", "rel", "--json")
        check(rc == 0, f"grad-error {fn} --target-rel: {se.strip()}")
        if rc == 0:
            j = json.loads(so)
            check(0.9 <= j["measured_over_target"] <= 1.1, f"{fn} target 0.02: measured/target {j['measured_over_target']}")
        expect_failure(f"{fn}: weight shape", ebase + ["--weight-shape", "256", "--eb", "0.01"], "--weight-shape", fn)
    return pre, edy, edyp


def grad_error_matmul(rng):
    """grad-error --layer matmul: C = A B per slice, A saved; the gradient checked is dB = A^T dC."""
    g1, g2, m, k, nn = 2, 3, 40, 40, 16
    logits = rng.normal(0, 2, (g1, g2, m, k))
    probs = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    dc = rng.normal(0, 1, (g1, g2, m, nn)).astype(np.float32)
    ap, dcp = path("mm-a.f32"), path("mm-dc.f32")
    probs.tofile(ap)
    dc.tofile(dcp)
    mbase = ["grad-error", "--activation", ap, "--grad-output", dcp, "--layer", "matmul", "--input-shape", f"{g1},{g2},{m},{k}"]
    for eb in (0.001, 0.003):
        rc, so, se = run(*mbase, "--weight-shape", f"{k},{nn}", "--eb", eb, "--json")
        check(rc == 0, f"grad-error matmul eb {eb}: {se.strip()}")
        if rc != 0:
            continue
        j = json.loads(so)
        y = fast_round_trip(ap, "mm", probs.shape, eb, probs)
        d = np.einsum("abmk,abmn->abkn", y - probs.astype(np.float64), dc.astype(np.float64))
        measured = np.sqrt((d ** 2).mean())
        db = np.einsum("abmk,abmn->abkn", probs.astype(np.float64), dc.astype(np.float64))
        check(j["gradient"] == "other_operand" and j["weights"] == g1 * g2 * k * nn, f"matmul: {j['gradient']}, {j['weights']} weights")
        check(abs(j["measured_sigma"] / measured - 1) < 1e-6, f"matmul eb {eb}: measured_sigma {j['measured_sigma']} != numpy {measured}")
        check(abs(j["grad_rms"] / np.sqrt((db ** 2).mean()) - 1) < 1e-6, f"matmul eb {eb}: grad_rms differs from numpy")
        check(0.8 <= j["predicted_sigma"] / measured <= 1.25, f"matmul eb {eb}: predicted {j['predicted_sigma']} vs measured {measured}")
    expect_failure("matmul: inner extent", mbase + ["--weight-shape", f"{k + 1},{nn}", "--eb", "0.01"], "--weight-shape", str(k))
    expect_failure("matmul: 1-D weight", mbase + ["--weight-shape", str(k), "--eb", "0.01"], "--weight-shape", "K,N")
    expect_failure("matmul: gamma", mbase + ["--weight-shape", f"{k},{nn}", "--gamma", ap, "--eb", "0.01"], "--gamma", "matmul")
    expect_failure("matmul: short grad-output", mbase + ["--weight-shape", f"{k},{nn * 4}", "--eb", "0.01"],
                   "--grad-output")


def grad_error_producer(rng, base, pre, edy, edyp):
    """--producer-input: the GELU's change carried into the weight gradient of the Linear that
    produced its input (the GELU's round trip at eb 0.03 written by grad_error_elementwise)."""
    shape = pre.shape
    rows_, fin = shape[0] * shape[1], 48
    xin = rng.normal(0, 1, (rows_, fin)).astype(np.float32)
    xinp = path("act-producer.f32")
    xin.tofile(xinp)
    gp_ = path("act-gelu.f32")
    pbase = ["grad-error", "--activation", gp_, "--grad-output", edyp, "--layer", "gelu", "--input-shape", ",".join(map(str, shape))]
    rc, so, se = run(*pbase, "--producer-input", xinp, "--producer-features", fin, "--eb", 0.03, "--json")
    check(rc == 0, f"grad-error gelu --producer-input: {se.strip()}")
    if rc == 0:
        j = json.loads(so)
        back = path("act-gelu-back.f32")  # written above at eb 0.03, the same bound
        y = np.fromfile(back, dtype=np.float32).reshape(rows_, -1).astype(np.float64)
        s64 = pre.astype(np.float64).reshape(rows_, -1)
        d64 = edy.astype(np.float64).reshape(rows_, -1)
        ddw = (d64 * (gelu_grad(y) - gelu_grad(s64))).T @ xin.astype(np.float64)
        dw = (d64 * gelu_grad(s64)).T @ xin.astype(np.float64)
        pm = np.sqrt((ddw ** 2).mean())
        check(abs(j["producer_weight_grad_measured_sigma"] / pm - 1) < 1e-6,
              f"gelu producer: measured {j['producer_weight_grad_measured_sigma']} != numpy {pm}")
        check(abs(j["producer_weight_grad_rms"] / np.sqrt((dw ** 2).mean()) - 1) < 1e-6, "gelu producer: grad_rms differs from numpy")
        check(0.9 <= j["producer_weight_grad_predicted_sigma"] / pm <= 1.1,
              f"gelu producer: predicted {j['producer_weight_grad_predicted_sigma']} vs measured {pm}")
    expect_failure("gelu: producer without features", pbase + ["--producer-input", xinp, "--eb", "0.01"], "--producer-features")
    expect_failure("gelu: short producer input", pbase + ["--producer-input", xinp, "--producer-features", str(fin + 1), "--eb", "0.01"],
                   "--producer-input")
    expect_failure("layernorm: producer", base + ["--producer-input", xinp, "--producer-features", "4", "--eb", "0.01"], "--producer-input")
    expect_failure("tanh: not a tanh output", ["grad-error", "--activation", path("act-gelu.f32"), "--grad-output", edyp, "--layer", "tanh",
                                               "--input-shape", ",".join(map(str, shape)), "--eb", "0.01"], "outside", "tanh")
    expect_failure("gelu: short grad-output", ["grad-error", "--activation", path("act-gelu.f32"), "--grad-output", path("ln-dy.f32"),
                                               "--layer", "gelu", "--input-shape", ",".join(map(str, shape)), "--eb", "0.01"], "--grad-output")


def group_grad_error():
    """`grad-error --layer layernorm`, matmul and the elementwise kinds (gelu, tanh): their
    measured errors equal numpy's backward on the stream `compress` writes,
    their predictions land near them, and bad shapes are refused."""
    rng = np.random.default_rng(17)
    base = grad_error_layernorm(rng)
    pre, edy, edyp = grad_error_elementwise(rng)
    grad_error_matmul(rng)
    grad_error_producer(rng, base, pre, edy, edyp)


# --- reliability, second round (issue 53) -------------------------------------


def random_input(name, n, seed=53):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    p = path(name)
    x.tofile(p)
    return p, x


def group_hostile():
    """Standard output onto the input is refused; SIGXFSZ (ulimit -f) is a
    write error and every catchable fatal signal removes the temporary file;
    a stream is read as far as its header says (trailing data, however much,
    is refused without being read into memory); nonsense arguments are
    refused with a message."""
    import resource
    import signal
    import threading
    import time
    n = 20000
    src, x = random_input("victim.f32", n)
    raw = open(src, "rb").read()
    cargs = ["--dtype", "f32", "--dims", str(n), "--eb", "1e-3"]

    # 1. Standard output that is the input file (1<>victim): refused, the input intact.
    with open(src, "r+b") as f:
        rc, so, se = run_bytes(["compress", src, "-o", "-"] + cargs, stdout=f)
    one_error_line("compress with stdout onto its input", rc, se, "standard output is the input file", "victim.f32")
    check(open(src, "rb").read() == raw, "compress with stdout onto its input: the input changed")
    with open(src, "rb") as fin, open(src, "r+b") as f:  # ebac compress - <victim 1<>victim
        rc, so, se = run_bytes(["compress", "-"] + cargs, stdin=fin, stdout=f)
    one_error_line("compress - with stdin and stdout the same file", rc, se, "standard output is the input file", "standard input")
    check(open(src, "rb").read() == raw, "compress -: the input changed")
    with open(src, "r+b") as f:
        rc, so, se = run_bytes(["compress", src, "-o", "/dev/stdout"] + cargs, stdout=f)
    one_error_line("compress -o /dev/stdout onto its input", rc, se, "standard output is the input file")
    check(open(src, "rb").read() == raw, "-o /dev/stdout: the input changed")
    stream_path = path("victim.ebac")
    rc, so, se = run_bytes(["compress", src, "-o", stream_path] + cargs)
    check(rc == 0, f"setup compress: {se}")
    stream = open(stream_path, "rb").read()
    with open(stream_path, "r+b") as f:
        rc, so, se = run_bytes(["decompress", stream_path, "-o", "-"], stdout=f)
    one_error_line("decompress with stdout onto its input", rc, se, "standard output is the input file")
    check(open(stream_path, "rb").read() == stream, "decompress with stdout onto its input: the input changed")
    with open(path("other.ebac"), "wb") as f:  # another regular file as standard output still works
        rc, so, se = run_bytes(["compress", src, "-o", "-"] + cargs, stdout=f)
    check(rc == 0 and open(path("other.ebac"), "rb").read() == stream, f"stdout onto another file: rc {rc} {se!r}")

    # 2. A file-size limit (ulimit -f): the write fails with EFBIG and a message, no
    # signal; the temporary file is removed and an existing output kept.
    check(len(stream) > 4096, f"setup: the stream ({len(stream)} bytes) must exceed the 4096-byte limit")

    def fsize_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    out = path("limited.ebac")
    with open(out, "wb") as f:
        f.write(b"old output")
    for label, args in (("compress", ["compress", src, "-o", out] + cargs),
                        ("decompress", ["decompress", stream_path, "-o", out])):
        rc, so, se = run_bytes(args, preexec_fn=fsize_limit)
        one_error_line(f"{label} past ulimit -f", rc, se, "file too large", "ulimit -f")
        check(open(out, "rb").read() == b"old output", f"{label} past ulimit -f: the old output changed")
        check(not temporaries(), f"{label} past ulimit -f: temporary files left behind: {temporaries()}")
    with open(path("limited.stdout"), "wb") as f:  # standard output onto a file: the same error
        rc, so, se = run_bytes(["compress", src, "-o", "-"] + cargs, stdout=f, preexec_fn=fsize_limit)
    one_error_line("compress to stdout past ulimit -f", rc, se, "file too large")

    # 3. Fatal signals while the output's temporary file exists (ebac waits for
    # standard input, which never comes): each removes it and ends the process by that signal.
    sigs = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGTERM, signal.SIGHUP, signal.SIGINT,
            signal.SIGQUIT, signal.SIGVTALRM, signal.SIGPROF, signal.SIGXCPU, signal.SIGPOLL, signal.SIGRTMIN + 2]
    if hasattr(signal, "SIGPWR"):
        sigs.append(signal.SIGPWR)

    def no_core():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for s in sigs:  # a signal our parent ignores (nohup) would stay ignored in ebac, by design
            signal.signal(s, signal.SIG_DFL)
    for t in temporaries():  # what earlier checks may have left (they report it themselves)
        os.remove(os.path.join(WORK, t))
    for sig in sigs:
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else f"signal {int(sig)}"
        out = path("signalled.ebac")
        p = subprocess.Popen([EBAC, "compress", "-", "-o", out] + cargs, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, preexec_fn=no_core)
        for _ in range(6000):  # until the temporary file exists (a hang guard, not a timing)
            if temporaries() or p.poll() is not None:
                break
            time.sleep(0.01)
        pending = temporaries()
        p.send_signal(sig)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdin.close()
        check(len(pending) == 1, f"{name}: the temporary file never appeared: {pending} (exit {p.returncode})")
        check(p.returncode == -sig, f"{name}: exit status {p.returncode}, expected death by the signal ({-sig})")
        check(not temporaries(), f"{name}: temporary files left behind: {temporaries()}")
        check(not os.path.exists(out), f"{name}: the output was created")
        for t in temporaries():
            os.remove(os.path.join(WORK, t))

    # 4. A valid stream followed by 1 GiB of zeros on a pipe: refused at once,
    # with the peak memory of a small stream (measured on that very process).
    def endless(args, payload, total=1 << 30):
        p = subprocess.Popen([EBAC] + args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        sent = [0]

        def feed():
            try:
                p.stdin.write(payload)
                zeros = bytes(1 << 20)
                while sent[0] < total:
                    p.stdin.write(zeros)
                    sent[0] += len(zeros)
                p.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass
        t = threading.Thread(target=feed, daemon=True)
        t.start()
        err = p.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        t.join(60)
        return p.returncode, err, usage.ru_maxrss * 1024, sent[0]
    for label, args in (("decompress -", ["decompress", "-", "-o", path("endless.out")]), ("info -", ["info", "-"])):
        rc, se, peak, sent = endless(args, stream)
        one_error_line(f"{label}: a stream then 1 GiB of zeros", rc, se, "trailing data", str(len(stream)))
        check(peak < 200 << 20, f"{label}: peak RSS {peak >> 20} MiB with 1 GiB of trailing zeros (expected < 200 MiB)")
        check(sent < 1 << 30, f"{label}: all of the trailing GiB was read ({sent} bytes)")
    check(not os.path.exists(path("endless.out")), "decompress with trailing data created its output")
    # A stream that decodes to more than --max-output, then endless zeros: refused from the header alone.
    rc, se, peak, sent = endless(["decompress", "-", "-o", path("endless.out"), "--max-output", "1K"], stream)
    one_error_line("decompress --max-output 1K, endless input", rc, se, "--max-output")
    check(peak < 200 << 20, f"--max-output 1K, endless input: peak RSS {peak >> 20} MiB")
    # A header claiming sections of any size costs only the bytes that arrive.
    forged = bytearray(stream)
    forged[64 + 8 * 3:64 + 8 * 4] = (1 << 50).to_bytes(8, "little")  # the payload section
    rc, se, peak, sent = endless(["info", "-"], bytes(forged))
    one_error_line("info: a header claiming a 1 PiB payload", rc, se, "claims", "more than any stream")
    check(peak < 200 << 20, f"forged payload size: peak RSS {peak >> 20} MiB")
    # The same on files and pipes without the zeros: a byte too many is refused, an exact stream works.
    with open(path("trailing.ebac"), "wb") as f:
        f.write(stream + b"\0")
    for cmd in ("decompress", "info"):
        rc, so, se = run_bytes([cmd, path("trailing.ebac")] + (["-o", path("t.out")] if cmd == "decompress" else []))
        one_error_line(f"{cmd}: one trailing byte in a file", rc, se, "trailing data")
    rc, so, se = run_bytes(["decompress", "-", "-o", "-"], input=stream)
    ok = rc == 0 and len(so) == 4 * n
    check(ok and float(np.abs(np.frombuffer(so, dtype=np.float32).astype(np.float64) - x).max()) <= 1e-3,
          f"decompress of an exact stream on a pipe: rc {rc}, {len(so)} bytes, {se!r}")
    rc, so, se = run_bytes(["decompress", "-", "-o", "-"], input=stream[:-5])
    one_error_line("decompress of a truncated stream on a pipe", rc, se, "shorter")
    # Standard output cannot be rolled back: an error after windows went out is still one line
    # and a non-zero exit (a u8 stream whose last chunk does not decode; 32 windows of 1 MiB before it).
    late = path("late_fault.ebac")
    write_outlier_stream(late, "u8", 1 << 25, 1 << 20, 0, 0, 0, b"\0", corrupt_last_chunk=True)
    for label, args, stdin in (("file", [late], None), ("pipe", ["-"], late)):
        with open(path("late_fault.out"), "wb") as f, open(stdin or os.devnull, "rb") as fin:
            rc, so, se = run_bytes(["decompress"] + args + ["-o", "-"], stdout=f, stdin=fin)
        one_error_line(f"an error after output went to stdout (from a {label})", rc, se, "chunk", "does not decode")
        sent = os.path.getsize(path("late_fault.out"))
        check(8 << 20 <= sent < 1 << 25, f"an error after output went to stdout (from a {label}): {sent} bytes went out "
                                         f"(expected the windows before the fault: streamed, not held)")

    # 5. Nonsense arguments. A --pool geometry that does not give the last --dims:
    idx = path("pool.i64")
    np.zeros(2 * 14 * 14, dtype=np.int64).tofile(idx)
    for pool, ok in (("28,28:2:2", True), ("29,29:2:2", True), ("27,27:2:2", True),  # floor and ceil mode
                     ("100,100:2:2", False), ("30,30:3:2:1", False), ("28,28:2:2:3", False), ("1,1:2:2", False)):
        rc, so, se = run_bytes(["compress", idx, "-o", path("pool.ebac"), "--dtype", "i64", "--dims", "2,14,14", "--pool", pool])
        if ok:
            check(rc == 0, f"--pool {pool} on 2,14,14: rc {rc} {se!r}")
        else:
            one_error_line(f"--pool {pool} on 2,14,14", rc, se, "--pool", "does not match --dims", "14")
    # info on a stored stream (random bytes do not shrink): no quantizer, encoder or chunks.
    np.random.default_rng(1).integers(0, 256, 4000, dtype=np.uint8).tofile(path("noise.u8"))
    rc, so, se = run_bytes(["compress", path("noise.u8"), "-o", path("noise.ebac"), "--dtype", "u8", "--dims", "4000"])
    rc2, so2, se2 = run_bytes(["info", path("noise.ebac")])
    info = so2.decode()
    check(rc == 0 and rc2 == 0 and "stored yes" in info and "quantizer none encoder none chunk none" in info,
          f"info on a stored stream: {info.strip()!r} {se2!r}")
    # grad-error's shape errors name its own options, not --dims.
    act = path("act.f32")
    np.zeros(64, dtype=np.float32).tofile(act)
    ge = ["grad-error", "--activation", act, "--grad-output", act, "--eb", "0.01"]
    for label, extra, needles in (
            ("overflowing --input-shape", ["--layer", "gelu", "--input-shape", "4294967296,4294967296"], ("--input-shape", "2^64")),
            ("--input-shape past 2^48", ["--layer", "gelu", "--input-shape", "3037000500,3037000500"], ("--input-shape", "2^48")),
            ("huge --weight-shape extent", ["--layer", "linear", "--input-shape", "8,8", "--weight-shape", "99999999999999999999,8"],
             ("--weight-shape", "2^64")),
            ("short activation", ["--layer", "gelu", "--input-shape", "8,9"], ("--input-shape", "288"))):
        rc, so, se = run_bytes(ge + extra)
        one_error_line(f"grad-error: {label}", rc, se, *needles)
        check("--dims" not in se, f"grad-error: {label}: the message names --dims, which grad-error does not take: {se.strip()!r}")
    # --min-time: an option of eval only, as docs/cli.md (the CLI's reference) says.
    rc, so, se = run_bytes(ge + ["--layer", "gelu", "--input-shape", "8,8", "--min-time", "1"])
    one_error_line("grad-error --min-time", rc, se, "--min-time")
    rc, so, se = run_bytes(["eval", "--help"])
    check(rc == 0 and b"--min-time" in so, "eval --help does not list --min-time")
    doc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "cli.md")).read()
    claim = " ".join(l for l in doc.splitlines() if "--min-time" in l or "grad-error` only" in l)
    check("`--min-time` (seconds, 0 to 3600" in doc and "of `eval` only" in doc and
          "are options of `eval` and `grad-error`" not in doc,
          f"docs/cli.md: --min-time must be documented as an option of eval only: {claim!r}")


# --- decode memory (issue 53, item 6) ------------------------------------------

DTYPE_CODES = {"f32": (1, 4), "u8": (5, 1)}


def crafted_header(dtype, dims, chunk, predictor, encoder, sections, lorenzo_axis=None):
    """A version-2 stream header without checksum (docs/format.md): exact
    quantizer for u8, linear (eb 1e-3) for f32; predictor 1 none or 2
    Lorenzo along axis lorenzo_axis with one tile over it."""
    import struct
    code, _ = DTYPE_CODES[dtype]
    rank = len(dims)
    quant = 1 if dtype == "f32" else 3
    h = bytearray(112 + 8 * rank)
    h[0:4] = b"EBAC"
    struct.pack_into("<HHBBBB", h, 4, 2, 112 + 8 * rank, code, 1 if quant == 1 else 0, 0, rank)
    struct.pack_into("<BBBB", h, 12, predictor, 1 if predictor == 2 else 0, quant, encoder)
    if predictor == 2:
        h[16] = lorenzo_axis
        struct.pack_into("<I", h, 20, dims[lorenzo_axis])
    if quant == 1:
        struct.pack_into("<dd", h, 32, 1e-3, 1e-3)
    struct.pack_into("<I", h, 48, chunk)
    struct.pack_into("<6Q", h, 64, *sections)
    for k, d in enumerate(dims):
        struct.pack_into("<Q", h, 112 + 8 * k, d)
    return bytes(h)


def varint_bytes(v):
    b = bytearray()
    while True:
        x, v = v & 0x7F, v >> 7
        if not v:
            b.append(x)
            return bytes(b)
        b.append(x | 0x80)


def crafted_zeros_stream(dtype, n, chunk, encoder, lorenzo_axis=None):
    """A stream of n zeros in chunks of `chunk` codes, a few hundred bytes:
    run-length (encoder 2; one run token a chunk), optionally under a Lorenzo
    predictor along axis 0 of a rank-1 tensor (a block larger than a chunk:
    the chunks depend on each other), or context ANS (encoder 4; one context
    whose only token is 0, so each chunk is its byte count and four states
    of 2^23 that no step changes)."""
    import struct
    chunks = (n + chunk - 1) // chunk
    sizes = [min(chunk, n - c * chunk) for c in range(chunks)]
    if encoder == 2:
        bodies = [bytes([0xF0]) + varint_bytes(m - 15) for m in sizes]
        codebook = b""
    else:
        bodies = [struct.pack("<5I", 16, 1 << 23, 1 << 23, 1 << 23, 1 << 23)] * chunks
        codebook = bytes([1, 6]) + varint_bytes(1) + varint_bytes(1) + varint_bytes(16384)
    table = b"".join(struct.pack("<I", len(b)) for b in bodies)
    payload = b"".join(bodies)
    predictor = 1 if lorenzo_axis is None else 2
    h = crafted_header(dtype, [n], chunk, predictor, encoder, (0, len(codebook), len(table), len(payload), 0, 0), lorenzo_axis)
    return h + codebook + table + payload


# Runs the command in argv[1:] and prints its exit status and peak RSS (KiB).
# A child's ru_maxrss counts the pages of its parent at the fork (Linux keeps
# the larger of the RSS before and after exec): this small interpreter, not
# the test's (numpy and its arrays), is the parent, which adds ~10 MiB.
# With EBAC_STDOUT set, ebac's standard output is that file (the helper's own is the pipe it reports on).
PEAK_RSS_HELPER = """import os, resource, sys
out = os.environ.pop("EBAC_STDOUT", None)
acts = [(os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)] if out else []
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=acts)
_, st = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(st), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss_run(args, stdin=None, stdout=None):
    """Runs ebac (stdin: a file to read on its standard input, through a pipe; stdout: a file that
    becomes its standard output); returns (exit status, stderr text, peak RSS in bytes, through
    PEAK_RSS_HELPER)."""
    feed = subprocess.Popen(["cat", stdin], stdout=subprocess.PIPE) if stdin else None
    env = dict(os.environ, EBAC_STDOUT=stdout) if stdout else None
    p = subprocess.run([sys.executable, "-S", "-E", "-c", PEAK_RSS_HELPER, EBAC] + [str(a) for a in args],
                       stdin=feed.stdout if feed else None, capture_output=True, timeout=120, env=env)
    if feed:
        feed.stdout.close()
        feed.wait()
    rc, kib = (int(v) for v in p.stdout.split())
    return rc, p.stderr.decode(errors="replace"), kib * 1024


def write_low_ratio_stream(name, n, chunk=1 << 24):
    """A u8 stream of n zeros (no prediction, exact quantizer) bit-packed at 7 bits a code: each
    chunk is its blocks' width bytes (7) and 28 zero bytes a block of 32, a ratio of 32/29. Written
    sparse: only the headers, the table and the width bytes take disk blocks."""
    import struct
    chunks = (n + chunk - 1) // chunk
    sizes = [min(chunk, n - c * chunk) for c in range(chunks)]
    bodies = [(m + 31) // 32 * 29 for m in sizes]
    table = b"".join(struct.pack("<I", b) for b in bodies)
    h = crafted_header("u8", [n], chunk, 1, 1, (0, 0, len(table), sum(bodies), 0, 0))
    with open(name, "wb") as f:
        f.write(h + table)
        at = len(h) + len(table)
        for m, b in zip(sizes, bodies):
            f.seek(at)
            f.write(b"\x07" * ((m + 31) // 32))
            at += b
        f.truncate(at)


def write_bitpack_zero_stream(name, n, chunk=32):
    """A u8 stream of n zeros bit-packed in chunks of `chunk` codes, each a block width of 0 a
    block of 32 (the table written, the payload's zero widths sparse)."""
    import struct
    chunks = (n + chunk - 1) // chunk
    sizes = [(min(chunk, n - c * chunk) + 31) // 32 for c in (0, chunks - 1)]
    body = sizes[0] * (chunks - 1) + sizes[1]
    h = crafted_header("u8", [n], chunk, 1, 1, (0, 0, 4 * chunks, body, 0, 0))
    with open(name, "wb") as f:
        f.write(h)
        piece = struct.pack("<I", sizes[0]) * min(chunks - 1, 1 << 20)
        left = chunks - 1
        while left > 0:
            k = min(left, 1 << 20)
            f.write(piece[:4 * k])
            left -= k
        f.write(struct.pack("<I", sizes[1]))
        f.truncate(len(h) + 4 * chunks + body)


def zero_file(name):
    """Whether a file holds only zero bytes (read a chunk at a time)."""
    with open(name, "rb") as f:
        while True:
            b = f.read(1 << 24)
            if not b:
                return True
            if b.count(0) != len(b):
                return False


def padded_varint(v, pad):
    """v as a varint with `pad` more bytes than it needs (continuation bytes carrying zeros)."""
    b = bytearray(varint_bytes(v))
    for _ in range(pad):
        b[-1] |= 0x80
        b.append(0)
    return bytes(b)


def write_outlier_stream(name, dtype, n, chunk, first_gap, gap, k, value, pad=0, corrupt_last_chunk=False):
    """A crafted stream of n zeros (run-length chunks, no prediction, no checksum) and k outliers:
    the first at element first_gap, each next gap + 1 further, every one holding the element's
    bytes `value`; the index varints padded by `pad` bytes (padded_varint). corrupt_last_chunk:
    the last chunk's run claims 1000 elements more than the chunk has. Written a piece at a time
    (the test's own peak RSS is inherited by the ebac processes it starts)."""
    import struct
    chunks = (n + chunk - 1) // chunk
    sizes = [min(chunk, n - c * chunk) for c in range(chunks)]
    bodies = [bytes([0xF0]) + varint_bytes(m - 15) for m in sizes]
    if corrupt_last_chunk:
        bodies[-1] = bytes([0xF0]) + varint_bytes(sizes[-1] - 15 + 1000)
    table = b"".join(struct.pack("<I", len(b)) for b in bodies)
    payload = b"".join(bodies)
    first, step = padded_varint(first_gap, pad), padded_varint(gap, pad)
    index_bytes = (len(first) + len(step) * (k - 1)) if k else 0
    h = bytearray(crafted_header(dtype, [n], chunk, 1, 2, (0, 0, len(table), len(payload), index_bytes, k * len(value))))
    struct.pack_into("<Q", h, 56, k)
    piece = 1 << 20
    with open(name, "wb") as f:
        f.write(h + table + payload)
        if k:
            f.write(first)
        for done in range(0, max(k - 1, 0), piece):
            f.write(step * min(piece, k - 1 - done))
        for done in range(0, k, piece):
            f.write(value * min(piece, k - done))


def outliers_as_crafted(name, dtype, n, first_gap, gap, k, value):
    """Whether the file holds n zero elements of dtype but for the k crafted outliers (elements
    first_gap + j (gap + 1), each `value`), compared a piece at a time."""
    size = DTYPE_CODES[dtype][1]
    want_value = np.frombuffer(value, dtype=np.uint8)
    if os.path.getsize(name) != n * size:
        return False
    piece = 1 << 22  # elements
    with open(name, "rb") as f:
        for e0 in range(0, n, piece):
            m = min(piece, n - e0)
            got = np.frombuffer(f.read(m * size), dtype=np.uint8).reshape(-1, size)
            want = np.zeros_like(got)
            # Outliers j with e0 <= first_gap + j (gap + 1) < e0 + m.
            j_lo = max(0, -(-(e0 - first_gap) // (gap + 1)))
            j_hi = min(k, max(0, (e0 + m - 1 - first_gap) // (gap + 1) + 1))
            want[first_gap + np.arange(j_lo, j_hi, dtype=np.int64) * (gap + 1) - e0] = want_value
            if not np.array_equal(got, want):
                return False
    return True


def group_decode_memory():
    """decompress's peak RSS stays within 1.5 x its output + 64 MiB whatever
    chunk size, predictor and thread count a stream names (issue 53: a
    264-byte u8 stream peaked at 1.31 GB under a 256M cap, 4 bytes of
    scratch an element; context ANS took eight chunks' codes a thread), and
    a stream over --max-output is refused before anything large is allocated."""
    if SANITIZED:
        print("note: sanitized build, peak RSS is ASan's: not checked", flush=True)
        return
    n8 = 1 << 26  # 64 MiB of u8 output
    cases = (
        # Lorenzo along the only axis, one block of 2^26 > a chunk of 2^24: the chunks depend on each other.
        ("u8 lorenzo rle chunk 2^24", "u8", n8, crafted_zeros_stream("u8", n8, 1 << 24, 2, lorenzo_axis=0)),
        ("f32 lorenzo rle chunk 2^22", "f32", 1 << 24, crafted_zeros_stream("f32", 1 << 24, 1 << 22, 2, lorenzo_axis=0)),
        # Independent chunks of 2^24 and 2^22 codes; float ANS chunks of 2^22, the largest the
        # AVX2 build decodes eight at a time (eight chunks: one group, with eight chunks' codes
        # and the interleaved lanes; 267 MB for 128 MiB before the fix).
        ("u8 none rle chunk 2^24", "u8", n8, crafted_zeros_stream("u8", n8, 1 << 24, 2)),
        ("u8 none ans chunk 2^22", "u8", n8, crafted_zeros_stream("u8", n8, 1 << 22, 4)),
        ("f32 none ans chunk 2^22", "f32", 1 << 25, crafted_zeros_stream("f32", 1 << 25, 1 << 22, 4)),
    )
    out = path("decoded.raw")
    for label, dtype, n, stream in cases:
        src = path("crafted.ebac")
        with open(src, "wb") as f:
            f.write(stream)
        check(len(stream) < 1024, f"{label}: setup: the crafted stream takes {len(stream)} bytes")
        out_bytes = n * DTYPE_CODES[dtype][1]
        limit = out_bytes * 3 // 2 + (64 << 20)
        for threads in (1, 2):
            rc, se, peak = peak_rss_run(["decompress", "--input", src, "--output", out, "--threads", threads])
            if not check(rc == 0, f"{label}, {threads} thread(s): exit {rc}: {se.strip()!r}"):
                continue
            got = np.fromfile(out, dtype=np.uint8)
            check(got.size == out_bytes and not got.any(), f"{label}, {threads} thread(s): output is not {out_bytes} zero bytes")
            del got
            check(peak <= limit, f"{label}, {threads} thread(s): peak RSS {peak >> 20} MiB, more than 1.5 x the output + 64 MiB "
                                 f"({limit >> 20} MiB)")
        if os.path.exists(out):
            os.remove(out)
    # A stored stream holds the elements themselves: decoded in its own buffer, from a file or a
    # pipe (before: 2x the output, and from a pipe the buffer's old and new copies as it doubled).
    import struct
    n = 3 << 26  # 192 MiB, where 2x the output exceeds 1.5x + 64 MiB
    h = bytearray(crafted_header("u8", [n], 1 << 14, 1, 0, (0, 0, 0, n, 0, 0)))
    h[10] = 2  # stored, no checksum
    h[14] = 0  # no quantizer
    src = path("stored.ebac")
    with open(src, "wb") as f:
        f.write(h)
        f.truncate(len(h) + n)  # zeros
    limit = n * 3 // 2 + (64 << 20)
    for label, args, stdin in (("file", ["--input", src], None), ("pipe", ["--input", "-"], src)):
        for threads in (1, 2):
            rc, se, peak = peak_rss_run(["decompress"] + args + ["--output", out, "--threads", threads], stdin=stdin)
            if not check(rc == 0, f"stored stream from a {label}, {threads} thread(s): exit {rc}: {se.strip()!r}"):
                continue
            check(os.path.getsize(out) == n, f"stored stream from a {label}: output is not {n} bytes")
            check(peak <= limit, f"stored stream from a {label}, {threads} thread(s): peak RSS {peak >> 20} MiB, more than "
                                 f"1.5 x the output + 64 MiB ({limit >> 20} MiB)")
    for f in (out, src):
        if os.path.exists(f):
            os.remove(f)
    # A coded stream of a low ratio (1.1: bit-packing at 7 bits a u8 code) and 256 MiB of output,
    # from a file and from a pipe: decoded window by window from the input to the output file
    # (before: the whole stream beside the whole output, 1.9x the output).
    n = 1 << 28
    write_low_ratio_stream(src := path("low_ratio.ebac"), n)
    limit = n * 3 // 2 + (64 << 20)
    for label, args, stdin, threads in (("file", ["--input", src], None, 1), ("file", ["--input", src], None, 2),
                                        ("pipe", ["--input", "-"], src, 2)):
        rc, se, peak = peak_rss_run(["decompress"] + args + ["--output", out, "--threads", threads], stdin=stdin)
        if not check(rc == 0, f"low-ratio stream from a {label}, {threads} thread(s): exit {rc}: {se.strip()!r}"):
            continue
        check(os.path.getsize(out) == n and zero_file(out), f"low-ratio stream from a {label}: output is not {n} zero bytes")
        check(peak <= limit, f"low-ratio stream from a {label}, {threads} thread(s): peak RSS {peak >> 20} MiB, more than "
                             f"1.5 x the output + 64 MiB ({limit >> 20} MiB)")
    os.remove(src)
    # A stream of the same kind (16 MiB of output) cut short, and followed by a byte: refused,
    # and no output file left behind.
    n = 1 << 24
    write_low_ratio_stream(src, n, chunk=1 << 20)
    size = os.path.getsize(src)
    for label, change in (("truncated", lambda f: f.truncate(size - 1000)), ("with a trailing byte", lambda f: (f.seek(size), f.write(b"x")))):
        if os.path.exists(out):
            os.remove(out)
        with open(src, "r+b") as f:
            change(f)
        rc, se, _ = peak_rss_run(["decompress", "--input", src, "--output", out, "--threads", 2])
        one_error_line(f"low-ratio stream {label}", rc, se, "truncated" if label == "truncated" else "trailing data")
        check(not os.path.exists(out) and not [f for f in os.listdir(WORK) if f.startswith(".ebac-tmp-")],
              f"low-ratio stream {label}: an output or a temporary file was left behind")
        write_low_ratio_stream(src, n, chunk=1 << 20)
    os.remove(src)
    # Chunks of 32 u8 codes (4 bytes of chunk table a chunk, an eighth of the output): into a file
    # the table and a window are all decompress holds (before: the output, the stream and 13
    # bytes of bookkeeping a chunk; 1.6 GiB for 1 GiB of output).
    n = 1 << 27
    write_bitpack_zero_stream(src, n)
    for threads in (1, 2):
        rc, se, peak = peak_rss_run(["decompress", "--input", src, "--output", out, "--threads", threads])
        if not check(rc == 0, f"chunks of 32, {threads} thread(s): exit {rc}: {se.strip()!r}"):
            continue
        check(os.path.getsize(out) == n and zero_file(out), f"chunks of 32: output is not {n} zero bytes")
        check(peak <= n // 8 + (48 << 20), f"chunks of 32, {threads} thread(s): peak RSS {peak >> 20} MiB, more than an eighth "
                                           f"of the output + 48 MiB ({(n // 8 + (48 << 20)) >> 20} MiB)")
    os.remove(src)
    # The largest corpus streams: their peak is the program's own, far within the allowance.
    rows = sorted(manifest(), key=lambda r: -int(np.prod(r["dims"])))[:2]
    for r in rows:
        raw = os.path.join(CORPUS, r["file"])
        comp = path("corpus.ebac")
        rc, _, se = run("compress", raw, "--dtype", r["dtype"], "--dims", ",".join(map(str, r["dims"])), "--eb", "1e-2",
                        "--mode", "rel", "--output", comp)
        if not check(rc == 0, f"{r['file']}: compress failed: {se.strip()!r}"):
            continue
        out_bytes = os.path.getsize(raw)
        for threads in (1, 2):
            rc, se, peak = peak_rss_run(["decompress", "--input", comp, "--output", out, "--threads", threads])
            check(rc == 0 and os.path.getsize(out) == out_bytes, f"{r['file']}: decompress failed: {se.strip()!r}")
            check(peak <= out_bytes * 3 // 2 + (64 << 20), f"{r['file']}, {threads} thread(s): peak RSS {peak >> 20} MiB")
    # Over the cap: refused from the header, before the output or any scratch is allocated.
    src = path("crafted.ebac")
    with open(src, "wb") as f:
        f.write(crafted_zeros_stream("u8", 1 << 28, 1 << 24, 2, lorenzo_axis=0))
    rc, se, peak = peak_rss_run(["decompress", "--input", src, "--output", out, "--max-output", "64M", "--threads", 2])
    one_error_line("256 MiB stream under --max-output 64M", rc, se, "--max-output")
    check(peak <= 32 << 20, f"256 MiB stream under --max-output 64M: peak RSS {peak >> 20} MiB before the refusal (expected < 32 MiB)")
    decode_memory_stdout_info_slabs()


def decode_memory_stdout_info_slabs():
    """Standard output streamed window by window (a stream's outliers read ahead from a file; held
    with the output only for a stream with outliers on a pipe); an outlier index the size of the
    output costs a bitmap, not its size; info reads the header and the chunk table only; a Lorenzo
    slab that would take more scratch than 1.5 x the output + 64 MiB allows is refused from the
    header."""
    out, src = path("decoded.raw"), path("stdout.ebac")
    # 1. A 128 MiB u8 stream without outliers to standard output, from a file and from a pipe:
    # a window, its stream bytes and the scratch (before: the whole output, 128 MiB and more).
    n = 1 << 27
    write_low_ratio_stream(src, n, chunk=1 << 20)
    for label, args, stdin in (("file", ["--input", src], None), ("pipe", ["--input", "-"], src)):
        for threads in (1, 2):
            rc, se, peak = peak_rss_run(["decompress"] + args + ["--output", "-", "--threads", threads], stdin=stdin, stdout=out)
            if not check(rc == 0, f"to stdout from a {label}, {threads} thread(s): exit {rc}: {se.strip()!r}"):
                continue
            check(os.path.getsize(out) == n and zero_file(out), f"to stdout from a {label}: output is not {n} zero bytes")
            check(peak <= 64 << 20, f"to stdout from a {label}, {threads} thread(s): peak RSS {peak >> 20} MiB for "
                                    f"{n >> 20} MiB of output (expected a window's worth, < 64 MiB)")
    # info on it: the header and the chunk table, from a file and a pipe (before: the whole stream).
    for label, args, stdin in (("file", ["--input", src], None), ("pipe", ["--input", "-"], src)):
        rc, se, peak = peak_rss_run(["info"] + args, stdin=stdin, stdout=out + ".info")
        check(rc == 0, f"info from a {label}: exit {rc}: {se.strip()!r}")
        check(peak <= 32 << 20, f"info from a {label}: peak RSS {peak >> 20} MiB on a {os.path.getsize(src) >> 20} MiB "
                                f"stream (expected < 32 MiB)")
    rc, so, se = run_bytes(["info", src])
    check(rc == 0 and f"bytes {os.path.getsize(src)} " in so.decode(), f"info: bytes is not the stream's size: {so!r}")
    size = os.path.getsize(src)
    with open(src, "r+b") as f:
        f.truncate(size - 1)
    for label, args, stdin in (("file", [src], None), ("pipe", ["-"], src)):
        with open(stdin or os.devnull, "rb") as fin:
            rc, so, se = run_bytes(["info"] + args, stdin=fin)
        one_error_line(f"info on a truncated stream from a {label}", rc, se, "truncated", "shorter")
    with open(src, "r+b") as f:
        f.seek(size - 1)
        f.write(b"\0\0")
    rc, so, se = run_bytes(["info", src])
    one_error_line("info on a stream with a trailing byte", rc, se, "trailing data")
    with open(src, "r+b") as f:
        f.truncate(size)
        f.seek(112 + 8)  # the first chunk's size in the table: one byte more
        b = bytearray(f.read(4))
        b[0] += 1
        f.seek(112 + 8)
        f.write(b)
    rc, so, se = run_bytes(["info", src])
    one_error_line("info on a chunk table that does not add up", rc, se, "chunk sizes do not add up")
    os.remove(src)
    # 2. 128 MiB of f32 with an outlier every 1000 elements, to standard output: from a file the
    # outliers are read ahead and put in each window (a window's memory); from a pipe the output is
    # held (within 1.5 x the output + 64 MiB). The bytes checked against the crafted values.
    import struct
    n = 1 << 25
    write_outlier_stream(src, "f32", n, 1 << 20, 999, 999, n // 1000, struct.pack("<f", 1.5))
    for label, args, stdin, limit in (("file", ["--input", src], None, 64 << 20),
                                      ("pipe", ["--input", "-"], src, 4 * n * 3 // 2 + (64 << 20))):
        rc, se, peak = peak_rss_run(["decompress"] + args + ["--output", "-", "--threads", 2], stdin=stdin, stdout=out)
        if not check(rc == 0, f"outliers to stdout from a {label}: exit {rc}: {se.strip()!r}"):
            continue
        check(outliers_as_crafted(out, "f32", n, 999, 999, n // 1000, struct.pack("<f", 1.5)),
              f"outliers to stdout from a {label}: wrong output")
        check(peak <= limit, f"outliers to stdout from a {label}: peak RSS {peak >> 20} MiB (expected <= {limit >> 20} MiB)")
    # 3. A forged u8 stream whose outlier index is nearly the size of the output (10-byte varints,
    # an outlier every element up to n / 11), to standard output from a pipe: the output and a
    # bitmap of n bits (before: the output and the whole index, 1.9 x the output); from a file: the bitmap.
    n = 1 << 27
    k = (n - 4096) // 11
    write_outlier_stream(src, "u8", n, 1 << 20, 0, 0, k, b"\x07", pad=9)
    check(os.path.getsize(src) > n * 9 // 10, f"setup: the forged stream has {os.path.getsize(src)} bytes")
    for label, args, stdin, limit in (("pipe", ["--input", "-"], src, n + n // 8 + (48 << 20)),
                                      ("file", ["--input", src], None, n // 8 + (64 << 20))):
        rc, se, peak = peak_rss_run(["decompress"] + args + ["--output", "-", "--threads", 2], stdin=stdin, stdout=out)
        if not check(rc == 0, f"a forged index the size of the output, to stdout from a {label}: exit {rc}: {se.strip()!r}"):
            continue
        check(outliers_as_crafted(out, "u8", n, 0, 0, k, b"\x07"), f"a forged index the size of the output, from a {label}: "
                                                                    "wrong output")
        check(peak <= limit, f"a forged index the size of the output, to stdout from a {label}: peak RSS {peak >> 20} MiB "
                             f"(expected <= {limit >> 20} MiB: the output held, a bitmap of n bits, the scratch)")
    os.remove(src)
    # 4. Lorenzo along the outer axis of u8 [2, 2^25] in chunks of 2^24 (the chunks depend on each
    # other): two slabs of 2^25 4-byte codes are 256 MiB, more than 1.5 x 64 MiB + 64 MiB allows:
    # refused from the header, before anything large is allocated. [16, 2^22] in chunks of 2^20
    # (two slabs: 32 MiB) decodes within the rule.
    import struct as st

    def lorenzo_rows(dims, chunk):
        m = dims[0] * dims[1]
        sizes = [min(chunk, m - c * chunk) for c in range((m + chunk - 1) // chunk)]
        bodies = [bytes([0xF0]) + varint_bytes(s - 15) for s in sizes]
        table = b"".join(st.pack("<I", len(b)) for b in bodies)
        payload = b"".join(bodies)
        return crafted_header("u8", dims, chunk, 2, 2, (0, 0, len(table), len(payload), 0, 0), lorenzo_axis=0) + table + payload
    with open(src, "wb") as f:
        f.write(lorenzo_rows([2, 1 << 25], 1 << 24))
    for target in (out, "-"):
        rc, se, peak = peak_rss_run(["decompress", "--input", src, "--output", target, "--threads", 2], stdout=out + ".stdout")
        one_error_line(f"a Lorenzo slab of 2^25 u8 elements (to {target})", rc, se, "Lorenzo", "scratch", "1.5 x the output")
        check(peak <= 32 << 20, f"a Lorenzo slab of 2^25: peak RSS {peak >> 20} MiB before the refusal (expected < 32 MiB)")
    with open(src, "wb") as f:
        f.write(lorenzo_rows([16, 1 << 22], 1 << 20))
    rc, se, peak = peak_rss_run(["decompress", "--input", src, "--output", out, "--threads", 2])
    if check(rc == 0, f"a Lorenzo slab of 2^22 u8 elements: exit {rc}: {se.strip()!r}"):
        check(os.path.getsize(out) == 1 << 26 and zero_file(out), "a Lorenzo slab of 2^22: output is not 64 MiB of zeros")
        check(peak <= (1 << 26) * 3 // 2 + (64 << 20), f"a Lorenzo slab of 2^22: peak RSS {peak >> 20} MiB")
    for f in (src, out, out + ".stdout"):
        if os.path.exists(f):
            os.remove(f)


GROUPS = {"host_isa": group_host_isa, "integers": group_integers, "grad_error": group_grad_error, "info": group_info, "golden": group_golden, "roundtrip": group_roundtrip, "eval_json": group_eval_json, "errors": group_errors,
          "no_overwrite": group_no_overwrite, "adversarial": group_adversarial, "streams": group_streams,
          "outputs": group_outputs, "limits": group_limits, "arguments": group_arguments, "hostile": group_hostile,
          "decode_memory": group_decode_memory}


def main():
    global EBAC, CORPUS, WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--ebac", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--group", default="all", choices=sorted(GROUPS) + ["all"])
    ap.add_argument("--write-golden", metavar="FILE", help="golden group: record the digests in FILE instead of checking")
    ap.add_argument("--sanitized", action="store_true", help="the binary runs under ASan: skip the address-space limit checks")
    a = ap.parse_args()
    global WRITE_GOLDEN, SANITIZED
    EBAC, CORPUS, WRITE_GOLDEN, SANITIZED = a.ebac, a.corpus, a.write_golden, a.sanitized
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
    if SKIPPED:  # exit status 77: ctest reports the test as skipped (SKIP_RETURN_CODE), never as passed
        for why in SKIPPED:
            print("SKIPPED: " + why, flush=True)
        return 77
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
