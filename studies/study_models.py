"""Networks and inputs for the whole-network studies (studies/memory_report.py).

Every network here is built with random, seeded weights (nothing is
downloaded) and trained on data that Debian ships:

* Fashion-MNIST (package dataset-fashion-mnist, /usr/share/datasets/fashion-mnist)
  for the image networks: 28x28x1 as is for the two small ones, bilinearly
  upsampled and repeated to 3 channels for torchvision's;
* the bytes of /usr/share/common-licenses/GPL-3 (package base-files, which is
  essential, so it is on every Debian system) for the GPT-style language
  model, one token per byte.

The three small networks are defined here: ``VGGStyleCNN`` and ``SmallViT``
(the two of the issue) and ``TinyGPT``. torchvision 0.14
(``python3-torchvision``) defines vgg16_bn, resnet18, resnet50, mobilenet_v2
and vit_b_16.

``NETWORKS`` lists them with their default input size and batch, and
``checkpointed_forward`` runs each with ``torch.utils.checkpoint`` over its
natural segments (see ``SEGMENTS``).
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_corpus  # noqa: E402  (read_idx and the Fashion-MNIST constants; numpy + torch only)

FMNIST_DIR = make_corpus.DATA_DIR
TEXT_FILE = "/usr/share/common-licenses/GPL-3"


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

def fashion_mnist_batch(batch, seed, size=28, channels=1, data_dir=FMNIST_DIR):
    """`batch` training images (normalized like make_corpus.py) and labels,
    drawn without replacement with a seeded generator; resized to size x size
    (bilinear) and repeated to `channels` channels when asked."""
    img = make_corpus.read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
    lab = make_corpus.read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    rng = np.random.RandomState(seed)
    idx = rng.choice(img.shape[0], size=batch, replace=batch > img.shape[0])
    x = torch.from_numpy(img[idx].astype(np.float32) / 255.0)
    x = ((x - make_corpus.FMNIST_MEAN) / make_corpus.FMNIST_STD).unsqueeze(1)
    if size != x.shape[-1]:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    if channels != 1:
        x = x.repeat(1, channels, 1, 1)
    y = torch.from_numpy(lab[idx].astype(np.int64))
    return x.contiguous(), y


def text_batch(batch, context, seed, path=TEXT_FILE):
    """`batch` windows of `context` + 1 bytes of `path` at seeded random
    offsets: inputs are the first `context` bytes, targets the next-byte
    shift."""
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if data.size < context + 2:
        raise ValueError("%s: %d bytes, need more than %d" % (path, data.size, context + 1))
    rng = np.random.RandomState(seed)
    off = rng.randint(0, data.size - context - 1, size=batch)
    win = np.stack([data[o:o + context + 1] for o in off]).astype(np.int64)
    t = torch.from_numpy(win)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous()


# --------------------------------------------------------------------------
# the small networks
# --------------------------------------------------------------------------

def _conv_bn_relu(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=False)]


class VGGStyleCNN(nn.Module):
    """Fashion-MNIST, 28x28x1: two stages of [conv3x3-BN-ReLU x2, max-pool 2]
    (32 and 64 channels), dropout 0.25, FC 256, ReLU, dropout 0.5, FC 10."""

    def __init__(self, num_classes=10, widths=(32, 64)):
        super().__init__()
        c1, c2 = widths
        self.stage1 = nn.Sequential(*_conv_bn_relu(1, c1), *_conv_bn_relu(c1, c1), nn.MaxPool2d(2))
        self.stage2 = nn.Sequential(*_conv_bn_relu(c1, c2), *_conv_bn_relu(c2, c2), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Dropout(0.25), nn.Flatten(), nn.Linear(c2 * 7 * 7, 256), nn.ReLU(inplace=False),
            nn.Dropout(0.5), nn.Linear(256, num_classes))

    def forward(self, x):
        return self.classifier(self.stage2(self.stage1(x)))


class Attention(nn.Module):
    """Multi-head self-attention with its own q/k/v projection; `causal` adds
    GPT's mask. The scores, softmax and dropout are computed in this module's
    forward, so hooks attribute them to it (the projections are Linear
    submodules)."""

    def __init__(self, dim, heads, attn_drop=0.0, proj_drop=0.0, causal=False, context=0):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)
        self.causal = causal
        self.tap = None  # callable(q=, k=, v=, scores=, probs=, out=) or None
        if causal:
            self.register_buffer("allowed", torch.ones(context, context, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = q @ k.transpose(-2, -1)
        att = scores * self.scale
        if self.causal:
            att = att.masked_fill(~self.allowed[:t, :t], float("-inf"))
        att = self.attn_drop(att.softmax(dim=-1))
        out = att @ v
        if self.tap is not None:  # the two matmuls' operands and outputs, for studies of their saved tensors
            self.tap(q=q, k=k, v=v, scores=scores, probs=att, out=out)
        y = out.transpose(1, 2).reshape(b, t, c)
        return self.proj_drop(self.proj(y))


class MLP(nn.Module):
    def __init__(self, dim, hidden, drop):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(LN(x)), then x + mlp(LN(x))."""

    def __init__(self, dim, heads, mlp_ratio=4, attn_drop=0.1, drop=0.1, causal=False, context=0):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, attn_drop, drop, causal, context)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, mlp_ratio * dim, drop)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SmallViT(nn.Module):
    """Fashion-MNIST ViT: 4x4 patches of the 28x28x1 image (49 tokens) plus a
    class token, d = 96, 3 pre-LN blocks of 3 heads, MLP 384, attention and
    MLP dropout 0.1, LayerNorm, linear head on the class token."""

    def __init__(self, num_classes=10, dim=96, depth=3, heads=3, patch=4, image=28, drop=0.1):
        super().__init__()
        n = (image // patch) ** 2
        self.patch = nn.Conv2d(1, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, 4, drop, drop) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def embed(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos

    def head_of(self, x):
        return self.head(self.ln(x)[:, 0])

    def forward(self, x):
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head_of(x)


class BasicBlock(nn.Module):
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, plus the input (a 1x1
    conv-BN projection when the shape changes), ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU(inplace=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu2 = nn.ReLU(inplace=False)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(y + (x if self.short is None else self.short(x)))


class ResNet20(nn.Module):
    """ResNet-20-shaped CNN for Fashion-MNIST 28x28x1 (He et al.'s CIFAR
    ResNet): conv3x3 16-BN-ReLU, then 3 stages of 3 basic blocks with 16, 32
    and 64 channels (stride 2 at the start of stages 2 and 3, 1x1 projection
    shortcuts), global average pool, FC 10."""

    def __init__(self, num_classes=10, widths=(16, 32, 64), blocks=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=False))
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            for j in range(blocks):
                layers.append(BasicBlock(cin, w, 2 if (i > 0 and j == 0) else 1))
                cin = w
        self.blocks = nn.ModuleList(layers)
        self.fc = nn.Linear(widths[-1], num_classes)

    def head_of(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
        return self.head_of(x)


class TinyGPT(nn.Module):
    """GPT-style causal byte-level LM: token + position embedding, dropout,
    `depth` pre-LN blocks (causal self-attention with attention and residual
    dropout, GELU MLP with dropout), final LayerNorm, LM head (256 bytes)."""

    def __init__(self, vocab=256, context=128, dim=64, depth=4, heads=4, drop=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.drop = nn.Dropout(drop)
        self.blocks = nn.ModuleList([Block(dim, heads, 4, drop, drop, causal=True, context=context)
                                     for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.apply(self._init)
        for n, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if n.endswith("proj.weight") or n.endswith("fc2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * depth))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def embed(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.drop(self.tok(idx) + self.pos(pos))

    def head_of(self, x):
        return self.head(self.ln(x))

    def forward(self, idx):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x)
        return self.head_of(x)


# --------------------------------------------------------------------------
# the table of networks
# --------------------------------------------------------------------------

def _torchvision(name, **kw):
    import torchvision
    model = getattr(torchvision.models, name)(weights=None, num_classes=10, **kw)
    head = getattr(getattr(model, "heads", None), "head", None)
    if head is not None:
        # torchvision zero-initializes the ViT head, so at the first step no
        # gradient reaches the encoder; a small random head lets it.
        nn.init.normal_(head.weight, 0.0, 0.02)
    return model


# name: builder(size), data kind, default input size, default batch, family
NETWORKS = {
    "vgg-cnn": dict(build=lambda size: VGGStyleCNN(), data="fmnist", size=28, batch=128, family="cnn",
                    title="VGG-style CNN (4 conv-BN-ReLU, 2 max-pools, dropout)"),
    "small-vit": dict(build=lambda size: SmallViT(), data="fmnist", size=28, batch=128, family="transformer",
                      title="small ViT (3 blocks, d=96, 4x4 patches)"),
    # issue 50's two networks (studies/peak_step.py); memory_report.py runs them only when named
    # (--networks resnet20,vit12), to keep its default run's length
    "resnet20": dict(build=lambda size: ResNet20(), data="fmnist", size=28, batch=256, family="cnn", report=False,
                     title="ResNet-20-shaped CNN (16/32/64 channels, 3x3 basic blocks, BN, ReLU)"),
    "vit12": dict(build=lambda size: SmallViT(depth=12, heads=4), data="fmnist", size=28, batch=256,
                  family="transformer", report=False,
                  title="ViT, 12 blocks, d=96, 4 heads, 4x4 patches (50 tokens)"),
    "gpt": dict(build=lambda size: TinyGPT(context=size), data="text", size=128, batch=32, family="transformer",
                title="GPT-style byte LM (4 blocks, d=64, 4 heads)"),
    "vgg16_bn": dict(build=lambda size: _torchvision("vgg16_bn"), data="fmnist3", size=64, batch=16,
                     family="cnn", title="torchvision vgg16_bn"),
    "resnet18": dict(build=lambda size: _torchvision("resnet18"), data="fmnist3", size=96, batch=32,
                     family="cnn", title="torchvision resnet18"),
    "resnet50": dict(build=lambda size: _torchvision("resnet50"), data="fmnist3", size=96, batch=16,
                     family="cnn", title="torchvision resnet50"),
    "mobilenet_v2": dict(build=lambda size: _torchvision("mobilenet_v2"), data="fmnist3", size=96, batch=32,
                         family="cnn", title="torchvision mobilenet_v2"),
    "vit_b_16": dict(build=lambda size: _torchvision("vit_b_16", image_size=size), data="fmnist3", size=48,
                     batch=8, family="transformer", title="torchvision vit_b_16 (head drawn N(0, 0.02), not zeros)"),
}

# What checkpointed_forward wraps in torch.utils.checkpoint (one segment each).
SEGMENTS = {
    "vgg-cnn": "each of the 2 stages (2x conv-BN-ReLU + max-pool); the classifier is not checkpointed",
    "small-vit": "each transformer block; patch embedding and head are not",
    "gpt": "each transformer block; embeddings, final LayerNorm and LM head are not",
    "resnet20": "each residual block (9); the stem and the head are not",
    "vit12": "each transformer block (12); patch embedding and head are not",
    "vgg16_bn": "the 5 stages of `features` that end at a max-pool; avgpool and classifier are not",
    "resnet18": "the stem (conv1-bn1-relu-maxpool) and each residual block (8); avgpool and fc are not",
    "resnet50": "the stem (conv1-bn1-relu-maxpool) and each bottleneck block (16); avgpool and fc are not",
    "mobilenet_v2": "each entry of `features` (19: stem, 17 inverted-residual blocks, last 1x1 conv); "
                    "pooling and classifier are not",
    "vit_b_16": "each encoder block (12); patch embedding, class token, position embedding, final "
                "LayerNorm and head are not",
}


def network_input(name, batch, size, seed):
    """(input, target) for network `name` at `batch` and input `size`."""
    kind = NETWORKS[name]["data"]
    if kind == "text":
        return text_batch(batch, size, seed)
    if kind == "fmnist3":
        return fashion_mnist_batch(batch, seed, size=size, channels=3)
    return fashion_mnist_batch(batch, seed, size=size, channels=1)


def loss_of(out, target):
    """Cross entropy; for a language model over every position."""
    if out.dim() == 3:
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.cross_entropy(out, target)


def _ckpt(fn, x):
    from torch.utils.checkpoint import checkpoint
    # Non-reentrant: parameters inside a segment get gradients even when the
    # segment's input does not require grad (the first segment reads the data),
    # and the RNG state is restored for the recomputation (same dropout masks).
    return checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)


def _stages_split_at_pools(seq):
    """Consecutive pieces of an nn.Sequential, each ending at a MaxPool2d."""
    out, cur = [], []
    for m in seq:
        cur.append(m)
        if isinstance(m, nn.MaxPool2d):
            out.append(nn.Sequential(*cur))
            cur = []
    if cur:
        out.append(nn.Sequential(*cur))
    return out


def way_loss(name, way, model, x, y, ebac_torch=None):
    """The loss of one forward of network `name` the way a study compares:
    "checkpoint" (torch.utils.checkpoint over SEGMENTS), "ebac-recompute"
    (ebac_torch.checkpoint over the same segments) or a plain forward (plain
    and ebac ways; an ebac session is the caller's)."""
    if way == "checkpoint":
        return loss_of(checkpointed_forward(name, model, x), y)
    if way == "ebac-recompute":
        return loss_of(segmented_forward(name, model, x, ebac_torch.checkpoint), y)
    return loss_of(model(x), y)


def checkpointed_forward(name, model, x, on_segment=None, ckpt=None):
    """model(x) with the segments of SEGMENTS[name] under torch.utils.checkpoint
    (or under `ckpt(fn, t)`, e.g. ebac_torch.checkpoint).

    `on_segment(t)`, if given, is called with each segment's input (the
    tensors checkpointing keeps from forward to backward)."""
    def seg(fn, t):
        if on_segment is not None:
            on_segment(t)
        return (ckpt or _ckpt)(fn, t)

    if name == "vgg-cnn":
        return model.classifier(seg(model.stage2, seg(model.stage1, x)))
    if name == "resnet20":
        x = model.stem(x)
        for b in model.blocks:
            x = seg(b, x)
        return model.head_of(x)
    if name in ("small-vit", "gpt", "vit12"):
        x = model.embed(x)
        for b in model.blocks:
            x = seg(b, x)
        return model.head_of(x)
    if name == "vgg16_bn":
        stages = model.__dict__.get("_ckpt_stages")  # not a registered submodule
        if stages is None:
            stages = model.__dict__["_ckpt_stages"] = _stages_split_at_pools(model.features)
        for s in stages:
            x = seg(s, x)
        return model.classifier(torch.flatten(model.avgpool(x), 1))
    if name in ("resnet18", "resnet50"):
        stem = model.__dict__.get("_ckpt_stem")  # not a registered submodule
        if stem is None:
            stem = model.__dict__["_ckpt_stem"] = nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool)
        x = seg(stem, x)
        for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
            for b in layer:
                x = seg(b, x)
        return model.fc(torch.flatten(model.avgpool(x), 1))
    if name == "mobilenet_v2":
        for f in model.features:
            x = seg(f, x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return model.classifier(x)
    if name == "vit_b_16":
        x = model._process_input(x)
        x = torch.cat([model.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        enc = model.encoder
        x = enc.dropout(x + enc.pos_embedding)
        for b in enc.layers:
            x = seg(b, x)
        return model.heads(enc.ln(x)[:, 0])
    raise ValueError("no checkpoint segmentation for %r" % name)


def segmented_forward(name, model, x, ckpt):
    """model(x) with each segment of SEGMENTS[name] run through ckpt(fn, t)."""
    return checkpointed_forward(name, model, x, ckpt=ckpt)
