#!/usr/bin/env python3
"""Build a corpus of real DNN activations for ebac.

Trains small CNNs (a VGG-style net and a small ResNet) on Fashion-MNIST on the
CPU, then runs forward+backward on a few batches inside
``torch.autograd.graph.saved_tensors_hooks`` and dumps every tensor autograd
saves for backward (the data an activation compressor would see), optionally
together with dL/dy of every conv/linear layer.

Run it with the Debian interpreter (it has python3-torch):

    /usr/bin/python3 studies/make_corpus.py --out data/corpus --grad-output

Inputs: the Debian package dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist/*-ubyte.gz).  Nothing is downloaded.

Outputs under --out:
  manifest.tsv  one row per saved tensor (header:
                file dtype dims model module kind role pair)
  layers.tsv    conv/linear hyper-parameters (only with --grad-output)
  README.md     how the corpus was generated
  *.f32 / *.f16 / *.bf16   raw little-endian tensors, outermost dim first
"""

import argparse
import gzip
import os
import shlex
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"
FMNIST_MEAN = 0.2860
FMNIST_STD = 0.3530

MANIFEST_HEADER = ["file", "dtype", "dims", "model", "module", "kind", "role", "pair"]
LAYERS_HEADER = ["module", "type", "in_file", "grad_file", "input_shape",
                 "weight_shape", "stride", "padding", "dilation", "groups"]


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

def read_idx(path):
    """Parse an IDX file (optionally gzipped) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if raw[0] != 0 or raw[1] != 0:
        raise ValueError("%s: bad IDX magic" % path)
    code, ndim = raw[2], raw[3]
    dtypes = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4",
              0x0D: ">f4", 0x0E: ">f8"}
    if code not in dtypes:
        raise ValueError("%s: unknown IDX type 0x%02x" % (path, code))
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    off = 4 + 4 * ndim
    arr = np.frombuffer(raw, dtype=dtypes[code], offset=off)
    expect = int(np.prod(dims))
    if arr.size != expect:
        raise ValueError("%s: %d elements, header says %d" % (path, arr.size, expect))
    return arr.reshape(dims)


def load_split(data_dir, split):
    img = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
    lab = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
    x = torch.from_numpy(img.astype(np.float32) / 255.0)
    x = ((x - FMNIST_MEAN) / FMNIST_STD).unsqueeze(1).contiguous()  # N,1,28,28
    y = torch.from_numpy(lab.astype(np.int64))
    return x, y


# --------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------

def conv_bn_relu(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=False)]


class SmallVGG(nn.Module):
    """conv3x3-BN-ReLU x2 (32), pool, x2 (64), pool, linear 128, linear 10."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            *conv_bn_relu(1, 32), *conv_bn_relu(32, 32), nn.MaxPool2d(2),
            *conv_bn_relu(32, 64), *conv_bn_relu(64, 64), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(inplace=False),
            nn.Linear(128, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    """ResNet basic block; every ReLU is its own module so hooks can tell them apart."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
        else:
            self.shortcut = nn.Identity()
        self.relu2 = nn.ReLU(inplace=False)

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """stem conv16, stages (16,s1) (32,s2) (64,s2) of basic blocks, avgpool, fc."""

    def __init__(self, blocks=(1, 1, 1), widths=(16, 32, 64), num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn_relu(1, widths[0]))
        cin = widths[0]
        for i, (nb, w) in enumerate(zip(blocks, widths)):
            layers = []
            for b in range(nb):
                stride = 2 if (i > 0 and b == 0) else 1
                layers.append(BasicBlock(cin, w, stride))
                cin = w
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*layers))
        self.nstages = len(widths)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for i in range(self.nstages):
            x = getattr(self, "layer%d" % (i + 1))(x)
        return self.fc(self.flatten(self.pool(x)))


class SmallMobile(nn.Module):
    """Depthwise-separable blocks (MobileNet style) with a dilated depthwise conv:
    stem conv16 s2, [dw3x3 + pw1x1] x3 (one dw with dilation 2, one with stride 2),
    avgpool, fc. Not in the default --models; it adds grouped/dilated layers
    for the error-model study (studies/grad_error_study.py)."""

    def __init__(self, num_classes=10):
        super().__init__()
        def dw_pw(cin, cout, stride=1, dilation=1):
            return [nn.Conv2d(cin, cin, 3, stride=stride, padding=dilation, dilation=dilation,
                              groups=cin, bias=False),
                    nn.BatchNorm2d(cin), nn.ReLU(inplace=False),
                    nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout),
                    nn.ReLU(inplace=False)]
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
            nn.ReLU(inplace=False),
            *dw_pw(16, 32), *dw_pw(32, 32, dilation=2), *dw_pw(32, 64, stride=2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.features(x))))


MODELS = {"vgg": SmallVGG, "resnet": SmallResNet, "mobile": SmallMobile}


# --------------------------------------------------------------------------
# training / evaluation
# --------------------------------------------------------------------------

class BatchStream:
    """Deterministic shuffled mini-batches over the training set (epochs wrap)."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.RandomState(seed)
        self.perm = self.rng.permutation(n)
        self.pos = 0

    def next(self, b):
        if self.pos + b > self.n:
            self.perm = self.rng.permutation(self.n)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + b]
        self.pos += b
        return torch.from_numpy(idx.astype(np.int64))


