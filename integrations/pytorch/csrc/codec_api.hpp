// codec_api.hpp - the seam between the PyTorch bindings and an ebac backend.
//
// bindings.cpp (torch + pybind11) talks to a backend only through these
// declarations, so the translation unit that instantiates ebac's templates
// (host_codec.cpp) never sees torch's headers and the torch one never sees
// ebac's. A CUDA backend is added the same way: a cuda_codec.cu defining the
// cuda_* functions below, compiled only when EBAC_TORCH_WITH_CUDA is set
// (setup.py / the in-tree loader decide; see docs/pytorch.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ebac_torch {

enum class elem : int { f32 = 1, f16 = 2, bf16 = 3 };

/// One tensor to compress: `count` elements of `type` at `data`, laid out
/// row-major with extents dims[0..rank) (outermost first; rank 1..8).
struct compress_request {
  const void* data = nullptr;
  elem type = elem::f32;
  std::uint64_t dims[8]{};
  int rank = 0;
  double error_bound = 0;
  bool relative = true;       ///< value-range relative bound, else absolute
  std::string pipeline = "fast";
  int threads = 0;            ///< 0: all OpenMP threads
  bool checksum = false;      ///< in-memory training buffers skip it by default
};

/// What a stream says about itself (ebac::host::inspect).
struct stream_info {
  elem type = elem::f32;
  std::vector<std::int64_t> dims;
  bool relative = true;
  double eb_requested = 0;
  double eb_abs = 0;
  std::uint64_t outliers = 0;
  std::uint64_t bytes = 0;
  int predictor = 0, quantizer = 0, encoder = 0;
  bool checksum = false;
};

/// True when `name` is a pipeline ebac::parse_pipeline accepts.
bool valid_pipeline(const std::string& name);

/// Host backend. Throw ebac::error (a std::runtime_error) on bad input.
std::vector<std::byte> host_compress(const compress_request& r);
void host_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, int threads);
stream_info host_inspect(const std::byte* data, std::size_t size);

/// A Conv2d (or, with 1x1 everything, a Linear: rows = batch, features =
/// in_channels) whose saved input is compressed; PyTorch conventions.
struct layer_geometry {
  std::int64_t batch = 1, in_channels = 1, in_h = 1, in_w = 1, out_channels = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  bool linear = false;
};

/// ebac's error model (include/ebac/error_model) applied to one layer.
struct weight_error_estimate {
  double sigma = 0;           ///< predicted RMS of the weight-gradient error
  double iid_sigma = 0;       ///< the i.i.d. baseline of DESIGN.md with the measured E[e^2]
  double coherent_share = 0;  ///< share of sigma^2 from the flat-region / mean-error term
  double flat_share = 0;      ///< share of input positions the model treats as flat
};

/// x: the saved input, y: its reconstruction, dy: the layer's output
/// gradient; all float32, contiguous NCHW (N x F for a linear layer).
/// Throws std::invalid_argument when shapes and geometry disagree.
weight_error_estimate predict_weight_error(const layer_geometry& g, const float* x, const float* y, const float* dy,
                                           double eb_abs);

/// ebac's version as "major.minor.patch".
std::string ebac_version();

}  // namespace ebac_torch
