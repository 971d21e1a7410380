// ebac/encoder/striped_tokens.hpp - the alphabet of the striped Huffman
// encoder (encoder/striped_huffman.hpp) and a chunk's codes as its tokens.
//
// 171 symbols, so that every code length fits an 11-bit decode table and
// the whole table (2048 entries) stays in L1:
//   0 .. 31     the code itself (0: a single zero)
//   32 .. 139   a code v >= 32 by its bit width b (6..32) and the two bits
//               after its leading one: symbol 4b + 8 + m, then the b - 3
//               bits below them raw (a bucket of width 2^(b-3))
//   140 .. 170  a run of L >= 2 zeros with 2^k <= L < 2^(k+1), k = 1..31:
//               symbol 139 + k, then L - 2^k in k raw bits
// A token is its symbol's code followed by its raw bits: at most 11 + 31 bits.
//
// Two mantissa bits cost little against coding every value: within one
// bucket the residuals of a smooth distribution are nearly uniform.
#pragma once

#include <ebac/config.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

namespace striped_alphabet {
inline constexpr std::uint32_t literals = 32;
inline constexpr std::uint32_t bucket_base = literals;  // symbols of codes >= literals
inline constexpr std::uint32_t run_base = 140;          // symbol of a run of class k: run_base + k - 1
inline constexpr std::uint32_t run_classes = 31;
inline constexpr std::uint32_t size = run_base + run_classes;  // 171
inline constexpr int max_code_length = 11;
inline constexpr int table_bits = 11;
/// The most bits a token takes: its code and its raw bits.
inline constexpr int max_token_bits = max_code_length + 31;
}  // namespace striped_alphabet

/// One token: its symbol and the raw bits that follow its code.
struct striped_token {
  std::uint32_t symbol;
  std::uint32_t extra;   ///< the raw bits' value
  std::uint32_t nextra;  ///< how many raw bits (0..31)
};

/// The token of one code v that is not part of a zero run.
[[nodiscard]] inline striped_token striped_value_token(std::uint32_t v) noexcept {
  namespace A = striped_alphabet;
  if (v < A::literals) return {v, 0, 0};
  const auto b = static_cast<std::uint32_t>(std::bit_width(v));  // 6..32
  const std::uint32_t shift = b - 3;
  return {4 * b + 8 + ((v >> shift) & 3u), v & ((1u << shift) - 1u), shift};
}

/// The value a value symbol stands for before its raw bits are added, and
/// how many raw bits follow; for a run symbol, the run's least length and
/// its raw bits. (What the decode table stores per entry.)
struct striped_symbol_value {
  std::uint32_t base;
  std::uint32_t nextra;
  bool run;
};
[[nodiscard]] constexpr striped_symbol_value striped_symbol(std::uint32_t s) noexcept {
  namespace A = striped_alphabet;
  if (s < A::literals) return {s, 0, false};
  if (s < A::run_base) {
    const std::uint32_t b = (s - A::bucket_base) / 4 + 6, m = (s - A::bucket_base) % 4, shift = b - 3;
    return {(4u + m) << shift, shift, false};
  }
  const std::uint32_t k = s - A::run_base + 1;
  return {1u << k, k, true};
}

/// A chunk of n codes read token by token, in order (next() false at the
/// end): the encoder takes four at a time, one for each stream, with its
/// writers in registers.
struct striped_cursor {
  const std::uint32_t* codes;
  std::size_t n;
  std::size_t i = 0;
  std::size_t run_left = 0;  ///< zeros of the current run not yet in a token

  bool next(striped_token& t) noexcept {
    if (run_left == 0) {
      if (i >= n) return false;
      const std::uint32_t v = codes[i];
      if (v != 0 || i + 1 == n || codes[i + 1] != 0) {
        t = striped_value_token(v);
        ++i;
        return true;
      }
      std::size_t j = i + 2;
      while (j < n && codes[j] == 0) ++j;
      run_left = j - i;
      i = j;
    }
    // A run: longer runs than a class holds (chunks of 2^32 codes or more) split.
    if (run_left == 1) {
      run_left = 0;
      t = striped_token{0, 0, 0};
      return true;
    }
    const std::size_t take = run_left >= (std::size_t{1} << 32) ? (std::size_t{1} << 32) - 1 : run_left;
    const auto k = static_cast<std::uint32_t>(std::bit_width(take)) - 1u;
    t = striped_token{striped_alphabet::run_base + k - 1u, static_cast<std::uint32_t>(take - (std::size_t{1} << k)), k};
    run_left -= take;
    return true;
  }
};

/// Calls emit(token) for each token of a chunk of n codes, in order.
template <class Emit>
inline void striped_tokenize(const std::uint32_t* codes, std::size_t n, Emit&& emit) {
  striped_cursor c{codes, n};
  striped_token t;
  while (c.next(t)) emit(t);
}

EBAC_NAMESPACE_END
