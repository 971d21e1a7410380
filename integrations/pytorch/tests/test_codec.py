"""Tensor-level compress/decompress through the extension."""

import gc
import math
import unittest

from _common import C, ebac_torch, max_err, torch

PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain", "max", "max-bound", "lorenzo1:linear:bitpack"]


def activation(shape, seed=0, relu=True, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    # some spatial correlation, like a conv output
    if x.dim() == 4:
        x = torch.nn.functional.avg_pool2d(x, 3, 1, 1) * 3
    if relu:
        x = torch.relu(x)
    return x.to(dtype)


class RoundTrip(unittest.TestCase):
    def check(self, x, eb, mode, pipeline):
        c = ebac_torch.compress(x, eb, mode, pipeline)
        y = ebac_torch.decompress(c)
        self.assertEqual(y.shape, x.shape)
        self.assertEqual(y.dtype, x.dtype)
        self.assertEqual(y.stride(), x.stride() if _dense(x) else x.contiguous().stride())
        info = ebac_torch.inspect(c)
        self.assertEqual(info["mode"], mode)
        # The bound the caller asked for, computed here from x (not the
        # header's eb_abs, which the code under test wrote).
        fin = torch.isfinite(x)
        xf = x.double()[fin]
        span = float(xf.max()) - float(xf.min()) if xf.numel() else 0.0
        promised = eb * span if mode == "rel" else eb
        self.assertLessEqual(max_err(x, y), promised, (pipeline, mode, eb, x.dtype))
        self.assertLessEqual(info["eb_abs"], promised * (1 + 1e-12))  # the header never claims more
        # zeros stay zero and signs are kept (sign-preserving quantizer: the
        # header's id 2; max-bound may have chosen the linear one, id 1)
        if pipeline != "lorenzo1:linear:bitpack" and (pipeline != "max-bound" or info["quantizer"] == 2):
            self.assertTrue(bool(((x == 0) == (y == 0))[fin].all()))
            self.assertTrue(bool((torch.sign(x) == torch.sign(y))[fin].all()))
        if info["quantizer"] == 4 or info["stored"]:  # levels or stored raw: lossless
            self.assertEqual(max_err(x, y), 0.0)
        return c, y

    def test_dtypes_modes_pipelines(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = activation((4, 8, 12, 12), dtype=dtype)
            for p in PIPELINES:
                for eb, mode in ((1e-2, "rel"), (1e-3, "rel"), (0.05, "abs")):
                    with self.subTest(dtype=dtype, pipeline=p, eb=eb, mode=mode):
                        self.check(x, eb, mode, p)

    def test_signed_data(self):
        x = activation((3, 5, 17, 9), seed=3, relu=False)
        for p in PIPELINES:
            self.check(x, 1e-3, "rel", p)

    def test_ratio_on_post_relu(self):
        x = activation((16, 16, 28, 28), seed=1)
        c, _ = self.check(x, 1e-2, "rel", "ratio")
        self.assertGreater(x.numel() * 4 / c.nbytes, 4.0)

    def test_pipelines_reconstruct_identically(self):
        # Every named pipeline shares the quantizer: same bound, same values back
        # (so training does not depend on the pipeline, only on the bound).
        x = activation((4, 8, 16, 16), seed=9, relu=False)
        ref = ebac_torch.decompress(ebac_torch.compress(x, 1e-2, "rel", "fast"))
        for p in ("ratio", "ratio-flat", "rle", "plain"):
            y = ebac_torch.decompress(ebac_torch.compress(x, 1e-2, "rel", p))
            self.assertTrue(torch.equal(y, ref), p)

    def test_nan_inf_bit_exact(self):
        x = activation((2, 3, 16, 16), seed=2, relu=False)
        x[0, 0, 0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            xd = x.to(dtype)
            y = ebac_torch.decompress(ebac_torch.compress(xd, 1e-2, "rel", "fast"))
            self.assertTrue(math.isnan(float(y[0, 0, 0, 0])))
            self.assertEqual(float(y[0, 0, 0, 1]), float("inf"))
            self.assertEqual(float(y[0, 0, 0, 2]), -float("inf"))
            self.assertEqual(float(y[0, 0, 0, 3]), 0.0)
            fin = torch.isfinite(xd.float())
            span = float(xd.float()[fin].max()) - float(xd.float()[fin].min())
            self.assertLessEqual(max_err(xd, y), 1e-2 * span)

    def test_layouts(self):
        x = activation((4, 8, 10, 6), seed=4)
        cl = x.contiguous(memory_format=torch.channels_last)
        _, y = self.check(cl, 1e-2, "rel", "ratio")
        self.assertTrue(y.is_contiguous(memory_format=torch.channels_last))
        t = x.transpose(1, 3)  # dense, permuted: compressed in memory order, strides kept
        _, y = self.check(t, 1e-2, "rel", "fast")
        self.assertEqual(y.stride(), t.stride())
        s = x[:, ::2, :, 1:]  # not dense: made contiguous
        _, y = self.check(s, 1e-2, "rel", "fast")
        self.assertTrue(y.is_contiguous())
        off = x.view(-1)[7:7 + 500]  # storage offset
        self.check(off, 1e-3, "abs", "fast")

    def test_large_outputs(self):
        # 4 MiB and more: the output gets a mapping of its own (huge pages
        # where Linux has them), unmapped when the tensor is freed; the same
        # values, layout and bound as a small tensor's, in both layouts, and
        # the tensor behaves as any other (written, freed, used by autograd).
        x = activation((32, 16, 48, 48), seed=5)  # 4.7 MB
        for t in (x, x.contiguous(memory_format=torch.channels_last)):
            for p in ("fast", "balanced", "max"):
                with self.subTest(pipeline=p, stride=t.stride()):
                    c, y = self.check(t, 1e-2, "rel", p)
                    self.assertEqual(y.stride(), t.stride())
                    y.add_(1.0)
                    self.assertLessEqual(max_err(t + 1.0, y), 1e-2 * float(t.max() - t.min()) * (1 + 1e-6) + 1e-6)
                    del y
                    gc.collect()
                    self.assertTrue(torch.equal(ebac_torch.decompress(c), ebac_torch.decompress(c)))
        w = torch.randn(8, 16, 3, 3, requires_grad=True)
        with ebac_torch.compressed_activations(1e-2, pipeline="balanced"):
            out = torch.nn.functional.conv2d(x, w, padding=1).sum()
        out.backward()
        ref = w.detach().clone().requires_grad_()
        torch.nn.functional.conv2d(x, ref, padding=1).sum().backward()
        cos = torch.nn.functional.cosine_similarity(w.grad.flatten(), ref.grad.flatten(), dim=0)
        self.assertGreater(float(cos), 0.999)

    def test_odd_shapes(self):
        self.check(torch.tensor(3.5), 1e-2, "abs", "fast")                       # 0-d
        self.check(activation((1, 1, 1, 37)), 1e-2, "rel", "ratio")               # size-1 axes
        self.check(torch.randn(2, 1, 2, 1, 2, 1, 2, 1, 3, 2), 1e-2, "rel", "ratio")  # rank 10
        c, y = self.check(torch.full((50, 70), 2.0), 1e-2, "rel", "fast")        # constant: range 0
        self.assertEqual(ebac_torch.inspect(c)["quantizer"], 4)  # one level: exact, no value stored raw
        self.assertEqual(ebac_torch.inspect(c)["outliers"], 0)
        self.assertLess(c.nbytes, 50 * 70 * 4 / 10)

    def test_blob(self):
        x = activation((4, 4, 8, 8))
        blob, strides = C.compress(x, 1e-2, "rel", "fast", 1, False)
        self.assertEqual(blob.dtype, torch.uint8)
        self.assertEqual(blob.dim(), 1)
        self.assertFalse(C.inspect(blob)["checksum"])
        blob2, _ = C.compress(x, 1e-2, "rel", "fast", 2, True)
        self.assertTrue(C.inspect(blob2)["checksum"])
        # thread count never changes the bytes
        blob1, _ = C.compress(x, 1e-2, "rel", "fast", 1, True)
        self.assertTrue(torch.equal(blob1, blob2))

    def test_errors(self):
        x = activation((4, 4))
        with self.assertRaises(RuntimeError):
            C.compress(x, 1e-2, "rel", "nonsense", 1, False)
        with self.assertRaises(RuntimeError):
            C.compress(x, 1e-2, "sideways", "fast", 1, False)
        with self.assertRaises(RuntimeError):
            C.compress(x, -1.0, "rel", "fast", 1, False)
        with self.assertRaises(TypeError):
            ebac_torch.compress(x.double())
        with self.assertRaises(RuntimeError):
            C.compress(torch.empty(0), 1e-2, "rel", "fast", 1, False)
        blob, strides = C.compress(x, 1e-2, "rel", "fast", 1, True)
        bad = blob.clone()
        bad[-3] ^= 0xFF
        # A damaged blob or arguments that do not fit it: ValueError naming what is wrong.
        with self.assertRaisesRegex(ValueError, "blob: .*checksum"):  # checksum catches it
            C.decompress(bad, [4, 4], strides, 1, 1)
        with self.assertRaisesRegex(ValueError, "blob: .*shorter"):  # truncated
            C.decompress(blob[:20].clone(), [4, 4], strides, 1, 1)
        with self.assertRaisesRegex(ValueError, "shape: .*20 elements, but the blob holds 16"):  # wrong element count
            C.decompress(blob, [4, 5], [5, 1], 1, 1)
        with self.assertRaisesRegex(ValueError, "dtype: float16, but the blob holds float32"):  # wrong dtype
            C.decompress(blob, [4, 4], strides, 2, 1)

    def test_kernel_path_is_checked_and_ignored_on_the_host(self):
        x = activation((4, 8, 9, 9))
        ref = ebac_torch.compress(x, 1e-2, "rel", "ratio", threads=1)
        for k in ebac_torch.KERNEL_PATHS:
            with self.subTest(kernel_path=k):
                c = ebac_torch.compress(x, 1e-2, "rel", "ratio", threads=1, kernel_path=k)
                self.assertTrue(torch.equal(c.blob, ref.blob))
                self.assertTrue(torch.equal(ebac_torch.decompress(c, kernel_path=k), ebac_torch.decompress(ref)))
        with self.assertRaisesRegex(ValueError, "kernel_path must be one of staged, fused, single_pass, got 'fast'"):
            ebac_torch.compress(x, kernel_path="fast")
        with self.assertRaisesRegex(ValueError, "kernel_path"):
            ebac_torch.decompress(ref, kernel_path="Staged")
        with self.assertRaisesRegex(ValueError, "kernel_path"):
            ebac_torch.compressed_activations(kernel_path="single-pass")
        # the extension checks it too (a typo fails on a CPU run)
        with self.assertRaisesRegex(RuntimeError, "kernel_path must be 'staged', 'fused' or 'single_pass', got 'x'"):
            C.compress(x, 1e-2, "rel", "fast", 1, False, "x")
        with self.assertRaisesRegex(RuntimeError, "kernel_path"):
            C.decompress(ref.blob, list(x.shape), list(ref.strides), 1, 1, "")

    def test_storage_ref(self):
        a = torch.randn(1000)
        r = C.StorageRef(a)
        self.assertTrue(r.same(a))
        self.assertTrue(r.same(a[10:].view(10, 99)))
        self.assertTrue(r.same(a.detach()))
        self.assertFalse(r.same(torch.randn(1000)))
        del a
        gc.collect()
        self.assertFalse(r.alive())
        b = torch.randn(1000)  # may well reuse a's address
        self.assertFalse(r.same(b))


class ErrorModel(unittest.TestCase):
    """ebac's error model through the extension agrees with a measured gradient error."""

    def check(self, layer, x, rel=1e-2):
        torch.manual_seed(0)
        c = ebac_torch.compress(x, rel, "rel", "ratio")
        x_hat = ebac_torch.decompress(c)
        eb_abs = ebac_torch.inspect(c)["eb_abs"]
        out = layer(x)
        dy = torch.randn_like(out)
        def wgrad(inp):
            layer.zero_grad()
            layer(inp).backward(dy)
            return layer.weight.grad.double().clone()
        measured = float((wgrad(x_hat) - wgrad(x)).pow(2).mean().sqrt())
        p = ebac_torch.predict_weight_error(layer, x, x_hat, dy, eb_abs)
        self.assertGreater(p["sigma"], 0)
        self.assertLess(abs(p["sigma"] / measured - 1), 0.5, (p, measured))
        return p

    def test_conv2d(self):
        self.check(torch.nn.Conv2d(8, 16, 3, padding=1), activation((8, 8, 16, 16), seed=11))
        self.check(torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), activation((8, 8, 16, 16), seed=12))

    def test_linear(self):
        self.check(torch.nn.Linear(64, 32), activation((128, 64), seed=13))

    def test_linear_repeated_rows(self):
        # Every other row is one of 4 patterns with alike output gradients (a
        # ViT's background patches): their errors add coherently, and the
        # model reads the rows merged (docs/error-model.md 3.6).
        g = torch.Generator().manual_seed(21)
        layer = torch.nn.Linear(48, 32)
        x = torch.randn(400, 48, generator=g)
        dy = 0.2 * torch.randn(400, 32, generator=g)
        px, pdy = torch.randn(4, 48, generator=g), torch.randn(4, 32, generator=g)
        for r in range(0, 400, 2):
            x[r] = px[(r // 2) % 4]
            dy[r] += pdy[(r // 2) % 4]
        c = ebac_torch.compress(x, 0.05, "abs", "fast")
        x_hat = ebac_torch.decompress(c)
        dw = lambda inp: dy.double().t() @ inp.double()  # noqa: E731 (dL/dW of a Linear)
        measured = float((dw(x_hat) - dw(x)).pow(2).mean().sqrt())
        p = ebac_torch.predict_weight_error(layer, x, x_hat, dy, 0.05, grad_rms=float(dw(x_hat).pow(2).mean().sqrt()))
        self.assertLess(abs(p["sigma"] / measured - 1), 0.15, (p, measured))

    def test_bad_layer(self):
        with self.assertRaises(TypeError):
            ebac_torch.predict_weight_error(torch.nn.ReLU(), torch.ones(2, 2), torch.ones(2, 2), torch.ones(2, 2), 0.1)


def _dense(t):
    return torch.empty_strided(t.shape, t.stride()).is_contiguous() or _permuted_dense(t)


def _permuted_dense(t):
    dims = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    expected = 1
    for d in reversed(dims):
        if t.size(d) == 1:
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


if __name__ == "__main__":
    unittest.main()
