"""ebac_torch.checkpoint: block boundaries kept (compressed inside a
session), blocks recomputed in backward; gradients match plain training."""

import unittest

from _common import torch, ebac_torch  # noqa: F401  (import path, threads, extension)

import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        y = self.bn2(self.conv2(self.drop(F.relu(self.bn1(self.conv1(x))))))
        return F.relu(x + y)


class Net(nn.Module):
    def __init__(self, c=8, depth=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.blocks = nn.ModuleList([Block(c) for _ in range(depth)])
        self.fc = nn.Linear(c, 10)

    def forward(self, x, ckpt=None):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x) if ckpt is None else ckpt(b, x)
        return self.fc(x.mean((2, 3)))


def mean_saves_input():
    """1 when this torch's mean over dims saves its input for backward (torch 1.13), else 0 (2.x)."""
    saved = []
    t = torch.randn(2, 3, 4, 4, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda x: saved.append(x) or x, lambda x: x):
        t.mean((2, 3))
    return int(any(x.shape == t.shape for x in saved))


def step_grads(model, x, y, ckpt=None, session=None, seed=5):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # same dropout masks each way
    if session is not None:
        with session:
            loss = F.cross_entropy(model(x, ckpt), y)
    else:
        loss = F.cross_entropy(model(x, ckpt), y)
    loss.backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(a @ b) / (float(a.norm()) * float(b.norm()))


class Recompute(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = Net()
        self.x = torch.randn(16, 1, 12, 12)
        self.y = torch.randint(0, 10, (16,))
        self.base = step_grads(self.model, self.x, self.y)

    def test_lossless_matches_plain(self):
        # Without a session nothing is compressed: recomputation alone, the
        # same dropout masks (RNG restored), so the gradients agree to rounding.
        got = step_grads(self.model, self.x, self.y, ckpt=ebac_torch.checkpoint)
        for n, g in self.base.items():
            self.assertIn(n, got)
            self.assertTrue(torch.allclose(got[n], g, rtol=1e-4, atol=1e-6), n)

    def test_compressed_boundaries_gradients(self):
        s = ebac_torch.compressed_activations(1e-2, "rel", model=self.model, min_numel=1)
        got = step_grads(self.model, self.x, self.y, ckpt=ebac_torch.checkpoint, session=s)
        gmax = max(float(g.norm()) for g in self.base.values())
        for n, g in self.base.items():
            if float(g.norm()) < 1e-5 * gmax:
                continue
            self.assertGreaterEqual(cosine(got[n], g), 0.99, n)
        # Only the stem's and head's own saves plus one boundary per block are kept.
        st = s.stats()
        self.assertTrue(st["complete"])
        block_inputs = [d for d in st["details"] if d["shape"] == (16, 8, 12, 12)]
        plain = ebac_torch.compressed_activations(1e-3, "rel", model=self.model, min_numel=1)
        step_grads(self.model, self.x, self.y, session=plain)
        self.assertLess(st["raw_bytes"], plain.stats()["raw_bytes"] / 2)
        # The stem's BN input and ReLU output and the last block's output (read by the head's mean, where
        # this torch's mean saves its input: 1.13's does, 2.x's keeps only the shape), under the session's
        # bound; each block's input (the first is the stem's ReLU output again: a boundary never shares the
        # looser blob). Nothing from inside the blocks.
        self.assertEqual(len(block_inputs), 2 + mean_saves_input() + len(self.model.blocks))
        # The boundaries under the checkpoint's bound, everything else under the session's.
        eb, mode = ebac_torch.recompute.BOUNDARY_BOUND
        tight = [d for d in st["details"] if d.get("eb") == eb and d.get("mode") == mode]
        self.assertEqual(len(tight), len(self.model.blocks))
        self.assertTrue(all(d["pipeline"] == ebac_torch.recompute.BOUNDARY_PIPELINE for d in tight))
        auto = ebac_torch.hooks.AUTO_PIPELINES["cpu"]  # the session's default, "auto", on the host
        self.assertTrue(all(d["pipeline"] == auto for d in st["details"] if "pipeline" in d and d not in tight))
        self.assertTrue(all(d["shape"] == (16, 8, 12, 12) for d in tight))
        # (the stem's BN input under batchnorm_bound_scale x the session's: hooks.py, test_batchnorm_bound.py)
        bn = [d for d in st["details"] if d["module"] == "stem.1" and "eb" in d]
        self.assertEqual([d["eb"] for d in bn], [1e-2 * 0.5])
        self.assertTrue(all(d.get("eb") == 1e-2 for d in st["details"] if "eb" in d and d not in tight + bn))

    def test_boundary_bound_argument(self):
        s = ebac_torch.compressed_activations(1e-2, "rel", model=self.model, min_numel=1)
        ck = lambda f, t: ebac_torch.checkpoint(f, t, error_bound=1e-3, mode="abs", pipeline="ratio-flat")  # noqa: E731
        step_grads(self.model, self.x, self.y, ckpt=ck, session=s)
        tight = [d for d in s.stats()["details"] if d.get("eb") == 1e-3 and d.get("mode") == "abs"]
        self.assertEqual(len(tight), len(self.model.blocks))
        self.assertTrue(all(d["pipeline"] == "ratio-flat" for d in tight))

    def test_first_block_reading_data_gets_parameter_grads(self):
        # The data does not require grad: the parameters inside still get gradients.
        block = Block(1)
        x = torch.randn(4, 1, 6, 6)
        out = ebac_torch.checkpoint(block, x)
        out.sum().backward()
        self.assertIsNotNone(block.conv1.weight.grad)
        self.assertGreater(float(block.conv1.weight.grad.abs().sum()), 0)

    def test_tuple_and_non_tensor_arguments(self):
        lin = nn.Linear(4, 4)

        def fn(a, scale, b):
            return lin(a) * scale, b * 2

        a = torch.randn(3, 4, requires_grad=True)
        b = torch.randn(3, 4, requires_grad=True)
        o1, o2 = ebac_torch.checkpoint(fn, a, 3.0, b)
        (o1.sum() + o2.sum()).backward()
        ga, gb, gw = a.grad.clone(), b.grad.clone(), lin.weight.grad.clone()
        a.grad = b.grad = lin.weight.grad = None
        o1, o2 = fn(a, 3.0, b)
        (o1.sum() + o2.sum()).backward()
        self.assertTrue(torch.allclose(ga, a.grad) and torch.allclose(gb, b.grad) and torch.allclose(gw, lin.weight.grad))


if __name__ == "__main__":
    unittest.main()
