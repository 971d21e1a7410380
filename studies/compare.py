#!/usr/bin/python3
"""Side-by-side comparison of ebac with SZ3, ZFP and a quantize+zstd baseline.

Run it with the Debian interpreter (numpy 1.24, python3-zstandard):

    /usr/bin/python3 studies/compare.py --out out                  # bundled corpus
    /usr/bin/python3 studies/compare.py --file a.f32 --dtype f32 --dims 512,512,512 --out out

For every tensor and every relative bound r in --bounds, one absolute bound
eb = r * (max - min over the finite values) is computed here, once, and every
compressor gets that same eb: ebac (--mode abs, every named pipeline), SZ3
(ABS), ZFP (fixed accuracy eb) and quantize+zstd set up as a user who wants
speed writes it (round(x / 2eb) in float32, the codes in the smallest integer
type that holds them: int8 at rel 1e-1 and 1e-2, int16 below; zstd at each of
--zstd-levels, default 3, named "quant+zstd -L" after the zstd CLI's -L;
reconstruct q * 2eb in float32; nothing is verified or stored raw, so its max
error is whatever it measures). Every reconstruction is decompressed and
compared element-wise here, in float64; a compressor's own claims are not
trusted. Ratios are input bytes (in the tensor's storage dtype) over compressed
bytes; aggregate ratios are total input bytes over total compressed bytes.

Timings are in memory (no file IO), the best of N runs with N adaptive (runs
until --min-time seconds in total, at most 100; at least 3 for the peers unless
one run takes a second or more, at least 1 inside `ebac eval`), single-threaded
and (unless --single-thread) with all cores: ebac's figures come from `ebac eval --json` (its in-memory
timing, --threads 1 and 0); SZ3 runs in this process through pysz (openmp off
and on); ZFP through studies/peers/zfp_runner (serial and OpenMP policies); the
zstd baseline in numpy + python-zstandard (threads=-1 for all cores). MB/s
count input bytes in the storage dtype.

16-bit tensors (f16, bf16): SZ3, ZFP and the baseline have no 16-bit input, so
they get the values widened to float32 and their float32 reconstruction is
rounded back to the storage dtype (as a trainer must, to put the tensor back);
that rounding counts against the bound, as it does for ebac. The float32
error before rounding is kept in the JSON as max_abs_error_f32.

The ebac rows also include "ebac best": per tensor and bound, the named
pipeline with the smallest stream (what keeping the best of `--pipeline all`
gives); it has no MB/s of its own.

Outputs: a markdown report (stdout and OUT/compare.md) with per-bound,
per-kind tables and a "Where ebac loses" section, and OUT/compare.json with
per-file detail, the aggregates and the losses (the input of plot_rd.py).
"""

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYDEPS = os.path.join(REPO, "build", "pydeps")
if os.path.isdir(PYDEPS) and PYDEPS not in sys.path:
    sys.path.append(PYDEPS)  # appended: never shadows Debian's numpy

EBAC_PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain", "max", "max-bound", "balanced", "balanced-bound"]
PEER_FAMILIES = ["sz3", "zfp", "quant+zstd"]
KINDS = ["post_relu", "dense", "other"]
# The design's one-core speed targets for the best-ratio pipeline on tensors of a trainer's size, MB/s of
# input (the host this runs on decides whether they are met: compare each with quant+zstd -1's in the same run).
SPEED_TARGET_MBPS = {"compress": 800, "decompress": 1000}
LONG_RUN_S = 1.0  # a timed run this long is measured once (zstd -19 on a tensor of many MB)
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------

def load_raw(path, dtype, dims):
    n = int(np.prod(dims, dtype=np.int64))
    a = np.fromfile(path, dtype=STORAGE[dtype])
    if a.size != n:
        raise SystemExit("%s: %d elements on disk, --dims %s says %d" % (path, a.size, dims, n))
    return a.reshape(dims)


def to_float32(a, dtype):
    """Storage array -> float32 values (exact for f16 and bf16)."""
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32, copy=False)


def from_float32(y, dtype):
    """float32 -> storage dtype, round to nearest even (the trainer's cast)."""
    y = np.ascontiguousarray(y, dtype=np.float32)
    if dtype == "f32":
        return y
    if dtype == "f16":
        return y.astype(np.float16)
    b = y.view(np.uint32)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(y)
    if nan.any():
        rounded[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)  # stays a NaN
    return rounded


def peer_shape(dims):
    """The shape peers see: size-1 axes dropped, leading axes folded to rank <= 4."""
    d = [int(v) for v in dims if int(v) != 1] or [1]
    while len(d) > 4:
        d = [d[0] * d[1]] + d[2:]
    return tuple(d)


class Tensor:
    """One input: storage array, float64 view for error checks, its range."""

    def __init__(self, path, label, dtype, dims, kind, meta=None):
        self.path, self.label, self.dtype, self.dims, self.kind = path, label, dtype, list(dims), kind
        self.meta = meta or {}
        self.storage = load_raw(path, dtype, self.dims)
        self.f32 = np.ascontiguousarray(to_float32(self.storage, dtype))
        self.n = int(self.storage.size)
        self.bytes_in = self.n * ITEMSIZE[dtype]
        x = self.f32.astype(np.float64)
        self.finite = np.isfinite(x)
        self.all_finite = bool(self.finite.all())
        fx = x[self.finite] if not self.all_finite else x
        self.vmin = float(fx.min()) if fx.size else 0.0
        self.vmax = float(fx.max()) if fx.size else 0.0
        self.range = self.vmax - self.vmin
        self.zero_fraction = float(np.count_nonzero(x == 0)) / max(1, self.n)
        self.x64 = x

    def check(self, y_storage):
        """Error of a reconstruction given in the storage dtype."""
        y = to_float32(np.asarray(y_storage).reshape(self.storage.shape), self.dtype).astype(np.float64)
        return self.check_f64(y, y_storage)

    def check_f64(self, y, y_storage=None):
        x = self.x64
        if self.all_finite:
            d = np.abs(x - y)
        else:
            d = np.abs(x[self.finite] - y[self.finite])
        d = np.where(np.isnan(d), np.inf, d)
        max_err = float(d.max()) if d.size else 0.0
        mse = float(np.mean(d * d)) if d.size else 0.0
        nonfinite_exact = True
        if not self.all_finite and y_storage is not None:
            xs = self.storage.reshape(-1).view(np.uint32 if self.dtype == "f32" else np.uint16)
            ys = np.asarray(y_storage).reshape(-1).view(xs.dtype)
            bad = ~self.finite.reshape(-1)
            nonfinite_exact = bool(np.array_equal(xs[bad], ys[bad]))
        elif not self.all_finite:
            nonfinite_exact = False
        if mse > 0 and self.range > 0 and math.isfinite(mse):
            psnr = 20 * math.log10(self.range) - 10 * math.log10(mse)
        else:
            psnr = math.inf if mse == 0 else -math.inf
        return {"max_abs_error": max_err, "psnr": psnr, "nonfinite_exact": nonfinite_exact}


