"""Host speed of the PyTorch extension's codec (ebac_torch._C.compress /
decompress on CPU tensors): MB/s of one thread, best of --reps, on the
corpus's f32 tensors, every reconstruction checked against the bound computed
here. The build of the codec that runs is the one EBAC_HOST_ISA chooses
(docs/pytorch.md, "AVX2 without flags"); run it once per value to compare:

    for isa in baseline auto; do
        EBAC_HOST_ISA=$isa taskset -c 1 /usr/bin/python3 studies/torch_host_speed.py
    done
"""

import argparse
import csv
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integrations", "pytorch", "tests"))
from _common import C, promised_bound, torch  # noqa: E402

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(HERE, "..", "data", "training-corpus"))
    ap.add_argument("--pipelines", default="max,max-bound")
    ap.add_argument("--bounds", default="0.1,0.01", help="value-range relative bounds")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="one tensor, one pipeline, one bound, one rep")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(a.corpus, "manifest.tsv")) as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["dtype"] == "f32"]
    pipelines, bounds = a.pipelines.split(","), [float(b) for b in a.bounds.split(",")]
    if a.smoke:
        rows, pipelines, bounds, a.reps = rows[:1], pipelines[:1], bounds[:1], 1
    print("host codec:", C.host_isa())
    print(f"{'tensor':32s} {'pipeline':10s} {'rel':>6s} {'ratio':>7s} {'comp MB/s':>10s} {'dec MB/s':>9s}")
    for r in rows:
        dims = [int(d) for d in r["dims"].split(",")]
        x = torch.from_numpy(np.fromfile(os.path.join(a.corpus, r["file"]), dtype=np.float32).reshape(dims))
        mb = x.numel() * 4 / 1e6
        for p in pipelines:
            for eb in bounds:
                best_c = best_d = float("inf")
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    blob, strides = C.compress(x, eb, "rel", p, 1, False)
                    t1 = time.perf_counter()
                    y = C.decompress(blob, list(x.shape), list(strides), 1, 1, "staged")
                    t2 = time.perf_counter()
                    best_c, best_d = min(best_c, t1 - t0), min(best_d, t2 - t1)
                err = float((x.double() - y.double()).abs().max())
                if not err <= promised_bound(x, eb, "rel"):
                    sys.exit(f"{r['file']} {p} {eb}: error {err} above the bound")
                print(f"{r['file'][:32]:32s} {p:10s} {eb:6g} {x.numel() * 4 / blob.numel():7.1f} {mb / best_c:10.0f} {mb / best_d:9.0f}")


if __name__ == "__main__":
    main()
