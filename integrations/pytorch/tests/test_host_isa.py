"""The two builds of the host codec the extension carries (csrc/host_codec.cpp,
csrc/host_codec_x86_64_v3.cpp; ebac/host/isa_codec.hpp): EBAC_HOST_ISA
chooses one per process, so each build runs in a child process of its own.
Where the x86-64-v3 build runs, it writes the baseline build's blobs byte for
byte, each build decodes the other's blobs to the same bits, and those are
within the bound computed here from the input."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from _common import C, HERE, max_err, torch  # noqa: F401  (C: the extension is built before the children start)

PIPELINES = ["fast", "ratio", "max", "max-bound", "lorenzo2:linear:ans", "none:sign:huffman"]
CASES = [(dtype, p, eb, mode) for dtype in ("float32", "float16", "bfloat16") for p in PIPELINES
         for eb, mode in ((1e-2, "rel"), (1e-3, "abs"))]

CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from _common import C, torch
out, other = sys.argv[2], sys.argv[3]
cases = json.loads(sys.argv[4])
x0 = torch.load(sys.argv[5])
res = {"isa": C.host_isa(), "cases": []}
for i, (dtype, p, eb, mode) in enumerate(cases):
    x = x0.to(getattr(torch, dtype))
    blob, strides = C.compress(x, eb, mode, p, 1, True)
    b = bytes(blob.numpy().tobytes())
    with open(os.path.join(out, "%d.blob" % i), "wb") as f:
        f.write(b)
    elem = {"float32": 1, "float16": 2, "bfloat16": 3}[dtype]
    y = C.decompress(blob, list(x.shape), list(strides), elem, 1, "staged")
    case = {"blob": b.hex(), "own": y.view(torch.int16 if dtype != "float32" else torch.int32).numpy().tobytes().hex()}
    if other:
        ob = torch.frombuffer(bytearray(open(os.path.join(other, "%d.blob" % i), "rb").read()), dtype=torch.uint8)
        z = C.decompress(ob, list(x.shape), list(strides), elem, 1, "staged")
        case["other"] = z.view(torch.int16 if dtype != "float32" else torch.int32).numpy().tobytes().hex()
    res["cases"].append(case)
print(json.dumps(res))
"""


def child(isa, out, other, code=CHILD, x0_path=""):
    """Runs `code` with EBAC_HOST_ISA=isa; argv: tests dir, blob dir, the other build's blob dir, CASES, the input tensor's file."""
    env = dict(os.environ, EBAC_HOST_ISA=isa)
    return subprocess.run([sys.executable, "-c", code, HERE, out, other or "", json.dumps(CASES), x0_path],
                          env=env, capture_output=True, text=True, timeout=600)


class HostIsa(unittest.TestCase):
    def test_unknown_value_is_refused(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from _common import C\n"
                "try:\n    C.host_isa()\nexcept ValueError as e:\n    print('ValueError:', e)\n")
        p = child("avx9000", "", "", code)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ValueError: EBAC_HOST_ISA='avx9000'", p.stdout)

    def test_builds_write_and_read_the_same_streams(self):
        probe = child("x86-64-v3", "", "", "import sys; sys.path.insert(0, sys.argv[1]); from _common import C; print(C.host_isa())")
        if probe.returncode != 0:
            self.assertIn("EBAC_HOST_ISA=x86-64-v3", probe.stderr)  # refused, and it says why
            self.skipTest("the x86-64-v3 build does not run here: " + probe.stderr.strip().splitlines()[-1])
        self.assertEqual(probe.stdout.strip(), "x86-64-v3")
        g = torch.Generator().manual_seed(7)
        x0 = torch.relu(torch.nn.functional.avg_pool2d(torch.randn((8, 16, 24, 24), generator=g), 3, 1, 1) * 3)
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            x0_path = os.path.join(a, "x0.pt")
            torch.save(x0, x0_path)
            pa = child("baseline", a, "", x0_path=x0_path)
            self.assertEqual(pa.returncode, 0, pa.stderr)
            pb = child("x86-64-v3", b, a, x0_path=x0_path)
            self.assertEqual(pb.returncode, 0, pb.stderr)
            ra, rb = json.loads(pa.stdout), json.loads(pb.stdout)
        self.assertEqual((ra["isa"], rb["isa"]), ("baseline", "x86-64-v3"))
        for (dtype, p, eb, mode), ca, cb in zip(CASES, ra["cases"], rb["cases"]):
            with self.subTest(dtype=dtype, pipeline=p, eb=eb, mode=mode):
                self.assertEqual(ca["blob"], cb["blob"], "the two builds write different streams")
                self.assertEqual(cb["other"], ca["own"], "the x86-64-v3 build decodes the baseline's stream differently")
                self.assertEqual(cb["own"], ca["own"])
                x = x0.to(getattr(torch, dtype))
                word = torch.int32 if dtype == "float32" else torch.int16
                y = torch.frombuffer(bytearray(bytes.fromhex(cb["other"])), dtype=word).view(getattr(torch, dtype)).reshape(x.shape)
                xf = x.double()
                promised = eb * float(xf.max() - xf.min()) if mode == "rel" else eb
                self.assertLessEqual(max_err(x, y), promised)


if __name__ == "__main__":
    unittest.main()
