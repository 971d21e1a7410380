"""compressed_activations(): what is compressed, what is counted, gradients."""

import copy
import gc
import unittest

from _common import C, ebac_torch, max_err, promised_bound, torch

nn = torch.nn
F = torch.nn.functional


class Net(nn.Module):
    """conv-BN-ReLU, max-pool (int64 indices), conv-ReLU, linear: the usual saved kinds."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2, return_indices=False)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        x = self.relu2(self.conv2(x))
        return self.fc(torch.flatten(F.avg_pool2d(x, 2), 1))


def data(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def grads(model, x, y, ctx=None):
    model.zero_grad(set_to_none=True)
    if ctx is None:
        loss = F.cross_entropy(model(x), y)
    else:
        with ctx:
            loss = F.cross_entropy(model(x), y)
    loss.backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


class RecordingExtension:
    """The extension as the hooks see it (ctx.C): keeps what each compress
    was given and checks every decompression of it against the bound the
    test asked for, computed here from the tensor (not the header's eb_abs,
    nor the hooks' own bound_violations, both from the code under test)."""

    def __init__(self, C, eb, mode):
        self._C, self.eb, self.mode = C, eb, mode
        self._given = {}       # id(blob) -> (blob, tensor given to compress)
        self.checked = 0       # decompressions checked
        self.float_checked = 0  # ... of floating-point tensors (under the bound)
        self.failures = []     # what did not hold

    def __getattr__(self, name):
        return getattr(self._C, name)

    def compress(self, t, eb, mode, *rest):
        blob, strides = self._C.compress(t, eb, mode, *rest)
        if t.is_floating_point() and (eb, mode) != (self.eb, self.mode):
            self.failures.append("compressed under (%r, %r), not the (%r, %r) asked for" % (eb, mode, self.eb, self.mode))
        self._given[id(blob)] = (blob, t.detach().clone())
        return blob, strides

    def decompress(self, blob, *rest):
        y = self._C.decompress(blob, *rest)
        given = self._given.get(id(blob))
        if given is not None and given[0] is blob:
            x = given[1]
            self.checked += 1
            if x.is_floating_point():
                self.float_checked += 1
                err, bound = max_err(x, y), promised_bound(x, self.eb, self.mode)
                if not err <= bound:
                    self.failures.append("%s %s: error %g over the bound %g" % (x.dtype, tuple(x.shape), err, bound))
            elif not torch.equal(x, y):
                self.failures.append("%s %s: not restored exactly" % (x.dtype, tuple(x.shape)))
        return y


def saved_reference(model, x, y):
    """Every tensor autograd saves, deduplicated, with parameters removed (an identity hook)."""
    params = {p.data_ptr() for p in model.parameters()} | {b.data_ptr() for b in model.buffers()}
    seen, keep = set(), []

    def pack(t):
        if (t.requires_grad and t.is_leaf) or (t.data_ptr() in params and t.is_floating_point()):
            return t
        k = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t._version)
        if k not in seen:
            seen.add(k)
            keep.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    return keep


