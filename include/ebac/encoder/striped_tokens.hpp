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
//
// Two readers give the same tokens in the same order: striped_cursor, one
// token a call (the reference, kept simple), and striped_token_reader, a
// block of tokens a call into the caller's arrays, which the encoder and its
// statistics use: where AVX2 is compiled in, zero runs found eight codes a
// compare and value tokens formed eight at a time without a branch (why:
// tokenizing one code at a time, with a branch per code on what it is, was
// half of a compression's time, docs/benchmarks.md); without AVX2 the
// cursor's loop, which was faster there than scalar scans.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/host_avx2.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

/// The token of a zero run of 1 <= L < 2^32 codes: a single zero is the
/// literal 0; a longer run is class c = floor(log2 L) (symbol run_base + c -
/// 1) and L - 2^c in c raw bits. Every tokenizer forms runs through this
/// (the branch-free window loop of striped_tokenize_kept as a select).
[[nodiscard]] constexpr striped_token striped_run_token(std::uint64_t L) noexcept {
  const auto c = static_cast<std::uint32_t>(std::bit_width(L | 1u)) - 1u;
  const striped_token run{striped_alphabet::run_base + c - 1u, static_cast<std::uint32_t>(L - (std::uint64_t{1} << c)), c};
  return L <= 1 ? striped_token{0, 0, 0} : run;
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

/// The raw bits that follow each symbol's code (striped_symbol(s).nextra).
inline constexpr std::array<std::uint8_t, striped_alphabet::size> striped_raw_bits = [] {
  std::array<std::uint8_t, striped_alphabet::size> r{};
  for (std::uint32_t s = 0; s < striped_alphabet::size; ++s) r[s] = static_cast<std::uint8_t>(striped_symbol(s).nextra);
  return r;
}();

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
    t = striped_run_token(take);
    run_left -= take;
    return true;
  }
};

/// The first j in [i, limit) where a zero run starts (codes[j] and
/// codes[j + 1] both 0, j + 1 < n), else limit.
[[nodiscard]] inline std::size_t striped_next_run(const std::uint32_t* codes, std::size_t i, std::size_t limit,
                                                  std::size_t n) noexcept {
  std::size_t j = i;
#if EBAC_HOST_AVX2
  const __m256i zero = _mm256_setzero_si256();
  for (; j + 8 <= limit && j + 9 <= n; j += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + j));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + j + 1));
    const auto pairs =
        static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_or_si256(a, b), zero))));
    if (pairs != 0) return j + static_cast<std::size_t>(std::countr_zero(pairs));
  }
#endif
  for (; j < limit; ++j)
    if (j + 1 < n && (codes[j] | codes[j + 1]) == 0) return j;
  return limit;
}

/// The first j in [i, n) with codes[j] != 0, else n.
[[nodiscard]] inline std::size_t striped_next_nonzero(const std::uint32_t* codes, std::size_t i, std::size_t n) noexcept {
  std::size_t j = i;
#if EBAC_HOST_AVX2
  const __m256i zero = _mm256_setzero_si256();
  for (; j + 8 <= n; j += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + j));
    const auto zeros = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, zero))));
    if (zeros != 0xffu) return j + static_cast<std::size_t>(std::countr_zero(~zeros & 0xffu));
  }
#endif
  while (j < n && codes[j] == 0) ++j;
  return j;
}