# --------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------

def best_seconds(fn, min_time):
    """Best of N runs: until min_time seconds in total, at most 100, and at least 3 when
    timing at all (one preempted first run must not be the only sample) unless a run took
    LONG_RUN_S or more (a preemption is then a small part of it)."""
    best, total, out = math.inf, 0.0, None
    for rep in range(100):
        t0 = time.perf_counter()
        out = fn()
        s = time.perf_counter() - t0
        best, total = min(best, s), total + s
        if total >= min_time and (rep >= 2 or min_time <= 0 or s >= LONG_RUN_S):
            break
    return best, out


# --------------------------------------------------------------------------
# compressors
# --------------------------------------------------------------------------

def result(t, eb, rel, name, family, bytes_out, err, times, extra=None):
    r = {
        "file": t.label, "dtype": t.dtype, "kind": t.kind, "n": t.n, "bound_rel": rel, "eb_abs": eb,
        "compressor": name, "family": family, "bytes_in": t.bytes_in, "bytes_out": int(bytes_out),
        "ratio": t.bytes_in / bytes_out if bytes_out else None,
        "bits_per_value": 8.0 * bytes_out / t.n,
        "max_abs_error": err["max_abs_error"],
        "bound_held": bool(err["max_abs_error"] <= eb and err["nonfinite_exact"]),
        "psnr": err["psnr"],
    }
    for key in ("compress_s_1t", "decompress_s_1t", "compress_s_all", "decompress_s_all"):
        s = times.get(key)
        r[key] = s
        r[key.replace("_s_", "_MBps_")] = (t.bytes_in / s / 1e6) if s else None
    if extra:
        r.update(extra)
    return r


def run_checked(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd[:2]), p.returncode, p.stderr.strip()))
    return p.stdout


def ebac_results(args, t, eb, rel, tmp):
    """Every ebac pipeline: MB/s from `ebac eval`, ratio and error from compress + decompress here."""
    common = ["--dtype", t.dtype, "--dims", ",".join(map(str, t.dims)), "--eb", repr(eb), "--mode", "abs"]
    evals = {}
    # `--pipeline all` runs the named pipelines in one process; other lists one process each.
    names = ["all"] if args.ebac_pipelines == EBAC_PIPELINES else args.ebac_pipelines
    for tag, threads in () if args.ratios_only else (("1t", "1"),) + ((("all", "0"),) if args.all_cores else ()):
        for name in names:
            out = run_checked([args.ebac, "eval", "--input", t.path] + common +
                              ["--pipeline", name, "--json", "--threads", threads, "--min-time", repr(args.min_time)])
            for line in out.splitlines():
                if line.strip().startswith("{"):
                    j = json.loads(line)
                    evals.setdefault(j["pipeline"], {})[tag] = j
    rows = []
    stream, recon = os.path.join(tmp, "x.ebac"), os.path.join(tmp, "x.raw")
    for p in args.ebac_pipelines:
        run_checked([args.ebac, "compress", "--input", t.path, "--output", stream] + common + ["--pipeline", p])
        run_checked([args.ebac, "decompress", "--input", stream, "--output", recon])
        bytes_out = os.path.getsize(stream)
        y = np.fromfile(recon, dtype=STORAGE[t.dtype])
        if y.size != t.n:
            raise RuntimeError("ebac decompress gave %d elements, expected %d" % (y.size, t.n))
        err = t.check(y)
        ev = evals.get(p, {})
        times = {}
        for tag in ("1t", "all"):
            e = ev.get(tag)
            if e and e.get("compress_MBps") and e.get("decompress_MBps"):
                times["compress_s_" + tag] = t.bytes_in / (e["compress_MBps"] * 1e6)
                times["decompress_s_" + tag] = t.bytes_in / (e["decompress_MBps"] * 1e6)
        extra = {}
        e1 = ev.get("1t")
        if e1 and e1["bytes_out"] != bytes_out:
            extra["note"] = "ebac eval reported %d bytes, the file has %d" % (e1["bytes_out"], bytes_out)
        if e1 and e1["bound_held"] is False:
            extra["ebac_self_check"] = "ebac eval reports the bound NOT held"
        rows.append(result(t, eb, rel, "ebac " + p, "ebac", bytes_out, err, times, extra))
    return rows


_SZ3_OPENMP = None


def sz3_has_openmp():
    """Whether this pysz build has OpenMP (the PyPI wheel does not link libgomp)."""
    global _SZ3_OPENMP
    if _SZ3_OPENMP is None:
        import importlib.util
        with open(importlib.util.find_spec("pysz.sz").origin, "rb") as f:
            blob = f.read()
        _SZ3_OPENMP = b"GOMP_parallel" in blob or b"omp_get_num_threads" in blob
    return _SZ3_OPENMP


def sz3_results(args, t, eb, rel):
    from pysz import sz, szConfig, szErrorBoundMode
    x = np.ascontiguousarray(t.f32.reshape(peer_shape(t.dims)))
    times, extra, out = {}, {}, {}
    modes = (("1t", False), ("all", True)) if sz3_has_openmp() and args.all_cores else (("1t", False),)
    for tag, omp in modes:
        c = szConfig()
        c.errorBoundMode = szErrorBoundMode.ABS
        c.absErrorBound = eb
        c.openmp = omp
        tc, (comp, _) = best_seconds(lambda: sz.compress(x, c), args.min_time)
        comp = np.ascontiguousarray(comp).copy()  # own the bytes, not the size-bound buffer
        td, (y, _) = best_seconds(lambda: sz.decompress(comp, np.float32, x.shape), args.min_time)
        times["compress_s_" + tag], times["decompress_s_" + tag] = tc, td
        out[tag] = (comp.size, peer_error(t, y))
    bytes_out, err = out["1t"]
    if "all" in out:
        # The OpenMP stream is another format (a block per thread): its error counts too.
        bytes_mt, err_mt = out["all"]
        extra["bytes_out_all"] = int(bytes_mt)
        extra["max_abs_error_all"] = err_mt["max_abs_error"]
        if err_mt["max_abs_error"] > err["max_abs_error"]:
            err = dict(err, max_abs_error=err_mt["max_abs_error"])
    elif args.all_cores:
        extra["note"] = "this pysz build has no OpenMP: no all-core figures"
    extra["max_abs_error_f32"] = err.pop("max_abs_error_f32")
    return [result(t, eb, rel, "sz3", "sz3", bytes_out, err, {} if args.ratios_only else times, extra)]