def train(model, xtr, ytr, stream, steps, batch, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    model.train()
    last = float("nan")
    for step in range(steps):
        idx = stream.next(batch)
        # cosine decay keeps short runs stable
        for g in opt.param_groups:
            g["lr"] = lr * 0.5 * (1.0 + np.cos(np.pi * step / max(1, steps)))
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
        loss.backward()
        opt.step()
        last = loss.item()
    return last


@torch.no_grad()
def evaluate(model, x, y, n):
    model.eval()
    n = min(n, x.shape[0])
    correct = 0
    for i in range(0, n, 500):
        j = min(n, i + 500)
        correct += (model(x[i:j]).argmax(1) == y[i:j]).sum().item()
    model.train()
    return correct / n if n else float("nan")


# --------------------------------------------------------------------------
# dumping
# --------------------------------------------------------------------------

def dtype_tag(dt):
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
            torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
            torch.bool: "b8"}.get(dt, str(dt).replace("torch.", ""))


def tkey(t):
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)


def dims_str(shape):
    # a 0-d tensor (e.g. nll_loss total_weight) is written as one element
    return ",".join(str(int(d)) for d in shape) if len(shape) else "1"


def tensor_bytes(t, tag):
    t = t.detach().contiguous()
    if tag == "f32":
        return t.to(torch.float32).numpy().astype("<f4", copy=False).tobytes()
    if tag == "f16":
        return t.to(torch.float16).numpy().astype("<f2", copy=False).tobytes()
    if tag == "bf16":
        # torch rounds float32 -> bfloat16 to nearest-even
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2", copy=False).tobytes()
    raise ValueError(tag)


class Writer:
    """Writes tensor files under the --max-mb cap and collects manifest rows."""

    def __init__(self, out, max_bytes):
        self.out = out
        self.max_bytes = max_bytes
        self.total = 0
        self.skipped = 0
        self.rows = []
        self.warned = False

    def write(self, name, t, tag):
        """Write tensor t as tag; return file name or '-' if over the cap."""
        nbytes = t.numel() * {"f32": 4, "f16": 2, "bf16": 2}[tag]
        if self.max_bytes is not None and self.total + nbytes > self.max_bytes:
            self.skipped += 1
            if not self.warned:
                print("make_corpus: --max-mb cap of %.2f MB reached; skipping further "
                      "tensors (they stay in the manifest with file '-')"
                      % (self.max_bytes / 1e6), file=sys.stderr)
                self.warned = True
            print("make_corpus: skipped %s (%d bytes)" % (name, nbytes), file=sys.stderr)
            return "-"
        data = tensor_bytes(t, tag)
        assert len(data) == nbytes
        with open(os.path.join(self.out, name), "wb") as f:
            f.write(data)
        self.total += nbytes
        return name


