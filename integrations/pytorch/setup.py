"""Builds and installs ebac_torch (the Python package and its C++ extension).

    pip install --no-build-isolation integrations/pytorch

--no-build-isolation makes pip build against the torch already installed
(an isolated build would try to download one, and the extension must match
the torch it runs with). ebac's headers are taken from $EBAC_INCLUDE_DIR or
from this repository's include/ (two levels up).

CUDA: with EBAC_TORCH_CUDA=1 (by default: a CUDA build of torch, a visible
GPU and nvcc) it builds a CUDAExtension with csrc/cuda_codec.cu and
EBAC_TORCH_WITH_CUDA, so CUDA tensors are compressed on their device.
"""

import os
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ebac_torch"))
import _ext as flags  # noqa: E402  (the loader's flag lists, without importing the package)

from torch.utils.cpp_extension import BuildExtension, CppExtension  # noqa: E402


def ebac_include():
    inc = os.environ.get("EBAC_INCLUDE_DIR") or os.path.join(HERE, "..", "..", "include")
    inc = os.path.abspath(inc)
    if not os.path.exists(os.path.join(inc, "ebac", "ebac.hpp")):
        sys.exit("ebac_torch: ebac headers not found at %s; set EBAC_INCLUDE_DIR to ebac's include/" % inc)
    return inc


def extension():
    # The codec's units, written next to setuptools' own build directory.
    units = flags.codec_units(os.path.join(HERE, "build", "ebac_codec_units"), ebac_include())
    sources = [os.path.join("csrc", s) for s in flags.SOURCES] + [os.path.relpath(u, HERE) for u in units]
    if flags.want_cuda():
        from torch.utils.cpp_extension import CUDAExtension
        cuda_units = flags.cuda_codec_units(os.path.join(HERE, "build", "ebac_codec_units"), ebac_include())
        return CUDAExtension(
            "ebac_torch._C", sources + [os.path.join("csrc", s) for s in flags.CUDA_SOURCES]
            + [os.path.relpath(u, HERE) for u in cuda_units],
            include_dirs=[ebac_include(), os.path.join(HERE, "csrc")],
            extra_compile_args={"cxx": flags.CXX_FLAGS + [flags.CUDA_DEFINE], "nvcc": flags.NVCC_FLAGS},
            extra_link_args=flags.LD_FLAGS)
    return CppExtension(
        "ebac_torch._C", sources,
        include_dirs=[ebac_include()],
        extra_compile_args=flags.CXX_FLAGS,
        extra_link_args=flags.LD_FLAGS)


setup(
    name="ebac_torch",
    version="0.1.0",
    description="Train PyTorch models with error-bounded compressed activations (ebac)",
    packages=["ebac_torch"],
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.8",
    zip_safe=False,
)