def peer_error(t, y32):
    """Error of a peer's float32 reconstruction after the cast back to the storage dtype."""
    y32 = np.asarray(y32, dtype=np.float32).reshape(t.storage.shape)
    ys = from_float32(y32, t.dtype)
    err = t.check(ys)
    err["max_abs_error_f32"] = t.check_f64(y32.astype(np.float64))["max_abs_error"] if t.dtype != "f32" else err["max_abs_error"]
    return err


def zfp_results(args, t, bounds, tmp):
    """ZFP for every bound of one tensor in one zfp_runner process."""
    if t.dtype == "f32":
        src = t.path
    else:
        src = os.path.join(tmp, "zfp_in.f32")
        t.f32.tofile(src)
    prefix = os.path.join(tmp, "zfp_recon")
    cmd = [args.zfp_runner, "--input", src, "--dims", ",".join(map(str, t.dims)),
           "--eb", ",".join(repr(eb) for _, eb in bounds), "--min-time", repr(args.min_time),
           "--recon", prefix] + ([] if args.all_cores else ["--serial"])
    lines = [json.loads(l) for l in run_checked(cmd).splitlines() if l.startswith("{")]
    rows = []
    for i, ((rel, eb), j) in enumerate(zip(bounds, lines)):
        path = "%s.%d.f32" % (prefix, i)
        y = np.fromfile(path, dtype=np.float32)
        os.unlink(path)
        err = peer_error(t, y)
        times = {} if args.ratios_only else {
            "compress_s_1t": j["compress_s"], "decompress_s_1t": j["decompress_s"],
            "compress_s_all": j["compress_s_omp"], "decompress_s_all": j["decompress_s_omp"]}
        extra = {"max_abs_error_f32": err.pop("max_abs_error_f32"), "zfp_version": j.get("zfp_version")}
        if j["decompress_s_omp"] is None and args.all_cores:
            extra["note"] = "ZFP has no OpenMP decompression for fixed-accuracy streams"
        rows.append(result(t, eb, rel, "zfp", "zfp", j["bytes_out"], err, times, extra))
    return rows


def code_dtype(max_abs_code):
    """The smallest signed integer type that holds codes up to max_abs_code in magnitude."""
    for dt in (np.int8, np.int16, np.int32):
        if max_abs_code <= np.iinfo(dt).max:
            return dt
    return np.int64


def zstd_results(args, t, eb, rel, level):
    """quantize + zstd set up as a user who wants speed writes it: float32 arithmetic, the codes
    round(x / 2eb) in the smallest integer type that holds them (int8 at rel 1e-1 and 1e-2, int16
    below, for a tensor whose values are within its range of zero), chosen from the value range the
    bound already needs (max |x|), then zstd at `level`; reconstruction q * 2eb in float32."""
    import zstandard
    x = t.f32 if t.all_finite else np.where(np.isfinite(t.f32), t.f32, np.float32(0))
    step = np.float32(2.0 * eb)
    dims = t.storage.shape
    max_abs = float(np.abs(x).max()) if x.size else 0.0
    # +1: round(x / step) may land one code past max|x| / step.
    qtype = code_dtype(int(np.ceil(max_abs / float(step))) + 1)

    def compress(cctx):
        q = np.rint(x / step).astype(qtype)
        return cctx.compress(q.data)

    def decompress(blob):
        q = np.frombuffer(dctx.decompress(blob), dtype=qtype)
        return (q.astype(np.float32) * step).reshape(dims)

    dctx = zstandard.ZstdDecompressor()
    times, blobs = {}, {}
    for tag, threads in (("1t", 0),) + ((("all", -1),) if args.all_cores else ()):
        cctx = zstandard.ZstdCompressor(level=level, threads=threads)
        tc, blob = best_seconds(lambda: compress(cctx), args.min_time)
        td, y = best_seconds(lambda: decompress(blob), args.min_time)
        times["compress_s_" + tag], times["decompress_s_" + tag] = tc, td
        blobs[tag] = (blob, y)
    blob, y = blobs["1t"]
    err = peer_error(t, y)
    extra = {"max_abs_error_f32": err.pop("max_abs_error_f32"), "code_type": np.dtype(qtype).name}
    if "all" in blobs:
        extra.update(bytes_out_all=len(blobs["all"][0]), note="zstd decompression is single-threaded")
    return [result(t, eb, rel, "quant+zstd -%d" % level, "quant+zstd", len(blob), err,
                   {} if args.ratios_only else times, dict(extra, zstd_level=level))]


def best_ebac_rows(rows):
    """Per (tensor, bound): a copy of the ebac row with the smallest stream, named "ebac best", without timings
    (its ratio is what keeping the best of every named pipeline gives; the time is that of running them all)."""
    groups = {}
    for r in rows:
        if r["family"] == "ebac" and not r.get("derived"):
            groups.setdefault((r["file"], r["bound_rel"]), []).append(r)
    out = []
    for rs in groups.values():
        if len(rs) < 2:
            continue
        r = min(rs, key=lambda r: r["bytes_out"])
        d = dict(r, compressor="ebac best", derived=True, chosen=r["compressor"][5:])
        for key in ("compress", "decompress"):
            for tag in ("1t", "all"):
                d[key + "_s_" + tag] = d[key + "_MBps_" + tag] = None
        d.pop("note", None)
        out.append(d)
    return out


def peer_rank(name):
    """Peers in family order, quant+zstd by level."""
    for i, fam in enumerate(PEER_FAMILIES):
        if name == fam or name.startswith(fam + " "):
            try:
                return (i, int(name[len(fam):].strip().lstrip("-") or 0))
            except ValueError:
                return (i, 0)
    return (len(PEER_FAMILIES), 0)


def peers_of(items):
    """The peer compressor names among rows or aggregates, in peer_rank order."""
    return sorted({a["compressor"] for a in items if a["family"] != "ebac"}, key=lambda n: (peer_rank(n), n))


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------

def parse_dims(s):
    dims = [int(v) for v in s.split(",") if v.strip()]
    if not dims or any(d <= 0 for d in dims):
        raise SystemExit("bad --dims %r" % s)
    return dims


