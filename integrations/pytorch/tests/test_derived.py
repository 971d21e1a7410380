"""Saved tensors stored as recipes (ebac_torch/derived.py): which ones, and the bound on each.

Every check of the bound here is against the tensor autograd gave to pack,
kept by the test, and the bound computed from it (promised_bound), not
against the session's own eb_abs or bound_violations.
"""

import unittest

from _common import ebac_torch, max_err, promised_bound, torch

nn = torch.nn
F = torch.nn.functional


class MLP(nn.Module):
    """fc1 -> GELU -> Dropout -> fc2: fc2 saves dropout(gelu(fc1(x)))."""

    def __init__(self, d=32, hidden=128, p=0.1, act=None):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = act if act is not None else nn.GELU()
        self.drop = nn.Dropout(p)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class Attention(nn.Module):
    """softmax(q k^T) -> Dropout -> @ v: the matmul saves a 3-d view of dropout(softmax)."""

    def __init__(self, d=32, heads=4, p=0.1):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = self.drop((q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(dim=-1))
        return (att @ v).transpose(1, 2).reshape(b, t, c)


class NormLinear(nn.Module):
    """LayerNorm -> Linear: the Linear saves the LayerNorm's output."""

    def __init__(self, d=32, affine=True):
        super().__init__()
        self.ln = nn.LayerNorm(d, elementwise_affine=affine)
        self.fc = nn.Linear(d, d)
        if affine:  # a trained-looking affine: uneven gains, offsets
            with torch.no_grad():
                self.ln.weight.copy_(torch.linspace(0.2, 3.0, d))
                self.ln.bias.copy_(torch.linspace(-1.0, 1.0, d))

    def forward(self, x):
        # x * 1.0: LayerNorm's input is not a leaf, as inside a network (a leaf that requires
        # grad is passed through as a parameter)
        return self.fc(self.ln(x * 1.0))


class DoubledGELU(nn.GELU):
    """Not what nn.GELU computes: must never be rebuilt as gelu(x)."""

    def forward(self, x):
        return 2.0 * super().forward(x)


def run(model, x, eb=1e-2, mode="rel", seed=3, **kw):
    """One forward and backward inside a session whose every unpack is checked
    against the tensor pack was given: (stats, gradients, worst error / bound, unpacks checked)."""
    s = ebac_torch.compressed_activations(error_bound=eb, mode=mode, min_numel=1024, **kw)
    given = {}
    worst = [0.0, 0]
    pack, unpack = s._pack, s._unpack

    def checked_pack(t):
        p = pack(t)
        if not isinstance(p, tuple) and t.dtype == torch.float32:
            given[id(p)] = (p, t.detach().clone())
        return p

    def checked_unpack(p):
        y = unpack(p)
        if id(p) in given:
            t = given[id(p)][1]
            bound = promised_bound(t, eb, mode)
            worst[0] = max(worst[0], max_err(t, y) / bound if bound > 0 else float(max_err(t, y) > 0))
            worst[1] += 1
        return y

    s._pack, s._unpack = checked_pack, checked_unpack
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    with s:
        loss = model(x).square().mean()
        st = s.stats()
    loss.backward()
    return st, {n: p.grad.clone() for n, p in model.named_parameters()}, worst[0], worst[1]


def plain_grads(model, x, seed=3):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    model(x).square().mean().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def min_cosine(g, ref):
    return min(F.cosine_similarity(g[n].flatten(), ref[n].flatten(), dim=0).item() for n in ref)


class DerivedTensors(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.x = torch.randn(32, 16, 32)

    def test_mlp_hidden_is_rebuilt_within_the_bound(self):
        m = MLP().train()
        ref = plain_grads(m, self.x)
        st, g, worst, checked = run(m, self.x)
        self.assertEqual(st["derived"]["tensors"], 1)          # fc2's input
        self.assertEqual(st["derived"]["bytes"], 32 * 16 * 128 * 4)
        self.assertGreater(checked, 2)
        self.assertLessEqual(worst, 1.0)
        self.assertGreater(min_cosine(g, ref), 0.99)           # same dropout mask: no RNG drawn by the hooks

    def test_derived_costs_no_bytes_and_stores_less(self):
        m = MLP().train()
        on, _, _, _ = run(m, self.x)
        off, _, worst, _ = run(m, self.x, derive=False)
        self.assertEqual(off["derived"]["tensors"], 0)
        self.assertLessEqual(worst, 1.0)
        self.assertEqual(on["raw_bytes"], off["raw_bytes"])
        self.assertLess(on["compressed_bytes"], off["compressed_bytes"])

    def test_attention_dropout_view_is_rebuilt(self):
        m = Attention().train()
        st, g, worst, checked = run(m, self.x)
        self.assertEqual(st["derived"]["tensors"], 1)          # the 3-d view of dropout(softmax) that bmm saves
        self.assertLessEqual(worst, 1.0)
        self.assertGreater(checked, 3)

    def test_abs_bound_that_the_recipe_would_break_is_stored(self):
        # At mode "abs" the GELU input keeps the bound eb; rebuilt through
        # gelu (x1.129) and the dropout's 1/(1-p) its output would carry up to
        # ~1.25 eb, so it must be compressed instead.
        m = MLP(p=0.1).train()
        st, _, worst, _ = run(m, self.x, eb=1e-2, mode="abs")
        self.assertLessEqual(worst, 1.0)
        self.assertEqual(st["derived"]["tensors"], 0)

    def test_gelu_output_without_dropout_is_rebuilt(self):
        m = MLP(p=0.0).train()          # the dropout hands its input on: fc2 saves gelu's output
        st, _, worst, _ = run(m, self.x)
        self.assertEqual(st["derived"]["tensors"], 1)
        self.assertLessEqual(worst, 1.0)

    def test_abs_bound_without_dropout_stores_gelu_output(self):
        # Without dropout fc2 saves gelu's output itself: at "abs" the input
        # would need eb / 1.129, which it does not get, so it is stored too;
        # in eval mode the dropout is the identity and nothing is learned from it.
        m = MLP(p=0.0).train()
        st, _, worst, _ = run(m, self.x, eb=1e-2, mode="abs")
        self.assertLessEqual(worst, 1.0)
        self.assertEqual(st["derived"]["tensors"], 0)
        st, _, worst, _ = run(m.eval(), self.x)
        self.assertLessEqual(worst, 1.0)

    def test_subclass_is_not_taken_for_gelu(self):
        m = MLP(act=DoubledGELU()).train()
        st, g, worst, _ = run(m, self.x)
        self.assertEqual(st["derived"]["tensors"], 0)
        self.assertLessEqual(worst, 1.0)
        self.assertGreater(min_cosine(g, plain_grads(m, self.x)), 0.99)

    def test_layernorm_output_is_rebuilt_from_its_rows(self):
        # rows of different means and spreads, as a residual stream has; then rows of one spread and
        # different means, whose output range is well below the input's range / max spread: the
        # rows need a tighter bound than the input's own for the output to be rebuilt within its bound.
        spread = (torch.linspace(0.1, 4.0, 16), torch.ones(16))
        for affine, sd in ((True, spread[0]), (False, spread[0]), (True, spread[1]), (False, spread[1])):
            m = NormLinear(affine=affine)
            x = self.x * sd.reshape(1, 16, 1) + torch.linspace(-3, 3, 16).reshape(1, 16, 1)
            x.requires_grad_(True)  # without affine parameters LayerNorm saves nothing otherwise
            st, g, worst, checked = run(m, x)
            self.assertLessEqual(worst, 1.0)
            self.assertEqual(st["derived"]["tensors"], 1, "affine=%s" % affine)
            self.assertGreater(checked, 1)
            self.assertGreater(min_cosine(g, plain_grads(m, x)), 0.99)

    def test_layernorm_rows_off_stores_the_output(self):
        m = NormLinear()
        st, _, worst, _ = run(m, self.x, layernorm_rows=False)
        self.assertLessEqual(worst, 1.0)
        self.assertEqual(st["derived"]["tensors"], 0)

    def test_inplace_change_of_a_source_is_refused(self):
        # fc2's input is rebuilt from the GELU input: if that changes in place
        # before backward, backward must refuse as autograd does.
        m = MLP().train()
        with ebac_torch.compressed_activations(error_bound=1e-2, min_numel=1024):
            h = m.fc1(self.x)
            out = m.fc2(m.drop(m.act(h)))
        h.data.add_(1.0)  # .data: bypasses autograd's own version counter, as a careless user might
        out.square().mean().backward()  # h's blob holds the old values: gradients use what was saved
        with ebac_torch.compressed_activations(error_bound=1e-2, min_numel=1024):
            h = m.fc1(self.x)
            out = m.fc2(m.drop(m.act(h)))
        with torch.no_grad():
            h.add_(1.0)
        with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
            out.square().mean().backward()


if __name__ == "__main__":
    unittest.main()
