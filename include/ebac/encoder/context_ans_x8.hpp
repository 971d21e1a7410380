// ebac/encoder/context_ans_x8.hpp - eight context-ANS chunks decoded side by
// side with AVX2, one chunk on each 32-bit lane.
//
// Why: the decoder of one chunk is a serial chain (each element's context
// needs the code decoded just before it) of table loads and data-dependent
// branches; on the host it ran at 400-700 MB/s while the issue asks for
// 1 GB/s. Chunks are independent streams, so eight of them can take each
// step together: the same instructions, one per lane, and the chain's
// latency is paid once for eight elements. The codes are written
// interleaved (element i of lane l at out[8 i + l]) so that the left, upper
// and diagonal neighbours a context needs are plain vector loads, as the
// CUDA backend's warp layout does for its lanes.
//
// The same streams as context_ans::decode_chunk, and the same verdicts: a
// lane's chunk is corrupt exactly when decode_chunk would refuse it (bad
// byte count or initial state, a context the tensor never had, states not
// back at their initial value, rANS bytes or raw bits not used up exactly,
// non-zero trailing bits). Tested against decode_chunk on valid and damaged
// streams (tests/isa/test_context_ans_x8.cpp).
//
// Compiled where EBAC_HOST_AVX2 is 1 (ebac/detail/host_avx2.hpp: AVX2 on,
// GCC or Clang, host code only); elsewhere the host codec decodes one chunk
// at a time.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/host_avx2.hpp>
#include <ebac/encoder/context_ans.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>