#if EBAC_HOST_AVX2
/// striped_value_tokens on eight codes, with AVX2. A code's bit width from
/// the exponent of its float conversion, exact below 2^24; a larger code is
/// converted shifted right by 8 (the width then gains 8), so no conversion
/// ever rounds.
EBAC_FORCE_INLINE void striped_value_tokens_x8(const std::uint32_t* EBAC_RESTRICT codes, std::uint8_t* EBAC_RESTRICT symbol,
                                               std::uint32_t* EBAC_RESTRICT extra) noexcept {
  namespace A = striped_alphabet;
  const __m256i literals = _mm256_set1_epi32(static_cast<int>(A::literals - 1)), one = _mm256_set1_epi32(1),
                three = _mm256_set1_epi32(3), eight = _mm256_set1_epi32(8), exponent_bias = _mm256_set1_epi32(126),
                low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1,
                                             -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  const __m256i wide = _mm256_cmpgt_epi32(_mm256_srli_epi32(v, 24), _mm256_setzero_si256());  // v >= 2^24
  const __m256i x = _mm256_blendv_epi8(v, _mm256_srli_epi32(v, 8), wide);
  const __m256i width =
      _mm256_add_epi32(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(x)), 23), exponent_bias),
                       _mm256_and_si256(wide, eight));
  // Signed compare against 31 is right for v < 2^31; a larger v is a bucket too.
  const __m256i bucket = _mm256_or_si256(_mm256_cmpgt_epi32(v, literals), _mm256_srai_epi32(v, 31));
  const __m256i shift = _mm256_and_si256(bucket, _mm256_sub_epi32(width, three));
  const __m256i bucket_symbol = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(width, 2), eight),
                                                 _mm256_and_si256(_mm256_srlv_epi32(v, shift), three));
  const __m256i sym = _mm256_blendv_epi8(v, bucket_symbol, bucket);
  const __m256i raw = _mm256_and_si256(v, _mm256_sub_epi32(_mm256_sllv_epi32(one, shift), one));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(extra), raw);
  const __m256i bytes = _mm256_shuffle_epi8(sym, low_bytes);
  const auto lo = static_cast<std::uint32_t>(_mm256_cvtsi256_si32(bytes));
  const auto hi = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1)));
  const std::uint64_t eight_symbols = std::uint64_t{lo} | (std::uint64_t{hi} << 32);
  std::memcpy(symbol, &eight_symbols, 8);
}
#endif

/// The value tokens of m codes, none part of a zero run: striped_value_token
/// without a branch on the code's size (eight codes a step with AVX2).
inline void striped_value_tokens(const std::uint32_t* EBAC_RESTRICT codes, std::size_t m, std::uint8_t* EBAC_RESTRICT symbol,
                                 std::uint32_t* EBAC_RESTRICT extra) noexcept {
  namespace A = striped_alphabet;
  std::size_t k = 0;
#if EBAC_HOST_AVX2
  for (; k + 8 <= m; k += 8) striped_value_tokens_x8(codes + k, symbol + k, extra + k);
#endif
  for (; k < m; ++k) {
    const std::uint32_t v = codes[k];
    const auto b = static_cast<std::uint32_t>(std::bit_width(v));
    const bool bucket = v >= A::literals;
    const std::uint32_t shift = bucket ? b - 3 : 0;
    symbol[k] = static_cast<std::uint8_t>(bucket ? 4 * b + 8 + ((v >> shift) & 3u) : v);
    extra[k] = v & ((1u << shift) - 1u);
  }
}

/// A chunk of n codes as tokens a block at a time: the tokens of
/// striped_cursor, in its order, written to the caller's arrays.
struct striped_token_reader {
  const std::uint32_t* codes;
  std::size_t n;
  std::size_t i = 0;
  std::size_t run_left = 0;  ///< zeros of the current run not yet in a token

  /// Up to `room` (>= 1) tokens into symbol[] and extra[] (the raw bits'
  /// value; how many follow the code: striped_raw_bits); fewer only once
  /// the chunk's last token is out, then 0.
  std::size_t fill(std::uint8_t* symbol, std::uint32_t* extra, std::size_t room) noexcept {
    std::size_t k = 0;
#if !EBAC_HOST_AVX2
    // Without vector compares the scans cost more than the cursor's branch
    // per code (measured: bench_host's encode/striped cases 1.13-1.27x
    // slower): the cursor's tokens, into the arrays.
    striped_cursor cursor{codes, n, i, run_left};
    striped_token t;
    while (k < room && cursor.next(t)) symbol[k] = static_cast<std::uint8_t>(t.symbol), extra[k++] = t.extra;
    i = cursor.i;
    run_left = cursor.run_left;
#else
    while (k < room) {
      if (run_left != 0) {  // as striped_cursor: runs longer than a class holds split
        if (run_left == 1) {
          symbol[k] = 0, extra[k] = 0, run_left = 0;
        } else {
          const std::size_t take = run_left >= (std::size_t{1} << 32) ? (std::size_t{1} << 32) - 1 : run_left;
          const striped_token t = striped_run_token(take);
          symbol[k] = static_cast<std::uint8_t>(t.symbol);
          extra[k] = t.extra;
          run_left -= take;
        }
        ++k;
        continue;
      }
      if (i >= n) break;
      const std::size_t limit = n - i < room - k ? n : i + (room - k);
      const std::size_t j = striped_next_run(codes, i, limit, n);
      striped_value_tokens(codes + i, j - i, symbol + k, extra + k);
      k += j - i;
      i = j;
      if (j + 1 < n && (codes[j] | codes[j + 1]) == 0) {  // a run starts at j (j may be limit)
        const std::size_t end = striped_next_nonzero(codes, j + 2, n);
        run_left = end - j;
        i = end;
      }
    }
#endif
    return k;
  }
};

