// ebac/format/max_compressed_bytes.hpp - the largest stream a tensor can give.
//
// Both backends need it: the CUDA backend writes into a caller buffer sized
// before anything is known about the data (cuda::compress), and a host
// caller may want to reserve an arena the same way. It is a bound on the
// stream format, not on one backend's output, so it lives here and the host
// property tests check both bounds against every stream they make (the CUDA
// backend's streams are the host's minus the checksum).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

/// Bits a zigzagged residual code can need. Quantizer codes satisfy
/// |q| < 2^22 (quantizer_code_limit); with no prediction the code is
/// zigzag(q) < 2^23. A d-D Lorenzo residual is q minus 2^d - 1 neighbours
/// with coefficients +-1, so |r| <= 2^d (2^22 - 1) and zigzag(r) < 2^(23 + d).
/// Outliers have q = 0, inside the same range.
[[nodiscard]] constexpr unsigned max_code_bits(const no_prediction&) noexcept { return 23; }
[[nodiscard]] constexpr unsigned max_code_bits(const lorenzo& l) noexcept { return 23u + l.dims; }
static_assert(quantizer_code_limit == (1 << 22), "max_code_bits assumes codes below 2^22 in magnitude");

/// Bytes a coded (not stored) stream of this shape, pipeline and element
/// type can take at most, checksum included; 0 when the shape or the chunk
/// size is invalid (compress refuses those). A writer that assembles the
/// coded stream in place before it knows whether the stored form is smaller
/// (the CUDA backend) needs this much room. The terms, in stream order:
/// header, stage parameters, Huffman codebook, chunk table (4 bytes a
/// chunk), payload (each chunk at most its encoder's max_chunk_bytes of a
/// full chunk; for bit-packing, blocks no wider than max_code_bits), outliers,
/// checksum. Outliers: k indices as varint gaps that sum to at most n - k
/// take at most n bytes (a gap g costs 1 + floor(log2(g + 1) / 7) bytes, the
/// sum is largest for equal gaps, and then it is <= n:
/// tests/format/outlier_index.cpp), plus k <= n raw values. Every quantizer's
/// codes stay below quantizer_code_limit in magnitude (the lossless ones
/// by construction: exact.hpp, levels.hpp, pool_window.hpp).
template <class Pipeline, element T>
[[nodiscard]] std::size_t max_coded_bytes(const extents& shape, const Pipeline& pipe) noexcept {
  using E = typename Pipeline::encoder_type;
  std::uint64_t n = 0;
  if (shape.count(n) != status::ok || n > max_stream_elements) return 0;  // also keeps the sum below 2^64
  if (!valid_chunk_elements(pipe.chunk_elements)) return 0;
  // The writer cuts at the pipeline's chunk size (level and pooling codes,
  // no prediction) or rounds it to whole predictor blocks
  // (format/chunking.hpp): bound both cuts. The pipeline's predictor gives
  // the widest codes.
  auto bound = [&](std::uint64_t C) {
    const std::uint64_t chunks = (n + C - 1) / C;
    const std::uint64_t per_chunk = E{}.max_chunk_bytes(static_cast<std::size_t>(C), max_code_bits(pipe.predictor));
    std::uint64_t codebook = 0;
    if constexpr (E::needs_codebook) codebook = E::codebook::max_serialized_bytes;
    return stream_fixed_header_bytes + 8 * static_cast<std::uint64_t>(shape.rank) + max_parameter_bytes + codebook + 4 * chunks +
           chunks * per_chunk + n * (1 + sizeof(T)) + 8;
  };
  const std::uint64_t a = bound(pipe.chunk_elements),
                      b = bound(stream_chunk_elements(pipe.predictor, shape, pipe.chunk_elements));
  std::uint64_t most = a > b ? a : b;
  // A pipeline that chooses its predictor per tensor may also cut for flat
  // Lorenzo (whose codes are no wider than any Lorenzo's).
  if constexpr (std::is_same_v<typename Pipeline::predictor_type, lorenzo>) {
    if (pipe.choose_predictor) {
      const std::uint64_t f = bound(stream_chunk_elements(lorenzo::flat(), shape, pipe.chunk_elements));
      most = f > most ? f : most;
    }
  }
  return static_cast<std::size_t>(most);
}

/// Bytes a stream of this shape and element type can take at most, checksum
/// included, whatever the pipeline and the data: a writer stores the raw
/// elements (docs/format.md, "stored streams") whenever coding would give
/// more, so no stream exceeds its header plus the raw tensor plus the
/// checksum. 0 when the shape or the pipeline's chunk size is invalid
/// (compress refuses those). Size a host arena with it.
template <class Pipeline, element T>
[[nodiscard]] std::size_t max_compressed_bytes(const extents& shape, const Pipeline& pipe) noexcept {
  std::uint64_t n = 0;
  if (shape.count(n) != status::ok || n > max_stream_elements || !valid_chunk_elements(pipe.chunk_elements)) return 0;
  return static_cast<std::size_t>(stream_fixed_header_bytes + 8 * static_cast<std::uint64_t>(shape.rank) + n * sizeof(T) + 8);
}

EBAC_NAMESPACE_END
