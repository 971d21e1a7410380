// ebac/encoder/context_ans_encode_x8.hpp - two or four context-ANS chunks
// encoded side by side with AVX2: the four states of each in four 32-bit
// lanes, a pair of chunks in each vector.
//
// Why: the encoder was about 40% of a compression with context ANS and
// is bound by instructions: per element a token (a bit scan), a table row,
// two compares, two byte stores, a 64-bit multiply and shifts, a multiply
// and adds. A round (elements 4k .. 4k + 3, one on each of a chunk's four
// states) takes those steps together here, for two chunks at once: one
// chunk alone in a vector measured slower than the scalar steps, its one
// chain of vector steps being longer than four scalar chains side by side.
// The round's renormalisation bytes (0, 1 or 2 a state) are put in order
// by one byte shuffle from a table of the 81 cases.
//
// Two pairs take their rounds in turn (encode_context_ans_pairs<2>): each
// pair's rounds are one chain of dependent steps, and the core overlaps
// the two chains. A block of zeros takes no step (the chunk's bitmap flags
// it): where the others code that block, its lanes take the codebook's
// identity step (context_ans::identity_context), and where every chunk
// skips it, no round runs.
//
// The same bytes as context_ans::encode_chunk of each chunk; tests/isa/
// test_context_ans_encode_x8.cpp compares them. The host codec asks
// encode_chunks_side_by_side (encoder/context_ans_side_by_side.hpp) to encode fours, then
// pairs, of full chunks with it where EBAC_HOST_AVX2 is 1
// (ebac/detail/host_avx2.hpp); elsewhere, and for every other encoder,
// that says no and the codec encodes one chunk at a time.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/host_avx2.hpp>
#include <ebac/encoder/context_ans.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#if EBAC_HOST_AVX2
EBAC_NAMESPACE_BEGIN
namespace detail {

/// For each of the 256 patterns of (state >= limit, state >> 8 >= limit)
/// over four lanes (bit l and bit 4 + l; only the 81 with the second
/// implying the first occur): the byte shuffle that puts the round's bytes,
/// lane 0's lowest, into bytes 8 - count .. 7, and count. A lane of two
/// bytes puts bits 8-15 of its state then bits 0-7, of one byte bits 0-7
/// (the scalar steps' order, read backwards by the decoder).
struct context_ans_round_bytes {
  std::array<std::array<std::uint8_t, 16>, 256> shuffle{};
  std::array<std::uint8_t, 256> count{};
};
constexpr context_ans_round_bytes make_context_ans_round_bytes() {
  context_ans_round_bytes r;
  for (unsigned pattern = 0; pattern < 256; ++pattern) {
    std::array<std::uint8_t, 8> seq{};
    unsigned k = 0;
    for (unsigned l = 0; l < 4; ++l) {
      const unsigned take = ((pattern >> l) & 1u) + ((pattern >> (4 + l)) & 1u);
      if (take == 2) seq[k++] = static_cast<std::uint8_t>(4 * l + 1);
      if (take >= 1) seq[k++] = static_cast<std::uint8_t>(4 * l);
    }
    for (auto& b : r.shuffle[pattern]) b = 0x80;  // zero (below the bytes; overwritten later)
    for (unsigned i = 0; i < k; ++i) r.shuffle[pattern][8 - k + i] = seq[i];
    r.count[pattern] = static_cast<std::uint8_t>(k);
  }
  return r;
}
inline constexpr context_ans_round_bytes context_ans_round_bytes_table = make_context_ans_round_bytes();

/// Codes `rounds` rounds of four elements of 2 Pairs chunks, the last
/// round first: round r of chunk h is the elements with keys key[h][4 r ..
/// 4 r + 3], element 4 r + l on state x[4 h + l]. Chunk h's
/// renormalisation bytes go below p[h], which moves down past them; the 8
/// bytes below p[h] are written each round (as the scalar steps write 2:
/// the rANS space leaves room, and the final states overwrite the last
/// round's). A pair's round is one chain of dependent steps (the state's
/// compare, shift, multiplies, adds); two pairs are two chains, which the
/// core overlaps.
template <int Pairs>
inline void context_ans_encode_rounds(const context_ans_step* steps, const std::uint32_t* const (&key)[2 * Pairs],
                                      std::size_t rounds, std::uint32_t (&x)[8 * Pairs], std::byte* (&p)[2 * Pairs]) noexcept {
  static_assert(Pairs == 1 || Pairs == 2);
  static_assert(sizeof(context_ans_step) == 16 && offsetof(context_ans_step, reciprocal) == 4 &&
                    offsetof(context_ans_step, bias) == 8 && offsetof(context_ans_step, complement) == 12 &&
                    offsetof(context_ans_step, shift) == 14,
                "a row is read as four 32-bit lanes: limit, reciprocal, bias, complement | shift << 16");
  const auto& table = context_ans_round_bytes_table;
  auto row = [&](std::uint32_t ka,
                 std::uint32_t kb) EBAC_FORCE_INLINE_LAMBDA {  // the pair's first chunk's row low, its second's high
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(steps + ka))),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(steps + kb)), 1);
  };
  const __m256i low16 = _mm256_set1_epi32(0xffff), eight = _mm256_set1_epi32(8);
  std::byte* q[2 * Pairs];  // p's pointers in locals (registers: stores of bytes could alias p)
  for (int h = 0; h < 2 * Pairs; ++h) q[h] = p[h];
  // Round r of pair k (chunks 2k, 2k + 1) on its states s.
  auto round = [&](std::size_t r, int k, __m256i& s) EBAC_FORCE_INLINE_LAMBDA {
    const std::uint32_t* ka = key[2 * k] + 4 * r;
    const std::uint32_t* kb = key[2 * k + 1] + 4 * r;
    const __m256i r0 = row(ka[0], kb[0]), r1 = row(ka[1], kb[1]), r2 = row(ka[2], kb[2]), r3 = row(ka[3], kb[3]);
    // A 4x4 transpose in each half (the unpacks work within 128-bit halves).
    const __m256i a = _mm256_unpacklo_epi32(r0, r1), b = _mm256_unpacklo_epi32(r2, r3);  // limit, reciprocal
    const __m256i c = _mm256_unpackhi_epi32(r0, r1), d = _mm256_unpackhi_epi32(r2, r3);  // bias, complement | shift
    const __m256i limit = _mm256_unpacklo_epi64(a, b), reciprocal = _mm256_unpackhi_epi64(a, b);
    const __m256i bias = _mm256_unpacklo_epi64(c, d), packed = _mm256_unpackhi_epi64(c, d);
    // Renormalise: s >= limit puts a byte, s >> 8 >= limit a second (unsigned compares).
    const __m256i s8 = _mm256_srli_epi32(s, 8);
    const __m256i one = _mm256_cmpeq_epi32(_mm256_max_epu32(s, limit), s);
    const __m256i two = _mm256_cmpeq_epi32(_mm256_max_epu32(s8, limit), s8);
    const auto m1 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(one)));
    const auto m2 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(two)));
    const unsigned pa = (m1 & 15u) | ((m2 & 15u) << 4), pb = (m1 >> 4) | ((m2 >> 4) << 4);
    const __m256i order = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table.shuffle[pa].data()))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(table.shuffle[pb].data())), 1);
    const __m256i bytes = _mm256_shuffle_epi8(s, order);  // within each half: each chunk's own bytes
    std::byte*& q0 = q[2 * k];
    std::byte*& q1 = q[2 * k + 1];
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q0 - 8), _mm256_castsi256_si128(bytes));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q1 - 8), _mm256_extracti128_si256(bytes, 1));
    q0 -= table.count[pa];
    q1 -= table.count[pb];
    s = _mm256_srlv_epi32(s, _mm256_add_epi32(_mm256_and_si256(one, eight), _mm256_and_si256(two, eight)));
    // s += bias + (mulhi(s, reciprocal) >> shift) * complement.
    const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(s, reciprocal), 32);
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(s, 32), _mm256_srli_epi64(reciprocal, 32));
    const __m256i quotient = _mm256_srlv_epi32(_mm256_blend_epi32(even, odd, 0b10101010), _mm256_srli_epi32(packed, 16));
    s = _mm256_add_epi32(s, _mm256_add_epi32(bias, _mm256_mullo_epi32(quotient, _mm256_and_si256(packed, low16))));
  };
  __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  __m256i s1 = Pairs == 2 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 8 * (Pairs - 1))) : s0;
  for (std::size_t r = rounds; r-- > 0;) {
    round(r, 0, s0);
    if constexpr (Pairs == 2) round(r, 1, s1);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(x), s0);
  if constexpr (Pairs == 2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(x + 8), s1);
  for (int h = 0; h < 2 * Pairs; ++h) p[h] = q[h];
}

