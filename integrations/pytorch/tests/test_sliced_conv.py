"""compressed_activations(conv_backward_slices=K): nn.Conv1d/2d/3d backward over
batch slices (ebac_torch/sliced_conv.py). The gradients must be the unsliced
session's up to float rounding, and plain training's within the usual rule;
the convolution's input is stored once with the session's other savers."""

import threading
import unittest

from _common import torch, ebac_torch  # noqa: F401  (import path, threads, extension)

import torch.nn as nn
import torch.nn.functional as F

from ebac_torch import sliced_conv

SLICED = "_SlicedConvBackward"


def cosine(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    n = float(a.norm()) * float(b.norm())
    return float(a @ b) / n if n else float(a.norm() == b.norm())


def run(conv, x, slices, session=True, layout=None):
    """loss = <conv(x'), r> (r fixed), x' = layout(x * 1) (a tensor the session compresses; x itself, a
    leaf, would be kept as a parameter is); returns (loss, output's grad_fn name, {name: grad})."""
    conv.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(x.requires_grad)
    xin = x * 1.0
    if layout is not None:
        xin = layout(xin)
    if session:
        with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", conv_backward_slices=slices,
                                               min_numel=1) as s:
            y = conv(xin)
        assert x.dtype == torch.float64 or s.stats()["compressed_tensors"] >= 1  # (ebac keeps float64 raw)
    else:
        y = conv(xin)
    del xin
    g = torch.Generator().manual_seed(7)
    r = torch.randn(y.shape, generator=g)
    loss = (y * r).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in conv.named_parameters() if p.grad is not None}
    if x.requires_grad:
        grads["input"] = x.grad.clone()
    return float(loss), type(y.grad_fn).__name__, grads


# (module builder, input shape); each is run sliced and unsliced
CASES = [
    ("2d plain", lambda: nn.Conv2d(3, 5, 3), (6, 3, 9, 9)),
    ("2d bias stride padding", lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1), (7, 4, 11, 10)),
    ("2d groups dilation", lambda: nn.Conv2d(6, 9, 3, padding=2, dilation=2, groups=3, bias=False), (5, 6, 12, 12)),
    ("2d depthwise", lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8), (9, 8, 7, 7)),
    ("2d asymmetric kernel stride padding", lambda: nn.Conv2d(3, 4, (3, 5), stride=(2, 1), padding=(1, 2)),
     (4, 3, 9, 13)),
    ("2d padding same", lambda: nn.Conv2d(3, 4, 5, padding="same"), (5, 3, 8, 8)),
    ("2d padding valid", lambda: nn.Conv2d(3, 4, 3, padding="valid"), (5, 3, 8, 8)),
    ("2d reflect", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (5, 3, 8, 8)),
    ("2d circular", lambda: nn.Conv2d(3, 4, 3, padding=2, padding_mode="circular"), (5, 3, 8, 8)),
    ("2d replicate stride", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1, padding_mode="replicate"),
     (6, 3, 9, 9)),
    ("1d", lambda: nn.Conv1d(4, 6, 5, stride=2, padding=2, groups=2), (7, 4, 33)),
    ("3d", lambda: nn.Conv3d(2, 3, 3, padding=1, stride=(1, 2, 2)), (5, 2, 5, 8, 8)),
]