#if EBAC_HOST_AVX2
EBAC_NAMESPACE_BEGIN
namespace detail {

/// Chunks decode_context_ans_x8 takes at a time.
inline constexpr int context_ans_x8_lanes = 8;

/// Decodes 8 chunks of n codes each: chunk l is len[l] bytes at base +
/// off[l]. Codes go to out (8 n of them, 32-byte aligned): element i of
/// chunk l at out[8 i + l]. Returns the lanes whose chunk is corrupt, bit l
/// for chunk l (0: all eight decoded; a corrupt lane's codes are garbage).
///
/// Reads only base[0, limit + 8): every chunk must end at or before `limit`
/// (so that the 8-byte window at a valid chunk's last byte is in range);
/// a damaged chunk whose reads would run further reads clamped addresses,
/// and is refused by the checks at its end. limit + 8 < 2^32. `enc` is
/// bound to a host codebook (context_ans::bind): it reads first_token_fine.
inline unsigned decode_context_ans_x8(const context_ans& enc, const std::byte* base, const std::uint32_t* off, const std::uint32_t* len,
                                      std::size_t n, std::uint32_t limit, std::uint32_t* EBAC_RESTRICT out) {
  using model = context_ans_model;
  static_assert(model::lanes == 4 && model::scale_bits == 14 && model::max_classes == 8 && model::tokens < 256);
  constexpr int L = context_ans_x8_lanes;
  unsigned bad = 0;
  alignas(32) std::uint32_t x[4][L], p[L], pend[L], bitpos[L];
  for (int l = 0; l < L; ++l) {
    // decode_chunk's checks of the chunk's byte count and initial states.
    const std::uint32_t rans_bytes = len[l] >= 4 ? load_le<std::uint32_t>(base + off[l]) : 0;
    bool ok = len[l] >= 4 && rans_bytes >= 4 * model::lanes && rans_bytes <= len[l] - 4;
    for (int s = 0; s < 4; ++s) {
      x[s][l] = ok ? load_le<std::uint32_t>(base + off[l] + 4 + 4 * s) : model::state_low;
      ok = ok && x[s][l] >= model::state_low && x[s][l] < (model::state_low << 8);
    }
    if (!ok) bad |= 1u << l;
    p[l] = off[l] + (ok ? 4 + 4 * model::lanes : 0);
    pend[l] = off[l] + (ok ? 4 + rans_bytes : 0);
    bitpos[l] = pend[l] * 8;
  }
  __m256i X0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[0]));
  __m256i X1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[1]));
  __m256i X2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[2]));
  __m256i X3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[3]));
  __m256i P = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  __m256i B = _mm256_load_si256(reinterpret_cast<const __m256i*>(bitpos));
  // Lanes refused so far, all ones: they take no further table steps (their
  // context may be one with no table) and read token 0.
  __m256i refused = _mm256_setr_epi32(bad & 1 ? -1 : 0, bad & 2 ? -1 : 0, bad & 4 ? -1 : 0, bad & 8 ? -1 : 0, bad & 16 ? -1 : 0,
                                      bad & 32 ? -1 : 0, bad & 64 ? -1 : 0, bad & 128 ? -1 : 0);

  const int* const first_words = reinterpret_cast<const int*>(enc.first_token_fine);  // contexts * 1024 bytes, a multiple of 4
  const int* const cum = reinterpret_cast<const int*>(enc.cumulative);
  const int* const bytes = reinterpret_cast<const int*>(base);
  const long long* const words = reinterpret_cast<const long long*>(base);
  const std::uint32_t row = enc.row;
  const bool diagonal = enc.diagonal;
  const int class_shift = std::countr_zero(enc.classes);  // classes is 8, 4, 2 or 1
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  // magnitude_class(v, classes) = min(bit_width(v), classes - 1) = bit_width(min(v, 2^(classes-1) - 1)),
  // and bit_width(v) of v < 2^24 is the exponent of float(v) + 1 (0 for v = 0).
  const __m256i class_clamp = _mm256_set1_epi32((1 << (enc.classes - 1)) - 1);
  auto magnitude_class = [&](__m256i v) EBAC_FORCE_INLINE_LAMBDA {
    const __m256i f = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_min_epu32(v, class_clamp)));
    return _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(f, 23), _mm256_set1_epi32(126)), zero);
  };
  const __m256i limit_bytes = _mm256_set1_epi32(static_cast<int>(limit));
  const __m256i state_low = _mm256_set1_epi32(static_cast<int>(model::state_low));
  const __m256i last_token = _mm256_set1_epi32(static_cast<int>(model::tokens) - 1);
  const __m256i last_direct = _mm256_set1_epi32(static_cast<int>(model::direct_tokens) - 1);
  const __m256i qword_low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);

  __m256i left = zero;
  auto step = [&](std::size_t i, __m256i& S) EBAC_FORCE_INLINE_LAMBDA {
    // The context (context_ans_model::context), every lane at once.
    const __m256i up = i >= row ? _mm256_load_si256(reinterpret_cast<const __m256i*>(out + L * (i - row))) : zero;
    __m256i c = _mm256_add_epi32(_mm256_slli_epi32(magnitude_class(left), class_shift), magnitude_class(up));
    if (diagonal) {
      __m256i near = zero;
      if (row >= 2 && i > row) {
        const __m256i ul = _mm256_load_si256(reinterpret_cast<const __m256i*>(out + L * (i - row - 1)));
        const __m256i ur = _mm256_load_si256(reinterpret_cast<const __m256i*>(out + L * (i - row + 1)));
        near = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_or_si256(ul, ur), zero), one);
      }
      c = _mm256_add_epi32(_mm256_add_epi32(c, c), near);
    }
    // The token: first_token_fine's entry for the slot's 16 (read as the
    // aligned word holding that byte), then up the cumulative bounds. A
    // context the tensor never had (entry unused_context) refuses the lane.
    // The fine table, not first_token's 64 slots an entry: each further step
    // is two gathers of all eight lanes, taken when any lane needs it.
    const __m256i slot = _mm256_and_si256(S, _mm256_set1_epi32(model::scale - 1));
    const __m256i entry = _mm256_add_epi32(_mm256_slli_epi32(c, 10), _mm256_srli_epi32(slot, 4));
    const __m256i word = _mm256_i32gather_epi32(first_words, _mm256_srli_epi32(entry, 2), 4);
    __m256i t = _mm256_and_si256(_mm256_srlv_epi32(word, _mm256_slli_epi32(_mm256_and_si256(entry, _mm256_set1_epi32(3)), 3)),
                                 _mm256_set1_epi32(0xff));
    refused = _mm256_or_si256(refused, _mm256_cmpgt_epi32(t, last_token));
    t = _mm256_andnot_si256(refused, t);
    // cum[t] and cum[t + 1] in one 32-bit read: below in the low half, above in the high one.
    const __m256i row_base = _mm256_mullo_epi32(c, _mm256_set1_epi32(static_cast<int>(model::tokens) + 1));
    __m256i bounds = _mm256_i32gather_epi32(cum, _mm256_add_epi32(row_base, t), 2);
    __m256i further = _mm256_andnot_si256(refused, _mm256_cmpgt_epi32(slot, _mm256_sub_epi32(_mm256_srli_epi32(bounds, 16), one)));
    while (!_mm256_testz_si256(further, further)) {  // cum[tokens] = 2^14 > slot: t stays below tokens
      t = _mm256_sub_epi32(t, further);
      bounds = _mm256_i32gather_epi32(cum, _mm256_add_epi32(row_base, t), 2);
      further = _mm256_andnot_si256(refused, _mm256_cmpgt_epi32(slot, _mm256_sub_epi32(_mm256_srli_epi32(bounds, 16), one)));
    }
    const __m256i below = _mm256_and_si256(bounds, _mm256_set1_epi32(0xffff));
    const __m256i above = _mm256_srli_epi32(bounds, 16);
    S = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_sub_epi32(above, below), _mm256_srli_epi32(S, model::scale_bits)),
                         _mm256_sub_epi32(slot, below));
    // Renormalise: at most two bytes (a state after a step is at least 2^9).
    for (int r = 0; r < 2; ++r) {
      const __m256i need = _mm256_cmpgt_epi32(state_low, S);
      if (_mm256_testz_si256(need, need)) break;
      const __m256i at = _mm256_min_epu32(P, limit_bytes);
      const __m256i byte = _mm256_and_si256(_mm256_mask_i32gather_epi32(zero, bytes, at, need, 1), _mm256_set1_epi32(0xff));
      S = _mm256_blendv_epi8(S, _mm256_or_si256(_mm256_slli_epi32(S, 8), byte), need);
      P = _mm256_sub_epi32(P, need);
    }
    // The code: the token, or for a token above the direct ones its base
    // and the raw bits that follow (LSB first, from bit B of the lane).
    const __m256i large = _mm256_cmpgt_epi32(t, last_direct);
    __m256i v = t;
    if (!_mm256_testz_si256(large, large)) {
      const __m256i u = _mm256_sub_epi32(t, _mm256_set1_epi32(static_cast<int>(model::direct_tokens)));
      const __m256i k = _mm256_and_si256(_mm256_add_epi32(_mm256_srli_epi32(u, 1), _mm256_set1_epi32(4)), large);
      const __m256i base_code = _mm256_sllv_epi32(_mm256_or_si256(_mm256_set1_epi32(2), _mm256_and_si256(u, one)), k);
      const __m256i at = _mm256_min_epu32(_mm256_srli_epi32(B, 3), limit_bytes);
      const __m256i shift = _mm256_and_si256(B, _mm256_set1_epi32(7));
      // A lane's k raw bits start `shift` (< 8) bits into byte `at`: one
      // 32-bit read a lane holds them when k <= 25 in every large lane (all
      // but the tightest bounds' widest codes), else two 64-bit reads of four
      // lanes each (twice the gathered elements).
      __m256i raw;
      if (_mm256_testz_si256(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(25)), large)) {
        raw = _mm256_srlv_epi32(_mm256_mask_i32gather_epi32(zero, bytes, at, large, 1), shift);
      } else {
        const __m128i at_lo = _mm256_castsi256_si128(at), at_hi = _mm256_extracti128_si256(at, 1);
        const __m256i w0 = _mm256_mask_i32gather_epi64(zero, words, at_lo, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(large)), 1);
        const __m256i w1 = _mm256_mask_i32gather_epi64(zero, words, at_hi, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(large, 1)), 1);
        const __m256i s0 = _mm256_srlv_epi64(w0, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(shift)));
        const __m256i s1 = _mm256_srlv_epi64(w1, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(shift, 1)));
        raw = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(s0, qword_low_halves),
                                 _mm256_permutevar8x32_epi32(s1, qword_low_halves), 0xf0);
      }
      const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one);
      v = _mm256_blendv_epi8(t, _mm256_or_si256(base_code, _mm256_and_si256(raw, mask)), large);
      B = _mm256_add_epi32(B, k);
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + L * i), v);
    left = v;
  };
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    step(i, X0);
    step(i + 1, X1);
    step(i + 2, X2);
    step(i + 3, X3);
  }
  if (i < n) step(i, X0);
  if (i + 1 < n) step(i + 1, X1);
  if (i + 2 < n) step(i + 2, X2);

  // decode_chunk's end checks, lane by lane.
  __m256i back = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi32(X0, state_low), _mm256_cmpeq_epi32(X1, state_low)),
                                  _mm256_and_si256(_mm256_cmpeq_epi32(X2, state_low), _mm256_cmpeq_epi32(X3, state_low)));
  back = _mm256_andnot_si256(refused, back);
  bad |= ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(back))) & 0xffu;
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), P);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bitpos), B);
  for (int l = 0; l < L; ++l) {
    if (bad >> l & 1u) continue;
    const std::uint32_t raw_bytes = off[l] + len[l] - pend[l];
    const std::uint64_t used = bitpos[l] - std::uint64_t{pend[l]} * 8;
    bool ok = p[l] == pend[l] && (used + 7) / 8 == raw_bytes;
    if (ok && used % 8 != 0) ok = (static_cast<unsigned>(base[pend[l] + used / 8]) >> (used % 8)) == 0;
    if (!ok) bad |= 1u << l;
  }
  return bad;
}