def corpus_inputs(corpus):
    manifest = os.path.join(corpus, "manifest.tsv")
    if not os.path.exists(manifest):
        raise SystemExit("%s not found: generate the corpus (studies/make_corpus.py) or give --file" % manifest)
    rows = []
    with open(manifest) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if not line.strip():
                continue
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            if r.get("role", "activation") != "activation" or r.get("dtype") not in STORAGE or r.get("file", "-") == "-":
                continue
            kind = r.get("kind", "other")
            rows.append((os.path.join(corpus, r["file"]), r["file"], r["dtype"], parse_dims(r["dims"]),
                         kind if kind in KINDS else "other",
                         {k: r[k] for k in ("model", "module") if k in r}))
    return rows


def guess_kind(t):
    """Raw files carry no label: post_relu when nothing is negative and >= 10% are exactly zero."""
    return "post_relu" if t.vmin >= 0 and t.zero_fraction >= 0.10 else "other"


# --------------------------------------------------------------------------
# aggregation and report
# --------------------------------------------------------------------------

def aggregate(rows):
    """Per (bound, kind, compressor): total-bytes ratio, throughput over total time, worst error."""
    groups = {}
    for r in rows:
        for kind in (r["kind"], "all"):
            groups.setdefault((r["bound_rel"], kind, r["compressor"]), []).append(r)
    out = []
    for (rel, kind, name), rs in sorted(groups.items(), key=lambda kv: (-kv[0][0], kv[0][1], kv[0][2])):
        bi = sum(r["bytes_in"] for r in rs)
        bo = sum(r["bytes_out"] for r in rs)
        n = sum(r["n"] for r in rs)
        psnrs = [r["psnr"] for r in rs if r["psnr"] is not None and math.isfinite(r["psnr"])]
        a = {"bound_rel": rel, "kind": kind, "compressor": name, "family": rs[0]["family"], "files": len(rs),
             "bytes_in": bi, "bytes_out": bo, "ratio": bi / bo if bo else None,
             "bits_per_value": 8.0 * bo / n if n else None,
             "max_error_over_eb": max(r["max_abs_error"] / r["eb_abs"] for r in rs),
             "bound_held_files": sum(1 for r in rs if r["bound_held"]),
             "psnr_mean": sum(psnrs) / len(psnrs) if psnrs else None}
        for key in ("compress", "decompress"):
            for tag in ("1t", "all"):
                ts = [r[key + "_s_" + tag] for r in rs]
                a[key + "_MBps_" + tag] = bi / sum(ts) / 1e6 if all(ts) and sum(ts) > 0 else None
        out.append(a)
    return out


def is_target(peer, kind):
    """The design's ratio targets: at least SZ3 on post-ReLU activations, at least ZFP and quantize + zstd -19
    everywhere (the last on tensors of a trainer's size: the training-size corpus)."""
    return peer in ("zfp", "quant+zstd -19") or (peer == "sz3" and kind == "post_relu")