class SlicedMatchesUnsliced(unittest.TestCase):
    def check(self, make, shape, slices, requires_grad=True, layout=None):
        torch.manual_seed(0)
        conv = make()
        x = torch.randn(shape).requires_grad_(requires_grad)
        l0, f0, g0 = run(conv, x, None, layout=layout)
        l1, f1, g1 = run(conv, x, slices, layout=layout)
        lp, _, gp = run(conv, x, None, session=False, layout=layout)
        self.assertNotEqual(f0, SLICED)
        self.assertEqual(l0, l1)  # the forward is the same convolution
        self.assertEqual(set(g0), set(g1))
        if sliced_conv.slices_for(slices, x) == 1:  # one slice: the ordinary path, the same gradients bit for bit
            self.assertNotEqual(f1, SLICED)
            for n in g0:
                self.assertTrue(torch.equal(g0[n], g1[n]), n)
            return g1
        self.assertEqual(f1, SLICED, "the sliced path did not run")
        for n in g0:
            self.assertEqual(g0[n].shape, g1[n].shape, n)
            scale = float(g0[n].abs().max()) or 1.0
            self.assertLessEqual(float((g0[n] - g1[n]).abs().max()), 1e-5 * scale, n)
            self.assertGreaterEqual(cosine(g0[n], g1[n]), 0.9999, n)
            self.assertGreaterEqual(cosine(gp[n], g1[n]), 0.99, n)  # against plain, the usual rule
        return g1

    def test_cases(self):
        for name, make, shape in CASES:
            for k in (2, 3, 1):
                with self.subTest(case=name, slices=k):
                    self.check(make, shape, k)

    def test_auto(self):
        # 40 x 4 x 64 x 64 float32: 2.6 MB, 2 slices under AUTO_SLICE_BYTES = 2 MiB
        self.assertEqual(sliced_conv.slices_for("auto", torch.empty(40, 4, 64, 64)), 2)
        self.check(lambda: nn.Conv2d(4, 4, 3, padding=1, bias=False), (40, 4, 64, 64), "auto")
        self.check(lambda: nn.Conv2d(4, 4, 3, padding=1), (4, 4, 8, 8), "auto")  # one slice: ordinary

    def test_more_slices_than_samples(self):
        # batch 3 with 8 slices: one sample a slice
        self.check(lambda: nn.Conv2d(3, 4, 3, padding=1), (3, 3, 8, 8), 8)
        self.check(lambda: nn.Conv2d(3, 4, 3, padding=1), (2, 3, 8, 8), 64)

    def test_non_contiguous_inputs(self):
        make = lambda: nn.Conv2d(4, 5, 3, padding=1)  # noqa: E731
        layouts = {
            "channels_last": lambda t: t.contiguous(memory_format=torch.channels_last),
            "transposed": lambda t: t.transpose(2, 3),
            "strided": lambda t: torch.cat([t, t], 3)[..., ::2],
        }
        for name, lay in layouts.items():
            with self.subTest(layout=name):
                g = self.check(make, (5, 4, 8, 8), 2, layout=lay)
                self.assertEqual(g["input"].shape, (5, 4, 8, 8))

    def test_input_without_grad(self):
        g = self.check(lambda: nn.Conv2d(3, 4, 3), (6, 3, 8, 8), 3, requires_grad=False)
        self.assertNotIn("input", g)

    def test_frozen_weight(self):
        torch.manual_seed(0)
        conv = nn.Conv2d(3, 4, 3, padding=1)
        conv.weight.requires_grad_(False)
        x = torch.randn(6, 3, 8, 8, requires_grad=True)
        _, f0, g0 = run(conv, x, None)
        _, f1, g1 = run(conv, x, 4)
        self.assertEqual(f1, SLICED)
        self.assertEqual(set(g1), {"bias", "input"})
        for n in g0:
            self.assertLessEqual(float((g0[n] - g1[n]).abs().max()), 1e-5 * float(g0[n].abs().max()), n)


class Fallbacks(unittest.TestCase):
    def test_ordinary_path(self):
        """Cases that run the ordinary convolution inside the session, with its gradients."""
        torch.manual_seed(0)
        cases = [
            ("batch 1", nn.Conv2d(3, 4, 3), torch.randn(1, 3, 8, 8)),
            ("unbatched", nn.Conv2d(3, 4, 3), torch.randn(3, 8, 8)),
            ("same, even kernel", nn.Conv2d(3, 4, 4, padding="same"), torch.randn(4, 3, 8, 8)),
            ("float64", nn.Conv2d(3, 4, 3).double(), torch.randn(4, 3, 8, 8, dtype=torch.float64)),
        ]
        for name, conv, x in cases:
            with self.subTest(case=name):
                x.requires_grad_(True)
                _, f0, g0 = run(conv, x, None, session=False)
                _, f1, g1 = run(conv, x, 4)
                self.assertNotEqual(f1, SLICED)
                for n in g0:
                    self.assertGreaterEqual(cosine(g0[n], g1[n]), 0.99, n)

    def test_no_grad(self):
        conv = nn.Conv2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8)
        with torch.no_grad(), ebac_torch.compressed_activations(conv_backward_slices=2):
            y = conv(x)
        self.assertIsNone(y.grad_fn)
        self.assertTrue(torch.equal(y, F.conv2d(x, conv.weight.detach(), conv.bias.detach())))

    def test_transposed_conv_not_patched(self):
        conv = nn.ConvTranspose2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8, requires_grad=True)
        with ebac_torch.compressed_activations(conv_backward_slices=2):
            y = conv(x)
        self.assertNotEqual(type(y.grad_fn).__name__, SLICED)
        y.sum().backward()

    def test_off_by_default(self):
        conv = nn.Conv2d(3, 4, 3)
        with ebac_torch.compressed_activations():
            y = conv(torch.randn(4, 3, 8, 8, requires_grad=True))
        self.assertNotEqual(type(y.grad_fn).__name__, SLICED)


