"""Loading the C++ extension: the installed one, or a JIT build from the tree.

Order:
1. ``ebac_torch._C``, built by ``pip install integrations/pytorch`` (setup.py);
2. otherwise (or with ``EBAC_TORCH_FORCE_JIT=1``) a build of ``../csrc`` with
   ``torch.utils.cpp_extension.load`` against ebac's headers, found at
   ``$EBAC_INCLUDE_DIR`` or ``<repo>/include``. The build is cached under
   ``$TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``) and
   rebuilt by ninja when a source or an ebac header changes.
"""

import hashlib
import os
import re
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_ext = None
_origin = None

# Flags shared with setup.py (which imports this module without torch's
# extension machinery running).
# EBAC_HOST_CODEC_PREBUILT: host_codec.cpp declares the codec's instantiations
# extern; codec_units() writes the units that define them, one per element
# type, so the build
# runs in parallel (a single unit took about ten minutes of -O3 on one core).
# -g0: setup.py's build inherits Python's own CFLAGS, -g among them: debug
# information for the codec's units is slow to compile and large.
CXX_FLAGS = ["-O3", "-g0", "-std=c++20", "-fopenmp", "-ffp-contract=off", "-fvisibility=hidden", "-Wno-deprecated-declarations",
             "-DEBAC_HOST_CODEC_PREBUILT"]
LD_FLAGS = ["-fopenmp"]
# csrc/'s own units; codec_units() writes the codec's, one per element type.
SOURCES = ["bindings.cpp", "host_codec.cpp", "host_codec_x86_64_v3.cpp", "error_model.cpp", "adapt.cpp", "layernorm_rows.cpp"]
# The CUDA backend: one more source (the dispatcher; cuda_codec_units()
# writes the per-element units), compiled by nvcc, and a define for all.
CUDA_SOURCES = ["cuda_codec.cu"]
CUDA_DEFINE = "-DEBAC_TORCH_WITH_CUDA=1"
# -fmad=false: no FMA contraction in quantize/reconstruct, so device streams
# equal the host's byte for byte (DESIGN.md).
NVCC_FLAGS = ["-O3", "-std=c++20", "-fmad=false", "--expt-relaxed-constexpr", CUDA_DEFINE]


def want_cuda():
    """Build the CUDA backend? $EBAC_TORCH_CUDA=1/0 decides; by default yes
    when torch is a CUDA build, a GPU is visible and nvcc (CUDA_HOME) exists."""
    env = os.environ.get("EBAC_TORCH_CUDA")
    if env is not None:
        return env == "1"
    import torch
    from torch.utils.cpp_extension import CUDA_HOME
    return torch.version.cuda is not None and torch.cuda.is_available() and CUDA_HOME is not None


def source_dir():
    """Directory of the extension's C++ sources (present in a source tree only)."""
    return os.path.normpath(os.path.join(_HERE, "..", "csrc"))


def include_dir():
    """ebac's include/ directory: $EBAC_INCLUDE_DIR, else the repository's."""
    env = os.environ.get("EBAC_INCLUDE_DIR")
    if env:
        return os.path.abspath(env)
    return os.path.normpath(os.path.join(_HERE, "..", "..", "..", "include"))


def codec_elements(inc=None):
    """The host codec's element types (C++ spellings): the X-list of
    EBAC_HOST_CODEC_FOR_EACH_ELEMENT in ebac/host/codec_instances.hpp, the one
    place that names them (CMake's ebac_add_host_codec reads it too)."""
    header = os.path.join(inc or include_dir(), "ebac", "host", "codec_instances.hpp")
    with open(header) as f:
        lines = f.read().split("\n")
    text, inside = "", False
    for line in lines:
        if line.startswith("#define EBAC_HOST_CODEC_FOR_EACH_ELEMENT(X)"):
            inside, line = True, line[len("#define EBAC_HOST_CODEC_FOR_EACH_ELEMENT(X)"):]
        elif not inside:
            continue
        text += " " + line
        if not line.rstrip().endswith("\\"):
            break
    elements = re.findall(r"X\(([^)]+)\)", text)
    if not elements:
        raise RuntimeError("ebac_torch: no element list (EBAC_HOST_CODEC_FOR_EACH_ELEMENT) in %s" % header)
    return elements


