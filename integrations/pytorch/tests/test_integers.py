"""Integer, bool and few-level tensors: coded losslessly, counted, and small.

What a training step saves besides float activations: max-pool indices
(int64), dropout masks (float {0, 1/(1-p)} in torch 1.13, bool in 2.x),
labels. Every check compares against the input itself."""

import unittest

import torch.nn as nn

from _common import C, ebac_torch, torch

PIPELINES = ["fast", "ratio", "ratio-flat", "rle", "plain", "max", "max-bound"]
INT_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


class IntegerTensors(unittest.TestCase):
    def test_every_integer_dtype_round_trips_bit_exactly(self):
        g = torch.Generator().manual_seed(3)
        for dtype in INT_DTYPES:
            if dtype == torch.bool:
                x = torch.rand((4, 3, 17, 9), generator=g) < 0.3
            else:
                info = torch.iinfo(dtype)
                x = torch.randint(max(info.min, -1000), min(info.max, 1000), (4, 3, 17, 9), generator=g, dtype=dtype)
                x.view(-1)[::97] = info.max  # values beyond the code range for the wide types: stored raw
                x.view(-1)[5::101] = info.min
            for p in PIPELINES:
                with self.subTest(dtype=dtype, pipeline=p):
                    c = ebac_torch.compress(x, 1e-2, "rel", p)
                    y = ebac_torch.decompress(c)
                    self.assertEqual(y.dtype, x.dtype)
                    self.assertEqual(y.shape, x.shape)
                    self.assertTrue(torch.equal(y, x))
                    info = ebac_torch.inspect(c)
                    self.assertEqual(info["mode"], "none")
                    self.assertEqual(info["eb_abs"], 0.0)
                    self.assertLessEqual(c.nbytes, x.numel() * x.element_size() + 112 + 8 * 4 + 8)

    def test_layouts_of_integer_tensors(self):
        x = torch.arange(4 * 6 * 5 * 7, dtype=torch.int64).reshape(4, 6, 5, 7) % 37
        for t in (x.contiguous(memory_format=torch.channels_last), x.transpose(1, 3), x[:, ::2, :, 1:]):
            y = ebac_torch.decompress(ebac_torch.compress(t, pipeline="ratio"))
            self.assertTrue(torch.equal(y, t))

    def test_bool_masks_cost_about_a_bit(self):
        g = torch.Generator().manual_seed(4)
        m = torch.rand((64, 50, 384), generator=g) < 0.9  # torch 2.x dropout: keep with p = 0.9
        c = ebac_torch.compress(m, pipeline="ratio")
        self.assertTrue(torch.equal(ebac_torch.decompress(c), m))
        self.assertEqual(ebac_torch.inspect(c)["quantizer"], 4)  # two levels: palette indices
        self.assertGreaterEqual(m.numel() / c.nbytes, 8.0)         # <= 1 bit an element

    def test_max_pool_indices_with_geometry(self):
        g = torch.Generator().manual_seed(5)
        for k, s, pad, size in ((2, 2, 0, 28), (3, 2, 1, 56), (2, 2, 0, 7)):
            x = torch.relu(torch.randn((32, 16, size, size), generator=g))
            _, idx = torch.nn.functional.max_pool2d(x, k, s, pad, return_indices=True)
            pooling = [[size, size], [k, k], [s, s], [pad, pad], [1, 1]]
            for p in ("ratio", "fast", "rle"):
                with self.subTest(kernel=k, pipeline=p):
                    c = ebac_torch.compress(idx, pipeline=p, pooling=pooling)
                    self.assertTrue(torch.equal(ebac_torch.decompress(c), idx))
                    info = ebac_torch.inspect(c)
                    self.assertEqual(info["quantizer"], 5)  # window offsets
                    self.assertEqual(info["outliers"], 0)
                    bits = 8.0 * c.nbytes / idx.numel()
                    if p == "ratio" and k == 2:
                        self.assertLessEqual(bits, 3.0)  # the target, against 64 raw
            # without the geometry: delta coding, still exact
            c = ebac_torch.compress(idx, pipeline="ratio")
            self.assertTrue(torch.equal(ebac_torch.decompress(c), idx))
            self.assertEqual(ebac_torch.inspect(c)["quantizer"], 3)

    def test_max_pool_indices_of_few_distinct_values(self):
        # 2x2 output planes of a 4x4 input: at most 16 distinct indices, so the
        # codec codes them as palette levels, not window offsets; the stream keeps
        # the pooling layout (leading elements, 2, 2), and decompress must take it
        # (vgg16_bn's last max-pool at 64x64 inputs failed here in backward).
        g = torch.Generator().manual_seed(8)
        x = torch.randn((16, 64, 4, 4), generator=g)
        _, idx = torch.nn.functional.max_pool2d(x, 2, 2, return_indices=True)
        pooling = [[4, 4], [2, 2], [2, 2], [0, 0], [1, 1]]
        for p in PIPELINES:
            with self.subTest(pipeline=p):
                c = ebac_torch.compress(idx, pipeline=p, pooling=pooling)
                self.assertTrue(torch.equal(ebac_torch.decompress(c), idx))
        net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 4, 10))
        xin = torch.randn((16, 3, 4, 4), generator=g)
        with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel"):
            loss = net(xin).square().mean()
        loss.backward()  # raised "the blob holds (1024, 2, 2)" before
        self.assertTrue(all(p.grad is not None for p in net.parameters()))

    def test_wrong_pooling_geometry_is_refused_or_exact(self):
        idx = torch.zeros((2, 3, 4, 4), dtype=torch.int64)
        with self.assertRaisesRegex(RuntimeError, "pooling"):
            ebac_torch.compress(idx, pooling=[[8, 8], [0, 2], [2, 2], [0, 0], [1, 1]])
        with self.assertRaisesRegex(RuntimeError, "pooling"):
            ebac_torch.compress(idx, pooling=[[8], [2, 2], [2, 2], [0, 0], [1, 1]])
        with self.assertRaisesRegex(RuntimeError, "integer"):
            ebac_torch.compress(idx.float(), pooling=[[8, 8], [2, 2], [2, 2], [0, 0], [1, 1]])
        # indices of another geometry: outside their windows, stored raw, still exact
        x = torch.randn((2, 3, 9, 9))
        _, other = torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)
        c = ebac_torch.compress(other, pooling=[[9, 9], [2, 2], [2, 2], [0, 0], [1, 1]])
        self.assertTrue(torch.equal(ebac_torch.decompress(c), other))


