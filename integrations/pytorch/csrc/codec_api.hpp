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

/// ebac's version as "major.minor.patch".
std::string ebac_version();

}  // namespace ebac_torch