def dump_model(mname, model, batches, writer, want_grad, nhalf, model_index, counter):
    """Run forward+backward on each batch, dumping saved tensors. Returns layer rows."""
    model.train()
    skip_ptrs = {p.data_ptr() for p in model.parameters()}
    skip_ptrs |= {b.data_ptr() for b in model.buffers()}
    layer_rows = []

    names = {m: n for n, m in model.named_modules() if n}
    stack = []
    hooks = []
    for mod, name in names.items():
        hooks.append(mod.register_forward_pre_hook(
            lambda m, inp, name=name: stack.append(name)))
        hooks.append(mod.register_forward_hook(
            lambda m, inp, out, name=name: (stack.pop(), None)[1]))

    half_plan = {"f16": "post_relu" if model_index % 2 == 0 else "other",
                 "bf16": "other" if model_index % 2 == 0 else "post_relu"}

    for bi, (xb, yb) in enumerate(batches):
        entries = []          # dicts, in first-save order
        by_key = {}
        relu_out = {}         # key -> ReLU module name
        lin_in = {}           # conv/linear name -> (key, input tensor, module)
        grads = {}            # conv/linear name -> dL/dy
        order = []            # conv/linear names in forward order
        bhooks = []

        def relu_hook(m, inp, out, name):
            relu_out[tkey(out)] = (name, out)

        def lin_pre(m, inp, name):
            lin_in[name] = (tkey(inp[0]), inp[0], m)
            order.append(name)

        def lin_post(m, inp, out, name):
            if want_grad and out.requires_grad:
                def store(g, name=name):
                    grads[name] = g.detach().clone()
                out.register_hook(store)

        for mod, name in names.items():
            if isinstance(mod, nn.ReLU):
                bhooks.append(mod.register_forward_hook(
                    lambda m, i, o, name=name: relu_hook(m, i, o, name)))
            if isinstance(mod, (nn.Conv2d, nn.Linear)):
                bhooks.append(mod.register_forward_pre_hook(
                    lambda m, i, name=name: lin_pre(m, i, name)))
                bhooks.append(mod.register_forward_hook(
                    lambda m, i, o, name=name: lin_post(m, i, o, name)))

        def pack(t):
            if t.data_ptr() in skip_ptrs and t.is_floating_point():
                return t
            k = tkey(t)
            if k in by_key:
                return t
            e = {"t": t, "module": stack[-1] if stack else "loss"}
            by_key[k] = e
            entries.append(e)
            return t

        def unpack(t):
            return t

        model.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        for h in bhooks:
            h.remove()

        # classify and name
        for e in entries:
            t = e["t"]
            e["nn"] = counter[0]
            counter[0] += 1
            e["tag"] = dtype_tag(t.dtype)
            k = tkey(t)
            e["kind"] = "other"
            if k in relu_out and t.is_floating_point() and bool((t >= 0).all()):
                e["kind"] = "post_relu"
                e["module"] = relu_out[k][0]   # the producer, even if saved first elsewhere
            e["pair"] = "-"
        key_to_entry = {tkey(e["t"]): e for e in entries}

        # write activations
        for e in entries:
            t = e["t"]
            base = "%s_%02d_%s_activation" % (mname, e["nn"], e["module"].replace(".", "_"))
            if t.is_floating_point():
                e["file"] = writer.write(base + ".f32", t, "f32")
                e["dtag"] = "f32"
            else:
                e["file"] = "-"
                e["dtag"] = e["tag"]
            e["base"] = base

        # grad outputs
        grad_rows = []
        if want_grad:
            for name in order:
                if name not in grads:
                    continue
                k, tin, mod = lin_in[name]
                act = key_to_entry.get(k)
                g = grads[name]
                nnum = counter[0]
                counter[0] += 1
                gname = "%s_%02d_%s_grad_output.f32" % (mname, nnum, name.replace(".", "_"))
                gfile = writer.write(gname, g, "f32")
                afile = act["file"] if act is not None else "-"
                # an input shared by several layers (conv1 + projection shortcut)
                # pairs with the first of them; layers.tsv lists all of them
                if act is not None and gfile != "-" and act["pair"] == "-":
                    act["pair"] = gfile
                grad_rows.append({"file": gfile, "dtag": "f32", "t": g, "module": name,
                                  "kind": "other", "role": "grad_output", "pair": afile})
                if isinstance(mod, nn.Conv2d):
                    lrow = [name, "Conv2d", afile, gfile, dims_str(tin.shape),
                            dims_str(mod.weight.shape),
                            ",".join(map(str, mod.stride)), ",".join(map(str, mod.padding)),
                            ",".join(map(str, mod.dilation)), str(mod.groups)]
                else:
                    lrow = [name, "Linear", afile, gfile, dims_str(tin.shape),
                            dims_str(mod.weight.shape), "-", "-", "-", "1"]
                layer_rows.append(lrow)

        for e in entries:
            writer.rows.append([e["file"], e["dtag"], dims_str(e["t"].shape), mname,
                                e["module"], e["kind"], "activation", e["pair"]])
        # half-precision copies (first dumped batch only): the nhalf largest
        # activations of the planned kind (model inputs excluded)
        if bi == 0 and nhalf > 0:
            for tag in ("f16", "bf16"):
                cands = [e for e in entries if e["dtag"] == "f32" and e["file"] != "-"
                         and e["kind"] == half_plan[tag] and e["t"].dim() >= 2
                         and e["t"].data_ptr() != xb.data_ptr()]
                cands.sort(key=lambda e: (-e["t"].numel(), e["nn"]))
                for e in cands[:nhalf]:
                    f = writer.write(e["base"] + "." + tag, e["t"], tag)
                    writer.rows.append([f, tag, dims_str(e["t"].shape), mname, e["module"],
                                        e["kind"], "activation", "-"])
        for r in grad_rows:
            writer.rows.append([r["file"], r["dtag"], dims_str(r["t"].shape), mname,
                                r["module"], r["kind"], r["role"], r["pair"]])

    for h in hooks:
        h.remove()
    return layer_rows


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default="vgg,resnet",
                    help="comma-separated subset of: %s (default: vgg,resnet)" % ",".join(MODELS))
    ap.add_argument("--steps", type=int, default=200, help="SGD steps before dumping (default 200)")
    ap.add_argument("--batch", type=int, default=16, help="training batch size (default 16)")
    ap.add_argument("--dump-batch", type=int, default=None,
                    help="batch size of the dumped batches (default: --batch)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--dump-batches", type=int, default=1,
                    help="number of batches to dump per model (default 1)")
    ap.add_argument("--grad-output", action="store_true",
                    help="also dump dL/dy of every conv/linear layer and write layers.tsv")
    ap.add_argument("--max-mb", type=float, default=None,
                    help="cap on total bytes written (MB = 1e6 bytes); later tensors are skipped")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--lr", type=float, default=0.02, help="peak SGD learning rate (default 0.02)")
    ap.add_argument("--eval-n", type=int, default=10000,
                    help="number of test images used to measure accuracy (default 10000 = all)")
    ap.add_argument("--half", type=int, default=1,
                    help="per model, how many activations to also write as f16 and as bf16 (default 1)")
    ap.add_argument("--data-dir", default=DATA_DIR, help="Fashion-MNIST IDX directory")
    args = ap.parse_args(argv)

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            ap.error("unknown model %r (choose from %s)" % (m, ",".join(MODELS)))
    dump_batch = args.dump_batch or args.batch

    torch.set_num_threads(args.threads)
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
    except TypeError:
        torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False

    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    xtr, ytr = load_split(args.data_dir, "train")
    xte, yte = load_split(args.data_dir, "t10k")

    writer = Writer(args.out, None if args.max_mb is None else int(args.max_mb * 1e6))
    results = []
    all_layers = []
    for mi, mname in enumerate(models):
        torch.manual_seed(args.seed + mi)
        np.random.seed(args.seed + mi)
        model = MODELS[mname]()
        stream = BatchStream(xtr.shape[0], args.seed + 1000 * (mi + 1))
        t1 = time.time()
        last_loss = train(model, xtr, ytr, stream, args.steps, args.batch, args.lr)
        acc = evaluate(model, xte, yte, args.eval_n)
        t2 = time.time()
        print("make_corpus: %s: %d steps, last loss %.4f, test acc %.4f on %d images (%.1fs)"
              % (mname, args.steps, last_loss, acc, min(args.eval_n, xte.shape[0]), t2 - t1),
              file=sys.stderr)
        batches = []
        for _ in range(args.dump_batches):
            idx = stream.next(dump_batch)
            batches.append((xtr[idx].contiguous(), ytr[idx]))
        counter = [0]
        layers = dump_model(mname, model, batches, writer, args.grad_output, args.half, mi,
                            counter)
        all_layers += layers
        results.append((mname, acc, last_loss, sum(p.numel() for p in model.parameters())))

    with open(os.path.join(args.out, "manifest.tsv"), "w") as f:
        f.write("\t".join(MANIFEST_HEADER) + "\n")
        for r in writer.rows:
            f.write("\t".join(r) + "\n")
    if args.grad_output:
        with open(os.path.join(args.out, "layers.tsv"), "w") as f:
            f.write("\t".join(LAYERS_HEADER) + "\n")
            for r in all_layers:
                f.write("\t".join(r) + "\n")

    write_readme(args, models, dump_batch, results, writer)
    print("make_corpus: wrote %d bytes in %d files (%d skipped) to %s in %.1fs"
          % (writer.total, sum(1 for r in writer.rows if r[0] != "-"), writer.skipped,
             args.out, time.time() - t0), file=sys.stderr)
    return 0


