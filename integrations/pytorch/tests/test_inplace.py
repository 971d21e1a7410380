"""A tensor changed in place after autograd saved it (issue 53, item 2).

Plain autograd refuses the backward ("one of the variables needed for
gradient computation has been modified by an inplace operation"); it skips
that check for tensors that saved_tensors_hooks handle, so
compressed_activations makes it itself, for tensors it keeps raw, tensors it
compresses and parameters alike.
"""

import unittest

from _common import ebac_torch, torch

PHRASE = "one of the variables needed for gradient computation has been modified by an inplace operation"


def backward_error(fn, session=None):
    """The RuntimeError text of running fn() -> loss and its backward (None: it ran)."""
    try:
        if session is None:
            loss = fn()
        else:
            with session:
                loss = fn()
        loss.backward()
    except RuntimeError as e:
        return str(e)
    return None


class InPlaceChanges(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.x = torch.randn(64, 128, requires_grad=True)
        self.w = torch.randn(128, 32, requires_grad=True)

    def sigmoid_then_inplace(self):
        y = self.y = torch.sigmoid(self.x)  # saves its output; still alive at backward
        z = y.sum() + (y * 3).sum()
        y.mul_(2)
        return z

    def param_changed(self):
        loss = (torch.relu(self.x @ self.w) ** 2).sum()  # mm saves w (and x)
        with torch.no_grad():
            self.w.add_(1)
        return loss

    def check(self, fn, **session_kw):
        plain = backward_error(fn)
        self.assertIsNotNone(plain)
        self.assertIn(PHRASE, plain)  # what autograd says without ebac
        got = backward_error(fn, ebac_torch.compressed_activations(1e-2, **session_kw))
        self.assertIsNotNone(got, "the in-place change went unnoticed inside compressed_activations")
        self.assertIn(PHRASE, got)
        return got

    def test_kept_raw_tensor(self):
        got = self.check(self.sigmoid_then_inplace, min_numel=10 ** 9)  # everything kept raw
        self.assertIn("is at version 1; expected version 0", got)

    def test_compressed_tensor(self):
        got = self.check(self.sigmoid_then_inplace, min_numel=1)
        self.assertIn("[torch.FloatTensor [64, 128]]", got)

    def test_parameter(self):
        self.check(self.param_changed, min_numel=1)

    def test_compressed_tensor_gone_before_backward_uses_the_saved_values(self):
        # Once the changed tensor is gone, nothing can read its version; the blob holds the
        # values it had when saved, and backward uses those: the gradient of the unchanged
        # computation (plain autograd refuses this program instead).
        def fn():
            y = torch.sigmoid(self.x)
            z = (y * y).sum()
            y.mul_(2)
            return z
        with ebac_torch.compressed_activations(1e-6, "abs", min_numel=1):
            loss = fn()
        loss.backward()
        s = torch.sigmoid(self.x.detach())
        expected = 2 * s * s * (1 - s)
        self.assertLess(float((self.x.grad - expected).abs().max()), 1e-4)

    def test_inplace_before_saving_is_fine_and_saved_twice_is_stored_once(self):
        # In-place ops that run before a tensor is saved (ReLU(inplace=True), a residual +=) are
        # no change to what was saved: same gradients as plain PyTorch, and the ReLU output
        # that two nodes save is stored once (the dedupe table keys on _version).
        net = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(inplace=True), torch.nn.Linear(128, 8))
        x = torch.randn(32, 128)

        def step():
            h = net[0](x)
            h += 1.0
            r = net[1](h)  # relu_ saves its output; so does nothing else change r
            return (net[2](r) * torch.sigmoid(r).sum()).sum()

        net.zero_grad()
        step().backward()
        ref = [p.grad.clone() for p in net.parameters()]
        net.zero_grad()
        with ebac_torch.compressed_activations(1e-6, "abs", min_numel=1, model=net) as s:
            loss = step()
        loss.backward()
        for a, b in zip(ref, [p.grad for p in net.parameters()]):  # float32 rounding of gradients ~1e5
            self.assertLess(float((a - b).abs().max()), 1e-6 * float(a.abs().max()))
        self.assertGreaterEqual(s.stats()["duplicates"], 1)


if __name__ == "__main__":
    unittest.main()
