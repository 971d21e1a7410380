"""The pack/unpack paths' cheaper forms (issue 50, step time) give exactly what the plain formulas give.

hooks._row_normalized takes a CPU tensor's rows and their statistics from
the extension's layernorm_rows in one pass (checked against each quantity
in float64, and against torch's ops), derived.layernorm_rows_bound takes
the LayerNorm output's range from the rows' column ranges without forming
the output, the dropout noise's largest magnitude comes from aminmax, and
rebuilds work in place on the tensors they create. Each is checked here
against the straightforward formula written out in this file (the one the
code used before): bit for bit, or within one unit in the last place where
a double sum is rounded to float32; on inputs that exercise signs, zeros,
NaN and infinities.
"""

import math
import unittest

from _common import ebac_torch, torch

from ebac_torch import derived, hooks

nn = torch.nn


def reference_output_range(rows, weight, bias):
    """min and max of (rows - mean) * w + b, the output formed element by element."""
    shift = rows.mean(dim=1)
    y = rows - shift[:, None]
    if weight is not None:
        y = y * weight.detach().reshape(1, -1)
    if bias is not None:
        y = y + bias.detach().reshape(1, -1)
    return float(y.min()), float(y.max())


def reference_rows_bound(rows, row_eb, weight, bias, eb, mode):
    """derived.layernorm_rows_bound as first written (y formed, |rows| formed)."""
    shift = rows.mean(dim=1)
    lo, hi = reference_output_range(rows, weight, bias)
    w_max = 1.0 if weight is None else float(weight.detach().abs().max())
    need = eb * (hi - lo) if mode == "rel" else eb
    bound = row_eb
    if w_max > 0 and need / (w_max * derived.GELU_MARGIN) < row_eb:
        tighter = need / (w_max * derived.GELU_MARGIN)
        if tighter * derived.LAYERNORM_MAX_TIGHTENING >= row_eb:
            bound = tighter
    rounding = 2.0 ** -20 * (float(rows.abs().max()) + float(shift.abs().max())) * w_max
    return bound, w_max * bound + rounding