/// Copies the codes of decode_context_ans_x8's interleaved output (element
/// i of lane l at lanes[8 i + l], n of them a lane, n a multiple of 8) to
/// to[l][0, n): 8 x 8 blocks transposed in registers, so the buffer is read
/// once (a strided copy per lane read it eight times).
inline void deinterleave_context_ans_x8(const std::uint32_t* EBAC_RESTRICT lanes, std::size_t n, std::uint32_t* const (&to)[8]) noexcept {
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint32_t* b = lanes + 8 * i;
    __m256i r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8 * k));  // element i + k, lanes 0-7
    // Pairs, then quads of 32-bit values within 128-bit halves, then the halves.
    const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]), a1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]), a3 = _mm256_unpackhi_epi32(r[2], r[3]);
    const __m256i a4 = _mm256_unpacklo_epi32(r[4], r[5]), a5 = _mm256_unpackhi_epi32(r[4], r[5]);
    const __m256i a6 = _mm256_unpacklo_epi32(r[6], r[7]), a7 = _mm256_unpackhi_epi32(r[6], r[7]);
    const __m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2);
    const __m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3);
    const __m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6);
    const __m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
    // b0: lane 0 of elements i..i+3 (low half), lane 4 (high half); b4: the same for elements i+4..i+7.
    const __m256i out[8] = {_mm256_permute2x128_si256(b0, b4, 0x20), _mm256_permute2x128_si256(b1, b5, 0x20),
                            _mm256_permute2x128_si256(b2, b6, 0x20), _mm256_permute2x128_si256(b3, b7, 0x20),
                            _mm256_permute2x128_si256(b0, b4, 0x31), _mm256_permute2x128_si256(b1, b5, 0x31),
                            _mm256_permute2x128_si256(b2, b6, 0x31), _mm256_permute2x128_si256(b3, b7, 0x31)};
    for (int l = 0; l < 8; ++l) _mm256_storeu_si256(reinterpret_cast<__m256i*>(to[l] + i), out[l]);
  }
}

}  // namespace detail
EBAC_NAMESPACE_END
#endif  // EBAC_HOST_AVX2