/// context_ans::encode_chunk of 2 Pairs chunks of n codes each, codes[h]
/// into out[h] (each of enc.max_chunk_bytes(n)): the same bytes. Returns
/// the chunks' sizes.
template <int Pairs>
inline std::array<std::size_t, 2 * Pairs> encode_context_ans_pairs(const context_ans& enc,
                                                                   const std::uint32_t* const (&codes)[2 * Pairs], std::size_t n,
                                                                   std::byte* const (&out)[2 * Pairs]) noexcept {
  using model = context_ans_model;
  constexpr int H = 2 * Pairs;  // chunks
  constexpr std::size_t block = context_ans::context_block;
  static_assert(model::lanes == 4 && block % 4 == 0);
  std::size_t raw_bytes[H];
  std::byte* p[H];
  std::byte* bitmap[H];
  for (int h = 0; h < H; ++h) {
    raw_bytes[h] = context_ans::put_raw_bits(codes[h], n, out[h]);
    p[h] = context_ans::rans_end(out[h], n);
    bitmap[h] = context_ans::clear_bitmap(out[h], n);
  }
  const std::uint32_t identity_key = enc.identity_context() * model::tokens;
  alignas(32) std::uint32_t x[4 * H];
  for (auto& s : x) s = model::state_low;
  std::uint8_t context[block];
  alignas(32) std::uint32_t keys[H][block];
  std::uint32_t* key[H];
  for (int h = 0; h < H; ++h) key[h] = keys[h];
  for (std::size_t e = n, b = 0; e > 0; e = b) {
    b = (e - 1) / block * block;
    bool skip[H];
    bool all = true;
    for (int h = 0; h < H; ++h) {
      skip[h] = enc.zero_blocks && model::all_zero(codes[h], b, e);
      all = all && skip[h];
      if (skip[h]) {
        context_ans::flag_block(bitmap[h], b);
        continue;
      }
      model::contexts(codes[h], b, e, enc.row, enc.classes, enc.diagonal, context);
      context_ans_keys(codes[h] + b, context, e - b, key[h]);
    }
    if (all) continue;
    for (int h = 0; h < H; ++h)
      if (skip[h]) std::fill_n(key[h], e - b, identity_key);
    // Only the chunk's last block can end inside a round of four: those
    // elements one at a time, the last first, as encode_chunk does.
    const std::size_t i = e - e % 4;
    for (std::size_t j = e; j-- > i;)
      for (int h = 0; h < H; ++h)
        if (!skip[h]) context_ans_encode_step(enc.steps[key[h][j - b]], x[4 * h + j % 4], p[h]);
    const std::uint32_t* rounds_key[H];
    for (int h = 0; h < H; ++h) rounds_key[h] = key[h];
    context_ans_encode_rounds<Pairs>(enc.steps, rounds_key, (i - b) / 4, x, p);
  }
  std::array<std::size_t, H> bytes{};
  for (int h = 0; h < H; ++h) {
    const std::uint32_t xs[model::lanes] = {x[4 * h], x[4 * h + 1], x[4 * h + 2], x[4 * h + 3]};
    bytes[static_cast<std::size_t>(h)] = context_ans::finish_chunk(out[h], n, p[h], xs, raw_bytes[h]);
  }
  return bytes;
}

/// encode_context_ans_pairs of one pair: two chunks.
inline std::array<std::size_t, 2> encode_context_ans_x8(const context_ans& enc, const std::uint32_t* const (&codes)[2],
                                                        std::size_t n, std::byte* const (&out)[2]) noexcept {
  return encode_context_ans_pairs<1>(enc, codes, n, out);
}

}  // namespace detail
EBAC_NAMESPACE_END
#endif  // EBAC_HOST_AVX2
