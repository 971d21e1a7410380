// ebac/compress_options.hpp - what a caller asks of a compression, and which requests are refused.
//
// Shared by both backends: host::compress, the CUDA device-scope call and
// the CUDA convenience layer all take a compress_options and refuse the same
// arguments with the same message (compress_argument_error).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/status.hpp>

#include <cstdint>
#include <limits>
#include <string>

EBAC_NAMESPACE_BEGIN

/// decompress()'s default max_output_bytes: no limit.
inline constexpr std::uint64_t unlimited_output = std::numeric_limits<std::uint64_t>::max();

struct compress_options {
  /// The error bound of floating-point tensors. Integer and bool tensors are
  /// coded losslessly and ignore it.
  error_bound bound{};
  bool checksum = true;  ///< files always carry one; an in-memory buffer may skip it
  int threads = 0;       ///< 0: all OpenMP threads, 1: serial
  /// A tensor with at most this many distinct values (bit patterns) is coded
  /// losslessly as indices into its palette (quantizer/levels.hpp): masks,
  /// one-hot rows, bool tensors. 0 turns it off; at most max_levels.
  std::uint32_t max_levels = ebac::max_levels;
  /// For a tensor of max-pool indices (an integer dtype): the pooling
  /// layer's geometry, so that each index is coded as its offset inside its
  /// window (quantizer/pool_window.hpp). dims == 0: not a pooling tensor.
  pool_geometry pooling{};
  /// When coding would give a stream larger than the raw elements plus a
  /// header, store the raw elements instead (docs/format.md): no stream then
  /// exceeds max_compressed_bytes. false always codes (to measure a pipeline
  /// on its own); a stream is then bounded by max_coded_bytes only.
  bool store_when_larger = true;
};

namespace detail {

/// Why compress() refuses these arguments for elements of type T, or
/// nullptr when it takes them. Every compress entry point asks this (host,
/// CUDA device-scope and CUDA convenience), so a refusal reads the same on
/// either backend. Pointers are the caller's to check: a device-scope size
/// query takes none.
template <element T, class Pipeline>
[[nodiscard]] const char* compress_argument_error(const extents& shape, const Pipeline& pipe,
                                                  const compress_options& opt) noexcept {
  std::uint64_t n = 0;
  if (shape.count(n) != status::ok) return "extents: rank must be 1..8 and the element count must fit 64 bits";
  if (n > max_stream_elements) return "extents: more than 2^48 elements";
  if (floating_element<T> && opt.bound.validate() != status::ok)
    return "error bound must be finite and > 0 (a relative one at most 1e6)";
  if (pipe.predictor.validate(shape) != status::ok) return "predictor axes/tiles do not fit the tensor's rank";
  if (!valid_chunk_elements(pipe.chunk_elements)) return "chunk_elements must be a multiple of 32 in [32, 2^24]";
  if (opt.max_levels > max_levels) return "max_levels must be at most 16";
  if (opt.pooling.dims != 0) {
    if (floating_element<T>) return "a pooling geometry applies to integer (max-pool index) tensors only";
    if (opt.pooling.validate(shape) != status::ok)
      return "pooling geometry: 1..3 spatial dims (the tensor's last ones), every size >= 1 (padding >= 0) and < 2^31, "
             "fewer than 2^22 offsets in a window";
  }
  return nullptr;
}

/// Why decompress() refuses an output for a (validated) stream header, or
/// nullptr. Shared by the host and the CUDA convenience decoder, which asks
/// before it allocates anything (a forged header may claim any count).
[[nodiscard]] inline const char* decompress_argument_error(const stream_header& h, dtype out_type, std::uint64_t count,
                                                           const void* out) noexcept {
  if (h.type != out_type) return "output element type does not match the stream's dtype";
  if (count != element_count(h)) return "output size does not match the stream's element count";
  if (count > 0 && out == nullptr) return "output pointer is null";
  return nullptr;
}

/// Throws status::buffer_too_small when a (validated) stream decodes to more
/// than max_output_bytes bytes (element count x element size): checked
/// before anything is allocated, since a tiny stream may claim 2^48 elements.
inline void check_output_limit(const stream_header& h, std::uint64_t max_output_bytes) {
  const std::uint64_t n = element_count(h);  // <= 2^48: the product cannot overflow
  const std::uint64_t bytes = n * size_of(h.type);
  if (bytes > max_output_bytes)
    fail(status::buffer_too_small, "the stream decodes to " + std::to_string(bytes) + " bytes (" + std::to_string(n) +
                                       " elements), more than the " + std::to_string(max_output_bytes) +
                                       " bytes allowed (max_output_bytes)");
}

}  // namespace detail

/// The header fields every writer (host and CUDA) fills from the call before
/// any stage is chosen: dtype, bound mode and requested bound (0 for the
/// lossless integer dtypes), shape, checksum flag, and the pipeline's chunk
/// size (the chosen predictor's cut replaces it: format/chunking.hpp).
template <element T, class Pipeline>
[[nodiscard]] stream_header begin_stream_header(const extents& shape, const Pipeline& pipe, const compress_options& opt,
                                                bool checksum) noexcept {
  stream_header h;
  h.type = dtype_of<T>::value;
  h.mode = opt.bound.mode;
  h.flags = checksum ? stream_flag_checksum : 0;
  h.shape = shape;
  h.eb_requested = floating_element<T> ? opt.bound.value : 0.0;
  h.chunk_elements = pipe.chunk_elements;
  return h;
}

EBAC_NAMESPACE_END