def same_float(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


class OutputRangeTest(unittest.TestCase):
    def cases(self):
        g = torch.Generator().manual_seed(3)
        d = 48
        rows = torch.randn(64, d, generator=g) * torch.rand(64, 1, generator=g) * 5 + 0.3
        w = torch.randn(d, generator=g)
        w[::7] = 0.0                      # zero weights: both candidates are +-0
        w[1::11] = -w[1::11].abs()        # negative weights swap a column's extremes
        b = torch.randn(d, generator=g)
        yield rows, w, b
        yield rows, None, b
        yield rows, w, None
        yield rows, None, None
        yield rows, torch.full((d,), -1.0), None  # every column reversed

    def test_equals_the_formed_output(self):
        for rows, w, b in self.cases():
            shift = rows.mean(dim=1)
            got = derived._output_range(*torch.aminmax(rows - shift[:, None], dim=0), w, b)
            self.assertEqual(got, reference_output_range(rows, w, b))

    def test_rows_bound_equals_the_reference(self):
        for rows, w, b in self.cases():
            for eb, mode in ((1e-2, "rel"), (1e-3, "rel"), (5e-3, "abs")):
                row_eb = 0.05
                bound, shift, err = derived.layernorm_rows_bound(derived.RowStatistics.of(rows), row_eb, w, b, eb, mode)
                ref_bound, ref_err = reference_rows_bound(rows, row_eb, w, b, eb, mode)
                self.assertEqual(bound, ref_bound)
                self.assertEqual(err, ref_err)
                self.assertTrue(torch.equal(shift, rows.mean(dim=1)))

    def test_nan_weight_propagates_as_before(self):
        rows = torch.randn(8, 16)
        w = torch.ones(16)
        w[5] = float("nan")
        bound, _, err = derived.layernorm_rows_bound(derived.RowStatistics.of(rows), 0.01, w, None, 1e-2, "rel")
        ref_bound, ref_err = reference_rows_bound(rows, 0.01, w, None, 1e-2, "rel")
        self.assertTrue(same_float(bound, ref_bound) and same_float(err, ref_err), (bound, err, ref_bound, ref_err))


class RowNormalizedTest(unittest.TestCase):
    def test_non_finite_inputs_are_refused(self):
        ln = nn.LayerNorm(32)
        for bad in (float("nan"), float("inf"), -float("inf")):
            x = torch.randn(4, 10, 32)
            x[2, 3, 7] = bad
            self.assertIsNone(hooks._row_normalized(x, ln, 1e-2, "rel"), bad)
        x = torch.randn(4, 10, 32)
        self.assertIsNotNone(hooks._row_normalized(x, ln, 1e-2, "rel"))

    def test_equals_the_reference(self):
        ln = nn.LayerNorm(32)
        x = torch.randn(4, 10, 32) * 3 - 1
        rows, sigma, bound = hooks._row_normalized(x, ln, 1e-2, "rel")
        r = x.reshape(-1, 32)
        ref_sigma = (r.double().var(dim=1, unbiased=False) + ln.eps).sqrt().float()
        lo, hi = float(r.min()), float(r.max())
        room = 1e-2 * (hi - lo) * (1 - 2.0 ** -20) - 4 * 2.0 ** -24 * max(abs(lo), abs(hi))
        within_ulp(self, sigma, ref_sigma)
        self.assertTrue(torch.equal(rows, r / sigma[:, None]))  # divided by the sigma it returns, exactly
        self.assertEqual(bound, room / float(sigma.max()))


def within_ulp(test, got, want):
    """Float32 tensors equal or one unit in the last place apart (rounding a double result twice)."""
    test.assertEqual(got.dtype, torch.float32)
    test.assertEqual(got.shape, want.shape)
    gap = (got.double() - want.double()).abs()
    ulp = torch.nextafter(want.abs(), torch.tensor(float("inf"))).double() - want.abs().double()
    test.assertTrue(bool((gap <= ulp).all()), float((gap / ulp).max()))


class LayerNormRowsTest(unittest.TestCase):
    """The extension's layernorm_rows (one pass, CPU) against each quantity written out here in float64,
    and against hooks._normalize_rows_torch (torch's ops, the path of other devices)."""

    def matrices(self):
        g = torch.Generator().manual_seed(11)
        for n, d in ((2, 1), (3, 5), (64, 33), (200, 96), (17, 768)):
            x = torch.randn(n, d, generator=g) * torch.rand(n, 1, generator=g) * 4
            yield x
            yield x + 1000.0                 # a large mean: the variance cancels
            y = x.clone()
            y[0] = 0.25                      # a constant row: sigma = sqrt(eps)
            yield y

    def test_every_quantity(self):
        C = ebac_torch._ext.load()
        eps = 1e-5
        for x in self.matrices():
            r = C.layernorm_rows(x, eps)
            self.assertIsNotNone(r)
            rows, sigma, shift, col_lo, col_hi, lo, hi, smax, rmax, shmax = r
            x64 = x.double()
            within_ulp(self, sigma, (x64.var(dim=1, unbiased=False) + eps).sqrt().float())
            self.assertTrue(torch.equal(rows, x / sigma[:, None]))
            within_ulp(self, shift, rows.double().mean(dim=1).float())
            lo_z, hi_z = torch.aminmax(rows - shift[:, None], dim=0)
            self.assertTrue(torch.equal(col_lo, lo_z) and torch.equal(col_hi, hi_z))
            self.assertEqual((lo, hi), (float(x.min()), float(x.max())))
            self.assertEqual(smax, float(sigma.max()))
            self.assertEqual(rmax, float(rows.abs().max()))
            self.assertEqual(shmax, float(shift.abs().max()))
            t = hooks._normalize_rows_torch(x, eps)
            self.assertTrue(torch.allclose(t[1], sigma, rtol=1e-4, atol=0))
            self.assertTrue(torch.allclose(t[0], rows, rtol=1e-4, atol=1e-6))

    def test_a_non_finite_element_anywhere_gives_none(self):
        C = ebac_torch._ext.load()
        for bad in (float("nan"), float("inf"), -float("inf")):
            for at in ((0, 0), (0, 5), (3, 17), (7, 31)):  # first, inside a row (a NaN hides from min/max), last
                x = torch.randn(8, 32)
                x[at] = bad
                self.assertIsNone(C.layernorm_rows(x, 1e-5), (bad, at))
                self.assertIsNone(hooks._normalize_rows_torch(x, 1e-5), (bad, at))

    def test_bad_arguments_are_refused_by_name(self):
        C = ebac_torch._ext.load()
        for bad in (torch.randn(4, 8).double(), torch.randn(4, 8).t(), torch.randn(2, 4, 8), torch.randn(0, 8)):
            with self.assertRaisesRegex(RuntimeError, "layernorm_rows"):
                C.layernorm_rows(bad, 1e-5)
        with self.assertRaisesRegex(RuntimeError, "eps"):
            C.layernorm_rows(torch.randn(4, 8), -1.0)


class MaxMagnitudeTest(unittest.TestCase):
    def test_equals_abs_max(self):
        for t in (torch.tensor([0.0, 1.25, 0.0]), torch.tensor([-3.0, 2.0]), torch.tensor([-1.0, -4.0, -2.0]),
                  torch.randn(1000), torch.tensor([0.0, -0.0])):
            self.assertEqual(derived.max_magnitude(t), float(t.abs().max()))
        self.assertTrue(math.isnan(derived.max_magnitude(torch.tensor([1.0, float("nan"), -2.0]))))


class InPlaceRebuildTest(unittest.TestCase):
    """A rebuilt recipe output equals the out-of-place formula bit for bit, and its sources are untouched."""

    def test_layernorm_and_dropout_recipes(self):
        g = torch.Generator().manual_seed(5)
        rows = torch.randn(30, 24, generator=g)
        shift, w, b = torch.randn(30, generator=g), torch.randn(24, generator=g), torch.randn(24, generator=g)
        keep = rows.clone()
        rec = derived.Recipe("layernorm", [], {"shift": shift, "weight": w, "bias": b, "error": 0.0}, (5, 6, 24),
                             torch.float32)
        rec.sources = ["the stored rows"]  # a resolved recipe's source: rows_of reads it
        got = derived.rebuild(rec, None, lambda q: rows)
        want = ((rows - shift[:, None]) * w.reshape(1, -1) + b.reshape(1, -1)).reshape(5, 6, 24)
        self.assertTrue(torch.equal(got, want))
        self.assertTrue(torch.equal(rows, keep))

        x = torch.randn(40, 33, generator=g)
        mask = torch.rand(40, 33, generator=g) > 0.1
        keep_x = x.clone()
        rec = derived.Recipe("mul", [], {"scale": 1.0 / 0.9, "noise_max": 1.0}, (40, 33), torch.float32)
        rec.sources = [x, mask]
        got = derived.rebuild(rec, lambda s: s, None)
        self.assertTrue(torch.equal(got, x * mask * (1.0 / 0.9)))
        self.assertTrue(torch.equal(x, keep_x))

    def test_dropout_after_gelu_multiplies_into_the_rebuilt_gelu(self):
        """mul over a gelu recipe (an MLP's dropped hidden activation): the product is formed in the
        tensor gelu's rebuild made, equal to the out-of-place formula; the stored input and mask untouched."""
        g = torch.Generator().manual_seed(9)
        a = torch.randn(6, 10, 32, generator=g)
        keep_a = a.clone()
        for noise in ((torch.rand(6, 10, 32, generator=g) > 0.1),
                      (torch.rand(6, 10, 32, generator=g) > 0.1).float() / 0.9):
            keep_n = noise.clone()
            gelu = derived.Recipe("gelu", [], {"approximate": "none"}, a.shape, torch.float32)
            gelu.sources = [a]
            scale = 1.0 / 0.9 if noise.dtype == torch.bool else 1.0
            rec = derived.Recipe("mul", [], {"scale": scale, "noise_max": 1.0 / 0.9}, a.shape, torch.float32)
            rec.sources = [gelu, noise]
            made = []

            def value_of(s):
                return s

            orig = torch.nn.functional.gelu

            def spy(x, approximate="none"):
                out = orig(x, approximate=approximate)
                made.append(out)
                return out

            torch.nn.functional.gelu = spy
            try:
                got = derived.rebuild(rec, value_of, None)
            finally:
                torch.nn.functional.gelu = orig
            want = orig(a) * noise
            if noise.dtype == torch.bool:
                want = want * scale
            self.assertTrue(torch.equal(got, want))
            self.assertEqual(got.data_ptr(), made[0].data_ptr())  # no second tensor
            self.assertTrue(torch.equal(a, keep_a) and torch.equal(noise, keep_n))

    def test_layernorm_rows_unpack_is_within_the_bound(self):
        """A LayerNorm input a session restores (its rows scaled back in place) against the tensor packed,
        under the bound computed here from that tensor."""
        ln = nn.LayerNorm(64)
        x = (torch.randn(8, 20, 64) * torch.linspace(0.05, 4, 20).reshape(1, 20, 1)).requires_grad_()
        packed, restored = {}, {}
        s = ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", derive=False)
        orig_pack, orig_unpack = s._pack, s._unpack

        def pack(t):
            p = orig_pack(t)
            if tuple(t.shape) == tuple(x.shape):
                packed[id(p)] = t.detach().clone()
            return p

        def unpack(p):
            out = orig_unpack(p)
            if id(p) in packed:
                restored[id(p)] = out.detach().clone()
            return out

        s._pack, s._unpack = pack, unpack
        with s:
            out = ln(x * 1.0)
        out.sum().backward()
        self.assertEqual(sum("layernorm_rows" in d for d in s.stats()["details"]), 1)
        self.assertEqual(len(restored), 1)
        k = next(iter(restored))
        want, got = packed[k], restored[k]
        self.assertEqual(got.shape, want.shape)
        bound = 1e-2 * float(want.max() - want.min())
        err = float((got - want).abs().max())
        self.assertLessEqual(err, bound)
        self.assertGreater(err, 0.0)  # it did go through the codec


if __name__ == "__main__":
    unittest.main()
