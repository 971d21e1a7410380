"""A saved view that repeats its elements (issue 53, item 9).

`h * b` with b = torch.randn(1, 4096).expand(2048, 4096) saves b: plain
PyTorch keeps its 16 KiB of storage. compressed_activations keeps it as is
too, and counts the 16 KiB it holds, not its 32 MiB logical size.
"""

import unittest

from _common import ebac_torch, torch


class BroadcastViews(unittest.TestCase):
    def test_expanded_operand_is_kept_by_its_storage(self):
        torch.manual_seed(0)
        h = torch.randn(2048, 4096).requires_grad_()
        row = torch.randn(1, 4096)
        b = row.expand(2048, 4096)
        with ebac_torch.compressed_activations(1e-2, min_numel=1) as s:
            loss = (h * b).sum()
        st = s.stats()
        loss.backward()
        self.assertTrue(torch.equal(h.grad, b))  # the saved b comes back exactly
        self.assertEqual(st["kept"].get("broadcast"), {"tensors": 1, "bytes": 4096 * 4})
        self.assertEqual(st["raw_bytes"], 4096 * 4)
        self.assertEqual(st["compressed_bytes"], 4096 * 4)
        d = [x for x in st["details"] if x.get("kept") == "broadcast"]
        self.assertEqual(len(d), 1)
        self.assertEqual(d[0]["raw_bytes"], 4096 * 4)

    def test_scalar_and_column_broadcasts_and_dense_views(self):
        torch.manual_seed(1)
        h = torch.randn(512, 256).requires_grad_()
        col = torch.randn(512, 1).expand(512, 256)
        with ebac_torch.compressed_activations(1e-2, min_numel=1) as s:
            (h * col).sum().backward()
        st = s.stats()
        self.assertEqual(st["kept"].get("broadcast"), {"tensors": 1, "bytes": 512 * 4})
        # A dense view (a transpose) is no broadcast: it is compressed as before.
        x = torch.randn(256, 512).t()
        w = torch.randn(256, 8, requires_grad=True)
        with ebac_torch.compressed_activations(1e-2, min_numel=1) as s:
            (x @ w).sum().backward()
        st = s.stats()
        self.assertNotIn("broadcast", st["kept"])
        self.assertEqual(st["compressed_tensors"], 1)


if __name__ == "__main__":
    unittest.main()
