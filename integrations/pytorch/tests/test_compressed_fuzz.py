"""Compressed objects with edited fields and blob bytes, through the extension (issue 53, item 1).

A Compressed is a plain Python object anyone can build or unpickle. Each case
takes a Compressed that ebac_torch.compress wrote, changes one to three of its
fields (shape, strides, dtype, digest) or its blob's bytes at random, and hands
it to ebac_torch.decompress. What may happen:

* ValueError or TypeError whose message names a field that was changed;
* a tensor equal to what was stored: same dtype, shape, strides and bits;
* only when every change was to payload bytes (past the header) of a blob
  written without a checksum: a tensor of the stored dtype, shape and
  strides whose values may differ (no checksum to tell; see Compressed).

Anything else fails the test: another exception, a wrong tensor, and a crash
(zero strides used to end the interpreter with a heap corruption).

CI runs EBAC_FUZZ_CASES cases (default 5000, under a second). For a long run
outside CI:  python3 integrations/pytorch/tests/test_compressed_fuzz.py --cases 1000000 [--seed S]
"""

import argparse
import copy
import os
import random
import sys
import unittest

from _common import C, ebac_torch, torch

FIELDS = ("shape", "strides", "dtype", "blob", "digest")
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.bool, torch.uint8, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.float64, torch.complex64, torch.qint8, "float32", None, 1]


def bases():
    """(name, Compressed, reference tensor) for a few layouts and dtypes, with and without a checksum."""
    g = torch.Generator().manual_seed(53)
    x4 = torch.relu(torch.randn(2, 3, 5, 7, generator=g))
    idx = torch.nn.functional.max_pool2d(torch.randn(2, 3, 8, 8, generator=g), 2, 2, return_indices=True)[1]
    cases = [
        ("f32 nchw", x4, {}),
        ("f32 channels_last", x4.contiguous(memory_format=torch.channels_last), {}),
        ("f32 transposed square", torch.randn(6, 6, generator=g).t(), {}),  # two equal dims: only the digest tells
        ("f16 size-1 dims", torch.randn(1, 4, 1, 9, generator=g).half(), {}),
        ("bf16 long", torch.randn(300, generator=g).bfloat16(), {}),
        ("f32 rank 9", torch.randn(2, 2, 2, 2, 2, 2, 2, 2, 3, generator=g), {}),  # folded into 8 extents
        ("bool mask", torch.randn(4, 33, generator=g) > 0, {}),
        ("i64 pool indices", idx, {"pooling": [[8, 8], [2, 2], [2, 2], [0, 0], [1, 1]]}),
        ("u8 constant", torch.full((64, 64), 7, dtype=torch.uint8), {}),
    ]
    out = []
    for checksum in (False, True):
        for name, t, kw in cases:
            c = ebac_torch.compress(t, 1e-2, "rel", "ratio", threads=1, checksum=checksum, **kw)
            ref = ebac_torch.decompress(c, threads=1)
            out.append(("%s%s" % (name, " +checksum" if checksum else ""), c, ref, checksum))
    return out


def bits(t):
    """The tensor's elements as integers of their width (NaN payloads included)."""
    if t.dtype in (torch.float32,):
        return t.view(torch.int32)
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16)
    return t


def _ints(rng, v):
    return rng.choice([-1, 0, 1, 2, v - 1, v + 1, 2 * v, v * v + 1, 2 ** 31, 2 ** 62, 2 ** 63, -2 ** 64, 3.5, "2"])


def mutate_list(rng, vals):
    vals = list(vals)
    op = rng.randrange(7)
    if op == 0 and vals:
        i = rng.randrange(len(vals))
        vals[i] = _ints(rng, vals[i] if isinstance(vals[i], int) else 1)
    elif op == 1:
        vals.insert(rng.randrange(len(vals) + 1), rng.choice([1, 1, 0, 2]))
    elif op == 2 and vals:
        del vals[rng.randrange(len(vals))]
    elif op == 3 and len(vals) >= 2:
        i, j = rng.sample(range(len(vals)), 2)
        vals[i], vals[j] = vals[j], vals[i]
    elif op == 4:
        vals = vals[::-1]
    elif op == 5:
        vals = [0] * len(vals)
    else:
        return rng.choice([None, 5, "shape", [None], [[1]]])
    return vals


