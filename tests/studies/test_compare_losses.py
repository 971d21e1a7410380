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


if __name__ == "__main__":
    unittest.main()
