"""The CUDA backend through the extension (EBAC_TORCH_WITH_CUDA builds, on a GPU).

Skipped, with the reason printed, where there is no GPU or the extension was
built without its CUDA backend (every CPU-only machine, CI included);
tools/gpu-check.sh runs it on the lent GPU.
"""

import os
import re
import unittest
import warnings

from _common import REPO, C, ebac_torch, max_err, promised_bound, torch

HAVE = torch.cuda.is_available() and C.has_cuda()
# The skip reason unittest prints ("skipped 'no CUDA: ...'"); tools/gpu-check.sh
# greps for it, so a GPU run that skipped these shows in its summary.
WHY = ("no CUDA: torch.cuda.is_available() is False" if not torch.cuda.is_available()
       else "no CUDA: ebac_torch was built without its CUDA backend (EBAC_TORCH_CUDA=1 and nvcc build it)")
ELEM = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.bool: 4, torch.uint8: 5, torch.int8: 6, torch.int16: 7,
        torch.int32: 8, torch.int64: 9}


def activation(shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.relu(torch.nn.functional.avg_pool2d(torch.randn(shape, generator=g), 3, 1, 1) * 3)
    return x.to(dtype)


@unittest.skipUnless(HAVE, WHY)
class CudaBackend(unittest.TestCase):
    def test_device_streams_equal_host_streams(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = activation((4, 32, 28, 28), dtype=dtype)
            xd = x.cuda()
            for p in ("fast", "ratio", "ratio-flat", "rle", "plain"):
                with self.subTest(dtype=dtype, pipeline=p):
                    hb, hs = C.compress(x, 1e-2, "rel", p, 1, False)
                    db, ds = C.compress(xd, 1e-2, "rel", p, 0, False)
                    self.assertTrue(db.is_cuda)
                    self.assertEqual(list(hs), list(ds))
                    self.assertTrue(torch.equal(db.cpu(), hb), "device stream differs from the host's")
                    y = C.decompress(db, list(x.shape), list(ds), ELEM[dtype], 0)
                    self.assertTrue(y.is_cuda)
                    yh = C.decompress(hb, list(x.shape), list(hs), ELEM[dtype], 1)
                    self.assertTrue(torch.equal(y.cpu(), yh))
                    self.assertLessEqual(max_err(x, y.cpu()), promised_bound(x, 1e-2, "rel"))

    def test_integer_bool_level_and_pooling_streams_equal_host_streams(self):
        # Format 2 on the device: the stages (a palette, exact integers,
        # max-pool window offsets, the stored form) are chosen on the GPU as
        # the host chooses them, so every kernel path gives the host's bytes.
        g = torch.Generator().manual_seed(7)
        cases = [("bool mask", torch.rand((4, 3, 17, 9), generator=g) < 0.3, None)]
        for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            info = torch.iinfo(dtype)
            x = torch.randint(max(info.min, -1000), min(info.max, 1000), (4, 3, 17, 9), generator=g, dtype=dtype)
            x.view(-1)[::97] = info.max
            cases.append((str(dtype), x, None))
            cases.append((str(dtype) + " labels", torch.randint(0, 10, (64, 50), generator=g, dtype=dtype), None))
        xr = torch.relu(torch.randn((8, 16, 28, 28), generator=g))
        _, idx = torch.nn.functional.max_pool2d(xr, 2, 2, 0, return_indices=True)
        cases.append(("max-pool indices", idx, [[28, 28], [2, 2], [2, 2], [0, 0], [1, 1]]))
        m = (torch.rand((32, 50, 384), generator=g) >= 0.1).float().div_(0.9)
        cases.append(("dropout mask f32", m, None))
        cases.append(("dropout mask f16", m.half(), None))
        for name, x, pooling in cases:
            xd = x.cuda()
            for p in ("fast", "ratio", "rle", "plain"):
                hb, hs = C.compress(x, 1e-2, "rel", p, 1, False, "staged", pooling)
                for k in ebac_torch.KERNEL_PATHS:
                    with self.subTest(case=name, pipeline=p, kernel_path=k):
                        db, ds = C.compress(xd, 1e-2, "rel", p, 0, False, k, pooling)
                        self.assertTrue(db.is_cuda)
                        self.assertTrue(torch.equal(db.cpu(), hb), "device stream differs from the host's")
                        y = C.decompress(db, list(x.shape), list(ds), ELEM[x.dtype], 0, k)
                        self.assertTrue(torch.equal(y.cpu(), x))

    def test_every_kernel_path_gives_the_staged_stream(self):
        # bit-packing pipelines run the fused and single-pass kernels; the
        # others fall back to staged: every path must give the same bytes
        x = activation((4, 32, 28, 28))
        xd = x.cuda()
        for p in ("fast", "plain", "ratio-flat", "ratio"):
            ref, rs = C.compress(xd, 1e-3, "rel", p, 0, False, "staged")
            yref = C.decompress(ref, list(x.shape), list(rs), 1, 0, "staged")
            for k in ebac_torch.KERNEL_PATHS:
                with self.subTest(pipeline=p, kernel_path=k):
                    b, s = C.compress(xd, 1e-3, "rel", p, 0, False, k)
                    self.assertTrue(torch.equal(b, ref), "%s stream differs from staged" % k)
                    y = C.decompress(ref, list(x.shape), list(rs), 1, 0, k)
                    self.assertTrue(torch.equal(y, yref), "%s decode differs from staged" % k)

    def test_graph_capture_is_refused_with_a_clear_error(self):
        # the host layer reads sizes back, which would break a capture
        x = activation((2, 8, 16, 16)).cuda()
        b, s = C.compress(x, 1e-2, "rel", "fast", 0, False)
        torch.cuda.synchronize()
        errors = []
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for call in (lambda: C.compress(x, 1e-2, "rel", "fast", 0, False),
                         lambda: C.decompress(b, list(x.shape), list(s), 1, 0)):
                try:
                    call()
                except RuntimeError as e:
                    errors.append(str(e))
        self.assertEqual(len(errors), 2)
        for e in errors:
            self.assertIn("capturing a CUDA graph", e)
        y = C.decompress(b, list(x.shape), list(s), 1, 0)  # the stream still works afterwards
        self.assertLessEqual(max_err(x.cpu(), y.cpu()), promised_bound(x, 1e-2, "rel"))

    def test_channels_last_and_views(self):
        x = activation((2, 16, 9, 7)).cuda().to(memory_format=torch.channels_last)
        b, s = C.compress(x, 1e-3, "rel", "fast", 0, False)
        y = C.decompress(b, list(x.shape), list(s), 1, 0)
        self.assertEqual(y.stride(), x.stride())
        self.assertLessEqual(max_err(x.cpu(), y.cpu()), promised_bound(x, 1e-3, "rel"))
        t = x.transpose(1, 3)  # not dense in any order: made contiguous first
        b, s = C.compress(t, 1e-3, "rel", "fast", 0, False)
        y = C.decompress(b, list(t.shape), list(s), 1, 0)
        self.assertLessEqual(max_err(t.cpu(), y.cpu()), promised_bound(t, 1e-3, "rel"))

    def test_training_step_under_hooks(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).cuda()
        x = torch.randn(8, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (8,), device="cuda")
        torch.nn.functional.cross_entropy(model(x), y).backward()
        ref = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        with ebac_torch.compressed_activations(1e-3, "rel", "fast", model=model, kernel_path="single_pass"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        st = ebac_torch.stats()
        self.assertGreater(st["compressed_tensors"], 0)
        self.assertLess(st["compressed_bytes"], st["raw_bytes"])
        for p, r in zip(model.parameters(), ref):
            self.assertTrue(p.grad.is_cuda)
            rel = float((p.grad - r).norm() / r.norm().clamp_min(1e-12))
            self.assertLess(rel, 0.1)

    def test_layer_aware_with_batchnorm_on_cuda(self):
        # the controller's BatchNorm observation (propagated_weight_error) on device tensors
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                    torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                    torch.nn.Linear(16, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        la = ebac_torch.LayerAwareCompression(model, window=2, observe_every=1, min_numel=256)
        for step in range(4):
            x = torch.randn(8, 3, 32, 32, device="cuda")
            y = torch.randint(0, 10, (8,), device="cuda")
            opt.zero_grad()
            with la:
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            la.end_iteration()
            opt.step()
        last = {l["layer"]: l for l in la.history[-1]["layers"]}
        self.assertEqual(last["1"]["propagates_to"], "0")
        self.assertGreater(last["1"]["observations"], 0)

    def test_corrupt_device_blob_is_rejected(self):
        x = activation((4, 8, 16, 16)).cuda()
        b, s = C.compress(x, 1e-2, "rel", "fast", 0, False)
        bad = b.clone()
        bad[0] ^= 0xFF  # magic
        with self.assertRaises(RuntimeError):
            C.decompress(bad, list(x.shape), list(s), 1, 0)


class DeviceChoiceOnTheCpu(unittest.TestCase):
    """What decides between the backends, checked on any machine."""

    def test_want_cuda_follows_the_environment_then_the_machine(self):
        from ebac_torch import _ext
        saved = os.environ.pop("EBAC_TORCH_CUDA", None)
        try:
            os.environ["EBAC_TORCH_CUDA"] = "1"
            self.assertTrue(_ext.want_cuda())
            os.environ["EBAC_TORCH_CUDA"] = "0"
            self.assertFalse(_ext.want_cuda())
            del os.environ["EBAC_TORCH_CUDA"]
            if not torch.cuda.is_available():  # no device: never a CUDA build by default
                self.assertFalse(_ext.want_cuda())
        finally:
            os.environ.pop("EBAC_TORCH_CUDA", None)
            if saved is not None:
                os.environ["EBAC_TORCH_CUDA"] = saved

    def test_cuda_units_one_per_element_type(self):
        # the CUDA backend's units (_ext.cuda_codec_units): one per dtype the
        # extension maps (ELEM above), each instantiating its own type, and a
        # second call leaves them untouched (ninja rebuilds nothing)
        import tempfile
        from ebac_torch import _ext
        with tempfile.TemporaryDirectory() as d:
            inc = os.path.join(REPO, "include")  # the tree's element list (an install has no headers)
            units = _ext.cuda_codec_units(d, inc)
            self.assertEqual(len(units), len(ELEM))
            self.assertEqual(len(set(units)), len(units))
            instantiated = set()
            for u in units:
                with open(u) as f:
                    text = f.read()
                self.assertIn('#include "cuda_codec_typed.cuh"', text)
                instantiated.update(re.findall(r"EBAC_TORCH_CUDA_CODEC_INSTANTIATE\(([^)]+)\)", text))
            self.assertEqual(instantiated, {"float", "::ebac::float16", "::ebac::bfloat16", "bool", "std::uint8_t",
                                            "std::int8_t", "std::int16_t", "std::int32_t", "std::int64_t"})
            before = [os.stat(u).st_mtime_ns for u in units]
            self.assertEqual(_ext.cuda_codec_units(d, inc), units)
            self.assertEqual([os.stat(u).st_mtime_ns for u in units], before)

    def test_a_tensor_on_another_device_is_refused_by_name(self):
        # "meta" stands in for a device this build has no backend for (a CUDA
        # tensor in a CPU-only build takes the same branch, with its own message)
        t = torch.empty((4, 8, 16, 16), device="meta")
        with self.assertRaisesRegex(RuntimeError, "unsupported device meta"):
            C.compress(t, 1e-2, "rel", "fast", 1, False)

    def test_hooks_keep_a_tensor_whose_device_has_no_backend(self):
        # the hooks' choice for a saved tensor off the CPU: compress it when the
        # extension has that backend, else keep it raw (warning once) or raise
        t = torch.empty((4, 8, 16, 16), device="meta")
        s = ebac_torch.compressed_activations(1e-2)
        if C.has_cuda():
            self.skipTest("this build has a device backend: the meta tensor would go to C.compress (checked above)")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(s._keep_reason(t), "device")
            self.assertEqual(s._keep_reason(t), "device")
        self.assertEqual(len([x for x in w if "kept uncompressed" in str(x.message)]), 1)
        strict = ebac_torch.compressed_activations(1e-2, unsupported_device="error")
        with self.assertRaisesRegex(RuntimeError, "no meta backend"):
            strict._keep_reason(t)
        self.assertIsNone(s._keep_reason(torch.zeros((4, 8, 16, 16))))  # a CPU tensor is compressed


if __name__ == "__main__":
    unittest.main()