class Hooks(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = Net()
        self.x, self.y = data()

    def test_gradients_close(self):
        base = grads(self.model, self.x, self.y)
        tiny = grads(self.model, self.x, self.y,
                     ebac_torch.compressed_activations(1e-6, "rel", "fast", model=self.model, min_numel=1))
        loose = grads(self.model, self.x, self.y,
                      ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=self.model, min_numel=1))
        for n in base:
            scale = float(base[n].abs().max()) + 1e-12
            self.assertLess(float((tiny[n] - base[n]).abs().max()) / scale, 1e-3, n)
            self.assertLess(float((loose[n] - base[n]).abs().max()) / scale, 0.25, n)
            self.assertFalse(torch.equal(loose[n], base[n]) and n.startswith("conv1.weight"), n)

    def test_stats_count_every_saved_tensor_once(self):
        ref = saved_reference(self.model, self.x, self.y)
        raw = sum(t.numel() * t.element_size() for t in ref)
        with ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=self.model, min_numel=256) as s:
            loss = F.cross_entropy(self.model(self.x), self.y)
        st = s.stats()
        self.assertFalse(st["complete"])
        loss.backward()
        del loss
        gc.collect()
        st = ebac_torch.stats()
        self.assertTrue(st["complete"])
        self.assertEqual(st["tensors"], len(ref))
        self.assertEqual(st["raw_bytes"], raw)
        self.assertGreater(st["duplicates"], 0)          # ReLU outputs saved again by the next layer
        self.assertNotIn("integer", st["kept"])         # max-pool indices are compressed (losslessly) too
        self.assertTrue(any(d.get("lossless") and d["dtype"] == "int64" and "pooling" in d for d in st["details"]))
        self.assertIn("tiny", st["kept"])               # BN mean / invstd
        self.assertGreater(st["parameters"]["tensors"], 0)
        stored = sum(d["stored_bytes"] for d in st["details"])
        self.assertEqual(stored, st["compressed_bytes"])
        self.assertEqual(sum(m["raw_bytes"] for m in st["per_module"].values()), raw)
        self.assertEqual(sum(m["stored_bytes"] for m in st["per_module"].values()), st["compressed_bytes"])
        self.assertGreater(st["ratio"], 2.0)
        self.assertEqual(st["decompressions"], st["compressed_tensors"])
        self.assertIn("relu1", st["per_module"])         # named after the model's modules
        self.assertIn("<top>", st["per_module"])        # the loss, outside any module

    def test_new_pass_resets(self):
        ctx = ebac_torch.compressed_activations(1e-2, model=self.model)
        for _ in range(2):
            grads(self.model, self.x, self.y, ctx)
        st = ebac_torch.stats()
        self.assertEqual(st["pass"], 2)
        self.assertTrue(st["complete"])
        # two forwards before one backward are one pass
        with ctx:
            l1 = F.cross_entropy(self.model(self.x), self.y)
            l2 = F.cross_entropy(self.model(self.x[:8]), self.y[:8])
        (l1 + l2).backward()
        self.assertEqual(ebac_torch.stats()["pass"], 3)

    def test_dedupe_relu_output(self):
        lin1, lin2 = nn.Linear(64, 128), nn.Linear(128, 10)
        x = torch.randn(32, 64)
        with ebac_torch.compressed_activations(1e-3, min_numel=1) as s:
            h = torch.relu(lin1(x))      # relu saves h
            out = lin2(h).sum()          # lin2 saves h again
        out.backward()
        st = s.stats()
        self.assertEqual(st["duplicates"], 1)
        self.assertEqual(st["duplicate_bytes"], 32 * 128 * 4)
        self.assertEqual(st["decompressions"], st["compressed_tensors"])  # h decompressed once

    def test_codec_seconds(self):
        # The codec's CPU time is counted at each compress and decompress call, and only there: a
        # pass that compresses nothing has none; one that does has some of each.
        with ebac_torch.compressed_activations(1e-2, min_numel=10 ** 9, threads=1) as s:
            loss = F.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        st = s.stats()
        self.assertEqual(st["compressed_tensors"], 0)
        self.assertEqual((st["compress_cpu_seconds"], st["decompress_cpu_seconds"]), (0.0, 0.0))
        x = torch.randn(256, 4096)
        lin = nn.Linear(4096, 8)
        with ebac_torch.compressed_activations(1e-2, min_numel=1, threads=1) as s:
            out = lin(torch.relu(x)).sum()
        out.backward()
        st = s.stats()
        self.assertGreater(st["compressed_tensors"], 0)
        self.assertGreater(st["compress_cpu_seconds"], 0.0)
        self.assertGreater(st["decompress_cpu_seconds"], 0.0)

    def test_min_numel_and_policy(self):
        with ebac_torch.compressed_activations(1e-2, model=self.model, min_numel=10 ** 9):
            grads(self.model, self.x, self.y)
        st = ebac_torch.stats()
        self.assertEqual(st["compressed_tensors"], 0)
        self.assertAlmostEqual(st["ratio"], 1.0)
        seen = []

        def policy(name, t):
            seen.append(name)
            if name == "relu1":
                return None
            if name == "bn1":
                return (1e-4, "rel", "fast")
            return 1e-2

        with ebac_torch.compressed_activations(1e-2, model=self.model, min_numel=1, policy=policy):
            grads(self.model, self.x, self.y)
        st = ebac_torch.stats()
        self.assertIn("relu1", seen)
        self.assertEqual(st["per_module"]["relu1"]["compressed_tensors"], 0)
        self.assertIn("policy", st["kept"])
        for d in st["details"]:
            if d["module"] == "bn1" and "eb" in d:
                self.assertEqual((d["eb"], d["pipeline"]), (1e-4, "fast"))
        with ebac_torch.compressed_activations(1e-2, model=self.model, min_numel=1, bounds={"conv2": None}):
            grads(self.model, self.x, self.y)
        self.assertEqual(ebac_torch.stats()["per_module"]["conv2"]["compressed_tensors"], 0)

    def test_details_carry_each_stream_header(self):
        # eb_abs and outliers come from each stream's header, read when stats() is called
        with ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=self.model, min_numel=1):
            grads(self.model, self.x, self.y)
        st = ebac_torch.stats()
        comp = [d for d in st["details"] if "eb" in d]
        self.assertTrue(comp)
        for d in comp:
            self.assertGreaterEqual(d["eb_abs"], 0.0)  # the quantizer's bound (0 e.g. for an all-zero tensor)
            self.assertGreaterEqual(d["outliers"], 0)
        big = max(comp, key=lambda d: d["raw_bytes"])
        self.assertGreater(big["eb_abs"], 0.0)
        self.assertEqual(ebac_torch.stats()["details"], st["details"])  # read once, kept
        # a header copy is checked against the stream's size
        c = ebac_torch.compress(self.x, 1e-2, "rel", "ratio")
        head = c.blob[:C.max_header_bytes].clone()
        self.assertEqual(C.inspect(head, c.blob.numel())["eb_abs"], C.inspect(c.blob)["eb_abs"])
        with self.assertRaises(RuntimeError):
            C.inspect(head, c.blob.numel() + 1)  # not the stream's size: trailing bytes

    def test_measure_error_holds_bound(self):
        # batchnorm_bound_scale=1: every tensor under the one bound the recorder checks (the finer
        # BatchNorm-input bound of the default has its own tests: test_batchnorm_bound.py)
        ctx = ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=self.model, min_numel=1, measure_error=True,
                                                batchnorm_bound_scale=1)
        rec = ctx.C = RecordingExtension(ctx.C, 1e-2, "rel")
        with ctx:
            grads(self.model, self.x, self.y)
        self.assertGreater(rec.float_checked, 0)
        self.assertEqual(rec.failures, [])
        st = ebac_torch.stats()
        self.assertEqual(st["bound_violations"], 0)  # the hooks' own count agrees
        for name, m in st["per_module"].items():
            self.assertLessEqual(m["max_error_over_bound"], 1.0, name)
        self.assertTrue(any(m.get("mse", 0) > 0 for m in st["per_module"].values()))

    def test_without_model_names(self):
        with ebac_torch.compressed_activations(1e-2, min_numel=1):
            grads(self.model, self.x, self.y)
        names = list(ebac_torch.stats()["per_module"])
        self.assertTrue(any(n.startswith("Conv2d#") for n in names), names)

    def test_half_precision_autocast(self):
        model = copy.deepcopy(self.model)
        base = grads(model, self.x, self.y, torch.autocast("cpu", dtype=torch.bfloat16))
        ctx = ebac_torch.compressed_activations(1e-3, model=model, min_numel=1, measure_error=True,
                                                batchnorm_bound_scale=1)  # one bound, as above
        rec = ctx.C = RecordingExtension(ctx.C, 1e-3, "rel")  # rel: the default mode
        with torch.autocast("cpu", dtype=torch.bfloat16):
            comp = grads(model, self.x, self.y, ctx)
        self.assertGreater(rec.float_checked, 0)
        self.assertEqual(rec.failures, [])
        st = ebac_torch.stats()
        self.assertTrue(any(d["dtype"] == "bfloat16" and "eb" in d for d in st["details"]))
        self.assertEqual(st["bound_violations"], 0)
        for n in base:
            self.assertTrue(bool(torch.isfinite(comp[n]).all()), n)
            scale = float(base[n].abs().max()) + 1e-12
            self.assertLess(float((comp[n] - base[n]).abs().max()) / scale, 0.2, n)

    def test_channels_last(self):
        model = copy.deepcopy(self.model).to(memory_format=torch.channels_last)
        x = self.x.contiguous(memory_format=torch.channels_last)
        base = grads(model, x, self.y)
        comp = grads(model, x, self.y, ebac_torch.compressed_activations(1e-6, model=model, min_numel=1))
        for n in base:
            scale = float(base[n].abs().max()) + 1e-12
            self.assertLess(float((comp[n] - base[n]).abs().max()) / scale, 1e-3, n)

    def test_params_not_compressed_without_model(self):
        lin = nn.Linear(256, 256)
        x = torch.randn(64, 256, requires_grad=True)  # a leaf that requires grad: left alone too
        with ebac_torch.compressed_activations(1e-2, min_numel=1) as s:
            out = (lin(x) * 2).sum()
        out.backward()
        st = s.stats()
        self.assertGreaterEqual(st["parameters"]["tensors"], 2)  # x and the weight (a view: W^T)
        self.assertEqual(st["compressed_tensors"], 0)

    def test_training_loop_converges(self):
        torch.manual_seed(1)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, _ = data(64, seed=5)
        y = (x.mean(dim=(1, 2, 3)) * 40).long().clamp(-4, 5) + 4  # learnable labels
        losses = []
        for _ in range(20):
            opt.zero_grad()
            with ebac_torch.compressed_activations(1e-2, "rel", "ratio", model=model):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        self.assertLess(losses[-1], losses[0] * 0.7, losses)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            ebac_torch.compressed_activations(1e-2, pipeline="nope")
        with self.assertRaises(ValueError):
            ebac_torch.compressed_activations(0.0)
        with self.assertRaises(ValueError):
            ebac_torch.compressed_activations(1e-2, mode="sideways")


if __name__ == "__main__":
    unittest.main()
