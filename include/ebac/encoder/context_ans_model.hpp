// ebac/encoder/context_ans_model.hpp - what a context-ANS stream means:
// tokens and raw bits of a code, the context of an element, the rANS
// constants, and one encoding step's precomputed division. The host and
// CUDA coders (context_ans.hpp) and the vector steps of the host
// (context_ans_encode_x8.hpp, context_ans_x8.hpp) share it; the format is
// described in context_ans.hpp and docs/format.md.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_cast.hpp>
#include <ebac/detail/bytes.hpp>  // bit_width
#include <ebac/detail/host_avx2.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

namespace detail {
struct context_ans_model {
  static constexpr std::uint32_t direct_tokens = 32;               // codes below are their own token
  static constexpr std::uint32_t tokens = direct_tokens + 2 * 27;  // two per bit width 6..32
  static constexpr std::uint32_t max_classes = 8;                  // magnitude classes of a neighbour
  static constexpr std::uint32_t max_contexts = max_classes * max_classes * 2;
  static constexpr int scale_bits = 14;  // frequencies sum to 2^14
  static constexpr std::uint32_t scale = 1u << scale_bits;
  static constexpr std::uint32_t state_low = 1u << 23;  // a state lives in [2^23, 2^31)
  static constexpr int lanes = 4;

  EBAC_HOST_DEVICE static std::uint32_t token(std::uint32_t v) noexcept {
    if (v < direct_tokens) return v;
    const int w = bit_width(v);
    return direct_tokens + 2u * static_cast<std::uint32_t>(w - 6) + ((v >> (w - 2)) & 1u);
  }
  /// Raw bits after token t, and the code they complete (token_base(t) | bits).
  EBAC_HOST_DEVICE static int extra_bits(std::uint32_t t) noexcept {
    return t < direct_tokens ? 0 : static_cast<int>((t - direct_tokens) >> 1) + 4;
  }
  /// extra_bits(token(v)), without the token: a code's raw-bit count.
  EBAC_HOST_DEVICE static int raw_bits_of(std::uint32_t v) noexcept { return v < direct_tokens ? 0 : bit_width(v) - 2; }
  EBAC_HOST_DEVICE static std::uint32_t token_base(std::uint32_t t) noexcept {
    if (t < direct_tokens) return t;
    const int k = extra_bits(t);  // w - 2
    return (2u | ((t - direct_tokens) & 1u)) << k;
  }
  /// Contexts of the set of `classes` classes a neighbour, with or without the diagonal bit.
  EBAC_HOST_DEVICE static std::uint32_t contexts(std::uint32_t classes, bool diagonal) noexcept {
    return classes * classes * (diagonal ? 2 : 1);
  }
  EBAC_HOST_DEVICE static std::uint32_t magnitude_class(std::uint32_t v, std::uint32_t classes) noexcept {
    const auto w = static_cast<std::uint32_t>(bit_width(v));
    return w < classes ? w : classes - 1;
  }
  /// The context of element i of a chunk, from codes already coded, in the
  /// set of `classes` classes a neighbour (1, 2, 4 or 8) and the diagonal bit or not.
  EBAC_HOST_DEVICE static std::uint32_t context(const std::uint32_t* codes, std::size_t i, std::uint32_t row,
                                                std::uint32_t classes, bool diagonal) noexcept {
    return context(i > 0 ? codes[i - 1] : 0u, codes, i, row, classes, diagonal);
  }
  /// The same with the left code given (0 for the chunk's first): the
  /// decoder keeps it in a register instead of reading back the code it just
  /// wrote, which on a GPU is a round trip through the cache. `codes` is a
  /// pointer or anything indexed like one (decode_chunk_to's Codes).
  template <class Codes>
  EBAC_HOST_DEVICE static std::uint32_t context(std::uint32_t left_code, const Codes& codes, std::size_t i, std::uint32_t row,
                                                std::uint32_t classes, bool diagonal) noexcept {
    const std::uint32_t left = magnitude_class(left_code, classes);
    const std::uint32_t up = i >= row ? magnitude_class(codes[i - row], classes) : 0;
    const std::uint32_t c = left * classes + up;
    if (!diagonal) return c;
    // Upper-left and upper-right; a row of 1 has neither (up-right would be i).
    const bool near = row >= 2 && i > row && (codes[i - row - 1] | codes[i - row + 1]) != 0;
    return 2 * c + (near ? 1u : 0u);
  }

  /// Whether every code of [b, e) is 0. Why: a chunk's block of zeros is
  /// flagged in its bitmap and takes no rANS step (docs/format.md), and the
  /// statistics do not count it; one pass of ORs finds it.
  EBAC_HOST_DEVICE static bool all_zero(const std::uint32_t* codes, std::size_t b, std::size_t e) noexcept {
    std::uint32_t any = 0;
    std::size_t i = b;
    for (; i + zero_run <= e; i += zero_run) {
      any |= or_run<zero_run>(codes + i);
      if (any != 0) return false;
    }
    for (; i < e; ++i) any |= codes[i];
    return any == 0;
  }

