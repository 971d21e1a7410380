// ebac/encoder/huffman_encode.hpp - a chunk's codes as Huffman tokens
// (literals, zero runs, escapes): what the encoder codes and what the
// statistics count. A chunk can be cut into segments that different threads
// tokenize (cuda/kernels/encode.cuh: one warp a chunk).
//
// Part of the Huffman stage (encoder/huffman.hpp); huffman::encode_chunk
// puts each token's code with detail::bit_writer (detail/bit_io.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/huffman_codebook.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace detail {

/// Calls emit(symbol, extra_bits, extra_count) for each token that starts
/// in codes[begin, end) of a chunk of n codes. A zero run belongs to the
/// segment where it starts and may run past `end`; zeros at `begin` that
/// continue a run from before it are skipped. So the tokens of consecutive
/// segments, in order, are the chunk's tokens, and segments can be coded by
/// different threads (cuda/kernels/encode.cuh: one warp a chunk).
template <class Emit>
EBAC_HOST_DEVICE void huffman_tokenize_segment(const std::uint32_t* codes, std::size_t n, std::size_t begin, std::size_t end,
                                               bool use_runs, Emit&& emit) {
  namespace A = huffman_alphabet;
  std::size_t i = begin;
  if (use_runs && i > 0 && i < end && codes[i - 1] == 0)
    while (i < end && codes[i] == 0) ++i;
  while (i < end) {
    const std::uint32_t c = codes[i];
    if (c == 0 && use_runs) {
      std::size_t j = i + 1;
      while (j < n && codes[j] == 0) ++j;
      std::size_t run = j - i;
      i = j;
      // Split runs longer than a class can hold (chunks larger than 2^32).
      while (run > 0) {
        if (run == 1) {
          emit(0u, 0u, 0);
          break;
        }
        const std::size_t take = run >= (std::size_t{1} << 32) ? (std::size_t{1} << 32) - 1 : run;
        const int k = bit_width(static_cast<std::uint32_t>(take)) - 1;
        emit(A::run_base + static_cast<std::uint32_t>(k) - 1u, static_cast<std::uint32_t>(take - (std::size_t{1} << k)), k);
        run -= take;
      }
      continue;
    }
    if (c < A::literals) emit(c, 0u, 0);
    else emit(A::escape, c, 32);
    ++i;
  }
}

/// Calls emit(symbol, extra_bits, extra_count) for each token of a chunk.
template <class Emit>
EBAC_HOST_DEVICE void huffman_tokenize(const std::uint32_t* codes, std::size_t n, bool use_runs, Emit&& emit) {
  huffman_tokenize_segment(codes, n, 0, n, use_runs, static_cast<Emit&&>(emit));
}

}  // namespace detail
EBAC_NAMESPACE_END