def write_readme(args, models, dump_batch, results, writer):
    cmd = "/usr/bin/python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    counts = {}
    for r in writer.rows:
        if r[0] == "-" and r[1] in ("f32", "f16", "bf16"):
            key = (r[1] + " (skipped)", r[5], r[6])
        else:
            key = (r[1], r[5], r[6])
        counts[key] = counts.get(key, 0) + 1
    L = []
    L.append("# ebac real-activation corpus\n")
    L.append("Tensors that PyTorch autograd saves for backward while training small CNNs on "
             "Fashion-MNIST, captured with `torch.autograd.graph.saved_tensors_hooks`.\n")
    L.append("Generated by `studies/make_corpus.py` with:\n")
    L.append("```\n%s\n```\n" % cmd)
    L.append("- torch %s, numpy %s, %d thread(s), CPU" % (torch.__version__, np.__version__,
                                                      args.threads))
    L.append("- seed %d, %d SGD steps (momentum 0.9, peak lr %g, cosine decay, wd 5e-4), "
             "training batch %d" % (args.seed, args.steps, args.lr, args.batch))
    L.append("- dumped %d batch(es) of %d training images per model, model in train mode "
             "(BatchNorm uses batch statistics)" % (args.dump_batches, dump_batch))
    L.append("- data: %s (IDX), normalized (x/255 - %.4f) / %.4f" % (args.data_dir, FMNIST_MEAN,
                                                                 FMNIST_STD))
    L.append("")
    L.append("| model | parameters | test accuracy | test images | last train loss |")
    L.append("|---|---|---|---|---|")
    for mname, acc, loss, npar in results:
        L.append("| %s | %d | %.4f | %d | %.4f |" % (mname, npar, acc, min(args.eval_n, 10000),
                                                    loss))
    L.append("")
    L.append("Total bytes written: %d.\n" % writer.total)
    L.append("| dtype | kind | role | count |")
    L.append("|---|---|---|---|")
    for (dt, kind, role), n in sorted(counts.items()):
        L.append("| %s | %s | %s | %d |" % (dt, kind, role, n))
    L.append("")
    L.append("""## Format

`manifest.tsv` (tab-separated, one header line) has one row per tensor:

- `file`: path relative to this directory, or `-` when not written (integer tensors such as
  max-pool indices and loss targets, or tensors past the `--max-mb` cap).
- `dtype`: `f32`, `f16`, `bf16` (raw little-endian; bf16 is the high half of the float32,
  rounded to nearest-even, stored as 16-bit words) or `i64` (not written).
- `dims`: extents, outermost first (NCHW for conv activations); a file holds exactly
  prod(dims) elements. A 0-d tensor is listed as `1`.
- `model`, `module`: the network and the qualified name of the module whose forward saved the
  tensor (`loss` for the cross-entropy). A tensor saved by several modules (e.g. a ReLU output
  that the next conv also saves) is dumped once; a ReLU output is attributed to its ReLU.
- `kind`: `post_relu` for outputs of ReLU modules (all values >= 0), else `other`
  (conv outputs saved by BatchNorm, max-pooled outputs saved by the next conv, the image
  batch, BatchNorm batch mean / inverse std, log-probabilities saved by log-softmax, ...).
  BatchNorm outputs are not saved: a non-inplace ReLU saves only its own output.
- `role`: `activation` (saved by autograd) or `grad_output` (dL/dy of a conv/linear layer,
  same batch).
- `pair`: for a `grad_output` row, the activation file holding that layer's saved input;
  for the f32 activation row of a conv/linear input, the matching `grad_output` file (the
  first such layer when several read it, e.g. a ResNet block input feeding conv1 and the
  projection shortcut; `layers.tsv` lists every pairing); else `-`.

The `.f16`/`.bf16` files are conversions of the f32 activation with the same stem (same
number `nn`).

File names: `<model>_<nn>_<module with dots as underscores>_<role>.<ext>`, `nn` numbering
the tensors of one model: saved activations in order of first save (integer tensors take a
number too), then the `grad_output` tensors in forward order of their layers.
Parameters and BatchNorm running statistics are not dumped.
""")
    if args.grad_output:
        L.append("""`layers.tsv` lists every conv/linear layer of each dumped batch with what is needed to
recompute its weight gradient (dL/dW = conv2d_weight(input, weight_shape, grad_output, ...)):
`module type in_file grad_file input_shape weight_shape stride padding dilation groups`
(`-` for the conv-only fields of Linear layers; Linear computes y = x W^T + b).
""")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
