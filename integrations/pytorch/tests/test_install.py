"""pip install into a temporary --target directory, then import from there.

Slow (a full extension build), so opt-in: EBAC_TORCH_TEST_INSTALL=1. When the
suite runs against an install already made ($EBAC_TORCH_PATH, as CI does), that
install is checked instead of building another.
"""

import os
import subprocess
import sys
import tempfile
import unittest

from _common import PKG_ROOT


@unittest.skipUnless(os.environ.get("EBAC_TORCH_TEST_INSTALL") == "1" or os.environ.get("EBAC_TORCH_PATH"),
                     "set EBAC_TORCH_TEST_INSTALL=1 (or EBAC_TORCH_PATH to an install) to run")
class Install(unittest.TestCase):
    def test_pip_install_target(self):
        with tempfile.TemporaryDirectory() as d:
            target = os.environ.get("EBAC_TORCH_PATH")
            if target:
                target = os.path.abspath(target)
            else:
                target = os.path.join(d, "site")
                subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                                "--target", target, PKG_ROOT], check=True)
            code = ("import ebac_torch, torch; from ebac_torch import _ext; C = ebac_torch.load_extension(); "
                    "assert _ext.origin() == 'installed', _ext.origin(); "
                    "assert C.__file__.startswith(%r), C.__file__; "
                    "x = torch.relu(torch.randn(4, 8, 16, 16)); c = ebac_torch.compress(x, 1e-2, 'rel', 'ratio'); "
                    "y = ebac_torch.decompress(c); "
                    # the bound asked for, 1e-2 x (max - min), computed here in float64
                    "x64 = x.double(); bound = 1e-2 * (float(x64.max()) - float(x64.min())); "
                    "assert float((x64 - y.double()).abs().max()) <= bound; print('ok')" % target)
            env = dict(os.environ, PYTHONPATH=target)
            env.pop("EBAC_TORCH_FORCE_JIT", None)
            out = subprocess.run([sys.executable, "-c", code], cwd=d, env=env, check=True,
                                 capture_output=True, text=True)
            self.assertIn("ok", out.stdout)


if __name__ == "__main__":
    unittest.main()
