"""BatchNorm inputs compressed under batchnorm_bound_scale times the session's default bound.

BatchNorm's gamma gradient, sum over a channel of dy * xhat, is a cancelling
sum, while the error compression adds to it, sum of dy * e / std, is not: at
one bound its relative error is up to 2-2.5x a convolution weight's
(docs/error-model.md, section 6.6). The session compresses a BatchNorm's
saved input at a finer bound unless the caller chose that module's bound."""

import unittest

import torch.nn as nn

from _common import ebac_torch, torch

EB = 1e-2


def net():
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1))


def batch():
    g = torch.Generator().manual_seed(4)
    return torch.randn((8, 3, 16, 16), generator=g)


def bn_input(model, x):
    """The BatchNorm's input, computed without any session."""
    with torch.no_grad():
        return model[0](x)


def stored_bytes(model, x, **kw):
    """Stored bytes of each module's compressed saved tensors in one session (threads=1;
    BatchNorm's mean and 1/std are kept raw: tiny)."""
    # pipeline "ratio", as the reference compress calls below (the session's default, "auto", is
    # "max" on the host: same values, other bytes)
    with ebac_torch.compressed_activations(error_bound=EB, mode="rel", pipeline="ratio", model=model, threads=1,
                                           **kw) as s:
        model(x).square().sum().backward()
    out = {}
    for d in s.stats()["details"]:
        if "pipeline" in d:
            out.setdefault(d["module"], []).append(d["stored_bytes"])
    return out


class BatchNormBound(unittest.TestCase):
    def test_default_halves_the_bound_of_the_batchnorm_input(self):
        model, x = net(), batch()
        t = bn_input(model, x)
        # what the tensor costs at each bound, by the plain codec call (not the session)
        half = ebac_torch.compress(t, EB / 2, "rel", "ratio", threads=1).nbytes
        full = ebac_torch.compress(t, EB, "rel", "ratio", threads=1).nbytes
        self.assertGreater(half, full)
        self.assertEqual(stored_bytes(model, x)["1"], [half])
        self.assertEqual(stored_bytes(model, x, batchnorm_bound_scale=1)["1"], [full])
        quarter = ebac_torch.compress(t, EB / 4, "rel", "ratio", threads=1).nbytes
        self.assertEqual(stored_bytes(model, x, batchnorm_bound_scale=0.25)["1"], [quarter])
        # other modules' tensors keep the session's bound: the first conv's input
        self.assertEqual(stored_bytes(model, x)["0"], [ebac_torch.compress(x, EB, "rel", "ratio", threads=1).nbytes])

    def test_bounds_and_policy_answers_are_used_as_given(self):
        model, x = net(), batch()
        full = ebac_torch.compress(bn_input(model, x), EB, "rel", "ratio", threads=1).nbytes
        self.assertEqual(stored_bytes(model, x, bounds={"1": EB})["1"], [full])
        self.assertEqual(stored_bytes(model, x, policy=lambda name, t: EB)["1"], [full])

    def test_gradients_are_those_of_the_finer_bound(self):
        model, x = net(), batch()

        def grads(compress=True, **kw):
            model.zero_grad()
            if compress:
                with ebac_torch.compressed_activations(error_bound=EB, mode="rel", model=model, threads=1, **kw):
                    loss = model(x).square().sum()
            else:
                loss = model(x).square().sum()
            loss.backward()
            return [p.grad.double().clone() for p in model.parameters()]
        plain, default = grads(compress=False), grads()
        # the default session trains exactly like one told the finer bound for that module
        for a, b in zip(default, grads(bounds={"1": EB / 2}, batchnorm_bound_scale=1)):
            self.assertTrue(torch.equal(a, b))
        # and its gamma gradient is closer to the plain one than at the session's bound
        gamma = [float((g[2] - plain[2]).norm()) for g in (default, grads(batchnorm_bound_scale=1))]
        self.assertGreater(gamma[1], 0)
        self.assertLess(gamma[0], gamma[1])

    def test_bad_scale_is_an_error_naming_it(self):
        for bad in (0, -0.5, 1.5, float("nan"), "0.5", True):
            with self.assertRaisesRegex(ValueError, "batchnorm_bound_scale"):
                ebac_torch.compressed_activations(batchnorm_bound_scale=bad)


if __name__ == "__main__":
    unittest.main()