class LevelTensors(unittest.TestCase):
    def test_dropout_masks_compress_well_in_every_pipeline(self):
        # torch 1.13 saves a CPU dropout mask as float {0, 1/(1-p)}: every
        # non-zero is the tensor's maximum, on an edge of the bound's grid.
        g = torch.Generator().manual_seed(6)
        for p in (0.1, 0.5, 0.9):
            m = (torch.rand((32, 50, 384), generator=g) >= p).float().div_(1 - p)
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                md = m.to(dtype)
                for pipe in PIPELINES:
                    with self.subTest(p=p, dtype=dtype, pipeline=pipe):
                        c = ebac_torch.compress(md, 1e-2, "rel", pipe)
                        self.assertTrue(torch.equal(ebac_torch.decompress(c), md))  # lossless
                        ratio = md.numel() * md.element_size() / c.nbytes
                        self.assertGreaterEqual(ratio, 2.0)
                        if pipe == "ratio":
                            self.assertGreaterEqual(ratio, 12.0)

    def test_hooks_compress_indices_and_masks_of_a_real_step(self):
        torch.manual_seed(7)
        net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Dropout(0.5), nn.Linear(32 * 7 * 7, 10))
        x = torch.randn(64, 1, 28, 28)
        y = torch.randint(0, 10, (64,))
        with ebac_torch.compressed_activations(1e-2, "rel", model=net) as s:
            loss = nn.functional.cross_entropy(net(x), y)
        st = s.stats()
        loss.backward()
        pools = [d for d in st["details"] if d["module"] in ("3", "6") and d["dtype"] == "int64"]
        self.assertEqual(len(pools), 2)
        for d in pools:
            self.assertTrue(d["lossless"])
            self.assertIn("pooling", d)
            self.assertLessEqual(8.0 * d["stored_bytes"] / (d["raw_bytes"] / 8), 3.0)  # bits per index
        self.assertNotIn("integer", st["kept"])
        # The dropout mask (float in torch 1.13, bool in 2.x) is stored small.
        masks = [d for d in st["details"] if d["module"] == "8" and d["raw_bytes"] >= 64 * 32 * 49]
        self.assertTrue(masks)
        for d in masks:
            self.assertGreaterEqual(d["raw_bytes"] / d["stored_bytes"], 8.0)

    def test_lossless_tensors_leave_gradients_unchanged(self):
        # Only integer and mask tensors compressed (floats kept raw by policy):
        # the gradients are the plain step's, bit for bit.
        torch.manual_seed(8)
        net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Dropout(0.3), nn.Linear(8 * 14 * 14, 10))
        x = torch.randn(32, 1, 28, 28)
        y = torch.randint(0, 10, (32,))

        def step(policy):
            torch.manual_seed(9)
            net.zero_grad()
            if policy is None:
                loss = nn.functional.cross_entropy(net(x), y)
            else:
                with ebac_torch.compressed_activations(1e-2, "rel", model=net, policy=policy, min_numel=1):
                    loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            return [p.grad.clone() for p in net.parameters()]

        def only_exact(name, t):
            levels = t.is_floating_point() and torch.unique(t).numel() <= 16
            return 1e-2 if (not t.is_floating_point() or levels) else None

        plain, comp = step(None), step(only_exact)
        for a, b in zip(plain, comp):
            self.assertTrue(torch.equal(a, b))


if __name__ == "__main__":
    unittest.main()
