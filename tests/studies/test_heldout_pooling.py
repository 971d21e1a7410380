#!/usr/bin/env python3
"""studies/heldout_study.py's measurement rule: pooled_pair and sampling_interval.

pooled_pair is given grad-error answers chosen here (its `run` replaced), so
the pooled ratio it must return follows from figures this test wrote:
sqrt(mean predicted^2 / mean measured^2) over the batches, not the mean of
the batches' ratios, with the batches' degrees of freedom summed for the
interval. sampling_interval is checked against scipy's chi-square quantiles
(an independent implementation) where Wilson-Hilferty is accurate.

    /usr/bin/python3 -m unittest tests/studies/test_heldout_pooling.py
"""
import math
import os
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "studies"))
import heldout_study as h  # noqa: E402


class Pooling(unittest.TestCase):
    def test_pooled_ratio_and_dof(self):
        # three batches: predicted 1, 2, 2; measured 2, 1, 2; dof 8, 16, 24
        answers = iter([(1.0, 2.0, 8.0), (2.0, 1.0, 16.0), (2.0, 2.0, 24.0)])
        calls = []

        def fake_run(cmd):
            calls.append(cmd)
            p, m, dof = next(answers)
            return {"predicted_sigma": p, "measured_sigma": m, "ratio": p / m, "effective_dof": dof}
        rows = [dict(model="m", module="bn", kind="batchnorm", in_file="x%d" % b, grad_file="g%d" % b,
                     gamma_file="c%d" % b, input_shape="16,8,4,4", eps="1e-05", batch=str(b)) for b in range(3)]
        saved, h.run = h.run, fake_run
        try:
            ratio, iv, first, first_iv = h.pooled_pair("ebac", "/d", rows, 0.1, "fast", 4, None, {"role": "tune"})
        finally:
            h.run = saved
        self.assertEqual(len(calls), 3)
        self.assertTrue(all("--trials" in c and c[c.index("--trials") + 1] == "4" for c in calls))
        self.assertAlmostEqual(ratio, math.sqrt((1 + 4 + 4) / (4 + 1 + 4)))  # 1.0; the mean of ratios would be 1.17
        self.assertAlmostEqual(first, 0.5)
        self.assertEqual(iv, h.sampling_interval(48.0))
        self.assertEqual(first_iv, h.sampling_interval(8.0))


class Interval(unittest.TestCase):
    def test_against_chi_square(self):
        from scipy.stats import chi2
        for dof in (20, 64, 256, 2048):
            lo, hi = h.sampling_interval(dof)
            want_lo = math.sqrt(chi2.ppf(0.0005, dof) / dof)
            want_hi = math.sqrt(chi2.ppf(0.9995, dof) / dof)
            self.assertAlmostEqual(lo, want_lo, delta=0.01 * want_lo, msg="dof %d" % dof)
            self.assertAlmostEqual(hi, want_hi, delta=0.01 * want_hi, msg="dof %d" % dof)


if __name__ == "__main__":
    unittest.main()
