"""Nonsense arguments are refused up front, with a message (issue 53, item 7)."""

import math
import unittest

from _common import C, ebac_torch, torch


class NonsenseArguments(unittest.TestCase):
    def test_error_bound_must_be_finite_and_positive(self):
        for eb in (math.inf, -math.inf, math.nan, 0.0, -1e-3):
            with self.assertRaisesRegex(ValueError, "error_bound must be a finite number > 0"):
                ebac_torch.compressed_activations(error_bound=eb)
        ebac_torch.compressed_activations(error_bound=1e-3)  # a sane one is taken

    def test_pooling_geometry_must_give_the_tensor(self):
        idx = torch.nn.functional.max_pool2d(torch.randn(2, 3, 28, 28), 2, 2, return_indices=True)[1]
        good = [[28, 28], [2, 2], [2, 2], [0, 0], [1, 1]]
        c = ebac_torch.compress(idx, pooling=good)
        self.assertTrue(torch.equal(ebac_torch.decompress(c), idx))
        for bad in ([[100, 100], [2, 2], [2, 2], [0, 0], [1, 1]],   # pools to 50 x 50, the tensor is 14 x 14
                    [[28, 28], [3, 3], [2, 2], [2, 2], [1, 1]],     # padding more than half the kernel
                    [[28, 28], [2, 2], [0, 2], [0, 0], [1, 1]]):    # stride 0
            with self.assertRaisesRegex(RuntimeError, "pooling"):  # like the other pooling refusals
                ebac_torch.compress(idx, pooling=bad)
            with self.assertRaisesRegex(RuntimeError, "pooling"):
                C.compress(idx, 1e-2, "rel", "fast", 1, False, "staged", bad)


if __name__ == "__main__":
    unittest.main()
