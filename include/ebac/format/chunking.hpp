// ebac/format/chunking.hpp - how a writer cuts a tensor into chunks.
//
// Chunks are the stream's unit of independent coding (the chunk table) and
// the backends' unit of parallel work. A chunk that holds whole blocks of
// its predictor (predictor::independent_elements: a flat Lorenzo tile, or
// one plane of a Lorenzo along the last axes) is coded from its own codes
// alone, so a backend can quantize, predict and encode it in cache, and
// decode it straight to values, instead of building an integer field of the
// whole tensor (4 bytes an element for the compression's whole lifetime).
// The writer therefore rounds the pipeline's chunk size to whole blocks
// when the blocks are small enough. Both backends call these functions, so
// they cut alike; the stream records the result (header offset 48).
#pragma once

#include <ebac/config.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/stream_header.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

namespace detail {
[[nodiscard]] EBAC_HOST_DEVICE constexpr std::uint64_t gcd64(std::uint64_t a, std::uint64_t b) noexcept {
  while (b) {
    const std::uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}
}  // namespace detail

/// The chunk size for a tensor of extents e coded with predictor `pred`,
/// from the pipeline's `requested` size (valid_chunk_elements): the largest
/// multiple of lcm(32, block) not above `requested`, or one such multiple
/// when `requested` is smaller; `requested` itself when lcm(32, block)
/// exceeds the format's 2^24 or the tensor fits one requested chunk.
template <class P>
[[nodiscard]] EBAC_HOST_DEVICE std::uint32_t stream_chunk_elements(const P& pred, const extents& e,
                                                                   std::uint32_t requested) noexcept {
  std::uint64_t n = 0;
  if (e.count(n) != status::ok || n <= requested) return requested;
  const std::uint64_t block = pred.independent_elements(e);
  if (block == 0 || block > (std::uint64_t{1} << 24)) return requested;
  const std::uint64_t unit = block / detail::gcd64(block, 32) * 32;  // lcm(32, block)
  if (unit > (std::uint64_t{1} << 24)) return requested;
  const std::uint64_t c = requested >= unit ? requested / unit * unit : unit;
  return static_cast<std::uint32_t>(c);
}

/// Whether every residual of every chunk of C elements depends only on that
/// chunk's codes: the chunks hold whole blocks, or there is one chunk.
template <class P>
[[nodiscard]] EBAC_HOST_DEVICE bool chunks_independent(const P& pred, const extents& e, std::uint32_t C) noexcept {
  std::uint64_t n = 0;
  if (e.count(n) != status::ok) return false;
  if (n <= C) return true;
  const std::uint64_t block = pred.independent_elements(e);
  return block != 0 && C % block == 0;
}

EBAC_NAMESPACE_END