  /// context() of elements [b, e) of a chunk into out[0, e - b). The same
  /// values, computed in a loop the host compiler vectorizes: once an element
  /// has every neighbour (i > row) the branches of context() are gone and a
  /// class comes from a float's exponent instead of a bit scan
  /// (inner_contexts). The encoder and the statistics take a block of
  /// contexts this way before their serial loops; the decoder cannot (a
  /// context needs the code decoded just before it).
  EBAC_HOST_DEVICE static void contexts(const std::uint32_t* codes, std::size_t b, std::size_t e, std::uint32_t row,
                                        std::uint32_t classes, bool diagonal, std::uint8_t* out) noexcept {
    std::size_t i = b;
    for (; i < e && i <= row; ++i) out[i - b] = static_cast<std::uint8_t>(context(codes, i, row, classes, diagonal));
    if (i == e) return;
    auto run = [&](auto classes_constant) {
      constexpr std::uint32_t k = decltype(classes_constant)::value;
      if (diagonal) inner_contexts<k, true>(codes, i, e, row, out + (i - b));
      else inner_contexts<k, false>(codes, i, e, row, out + (i - b));
    };
    switch (classes) {
      case 8: run(std::integral_constant<std::uint32_t, 8>{}); break;
      case 4: run(std::integral_constant<std::uint32_t, 4>{}); break;
      case 2: run(std::integral_constant<std::uint32_t, 2>{}); break;
      default: run(std::integral_constant<std::uint32_t, 1>{}); break;
    }
  }

 private:
  /// contexts() for i in [b, e) with b > row (every neighbour exists) into
  /// out[0, e - b), with the diagonal bit or without.
  template <std::uint32_t Classes, bool Diagonal>
  EBAC_HOST_DEVICE static void inner_contexts(const std::uint32_t* codes, std::size_t b, std::size_t e, std::uint32_t row,
                                              std::uint8_t* out) noexcept {
    // Element b + j's left neighbour is codes[b - 1 + j], its upper ones
    // codes[b - row - 1 + j], codes[b - row + j] and codes[b - row + 1 + j]
    // (b > row, so all of them lie in the chunk). A row of 1 has no diagonal
    // neighbours (context() gives the bit 0; its up-right neighbour would be
    // the element itself): all of the bit is masked off.
    const std::uint32_t diagonal_mask = row >= 2 ? 1u : 0u;
    const std::size_t m = e - b;
    const std::uint32_t* const up = codes + (b - row);
    std::size_t j = 0;
    for (; j + context_run_block <= m; j += context_run_block)
      context_run<Classes, Diagonal, context_run_block>(codes + (b - 1 + j), up + j, up + j - 1, up + j + 1, out + j,
                                                        diagonal_mask);
    context_run<Classes, Diagonal, 0>(codes + (b - 1 + j), up + j, up + j - 1, up + j + 1, out + j, diagonal_mask, m - j);
  }

  /// Codes all_zero ORs at a time (a constant count vectorizes at -O2).
  static constexpr std::size_t zero_run = 64;
  template <std::size_t Count>
  EBAC_HOST_DEVICE static std::uint32_t or_run(const std::uint32_t* EBAC_RESTRICT codes) noexcept {
    std::uint32_t any = 0;
    for (std::size_t j = 0; j < Count; ++j) any |= codes[j];
    return any;
  }

  /// Elements context_run takes at a time: a constant trip count, which GCC
  /// (12) needs at -O2 to vectorize a loop (its "very cheap" cost model
  /// allows no scalar remainder and no run-time overlap check; the pointers
  /// are restrict parameters for the latter). At -O2 the loop of all
  /// elements stayed scalar and took a third of a compression.
  static constexpr std::size_t context_run_block = 32;

