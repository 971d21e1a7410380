"""The BatchNorm propagation term (ebac_torch.propagation) against autograd."""

import unittest

from _common import ebac_torch, torch
from test_hooks import Net, data

F = torch.nn.functional
nn = torch.nn


def grads_of(model, loss_fn, tensors, policy=None, eb=1e-2):
    """The gradients of `tensors` (float64 copies) after loss_fn().backward(), with the saved tensors
    `policy` picks compressed at rel `eb` (none without a policy)."""
    model.zero_grad(set_to_none=True)
    for t in tensors:
        t.grad = None
    if policy is None:
        loss_fn().backward()
    else:
        # derive=False: every tensor under exactly the bound the policy gives (a session that rebuilds
        # a GELU's output stores the GELU's input finer than asked: see ebac_torch/derived.py).
        with ebac_torch.compressed_activations(eb, "rel", "ratio", model=model, policy=policy, min_numel=1000,
                                               derive=False):
            loss = loss_fn()
        loss.backward()
    return [t.grad.detach().double().clone() for t in tensors]


def conv1_grad(model, x, y, policy=None, eb=1e-2):
    return grads_of(model, lambda: F.cross_entropy(model(x), y), [model.conv1.weight], policy, eb)[0]


class TinyAttention(nn.Module):
    """Self-attention whose scores, softmax and P V run in its own forward (they save Q, K, P, V)."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        p = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(dim=-1)
        return self.proj((p @ v).transpose(1, 2).reshape(b, t, c))


class Propagation(unittest.TestCase):
    def test_matches_autograd_when_only_the_batchnorm_input_is_compressed(self):
        torch.manual_seed(0)
        model = Net().train()
        with torch.no_grad():  # gamma away from 1, so a wrong scale would show
            model.bn1.weight.uniform_(0.5, 2.0)
        x, y = data(32)
        rec = {}
        h1 = model.conv1.register_forward_hook(lambda m, i, o: rec.update(a=i[0].detach(), z=o.detach()))

        def keep_dy(m, i, o):
            o.register_hook(lambda g: rec.update(dy=g.detach()))
        h2 = model.bn1.register_forward_hook(keep_dy)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        exact = conv1_grad(model, x, y)
        h1.remove()
        h2.remove()
        for eb in (1e-1, 1e-2):
            model.load_state_dict(state)  # BN running statistics moved; batch statistics do not depend on them
            # only bn1's saved input (conv1's output) is compressed: conv1's gradient error is the propagated term alone
            measured = conv1_grad(model, x, y, policy=lambda name, t: eb if name == "bn1" else None, eb=eb)
            z_hat = ebac_torch.decompress(ebac_torch.compress(rec["z"], eb, "rel", "ratio"))
            predicted = ebac_torch.propagated_weight_error(model.conv1, rec["a"], model.bn1, rec["z"], z_hat,
                                                           rec["dy"])
            err = float((measured - exact).pow(2).mean().sqrt())
            self.assertGreater(err, 0.0)
            self.assertAlmostEqual(predicted / err, 1.0, delta=1e-3, msg="eb %g: %g vs %g" % (eb, predicted, err))

    def test_gelu_term_matches_autograd_when_only_the_gelu_input_is_compressed(self):
        # A transformer MLP on tokens: fc1 -> GELU -> fc2; the GELU saves fc1's output.
        torch.manual_seed(0)
        model = nn.Sequential()
        model.add_module("fc1", nn.Linear(24, 96))
        model.add_module("act", nn.GELU())
        model.add_module("fc2", nn.Linear(96, 10))
        x = torch.randn(16, 12, 24)
        target = torch.randn(16, 12, 10)
        rec = {}
        h1 = model.fc1.register_forward_hook(lambda m, i, o: rec.update(a=i[0].detach(), z=o.detach()))

        def keep_dy(m, i, o):  # returns None: a forward hook's return value would replace the output
            o.register_hook(lambda g: rec.update(dy=g.detach()))
        h2 = model.act.register_forward_hook(keep_dy)

        def fc1_grad(policy=None, eb=1e-2):
            return grads_of(model, lambda: F.mse_loss(model(x), target), [model.fc1.weight], policy, eb)[0]
        exact = fc1_grad()
        h1.remove()
        h2.remove()
        for eb in (1e-1, 1e-2):
            measured = fc1_grad(policy=lambda name, t: eb if name == "act" else None, eb=eb)
            z_hat = ebac_torch.decompress(ebac_torch.compress(rec["z"], eb, "rel", "ratio"))
            predicted = ebac_torch.propagated_weight_error(model.fc1, rec["a"], model.act, rec["z"], z_hat, rec["dy"])
            err = float((measured - exact).pow(2).mean().sqrt())
            self.assertGreater(err, 0.0)
            self.assertAlmostEqual(predicted / err, 1.0, delta=1e-3, msg="eb %g: %g vs %g" % (eb, predicted, err))
        # The change itself is dy (g(z^) - g(z)) with g = GELU' (by autograd here).
        zz = rec["z"].double().requires_grad_()
        g0 = torch.autograd.grad(F.gelu(zz).sum(), zz)[0]
        zh = z_hat.double().requires_grad_()
        g1 = torch.autograd.grad(F.gelu(zh).sum(), zh)[0]
        d = ebac_torch.elementwise_input_grad_error(model.act, rec["z"], z_hat, rec["dy"])
        self.assertLess(float((d - rec["dy"].double() * (g1 - g0)).abs().max()), 1e-6)

    def test_layernorm_error_matches_autograd_when_only_its_input_is_compressed(self):
        # A pre-LN sublayer: LayerNorm -> Linear. Only the LayerNorm's saved input
        # is compressed (its row statistics stay exact, as torch saves them).
        torch.manual_seed(0)
        model = nn.Sequential()
        model.add_module("ln", nn.LayerNorm(48))
        model.add_module("fc", nn.Linear(48, 10))
        with torch.no_grad():  # gamma away from 1, so a wrong scale would show
            model.ln.weight.uniform_(0.5, 2.0)
            model.ln.bias.uniform_(-0.5, 0.5)
        x0 = torch.randn(16, 12, 48) * 3 + torch.linspace(-2, 2, 48)
        target = torch.randn(16, 12, 10)
        rec = {}

        def keep_dy(m, i, o):  # returns None: a forward hook's return value would replace the output
            o.register_hook(lambda g: rec.update(dy=g.detach()))
        h = model.ln.register_forward_hook(keep_dy)

        # a leaf that requires grad is saved by reference, like a parameter: the LayerNorm reads x * 1
        x = x0.clone().requires_grad_()

        def grads(policy=None, eb=1e-2):
            return grads_of(model, lambda: F.mse_loss(model(x * 1), target), [model.ln.weight, x], policy, eb)
        g0, dx0 = grads()
        h.remove()
        for eb in (1e-1, 1e-2):
            g1, dx1 = grads(policy=lambda name, t: eb if name == "ln" else None, eb=eb)
            # the session stores a LayerNorm's input row by row in its own units
            x_hat, _ = ebac_torch.hooks.layernorm_input_round_trip(x0, model.ln, eb, "rel", "ratio")
            e = ebac_torch.propagation.layernorm_error(model.ln, x0, x_hat, rec["dy"])
            for key, got, exact in (("weight", g1, g0), ("input", dx1, dx0)):
                err = float((got - exact).pow(2).mean().sqrt())
                self.assertGreater(err, 0.0)
                self.assertAlmostEqual(e[key] / err, 1.0, delta=1e-3, msg="%s, eb %g: %g vs %g" % (key, eb, e[key], err))
            self.assertAlmostEqual(e["weight_grad_rms"], float(g0.pow(2).mean().sqrt()), delta=1e-6 * e["weight_grad_rms"])
            self.assertAlmostEqual(e["input_grad_rms"], float(dx0.pow(2).mean().sqrt()), delta=1e-6 * e["input_grad_rms"])

    def test_operand_error_matches_autograd_when_only_the_operands_are_compressed(self):
        torch.manual_seed(0)
        model = nn.Sequential()
        model.add_module("attn", TinyAttention())
        x0 = torch.randn(8, 24, 32)
        target = torch.randn(8, 24, 32)
        rec = {}
        h = model.attn.register_forward_hook(lambda m, i, o: o.register_hook(lambda g: rec.update(dy=g.detach())) and None)

        def qkv_grad(policy=None, eb=1e-2):
            return grads_of(model, lambda: F.mse_loss(model(x0), target), [model.attn.qkv.weight, model.attn.proj.weight],
                            policy, eb)
        g0, p0 = qkv_grad()
        h.remove()
        for eb in (1e-1, 1e-2):
            # only what the attention's own code saves (Q, K, P, V) is compressed
            g1, p1 = qkv_grad(policy=lambda name, t: eb if name == "attn" else None, eb=eb)
            e = ebac_torch.propagation.operand_error(model.attn, x0, rec["dy"], eb, "ratio", min_numel=1000)
            err = float((g1 - g0).pow(2).mean().sqrt())
            self.assertGreater(err, 0.0)
            self.assertAlmostEqual(e["qkv"][0] / err, 1.0, delta=1e-6, msg="eb %g: %g vs %g" % (eb, e["qkv"][0], err))
            self.assertAlmostEqual(e["qkv"][1], float(g0.pow(2).mean().sqrt()), delta=1e-9)
            # proj reads P V, computed exactly in forward: its gradient does not change
            self.assertEqual(float((p1 - p0).abs().max()), 0.0)
            self.assertEqual(e["proj"][0], 0.0)

    def test_operand_error_leaves_no_trace(self):
        # a block whose own code saves a tensor (F.relu) and whose BatchNorm child keeps running statistics
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)
                self.bn = nn.BatchNorm2d(8)

            def forward(self, x):
                return F.relu(self.bn(self.conv(x)))
        torch.manual_seed(0)
        blk = Block().train()
        x = torch.randn(4, 3, 16, 16)
        before = {k: v.clone() for k, v in blk.state_dict().items()}
        dy = torch.randn(4, 8, 16, 16)
        rng = torch.get_rng_state()
        e = ebac_torch.propagation.operand_error(blk, x, dy, 1e-2, min_numel=100)
        self.assertIn("conv", e)
        for k, v in blk.state_dict().items():
            self.assertTrue(torch.equal(v, before[k]), k)
        self.assertTrue(torch.equal(torch.get_rng_state(), rng))

    def test_exact_input_gives_no_error(self):
        bn = nn.BatchNorm2d(3)
        x = torch.randn(4, 3, 5, 5)
        d = ebac_torch.batchnorm_input_grad_error(bn, x, x.clone(), torch.randn_like(x))
        self.assertEqual(float(d.abs().max()), 0.0)

    def test_bad_arguments(self):
        bn = nn.BatchNorm2d(3)
        x = torch.randn(4, 3, 5, 5)
        with self.assertRaisesRegex(TypeError, "BatchNorm2d"):
            ebac_torch.batchnorm_input_grad_error(nn.BatchNorm1d(3), x, x, x)
        with self.assertRaisesRegex(ValueError, "one shape"):
            ebac_torch.batchnorm_input_grad_error(bn, x, x[:2], x)
        with self.assertRaisesRegex(TypeError, "Conv2d"):
            ebac_torch.propagated_weight_error(nn.Linear(3, 3), x, bn, x, x, x)
        with self.assertRaisesRegex(TypeError, "GELU"):
            ebac_torch.elementwise_input_grad_error(nn.GELU(approximate="tanh"), x, x, x)
        with self.assertRaisesRegex(ValueError, "one shape"):
            ebac_torch.elementwise_input_grad_error(nn.GELU(), x, x[:2], x)
        with self.assertRaisesRegex(TypeError, "Linear or nn.Conv2d"):
            ebac_torch.propagated_weight_error(nn.ReLU(), x, nn.SiLU(), x, x, x)
        with self.assertRaisesRegex(TypeError, "LayerNorm"):
            ebac_torch.propagation.layernorm_error(bn, x, x, x)
        with self.assertRaisesRegex(ValueError, "ending in"):
            ebac_torch.propagation.layernorm_error(nn.LayerNorm(4), x, x, x)


if __name__ == "__main__":
    unittest.main()