/// The tokens of a whole chunk of n <= 2^16 codes, all below 2^16 (the form
/// striped_huffman keeps: raw bits in 16 bits), into symbol[] and extra[]
/// (room for n each); returns how many: striped_cursor's tokens.
///
/// With AVX2, 64 codes a window and no branch on what a token is (why: on
/// dense residuals at rel 1e-2, short zero runs between single values, the
/// block reader's branches on where runs start and end were a quarter of a
/// compression, docs/benchmarks.md): the window's zero mask Z gives the
/// tokens' starts (every non-zero, every zero after a non-zero), a zero
/// token's length is the distance to the next non-zero, and each token is
/// chosen between its value token and its run token by a select. A run still
/// open at a window's end is carried into the next.
inline std::size_t striped_tokenize_kept(const std::uint32_t* EBAC_RESTRICT codes, std::size_t n,
                                         std::uint8_t* EBAC_RESTRICT symbol, std::uint16_t* EBAC_RESTRICT extra) noexcept {
  std::size_t k = 0;
#if EBAC_HOST_AVX2
  // The token of a zero run of length L >= 1 (a single zero is the literal 0).
  auto run_token = [&](std::size_t L) EBAC_FORCE_INLINE_LAMBDA {
    const striped_token t = striped_run_token(L);
    symbol[k] = static_cast<std::uint8_t>(t.symbol);
    extra[k] = static_cast<std::uint16_t>(t.extra);
    ++k;
  };
  // A window's value tokens, then 64 zeros that a segment's fixed-size copy may read past them.
  std::uint8_t value_symbol[128] = {};
  std::uint32_t value_extra[64];
  std::uint16_t value_extra16[128] = {};
  std::uint32_t padded[64];
  std::size_t open = 0;  // zeros of a run that reached the previous window's end, not yet a token
  for (std::size_t w = 0; w < n; w += 64) {
    const std::uint32_t* x = codes + w;
    const std::size_t m = n - w < 64 ? n - w : 64;
    if (m < 64) {  // the last window, padded with non-zeros that end any run at the chunk's end
      std::memcpy(padded, x, m * sizeof(std::uint32_t));
      for (std::size_t i = m; i < 64; ++i) padded[i] = 1;
      x = padded;
    }
    std::uint64_t zero = 0;
    const __m256i z8 = _mm256_setzero_si256();
    for (unsigned b = 0; b < 8; ++b) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * b));
      zero |= std::uint64_t{static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, z8))))}
              << (8 * b);
    }
    const std::uint64_t nonzero = ~zero;
    if (nonzero == 0) {  // all zero: the run goes on
      open += 64;
      continue;
    }
    if (open != 0) {  // the open run ends at the window's first non-zero
      run_token(open + static_cast<std::size_t>(std::countr_zero(nonzero)));
      open = 0;
    } else if (m == 64 && (zero & ((zero >> 1) | (std::uint64_t{1} << 63))) == 0) {
      // No two zeros side by side and none last: every code is its own value token (a single
      // zero is the literal 0), the window's value tokens as they are.
      for (unsigned b = 0; b < 64; b += 8) striped_value_tokens_x8(x + b, symbol + k + b, value_extra + b);
      for (unsigned i = 0; i < 64; ++i) extra[k + i] = static_cast<std::uint16_t>(value_extra[i]);
      k += 64;
      continue;
    }
    for (unsigned b = 0; b < 64; b += 8) striped_value_tokens_x8(x + b, value_symbol + b, value_extra + b);
    // Starts: every non-zero, and every zero whose predecessor in the window is a non-zero (the
    // window's leading zeros belong to the run just closed, or start one when none was open,
    // which the first non-zero above them ends: `lead`).
    const std::uint64_t lead = (zero & 1u) && (w == 0 || codes[w - 1] != 0) ? 1u : 0u;
    std::uint64_t starts = ((nonzero | (zero & ~(zero << 1))) & ~(zero & 1u)) | lead;
    if (m < 64) starts &= (std::uint64_t{1} << m) - 1;
    // A run reaching the window's end stays open (never in the padded last window).
    unsigned end = static_cast<unsigned>(m);  // the window's tokens lie in [first start, end)
    if (zero >> 63) {
      end = 63u - static_cast<unsigned>(std::countl_zero(starts));
      open = 64 - end;
      starts &= ~(std::uint64_t{1} << end);
    }
    std::uint64_t runs = starts & zero & (zero >> 1);  // starts of zero runs of 2 or more
    if (4 * std::popcount(runs) <= std::popcount(starts)) {
      // Mostly values: the values between runs copied as segments, one run token each.
      for (unsigned i = 0; i < 64; ++i) value_extra16[i] = static_cast<std::uint16_t>(value_extra[i]);
      unsigned a = starts != 0 ? static_cast<unsigned>(std::countr_zero(starts)) : end;
      auto values = [&](unsigned b) EBAC_FORCE_INLINE_LAMBDA {  // the value tokens of [a, b)
        if (k + 64 <= n) {
          // 64 tokens copied whatever b - a is (the ones past b are overwritten by the tokens
          // after them, or lie past the chunk's last): a copy of a varying length was a libc
          // call a segment, 8-10% of a compression at rel 1e-2 (docs/benchmarks.md).
          for (unsigned j = 0; j < 64; j += 32)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(symbol + k + j),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(value_symbol + a + j)));
          for (unsigned j = 0; j < 64; j += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(extra + k + j),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(value_extra16 + a + j)));
        } else {
          std::memcpy(symbol + k, value_symbol + a, b - a);
          std::memcpy(extra + k, value_extra16 + a, (b - a) * sizeof(std::uint16_t));
        }
        k += b - a;
      };
      while (runs != 0) {
        const auto p = static_cast<unsigned>(std::countr_zero(runs));
        runs &= runs - 1;
        values(p);
        const auto L = static_cast<unsigned>(std::countr_zero(nonzero >> p));
        run_token(L);
        a = p + L;
      }
      values(end);
      continue;
    }
    while (starts != 0) {
      const auto p = static_cast<unsigned>(std::countr_zero(starts));
      starts &= starts - 1;
      const std::uint64_t ahead = nonzero >> p;  // bit 0: p is a non-zero; else zeros up to the next one
      const auto L = static_cast<std::uint32_t>(std::countr_zero(ahead));
      const striped_token run = striped_run_token(L);  // L 0 or 1 where p is a non-zero: not taken
      const bool value = (ahead & 1u) != 0;
      symbol[k] = static_cast<std::uint8_t>(value ? value_symbol[p] : run.symbol);
      extra[k] = static_cast<std::uint16_t>(value ? value_extra[p] : run.extra);
      ++k;
    }
  }
  if (open != 0) run_token(open);
#else
  std::uint32_t wide[512];
  striped_token_reader reader{codes, n};
  for (std::size_t got; (got = reader.fill(symbol + k, wide, 512)) > 0; k += got)
    for (std::size_t i = 0; i < got; ++i) extra[k + i] = static_cast<std::uint16_t>(wide[i]);
#endif
  return k;
}

/// Calls emit(token) for each token of a chunk of n codes, in order.
template <class Emit>
inline void striped_tokenize(const std::uint32_t* codes, std::size_t n, Emit&& emit) {
  striped_cursor c{codes, n};
  striped_token t;
  while (c.next(t)) emit(t);
}

EBAC_NAMESPACE_END