def _same(a, b):
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(type(x) is type(y) and x == y for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def payload_edit_only(c, d, head):
    """True when d differs from c at most in blob bytes past the first `head`
    (the fields and the header as compress wrote them)."""
    b = d.blob
    return (all(_same(getattr(c, f), getattr(d, f)) for f in ("shape", "strides", "dtype", "digest"))
            and isinstance(b, torch.Tensor) and b.dtype == torch.uint8 and b.dim() == 1 and b.is_contiguous()
            and b.numel() == c.blob.numel() and torch.equal(b[:head], c.blob[:head]))


def mutate(rng, c, checksum):
    """Changes 1 to 3 things of a copy of c; returns (copy, fields changed,
    payload_only: whether the copy differs only in payload bytes of a blob
    without a checksum, whose values may then differ)."""
    d = copy.copy(c)
    d.blob = c.blob.clone()
    changed = set()
    head = min(c.blob.numel(), C.max_header_bytes)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        field = rng.choice(FIELDS)
        changed.add(field)
        if field == "blob":
            b = d.blob
            op = rng.randrange(8) if isinstance(b, torch.Tensor) and b.dtype == torch.uint8 and b.dim() == 1 else 7
            if op <= 2 and b.numel():  # one bit, one byte, or a byte in the header
                i = rng.randrange(b.numel()) if op < 2 else rng.randrange(min(b.numel(), 120))
                b[i] = (int(b[i]) ^ (1 << rng.randrange(8))) if op != 1 else rng.randrange(256)
                continue
            if op == 3:
                d.blob = b[:rng.randrange(b.numel() + 1)].clone()
            elif op == 4:
                d.blob = torch.cat([b, torch.randint(0, 256, (rng.randrange(1, 64),), dtype=torch.uint8)])
            elif op == 5:
                d.blob = b.repeat(2)[::2]  # not contiguous
            elif op == 6:
                d.blob = b.to(rng.choice([torch.int16, torch.float32, torch.int8])) if rng.random() < 0.5 else b.view(1, -1)
            else:
                d.blob = rng.choice([None, b"EBAC", [1, 2]])
            continue
        if field == "shape":
            d.shape = mutate_list(rng, d.shape if isinstance(d.shape, (tuple, list)) else ())
        elif field == "strides":
            d.strides = mutate_list(rng, d.strides if isinstance(d.strides, (tuple, list)) else ())
        elif field == "dtype":
            d.dtype = rng.choice(DTYPES)
        else:
            g = d.digest
            if isinstance(g, str) and g and rng.random() < 0.7:
                i = rng.randrange(len(g))
                d.digest = g[:i] + ("0" if g[i] != "0" else "1") + g[i + 1:]
            else:
                d.digest = rng.choice(["", 0, b"x", "f" * 32])
    return d, changed, not checksum and payload_edit_only(c, d, head)


def check_case(rng, base):
    """One case; returns an error text, or None when the outcome is allowed."""
    name, c, ref, checksum = base
    d, changed, payload_only = mutate(rng, c, checksum)
    try:
        y = ebac_torch.decompress(d, threads=1)
    except (ValueError, TypeError) as e:
        if not any(f in str(e) for f in changed):
            return "%s: changed %s, but the error names none of them: %s" % (name, sorted(changed), e)
        return None
    except Exception as e:  # noqa: BLE001  (any other exception is a finding)
        return "%s: changed %s: %s: %s" % (name, sorted(changed), type(e).__name__, e)
    if y.dtype != ref.dtype or y.shape != ref.shape or y.stride() != ref.stride():
        return "%s: changed %s: decoded %s %s %s instead of %s %s %s" % (
            name, sorted(changed), y.dtype, tuple(y.shape), y.stride(), ref.dtype, tuple(ref.shape), ref.stride())
    if not payload_only and not torch.equal(bits(y), bits(ref)):
        return "%s: changed %s: decoded other values without an error" % (name, sorted(changed))
    return None


def run(cases, seed):
    rng = random.Random(seed)
    bs = bases()
    failures = []
    for k in range(cases):
        msg = check_case(rng, bs[k % len(bs)])
        if msg is not None:
            failures.append("case %d (seed %d): %s" % (k, seed, msg))
    return failures


class CompressedFuzz(unittest.TestCase):
    def test_random_edits_decode_exactly_or_raise_naming_the_field(self):
        cases = int(os.environ.get("EBAC_FUZZ_CASES", "5000"))
        failures = run(cases, int(os.environ.get("EBAC_FUZZ_SEED", "53")))
        self.assertEqual(failures, [], "\n".join(failures))

    def test_the_cases_of_issue_53(self):
        x = torch.randn(4, 8, 9, 9)
        c = ebac_torch.compress(x, 1e-2, "rel", "ratio")
        for shape, strides, dtype, field in [((4, 8, 9, 9), (0, 0, 0, 0), torch.float32, "strides"),
                                             ((4, 8, 9, 9), tuple(2 * s for s in c.strides), torch.float32, "strides"),
                                             ((4, 8, 9, 9), c.strides, torch.float64, "dtype"),
                                             ((4, 8, 9, 10), c.strides, torch.float32, "shape")]:
            for digest in (c.digest, None):  # with and without the digest compress wrote
                bad = ebac_torch.Compressed(c.blob, shape, strides, dtype, digest)
                with self.assertRaisesRegex((ValueError, TypeError), field):
                    ebac_torch.decompress(bad)
                if field != "dtype":  # the extension's own entry point, no Python checks before it
                    with self.assertRaisesRegex(ValueError, field):
                        C.decompress(c.blob, list(shape), list(strides), 1, 1)

    def test_header_checks_without_a_digest(self):
        # A Compressed built by hand (no digest): what the header can refute is refused ...
        t = torch.randn(6, 10)
        c = ebac_torch.compress(t, 1e-2, "rel", "ratio")
        with self.assertRaisesRegex(ValueError, "shape and strides"):
            ebac_torch.decompress(ebac_torch.Compressed(c.blob, (10, 6), (6, 1), torch.float32))
        with self.assertRaisesRegex(ValueError, "blob holds float32"):
            ebac_torch.decompress(ebac_torch.Compressed(c.blob, (6, 10), (10, 1), torch.int32))
        # ... and a transposed layout of the same extents is the stored tensor seen transposed:
        # the header holds extents in memory order only; the digest is what refuses this.
        y = ebac_torch.decompress(ebac_torch.Compressed(c.blob, (10, 6), (1, 10), torch.float32))
        self.assertTrue(torch.equal(y, ebac_torch.decompress(c).t()))
        with self.assertRaisesRegex(ValueError, "digest"):
            ebac_torch.decompress(ebac_torch.Compressed(c.blob, (10, 6), (1, 10), torch.float32, c.digest))

    def test_pickled_compressed_round_trips_and_is_checked(self):
        import pickle
        t = torch.randn(3, 40)
        c = ebac_torch.compress(t, 1e-3, "abs", "fast", checksum=True)
        d = pickle.loads(pickle.dumps(c))
        self.assertTrue(torch.equal(ebac_torch.decompress(d), ebac_torch.decompress(c)))
        d.strides = (1, 3)
        with self.assertRaisesRegex(ValueError, "strides"):
            ebac_torch.decompress(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    failures = run(a.cases, a.seed)
    print("%d cases (seed %d): %d failures" % (a.cases, a.seed, len(failures)))
    for f in failures[:50]:
        print(f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("--"):
        main()
    else:
        unittest.main()