class Session(unittest.TestCase):
    def test_bad_option(self):
        for v in (0, -2, 1.5, "8", True, [2]):
            with self.subTest(value=v):
                with self.assertRaisesRegex(ValueError, "conv_backward_slices"):
                    ebac_torch.compressed_activations(conv_backward_slices=v)

    def test_patch_removed_and_nesting(self):
        original = nn.Conv2d.__dict__["_conv_forward"]
        conv = nn.Conv2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8, requires_grad=True)
        with ebac_torch.compressed_activations(conv_backward_slices=2):
            self.assertIsNot(nn.Conv2d.__dict__["_conv_forward"], original)
            with ebac_torch.compressed_activations():  # the innermost session has the option off
                y_inner = conv(x)
            y_outer = conv(x)
        self.assertIs(nn.Conv2d.__dict__["_conv_forward"], original)
        self.assertNotEqual(type(y_inner.grad_fn).__name__, SLICED)
        self.assertEqual(type(y_outer.grad_fn).__name__, SLICED)
        self.assertNotEqual(type(conv(x).grad_fn).__name__, SLICED)  # after the session

    def test_other_thread_unaffected(self):
        conv = nn.Conv2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8, requires_grad=True)
        names = []
        with ebac_torch.compressed_activations(conv_backward_slices=2):
            t = threading.Thread(target=lambda: names.append(type(conv(x).grad_fn).__name__))
            t.start()
            t.join()
        self.assertEqual(len(names), 1)
        self.assertNotEqual(names[0], SLICED)

    def test_input_stored_once(self):
        """A ReLU output that the next conv saves too: one blob, as without the option."""
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        x = torch.randn(8, 3, 16, 16)
        out = {}
        for k in (None, 4):
            with ebac_torch.compressed_activations(conv_backward_slices=k) as s:
                y = net(x)
            st = s.stats()
            out[k] = (st["tensors"], st["duplicates"], st["compressed_bytes"], st["raw_bytes"])
            y.sum().backward()
            self.assertTrue(s.stats()["complete"])
        self.assertEqual(out[None], out[4])
        self.assertGreaterEqual(out[4][1], 1)

    def test_inplace_change_refused(self):
        conv = nn.Conv2d(3, 4, 3)
        h = torch.randn(4, 3, 8, 8, requires_grad=True) * 1.0
        with ebac_torch.compressed_activations(conv_backward_slices=2, min_numel=1):
            y = conv(h)
        h.add_(1.0)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            y.sum().backward()

    def test_second_backward_refused(self):
        conv = nn.Conv2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8, requires_grad=True)
        with ebac_torch.compressed_activations(conv_backward_slices=2):
            y = conv(x * 1.0)
        y.sum().backward(retain_graph=True)
        with self.assertRaisesRegex(RuntimeError, "second backward.*conv_backward_slices"):
            y.sum().backward()

    def test_double_backward_refused(self):
        conv = nn.Conv2d(3, 4, 3)
        x = torch.randn(4, 3, 8, 8, requires_grad=True)
        with ebac_torch.compressed_activations(conv_backward_slices=2):
            y = conv(x)
        (gx,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)
        with self.assertRaisesRegex(RuntimeError, "once_differentiable"):
            gx.sum().backward()


class Block(nn.Module):
    def __init__(self, c, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c // stride, c, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.short = nn.Conv2d(c // stride, c, 1, stride=stride, bias=False) if stride > 1 else nn.Identity()

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(self.short(x) + y)


class Model(unittest.TestCase):
    def test_small_resnet(self):
        """A small residual CNN, one step from the same weights: the loss is equal, every parameter's
        gradient matches the unsliced session's (cosine >= 0.9999) and plain's (>= 0.99)."""
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), Block(8),
                            Block(16, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        x = torch.randn(19, 1, 16, 16)
        y = torch.randint(0, 10, (19,))
        state = {k: v.clone() for k, v in net.state_dict().items()}

        def step(k, session=True):
            net.load_state_dict(state)
            net.zero_grad(set_to_none=True)
            if session:
                with ebac_torch.compressed_activations(error_bound=1e-2, mode="rel", conv_backward_slices=k):
                    loss = F.cross_entropy(net(x), y)
            else:
                loss = F.cross_entropy(net(x), y)
            loss.backward()
            return float(loss), {n: p.grad.clone() for n, p in net.named_parameters()}

        lp, gp = step(None, session=False)
        l0, g0 = step(None)
        for k in (4, 7):
            l1, g1 = step(k)
            self.assertEqual(l0, l1)
            gmax = max(float(g.norm()) for g in gp.values())
            for n in g0:
                self.assertGreaterEqual(cosine(g0[n], g1[n]), 0.9999, (k, n))
                if float(gp[n].norm()) > 1e-6 * gmax:
                    self.assertGreaterEqual(cosine(gp[n], g1[n]), 0.99, (k, n))


class SliceCount(unittest.TestCase):
    def test_slices_for(self):
        x = torch.empty(256, 16, 28, 28)  # 12.8 MB
        self.assertEqual(sliced_conv.slices_for("auto", x),
                         -(-x.numel() * 4 // sliced_conv.AUTO_SLICE_BYTES))
        self.assertEqual(sliced_conv.slices_for("auto", torch.empty(4, 1)), 1)
        self.assertEqual(sliced_conv.slices_for(8, torch.empty(3, 5)), 3)
        self.assertEqual(sliced_conv.slices_for(2, torch.empty(300, 5)), 2)


if __name__ == "__main__":
    unittest.main()