def losses(summary, rows):
    """Every case where ebac loses, each named: design targets first, then for information."""
    found = []

    def add(typ, text, **kw):
        found.append(dict(kw, type=typ, text=text))

    agg = {(a["bound_rel"], a["kind"], a["compressor"]): a for a in summary}
    for rel in sorted({a["bound_rel"] for a in summary}, reverse=True):
        for kind in KINDS:
            ebacs = [a for (b, k, _), a in agg.items() if b == rel and k == kind and a["family"] == "ebac"]
            if not ebacs:
                continue
            best = max(ebacs, key=lambda a: a["ratio"] or 0)
            fast = agg.get((rel, kind, "ebac fast"))
            # The design: at least quantize + zstd -19's ratio while compressing and decompressing faster than
            # quantize + zstd -1, and at least SPEED_TARGET_MBPS on one core, checked on the named pipeline with
            # the best ratio ("ebac best" has no time of its own), where quantize + zstd -1 ran (the
            # training-size corpus: the targets are set on tensors of a trainer's size).
            z1 = agg.get((rel, kind, "quant+zstd -1"))
            named = [a for a in ebacs if a["compressor"] != "ebac best"]
            if z1 and named:
                top = max(named, key=lambda a: a["ratio"] or 0)
                for key in ("compress", "decompress"):
                    e, v = top[key + "_MBps_1t"], z1[key + "_MBps_1t"]
                    if e and v and e < v:
                        add("speed_target", "%s speed (1 thread), %s, rel %s: %s (best ratio of the named "
                            "pipelines, %.2f) %.0f MB/s < quant+zstd -1 %.0f MB/s"
                            % (key, kind, bound_label(rel), top["compressor"], top["ratio"], e, v),
                            bound_rel=rel, kind=kind, peer="quant+zstd -1", what=key, ebac=top["compressor"],
                            ebac_MBps=e, peer_MBps=v)
                    if e and e < SPEED_TARGET_MBPS[key]:
                        add("speed_absolute", "%s speed (1 thread), %s, rel %s: %s %.0f MB/s < the target's %d MB/s"
                            % (key, kind, bound_label(rel), top["compressor"], e, SPEED_TARGET_MBPS[key]),
                            bound_rel=rel, kind=kind, what=key, ebac=top["compressor"], ebac_MBps=e,
                            target_MBps=SPEED_TARGET_MBPS[key])
            for peer in peers_of(summary):
                p = agg.get((rel, kind, peer))
                if not p:
                    continue
                if best["ratio"] < p["ratio"]:
                    held = "" if p["bound_held_files"] == p["files"] else \
                        " (%s held the bound on %d/%d)" % (peer, p["bound_held_files"], p["files"])
                    add("ratio" if is_target(peer, kind) else "ratio_info",
                        "ratio, %s, rel %s: best ebac (%s) %.2f < %s %.2f over %d tensors%s"
                        % (kind, bound_label(rel), best["compressor"], best["ratio"], peer, p["ratio"], p["files"], held),
                        bound_rel=rel, kind=kind, peer=peer, ebac=best["compressor"], ebac_ratio=best["ratio"],
                        peer_ratio=p["ratio"])
                for tag, typ, label in (("1t", "speed", "1 thread"), ("all", "speed_all", "all cores")):
                    for key in ("compress", "decompress"):
                        e, v = (fast or {}).get(key + "_MBps_" + tag), p[key + "_MBps_" + tag]
                        if e and v and v > e:
                            add(typ, "%s speed (%s), %s, rel %s: %s %.0f MB/s > ebac fast %.0f MB/s"
                                % (key, label, kind, bound_label(rel), peer, v, e),
                                bound_rel=rel, kind=kind, peer=peer, what=key, threads=tag, ebac_MBps=e, peer_MBps=v)
    # Per file, against the design's targets: the best ebac pipeline for that file.
    by_file = {}
    for r in rows:
        by_file.setdefault((r["bound_rel"], r["file"]), []).append(r)
    for (rel, f), rs in sorted(by_file.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        ebacs = [r for r in rs if r["family"] == "ebac"]
        if not ebacs:
            continue
        best = max(ebacs, key=lambda r: r["ratio"])
        for r in rs:
            if r["family"] != "ebac" and is_target(r["compressor"], r["kind"]) and best["ratio"] < r["ratio"]:
                held = "" if r["bound_held"] else " (%s breaks the bound here: max err / eb %.3f)" % (
                    r["compressor"], r["max_abs_error"] / r["eb_abs"])
                add("file_ratio", "ratio, %s (%s, %s), rel %s: best ebac (%s) %.2f < %s %.2f%s"
                    % (f, r["kind"], r["dtype"], bound_label(rel), best["compressor"], best["ratio"],
                       r["compressor"], r["ratio"], held),
                    bound_rel=rel, kind=r["kind"], peer=r["compressor"], file=f, ebac=best["compressor"],
                    ebac_ratio=best["ratio"], peer_ratio=r["ratio"], peer_bound_held=r["bound_held"])
    for r in rows:
        if r["family"] == "ebac" and not r["bound_held"]:
            add("bound", "BOUND VIOLATED: %s on %s, rel %s: max error %.6g > eb %.6g"
                % (r["compressor"], r["file"], bound_label(r["bound_rel"]), r["max_abs_error"], r["eb_abs"]),
                bound_rel=r["bound_rel"], file=r["file"], ebac=r["compressor"])
    return found


def peer_violations(rows):
    """Per peer: how many (tensor, bound) runs broke the bound, and how many only by the cast to 16 bits."""
    out = []
    for peer in peers_of(rows):
        bad = [r for r in rows if r["compressor"] == peer and not r["bound_held"]]
        if not bad:
            continue
        total = sum(1 for r in rows if r["compressor"] == peer)
        cast = [r for r in bad if r["dtype"] != "f32" and r.get("max_abs_error_f32") is not None
                and r["max_abs_error_f32"] <= r["eb_abs"]]
        worst = max(r["max_abs_error"] / r["eb_abs"] for r in bad)
        text = "%s broke the bound in %d of %d runs (worst max err / eb %.3f)" % (peer, len(bad), total, worst)
        if cast:
            text += "; %d of them on 16-bit tensors only through the rounding back to %s (its float32 output " \
                    "was within eb)" % (len(cast), "/".join(sorted({r["dtype"] for r in cast})))
        rest = [r for r in bad if r not in cast]
        if rest:
            own = max((r.get("max_abs_error_f32") or r["max_abs_error"]) / r["eb_abs"] for r in rest)
            text += "; %d in its own arithmetic (worst %.7f x eb before any 16-bit rounding)" % (len(rest), own)
        out.append(text)
    return out


def pipeline_rank(name):
    """Named pipelines in their CLI order, explicit triples after them."""
    return EBAC_PIPELINES.index(name) if name in EBAC_PIPELINES else len(EBAC_PIPELINES)


def fmt_mbps(v):
    """MB/s: whole numbers, one decimal below 10 (zstd -19 runs at a few MB/s)."""
    return fmt(v, ".1f" if v is not None and v < 10 else ".0f")


def fmt(v, spec):
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def markdown_intro(meta, skipped, all_cores):
    """The report's title and what it measured: inputs, host, bound, timing."""
    L = ["# ebac vs SZ3, ZFP and quantize+zstd", ""]
    L.append("Inputs: %s: %d tensors, %.1f MB (%s)." % (meta["source"], meta["files"], meta["bytes"] / 1e6,
                                                     ", ".join("%d %s" % (v, k) for k, v in sorted(meta["kinds"].items()))))
    if skipped:
        L.append("Skipped %d tensors under %d elements (%.3f MB; BN statistics, losses): headers dominate them and no "
                 "trainer compresses them." % (len(skipped), meta["min_elements"], sum(s["bytes"] for s in skipped) / 1e6))
    L.append("Host: %s, %s. %s." % (
        meta["cpu"], "%d threads for \"all\"" % meta["threads_all"] if all_cores else
        "no timing (--ratios-only)" if meta.get("ratios_only") else "one thread (--single-thread)",
        ", ".join("%s %s" % (k, v) for k, v in meta["versions"].items())))
    L.append("Every compressor gets the same absolute bound eb = rel x (max - min) of each tensor's finite values; "
             "errors are measured by compare.py after decompression. Timing: in memory, %s; MB/s are input bytes "
             "per second." % ("not measured (--ratios-only)" if meta.get("ratios_only") else
                              "best of N runs (N adaptive: >= %g s in total, <= 100; peers >= 3 unless a run takes >= %g s)"
                              % (meta["min_time"], LONG_RUN_S)
                              if meta["min_time"] > 0 else "one run per measurement (--min-time 0)"))
    L.append("")
    return L


def markdown_ratio_overview(agg, names, kinds, bounds):
    """One table: every compressor's ratio per kind and bound, the best in each column bold."""
    L = ["## Ratio overview (total input bytes / total compressed bytes)", ""]
    cols = [(k, b) for k in kinds for b in bounds]
    L.append("| compressor | " + " | ".join("%s %s" % (k, bound_label(b)) for k, b in cols) + " |")
    L.append("|---|" + "---:|" * len(cols))
    for n in names:
        cells = []
        for k, b in cols:
            a = agg.get((b, k, n))
            best = max((x["ratio"] for (bb, kk, _), x in agg.items() if bb == b and kk == k), default=None)
            v = fmt(a["ratio"], ".2f") if a else "-"
            cells.append("**%s**" % v if a and best and a["ratio"] == best else v)
        L.append("| %s | %s |" % (n, " | ".join(cells)))
    L.append("")
    L.append("Bold: the best ratio in the column.")
    L.append("")
    return L


def markdown_bound_tables(agg, names, kinds, bounds, all_cores):
    """Per bound and kind: each compressor's ratio, error, PSNR and speeds."""
    L = []
    for b in bounds:
        L.append("## rel %s" % bound_label(b))
        L.append("")
        for k in kinds:
            some = [agg[(b, k, n)] for n in names if (b, k, n) in agg]
            if not some:
                continue
            L.append("### %s (%d tensors, %.1f MB)" % (k, some[0]["files"], some[0]["bytes_in"] / 1e6))
            L.append("")
            L.append("| compressor | ratio | bits/value | max err / eb | bound held | PSNR dB | comp MB/s 1T | "
                     "dec MB/s 1T |" + (" comp MB/s all | dec MB/s all |" if all_cores else ""))
            L.append("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if all_cores else ""))
            for a in some:
                cells = [a["compressor"], fmt(a["ratio"], ".2f"), fmt(a["bits_per_value"], ".2f"),
                         fmt(a["max_error_over_eb"], ".3f"), "%d/%d" % (a["bound_held_files"], a["files"]),
                         fmt(a["psnr_mean"], ".1f"), fmt_mbps(a["compress_MBps_1t"]),
                         fmt_mbps(a["decompress_MBps_1t"])]
                if all_cores:
                    cells += [fmt_mbps(a["compress_MBps_all"]), fmt_mbps(a["decompress_MBps_all"])]
                L.append("| " + " | ".join(cells) + " |")
            L.append("")
    return L


# The sections of "Where ebac loses", in order: a loss type and its title.
LOSS_SECTIONS = (
    ("bound", "ebac bound violations"),
    ("ratio", "Ratio below a design target (SZ3 on post_relu, ZFP and quant+zstd -19 anywhere), aggregate"),
    ("file_ratio", "Ratio below a design target, per tensor"),
    ("speed_target", "The best-ratio pipeline compresses or decompresses slower than quant+zstd -1 "
                     "on one thread (design target, aggregate)"),
    ("speed_absolute", "The best-ratio pipeline below the one-core speed targets (compress %d MB/s, "
                       "decompress %d MB/s; design target, aggregate, on this host)"
                       % (SPEED_TARGET_MBPS["compress"], SPEED_TARGET_MBPS["decompress"])),
    ("speed", "A peer faster than ebac fast on one thread (aggregate)"),
    ("speed_all", "A peer faster than ebac fast with all cores (aggregate; not a design "
                  "target, and sensitive to other load on the machine)"),
    ("ratio_info", "For information, not a design target: other peers with a higher ratio "
                   "than ebac's best pipeline (aggregate)"))


def markdown_losses(summary, found):
    """"Where ebac loses": what was checked, then every case found, by type."""
    L = ["## Where ebac loses", ""]
    L.append("Checked: the best ebac pipeline's ratio against SZ3 on post_relu tensors and against ZFP (and "
             "quant+zstd -19 where it ran) everywhere (aggregate per bound and kind, then per file), the compress "
             "and decompress speed of the named pipeline with the best ratio against quant+zstd -1 and against "
             "the one-core targets (%d and %d MB/s) where quant+zstd -1 ran, every peer's "
             "speed against ebac fast (one thread, then all cores), and ebac's bound on every file; then, for "
             "information, every other peer ratio above ebac's best."
             % (SPEED_TARGET_MBPS["compress"], SPEED_TARGET_MBPS["decompress"]))
    L.append("")
    if not summary:
        L.append("Nothing was measured.")
    elif not [f for f in found if f["type"] not in ("ratio_info", "speed_all")]:
        L.append("Nowhere: ebac wins every case checked.")
        L.append("")
    for typ, title in LOSS_SECTIONS:
        items = [f for f in found if f["type"] == typ]
        if items:
            L.append("%s: %d case%s" % (title, len(items), "" if len(items) == 1 else "s"))
            L.append("")
            for f in items:
                L.append("- " + f["text"])
            L.append("")
    return L


def markdown_listed(title, entries):
    """A section of one bullet per entry, or nothing when there are none."""
    if not entries:
        return []
    return ["## " + title, ""] + ["- %s" % e for e in entries] + [""]


COLUMN_KEY = (
    "Column key: ratio = input bytes / compressed bytes (totals over the tensors); bits/value = 8 x compressed "
    "bytes / values; max err / eb = worst max |x - y| over the tensors divided by that tensor's eb (<= 1 means "
    "the bound held); bound held = tensors whose reconstruction is within eb everywhere (NaN/Inf bit-exact); "
    "PSNR = mean over tensors of 20 log10(range) - 10 log10(MSE); MB/s = total input bytes / total best time, "
    "1T = one thread, all = every core (ebac --threads 0, SZ3 openmp, ZFP OpenMP policy, zstd threads=-1); "
    "'-' = not available. quant+zstd -L: round(x / 2eb) in float32, the codes in the smallest integer type "
    "that holds them (int8 / int16 / int32, chosen from max |x| / 2eb; the JSON's code_type), then zstd "
    "level L (the zstd CLI's -L). "
    "ebac best: per tensor, the ebac pipeline with the smallest stream (no MB/s of its own).")


def markdown(meta, summary, found, violations, skipped, failures, rows_notes):
    """The whole report: intro, ratio overview, per-bound tables, notes, losses, peers' bound, failures, key."""
    all_cores = not (meta.get("single_thread") or meta.get("ratios_only"))
    bounds = sorted({a["bound_rel"] for a in summary}, reverse=True)
    names = []
    for a in summary:
        if a["compressor"] not in names:
            names.append(a["compressor"])
    names.sort(key=lambda n: (0 if n.startswith("ebac") else 1,
                              (pipeline_rank(n[5:]), 0) if n.startswith("ebac") else peer_rank(n)))
    agg = {(a["bound_rel"], a["kind"], a["compressor"]): a for a in summary}
    kinds = [k for k in KINDS if any(a["kind"] == k for a in summary)]

    L = markdown_intro(meta, skipped, all_cores)
    L += markdown_ratio_overview(agg, names, kinds, bounds)
    L += markdown_bound_tables(agg, names, kinds, bounds, all_cores)
    notes = {n: rows_notes[n] for n in names if rows_notes.get(n)}
    if notes:
        L.append("Notes: " + "; ".join("%s: %s" % (n, ", ".join(v)) for n, v in notes.items()) + ".")
        L.append("")
    L += markdown_losses(summary, found)
    L += markdown_listed("Peers and the bound", violations)
    L += markdown_listed("Failures", failures)
    L.append(COLUMN_KEY)
    L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions(args, have):
    v = {}
    try:
        line = run_checked([args.ebac, "--version"])
        v["ebac"] = line.split()[1]
        # "host codec x86-64-v3" or "baseline": the build of the codec that ran (EBAC_HOST_ISA)
        if "host codec " in line:
            v["ebac"] += " (host codec %s)" % line.split("host codec ", 1)[1].strip().rstrip(")")
    except Exception:  # noqa: BLE001 - only a label
        v["ebac"] = "?"
    if "sz3" in have:
        try:
            from importlib.metadata import version
            v["SZ3 (pysz)"] = version("pysz")
        except Exception:  # noqa: BLE001
            v["SZ3 (pysz)"] = "?"
    if "zstd" in have:
        import zstandard
        v["zstd"] = "%s (python-zstandard %s)" % (".".join(map(str, zstandard.ZSTD_VERSION)), zstandard.__version__)
    v["numpy"] = np.__version__
    return v


def default_ebac():
    for sub in ("", "release", "main"):
        p = os.path.join(REPO, "build", sub, "bin", "ebac")
        if os.access(p, os.X_OK):
            return p
    return os.path.join(REPO, "build", "bin", "ebac")


def bound_label(b):
    """1e-3 rather than 0.001."""
    m, e = ("%.0e" % b).split("e")
    return "%se%d" % (m, int(e)) if float("%se%d" % (m, int(e))) == b else "%g" % b


def argument_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--corpus", default=os.path.join(REPO, "data", "corpus"), help="corpus directory with manifest.tsv")
    ap.add_argument("--file", action="append", default=[], help="raw little-endian array (repeatable); replaces the corpus")
    ap.add_argument("--dtype", action="append", default=[], help="f32|f16|bf16 per --file (one value applies to all)")
    ap.add_argument("--dims", action="append", default=[], help="D0,D1,... outermost first, per --file (one applies to all)")
    ap.add_argument("--kind", action="append", default=[], help="post_relu|other per --file (default: guessed from the data)")
    ap.add_argument("--bounds", default="1e-2,1e-3,1e-4", help="relative bounds (default 1e-2,1e-3,1e-4)")
    ap.add_argument("--out", default=os.path.join(REPO, "out"), help="output directory (default out/)")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds of repetitions per timing (default 0.2)")
    ap.add_argument("--ratios-only", action="store_true",
                    help="ratio, error and PSNR only: one run each, no MB/s (for dense bound sweeps)")
    ap.add_argument("--min-elements", type=int, default=4096, help="skip corpus tensors smaller than this (default 4096)")
    ap.add_argument("--max-files", type=int, default=0, help="use only the first N tensors (0: all)")
    ap.add_argument("--compressors", default="ebac,sz3,zfp,zstd", help="subset of ebac,sz3,zfp,zstd")
    ap.add_argument("--zstd-levels", default="3",
                    help="zstd levels of the quantize+zstd baseline, one compressor each (default 3; e.g. 1,19: "
                         "the zstd CLI's -1 and -19)")
    ap.add_argument("--single-thread", action="store_true",
                    help="time one thread only: no all-core runs of ebac, SZ3, ZFP and zstd")
    ap.add_argument("--ebac-pipelines", default=",".join(EBAC_PIPELINES),
                    help="ebac pipelines to run: named ones and/or PREDICTOR:QUANTIZER:ENCODER triples "
                         "(default: every named pipeline)")
    ap.add_argument("--ebac", default=default_ebac(), help="the ebac CLI (default: build/bin/ebac, else build/*/bin/ebac)")
    ap.add_argument("--zfp-runner", default=os.path.join(REPO, "build", "peers", "zfp_runner"))
    ap.add_argument("--from-json", metavar="JSON", help="re-render the report from a compare.json, measuring nothing")
    return ap


def settle_arguments(args):
    """Checks the measuring options and turns the lists into values (in args); returns the zstd levels, the
    bounds and the compressors asked for."""
    if args.ratios_only:
        args.min_time = 0.0
    args.all_cores = not (args.ratios_only or args.single_thread)
    try:
        zstd_levels = [int(v) for v in args.zstd_levels.split(",") if v.strip()]
    except ValueError:
        raise SystemExit("--zstd-levels: comma-separated integers")
    if not zstd_levels:
        raise SystemExit("--zstd-levels: at least one level")
    args.ebac_pipelines = [p.strip() for p in args.ebac_pipelines.split(",") if p.strip()]
    bounds = [float(b) for b in args.bounds.split(",") if b.strip()]
    if not bounds or any(not (0 < b <= 1) for b in bounds):
        raise SystemExit("--bounds must be relative bounds in (0, 1]")
    want = {c.strip() for c in args.compressors.split(",") if c.strip()}
    unknown = want - {"ebac", "sz3", "zfp", "zstd"}
    if unknown:
        raise SystemExit("unknown compressors: %s" % ", ".join(sorted(unknown)))
    return zstd_levels, bounds, want


def available_compressors(args, want):
    """The compressors asked for that can run here, and a failure line for each that cannot."""
    failures = []
    have = set()
    if "ebac" in want:
        if not os.access(args.ebac, os.X_OK):
            raise SystemExit("%s not found: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && "
                             "cmake --build build -j2 --target ebac_cli" % args.ebac)
        have.add("ebac")
    if "sz3" in want:
        try:
            import pysz  # noqa: F401
            have.add("sz3")
        except ImportError:
            failures.append("SZ3 skipped: pysz not importable (/usr/bin/python3 -m pip install --no-deps "
                            "--target build/pydeps pysz)")
    if "zfp" in want:
        if os.access(args.zfp_runner, os.X_OK):
            have.add("zfp")
        else:
            failures.append("ZFP skipped: %s not found (cmake -S studies/peers -B build/peers -DCMAKE_BUILD_TYPE=Release "
                            "&& cmake --build build/peers)" % args.zfp_runner)
    if "zstd" in want:
        try:
            import zstandard  # noqa: F401
            have.add("zstd")
        except ImportError:
            failures.append("quant+zstd skipped: python3-zstandard missing (apt-get install python3-zstandard)")
    for f in failures:
        log("compare: " + f)
    return have, failures


def file_specs(args):
    """The tensors given by --file (one spec each, --dtype/--dims/--kind once or once per file)."""
    def per_file(values, name, default=None):
        if not values:
            if default is not None:
                return [default] * len(args.file)
            raise SystemExit("--%s is required with --file" % name)
        if len(values) == 1:
            return values * len(args.file)
        if len(values) != len(args.file):
            raise SystemExit("give --%s once or once per --file" % name)
        return values
    dts, dms, kds = per_file(args.dtype, "dtype"), per_file(args.dims, "dims"), per_file(args.kind, "kind", "auto")
    specs = []
    for path, dt, dm, kd in zip(args.file, dts, dms, kds):
        if dt not in STORAGE:
            raise SystemExit("--dtype must be f32, f16 or bf16, not %r" % dt)
        if kd not in KINDS + ["auto"]:
            raise SystemExit("--kind must be post_relu or other")
        specs.append((path, os.path.basename(path), dt, parse_dims(dm), kd, {}))
    return specs


def input_specs(args):
    """The tensors to measure (from --file or the corpus), those skipped as too small, and the source's label."""
    skipped = []
    if args.file:
        specs = file_specs(args)
        source = "%d raw file%s" % (len(specs), "" if len(specs) == 1 else "s")
    else:
        specs = []
        for s in corpus_inputs(args.corpus):
            n = int(np.prod(s[3]))
            if n < args.min_elements:
                skipped.append({"file": s[1], "n": n, "bytes": n * ITEMSIZE[s[2]]})
            else:
                specs.append(s)
        source = os.path.relpath(args.corpus, os.getcwd()) if args.corpus.startswith(REPO) else args.corpus
    if args.max_files:
        specs = specs[:args.max_files]
    if not specs:
        raise SystemExit("no inputs")
    return specs, skipped, source


def measure_file(args, t, bounds, zstd_levels, have, tmp):
    """Every compressor available on one tensor at every bound: its result rows."""
    eb_of = [(rel, rel * t.range) for rel in bounds]
    file_rows = []
    for rel, eb in eb_of:
        if "ebac" in have:
            file_rows += ebac_results(args, t, eb, rel, tmp)
        if "sz3" in have:
            file_rows += sz3_results(args, t, eb, rel)
        if "zstd" in have:
            for level in zstd_levels:
                file_rows += zstd_results(args, t, eb, rel, level)
    if "zfp" in have:
        file_rows += zfp_results(args, t, eb_of, tmp)
    return file_rows


def measure_all(args, specs, bounds, zstd_levels, have, failures):
    """Measures every tensor; returns the rows, the files' descriptions and how many tensors failed (each one a
    line in failures, its rows left out)."""
    rows, files, broken = [], [], 0
    with tempfile.TemporaryDirectory(prefix="ebac-compare-") as tmp:
        for fi, (path, label, dt, dims, kind, meta) in enumerate(specs):
            t = Tensor(path, label, dt, dims, "other" if kind == "auto" else kind, meta)
            if kind == "auto":
                t.kind = guess_kind(t)
            files.append({"file": label, "path": path, "dtype": dt, "dims": dims, "kind": t.kind, "n": t.n,
                          "bytes": t.bytes_in, "min": t.vmin, "max": t.vmax, "zero_fraction": t.zero_fraction, **meta})
            log("compare: [%d/%d] %s %s %s (%s, %.2f MB)" % (fi + 1, len(specs), label, dt,
                                                            "x".join(map(str, dims)), t.kind, t.bytes_in / 1e6))
            if t.range <= 0:
                failures.append("%s: constant tensor (range 0), no relative bound: skipped" % label)
                continue
            try:
                file_rows = measure_file(args, t, bounds, zstd_levels, have, tmp)
            except Exception as e:  # noqa: BLE001 - one bad file must not sink the run
                failures.append("%s: %s (file left out of every aggregate)" % (label, e))
                log("compare: " + failures[-1])
                broken += 1
                continue
            rows += file_rows + best_ebac_rows(file_rows)
    return rows, files, broken


def run_meta(args, argv, files, source, bounds, zstd_levels, have, rows, elapsed):
    """What the report says about the run: inputs, settings, host, versions, date, the command."""
    kinds = {}
    for f in files:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    meta = {"source": source, "files": len(files), "bytes": sum(f["bytes"] for f in files), "kinds": kinds,
            "min_elements": args.min_elements, "bounds": bounds, "min_time": args.min_time,
            "ratios_only": args.ratios_only, "single_thread": args.single_thread, "zstd_levels": zstd_levels,
            "threads_all": os.cpu_count() or 1, "cpu": cpu_name(), "versions": versions(args, have),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "seconds": round(elapsed, 1),
            "command": " ".join([os.path.relpath(sys.argv[0], os.getcwd())] + (argv if argv is not None else sys.argv[1:]))}
    zfp_v = next((r.get("zfp_version") for r in rows if r.get("zfp_version")), None)
    if zfp_v:
        meta["versions"]["ZFP"] = zfp_v
    return meta


def main(argv=None):
    args = argument_parser().parse_args(argv)
    if args.from_json:
        return rerender(args.from_json, args.out)
    zstd_levels, bounds, want = settle_arguments(args)
    have, failures = available_compressors(args, want)
    specs, skipped, source = input_specs(args)

    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    rows, files, broken = measure_all(args, specs, bounds, zstd_levels, have, failures)
    elapsed = time.time() - t_start
    meta = run_meta(args, argv, files, source, bounds, zstd_levels, have, rows, elapsed)
    write_report(args.out, meta, files, skipped, failures, rows)
    log("compare: %d tensors x %d bounds in %.0f s; wrote %s/compare.md and compare.json"
        % (len(files), len(bounds), elapsed, args.out))
    if broken:
        log("compare: %d tensor%s failed (see Failures)" % (broken, "" if broken == 1 else "s"))
    return 1 if broken or not rows else 0


def write_report(out, meta, files, skipped, failures, rows):
    """Aggregates rows, prints the markdown, writes OUT/compare.md and OUT/compare.json."""
    summary = aggregate(rows)
    found = losses(summary, rows)
    violations = peer_violations(rows)
    notes = {}
    for r in rows:
        if r.get("note") and r["note"] not in notes.setdefault(r["compressor"], []):
            notes[r["compressor"]].append(r["note"])
    md = markdown(meta, [a for a in summary if a["kind"] != "all"], found, violations, skipped, failures, notes)
    print(md)

    def clean(o):  # JSON has no inf/nan
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(clean({"meta": meta, "files": files, "skipped": skipped, "failures": failures,
                         "summary": summary, "losses": found, "peer_violations": violations, "results": rows}),
                  f, indent=1)


def rerender(path, out):
    """--from-json: the report again from a compare.json's per-file results, nothing re-measured."""
    with open(path) as f:
        d = json.load(f)
    for r in d["results"]:  # JSON stored inf PSNR (lossless) as null
        if r.get("psnr") is None:
            r["psnr"] = math.inf
    write_report(out, d["meta"], d["files"], d["skipped"], d["failures"], d["results"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
