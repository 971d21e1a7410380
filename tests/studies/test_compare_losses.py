#!/usr/bin/env python3
"""studies/compare.py's "Where ebac loses" checks of the design's speed targets.

losses() is given aggregates written here, so each verdict below follows from
figures this test chose (not from a measurement): the best-ratio named
pipeline against quant+zstd -1 on both sides, and against the one-core
targets, wherever quant+zstd -1 ran; nowhere else.
"""
import os
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "studies"))
import compare  # noqa: E402


def agg(compressor, family, ratio, comp, dec, rel=1e-3, kind="post_relu"):
    return dict(bound_rel=rel, kind=kind, compressor=compressor, family=family, ratio=ratio, files=2,
                bound_held_files=2, compress_MBps_1t=comp, decompress_MBps_1t=dec,
                compress_MBps_all=None, decompress_MBps_all=None)


def speed_findings(summary):
    return sorted((f["type"], f["what"]) for f in compare.losses(summary, [])
                  if f["type"] in ("speed_target", "speed_absolute"))


class SpeedTargets(unittest.TestCase):
    def test_targets(self):
        self.assertEqual(compare.SPEED_TARGET_MBPS, {"compress": 800, "decompress": 1000})

    def test_ahead_everywhere_finds_nothing(self):
        s = [agg("ebac max-bound", "ebac", 10.0, 900, 1100), agg("ebac fast", "ebac", 4.0, 2000, 3000),
             agg("quant+zstd -1", "quant+zstd", 6.0, 500, 900)]
        self.assertEqual(speed_findings(s), [])

    def test_slower_decompression_than_zstd_1(self):
        s = [agg("ebac max-bound", "ebac", 10.0, 900, 1050), agg("ebac fast", "ebac", 4.0, 2000, 3000),
             agg("quant+zstd -1", "quant+zstd", 6.0, 500, 1200)]
        self.assertEqual(speed_findings(s), [("speed_target", "decompress")])

    def test_below_the_one_core_targets(self):
        s = [agg("ebac max-bound", "ebac", 10.0, 700, 600), agg("ebac fast", "ebac", 4.0, 2000, 3000),
             agg("quant+zstd -1", "quant+zstd", 6.0, 500, 500)]
        self.assertEqual(speed_findings(s), [("speed_absolute", "compress"), ("speed_absolute", "decompress")])

    def test_the_best_ratio_pipeline_is_the_one_judged(self):
        # fast is quick but its ratio is lower: max-bound's speed is what counts.
        s = [agg("ebac max-bound", "ebac", 10.0, 400, 1100), agg("ebac fast", "ebac", 4.0, 2000, 3000),
             agg("quant+zstd -1", "quant+zstd", 6.0, 500, 900)]
        self.assertEqual(speed_findings(s), [("speed_absolute", "compress"), ("speed_target", "compress")])

    def test_no_speed_checks_without_zstd_1(self):
        s = [agg("ebac max-bound", "ebac", 10.0, 100, 100), agg("ebac fast", "ebac", 4.0, 2000, 3000),
             agg("quant+zstd", "quant+zstd", 6.0, 500, 900)]
        self.assertEqual(speed_findings(s), [])


class PeerCodeType(unittest.TestCase):
    """quant+zstd's codes go in the smallest integer type that holds them (issue 51: a peer set up as a user
    would), chosen from max |x| before quantizing; every code must fit it."""

    def test_smallest_type(self):
        import numpy as np
        self.assertEqual([compare.code_dtype(v) for v in (0, 127, 128, 32767, 32768, 2**31 - 1, 2**31)],
                         [np.int8, np.int8, np.int16, np.int16, np.int32, np.int32, np.int64])

    def test_every_code_fits(self):
        import numpy as np
        rng = np.random.default_rng(5)
        for rel in (1e-1, 1e-2, 1e-3, 1e-4):
            for x in (np.maximum(rng.standard_normal(4096), 0).astype(np.float32),   # post-ReLU
                      (rng.standard_normal(4096) * 3 - 1).astype(np.float32)):       # dense, off-centre
                step = np.float32(2 * rel * float(x.max() - x.min()))
                t = compare.code_dtype(int(np.ceil(float(np.abs(x).max()) / float(step))) + 1)
                q = np.rint(x / step)
                info = np.iinfo(t)
                self.assertTrue(info.min <= q.min() and q.max() <= info.max, (rel, t))
                # the type a user picks from the bound: int8 at 1e-1 and 1e-2, int16 at 1e-3 and 1e-4
                self.assertEqual(t, np.int8 if rel >= 1e-2 else np.int16, (rel, float(x.min()), float(x.max())))


if __name__ == "__main__":
    unittest.main()