  /// The contexts of Count elements (Count 0: of m) from their neighbours.
  template <std::uint32_t Classes, bool Diagonal, std::size_t Count>
  EBAC_HOST_DEVICE static void context_run(const std::uint32_t* EBAC_RESTRICT left, const std::uint32_t* EBAC_RESTRICT up,
                                           const std::uint32_t* EBAC_RESTRICT up_left,
                                           const std::uint32_t* EBAC_RESTRICT up_right, std::uint8_t* EBAC_RESTRICT out,
                                           std::uint32_t diagonal_mask, std::size_t m = Count) noexcept {
    // min(bit_width(v), Classes - 1) from the exponent of the float of v
    // as a signed integer, which vectorizes (a bit scan does not, and a sum
    // of unsigned comparisons costs three instructions a class): exact below
    // 2^24; from 2^24 (rounded, or negative from 2^31: the sign bit lands
    // above the exponent) the width is past every class and clamps to the last.
    auto cls = [](std::uint32_t v) EBAC_FORCE_INLINE_LAMBDA {
      const auto w = static_cast<std::int32_t>(float_bits(static_cast<float>(static_cast<std::int32_t>(v))) >> 23) - 126;
      const std::int32_t k = w < 0 ? 0 : w;
      return static_cast<std::uint32_t>(k < static_cast<std::int32_t>(Classes - 1) ? k : static_cast<std::int32_t>(Classes - 1));
    };
    const std::size_t count = Count != 0 ? Count : m;
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t c = cls(left[j]) * Classes + cls(up[j]);
      if constexpr (!Diagonal) out[j] = static_cast<std::uint8_t>(c);
      else
        out[j] = static_cast<std::uint8_t>(2 * c + (static_cast<std::uint32_t>((up_left[j] | up_right[j]) != 0) & diagonal_mask));
    }
  }
};

/// One (context, token)'s encoding step without a division: x / f as a
/// multiply and shift (exact for x < 2^31), as in ryg_rans's RansEncSymbol.
struct context_ans_step {
  std::uint32_t limit = 0;  // renormalise while x >= limit
  std::uint32_t reciprocal = 0;
  std::uint32_t bias = 0;
  std::uint16_t complement = 0;  // 2^14 - f
  std::uint16_t shift = 0;
};

/// One encoding step of state s with the step of its (context, token): the
/// renormalisation bytes below p (p moves down past them), then s becomes
/// the coded state.
EBAC_HOST_DEVICE void context_ans_encode_step(const context_ans_step& st, std::uint32_t& s, std::byte*& p) noexcept {
  // Renormalise without a data-dependent branch: s < 2^31 and the limit is
  // at least 2^17, so s gives 0, 1 or 2 bytes. Both are written every time;
  // p only moves past the ones that count (the rest is overwritten later,
  // and p never comes within 2 bytes of the space's start).
  const auto take = static_cast<unsigned>(s >= st.limit) + static_cast<unsigned>((s >> 8) >= st.limit);
  p[-1] = static_cast<std::byte>(s & 0xffu);
  p[-2] = static_cast<std::byte>((s >> 8) & 0xffu);
  p -= take;
  s >>= 8 * take;
  const auto q = static_cast<std::uint32_t>((static_cast<std::uint64_t>(s) * st.reciprocal) >> 32) >> st.shift;
  s += st.bias + q * st.complement;
}

/// key[j] = context[j] * tokens + token(codes[j]) for j < m: the row of
/// the steps table of element j, and the statistics' bin. Host code only;
/// eight at a time where EBAC_HOST_AVX2 is 1.
inline void context_ans_keys(const std::uint32_t* EBAC_RESTRICT codes, const std::uint8_t* EBAC_RESTRICT context, std::size_t m,
                             std::uint32_t* EBAC_RESTRICT key) noexcept {
  using model = context_ans_model;
  std::size_t j = 0;
#if EBAC_HOST_AVX2
  // token(v) = v below 32; else 32 + 2 (w - 6) + the bit under v's leading
  // one, w = bit_width(v). Both come from the float of t = v (v < 2^24) or
  // v >> 8, which is exact (t < 2^24) and keeps at least 17 bits of v: its
  // exponent is w - 1 (- 8), its mantissa's top bit the bit under the lead.
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  for (; j + 8 <= m; j += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + j));
    const __m256i small = _mm256_cmpeq_epi32(_mm256_srli_epi32(v, 24), zero);  // v < 2^24
    const __m256i t = _mm256_blendv_epi8(_mm256_srli_epi32(v, 8), v, small);
    const __m256i f = _mm256_castps_si256(_mm256_cvtepi32_ps(t));
    // w = exponent - 126 (+ 8); token = 2 w + 20 + next bit.
    const __m256i w = _mm256_add_epi32(_mm256_sub_epi32(_mm256_srli_epi32(f, 23), _mm256_set1_epi32(126)),
                                       _mm256_andnot_si256(small, _mm256_set1_epi32(8)));
    const __m256i next = _mm256_and_si256(_mm256_srli_epi32(f, 22), one);
    const __m256i coded = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(w, w), _mm256_set1_epi32(20)), next);
    const __m256i direct = _mm256_cmpeq_epi32(_mm256_srli_epi32(v, 5), zero);  // v < 32
    const __m256i token = _mm256_blendv_epi8(coded, v, direct);
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(context + j)));
    const __m256i k = _mm256_add_epi32(_mm256_mullo_epi32(c, _mm256_set1_epi32(static_cast<int>(model::tokens))), token);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(key + j), k);
  }
#endif
  for (; j < m; ++j) key[j] = std::uint32_t{context[j]} * model::tokens + model::token(codes[j]);
}
}  // namespace detail

EBAC_NAMESPACE_END