def _write_units(out_dir, inc, name, text):
    """Writes one unit per element type, name % stem and text % element,
    into out_dir; returns their paths. A file is rewritten only when its text
    changes, so ninja does not rebuild it."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for element in codec_elements(inc):
        stem = re.sub(r"[^A-Za-z0-9]+", "_", element).strip("_")
        path = os.path.join(out_dir, name % stem)
        body = text.replace("@ELEMENT@", element)
        try:
            with open(path) as f:
                same = f.read() == body
        except OSError:
            same = False
        if not same:
            with open(path, "w") as f:
                f.write(body)
        paths.append(path)
    return paths


def codec_units(out_dir, inc=None):
    """Writes the units that instantiate the host codec, one per element type
    (so they compile in parallel; host_codec.cpp sees them declared extern,
    EBAC_HOST_CODEC_PREBUILT), into out_dir; returns their paths."""
    return _write_units(out_dir, inc, "codec_%s.cpp",
                        "// Written by ebac_torch/_ext.py: the host codec for @ELEMENT@.\n"
                        "#include <ebac/host/codec_instances.hpp>\n"
                        "EBAC_HOST_CODEC_INSTANTIATE_COMPRESS(@ELEMENT@)\n"
                        "EBAC_HOST_CODEC_INSTANTIATE_DECOMPRESS(@ELEMENT@)\n")


def cuda_codec_units(out_dir, inc=None):
    """Writes the units of the CUDA backend, one per element type (nvcc
    compiles them side by side; cuda_codec.cu calls them: csrc/
    cuda_codec_typed.hpp), into out_dir; returns their paths. They include
    csrc/cuda_codec_typed.cuh: csrc must be on the include path."""
    return _write_units(out_dir, inc, "cuda_codec_%s.cu",
                        "// Written by ebac_torch/_ext.py: the CUDA backend for @ELEMENT@.\n"
                        "#include \"cuda_codec_typed.cuh\"\n"
                        "EBAC_TORCH_CUDA_CODEC_INSTANTIATE(@ELEMENT@)\n")


def _jit_load(verbose):
    from torch.utils import cpp_extension

    src, inc = source_dir(), include_dir()
    missing = [p for p in [os.path.join(src, s) for s in SOURCES] + [os.path.join(inc, "ebac", "ebac.hpp")]
               if not os.path.exists(p)]
    if missing:
        raise ImportError(
            "ebac_torch: the compiled extension is not installed and the in-tree build cannot find %s "
            "(install with `pip install --no-build-isolation integrations/pytorch`, or set EBAC_INCLUDE_DIR)"
            % ", ".join(missing))
    # One build per source tree, so two checkouts on one machine do not
    # rebuild each other's copy back and forth in the shared cache.
    tag = hashlib.sha1(os.path.realpath(src).encode()).hexdigest()[:8]
    cuda = want_cuda()
    sources = SOURCES + (CUDA_SOURCES if cuda else [])
    name = "ebac_torch_C_" + tag + ("_cuda" if cuda else "")
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions")
    units = codec_units(os.path.join(root, name + "_codec_units"), inc)
    if cuda:
        units += cuda_codec_units(os.path.join(root, name + "_codec_units"), inc)
    return cpp_extension.load(
        name=name,
        sources=[os.path.join(src, s) for s in sources] + units,
        extra_include_paths=[inc, src],
        extra_cflags=CXX_FLAGS + ([CUDA_DEFINE] if cuda else []),
        extra_cuda_cflags=NVCC_FLAGS if cuda else None,
        extra_ldflags=LD_FLAGS,
        verbose=verbose)


def load(verbose=False):
    """Returns the extension module, building it in-tree on first use if needed."""
    global _ext, _origin
    if _ext is not None:
        return _ext
    with _lock:
        if _ext is not None:
            return _ext
        if os.environ.get("EBAC_TORCH_FORCE_JIT", "0") != "1":
            try:
                from . import _C  # type: ignore[attr-defined]
                _ext, _origin = _C, "installed"
                return _ext
            except ImportError:
                pass
        _ext, _origin = _jit_load(verbose), "in-tree"
        return _ext


def origin():
    """'installed', 'in-tree', or None when not loaded yet."""
    return _origin
