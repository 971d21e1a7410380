"""Every named pipeline through compressed_activations(pipeline=...): a CPU tensor saved by autograd comes back
within the bound, checked here against the input (not against anything the codec reports)."""

import os
import re
import unittest

from _common import C, REPO, ebac_torch, promised_bound, torch


def library_pipeline_names():
    """The named pipelines as the library lists them (ebac::pipeline_names in include/ebac/pipeline.hpp), read
    from the header so that a pipeline added there is tested here without editing this file."""
    with open(os.path.join(REPO, "include", "ebac", "pipeline.hpp")) as f:
        text = f.read()
    m = re.search(r"pipeline_names\s*=\s*\{([^}]*)\}", text)
    if m is None:
        raise AssertionError("pipeline_names not found in include/ebac/pipeline.hpp")
    return re.findall(r'"([^"]+)"', m.group(1))


class PipelineRecorder:
    """The extension as the hooks see it (ctx.C), noting the pipeline of every compress call."""

    def __init__(self, C):
        self._C = C
        self.pipelines = []

    def __getattr__(self, name):
        return getattr(self._C, name)

    def compress(self, t, eb, mode, pipeline, *rest):
        self.pipelines.append(pipeline)
        return self._C.compress(t, eb, mode, pipeline, *rest)


def activations(kind, seed):
    """A 4x8x24x24 activation: post-ReLU (about half zeros) or dense (smooth plus noise), with a NaN and two
    infinities, which every pipeline must give back bit-exactly."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 8, 24, 24, generator=g)
    x = x + torch.linspace(0, 3, 24).view(1, 1, 1, 24)  # some smoothness for the predictors
    if kind == "post_relu":
        x = torch.relu(x - 1.5)
    x = x.reshape(-1)
    x[5], x[700], x[9000] = float("nan"), float("inf"), float("-inf")
    return x.reshape(4, 8, 24, 24)


class NamedPipelines(unittest.TestCase):
    def test_the_extension_takes_every_named_pipeline(self):
        names = library_pipeline_names()
        self.assertGreaterEqual(len(names), 9)
        for name in names:
            self.assertTrue(C.valid_pipeline(name), name)

    def round_trip(self, name, x, eb, mode):
        """x saved through a session with this pipeline; the weight's gradient of (x * w).sum() is the
        reconstruction of x."""
        w = torch.ones_like(x, requires_grad=True)
        ctx = ebac_torch.compressed_activations(eb, mode, name, min_numel=1)
        rec = ctx.C = PipelineRecorder(ctx.C)
        with ctx:
            (x * w).sum().backward()
        self.assertIn(name, rec.pipelines, "the session did not compress with %s" % name)
        return w.grad

    def test_round_trip_within_the_bound(self):
        for name in library_pipeline_names():
            for kind in ("post_relu", "dense"):
                for eb, mode in ((1e-2, "rel"), (1e-3, "rel"), (0.05, "abs")):
                    with self.subTest(pipeline=name, kind=kind, eb=eb, mode=mode):
                        x = activations(kind, seed=len(name))
                        y = self.round_trip(name, x, eb, mode)
                        finite = torch.isfinite(x)
                        # NaN and the infinities bit-exactly (NaN != NaN: compare the patterns).
                        self.assertTrue(torch.equal(x[~finite].view(torch.int32), y[~finite].view(torch.int32)))
                        err = float((x[finite].double() - y[finite].double()).abs().max())
                        bound = promised_bound(x, eb, mode)
                        self.assertLessEqual(err, bound)
                        self.assertGreater(err, 0.0, "lossy at this bound: the tensor was not compressed")


if __name__ == "__main__":
    unittest.main()
