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
// CUDA backend's warp layout does for its lanes. Two such groups take
// their steps in turn (decode_context_ans_groups<2>): a group's steps are
// still one chain, and the core overlaps two. A block of zeros (flagged in
// its chunk's bitmap) takes no step: where every lane skips it, its zeros
// are written at once; otherwise a skipping lane takes the codebook's
// identity context, whose step leaves its state as it is and decodes 0.
//
// The same streams as context_ans::decode_chunk, and the same verdicts: a
// lane's chunk is corrupt exactly when decode_chunk would refuse it (bad
// byte count, bitmap or initial state, a context the tensor never had, states not
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

/// Chunks decode_context_ans_x8 takes at a time (a group).
inline constexpr int context_ans_x8_lanes = 8;
/// Groups the host codec decodes together (decode_context_ans_groups): two
/// measured 1.14-1.25x one at rel 1e-3 and 1e-4 (docs/benchmarks.md); four
/// were slower than two (their state no longer fits the 16 registers).
inline constexpr int context_ans_x8_groups = 2;

/// One group's vector state: its chunks' four states, rANS read positions,
/// raw-bit positions, refused lanes (all ones: they take no further table
/// steps, their context may be one with no table, and read token 0) and
/// the codes just decoded (the next element's left neighbours).
/// `skip`: the identity context in the lanes that skip the current
/// block, 0 in the others (a context is at most identity_context - 1, so
/// the larger of the two is the lane's). `bitmap`: where a lane's bitmap
/// is, 0 for a lane without one.
struct context_ans_x8_group {
  __m256i X0, X1, X2, X3, P, B, refused, left, skip;
  std::uint32_t* out;
  unsigned renorm_seen;  // whether each of its last steps needed a byte, the last in bit 0
  alignas(32) std::uint32_t pend[context_ans_x8_lanes];
  std::uint32_t bitmap[context_ans_x8_lanes];
};

/// Starts group g on the eight chunks at base + off[l], len[l] bytes each,
/// its codes to `out`: decode_chunk's checks of each chunk's byte count,
/// bitmap and initial states, then the group's vectors. Returns the lanes
/// refused, bit l for chunk l.
inline unsigned start_context_ans_x8_group(const context_ans& enc, const std::byte* base, const std::uint32_t* off,
                                           const std::uint32_t* len, std::size_t n, std::uint32_t* out, context_ans_x8_group& g) {
  using model = context_ans_model;
  constexpr int L = context_ans_x8_lanes;
  alignas(32) std::uint32_t x[4][L], p[L], bitpos[L];
  unsigned bad = 0;
  for (int l = 0; l < L; ++l) {
    context_ans::chunk_head hd;
    const bool ok = enc.read_head(base + off[l], len[l], n, hd);
    const auto head = static_cast<std::uint32_t>(hd.bitmap_length);
    const std::uint32_t rans_bytes = hd.rans_bytes;
    const std::uint32_t at = off[l] + 4 + head;  // the states
    for (int s = 0; s < 4; ++s) x[s][l] = ok ? hd.states[s] : model::state_low;
    if (!ok) bad |= 1u << l;
    p[l] = ok ? at + 4 * model::lanes : off[l];
    g.pend[l] = ok ? at + rans_bytes : off[l];
    g.bitmap[l] = ok && head > 0 ? off[l] + 4 : 0;
    bitpos[l] = g.pend[l] * 8;
  }
  g.X0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[0]));
  g.X1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[1]));
  g.X2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[2]));
  g.X3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[3]));
  g.P = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  g.B = _mm256_load_si256(reinterpret_cast<const __m256i*>(bitpos));
  const unsigned b = bad;
  g.refused = _mm256_setr_epi32(b & 1 ? -1 : 0, b & 2 ? -1 : 0, b & 4 ? -1 : 0, b & 8 ? -1 : 0, b & 16 ? -1 : 0, b & 32 ? -1 : 0,
                                b & 64 ? -1 : 0, b & 128 ? -1 : 0);
  g.left = _mm256_setzero_si256();
  g.skip = _mm256_setzero_si256();
  g.out = out;
  g.renorm_seen = 0;
  return bad;
}

/// Marks group g's lanes that skip the block starting at element b (flagged
/// in their chunk's bitmap): their `skip` becomes `identity`, the others' 0.
/// `all` stays true only if every lane skips; `any` becomes true if one does.
inline void mark_context_ans_x8_skips(const std::byte* base, std::size_t b, const __m256i& identity, context_ans_x8_group& g,
                                      bool& all, bool& any) {
  constexpr int L = context_ans_x8_lanes;
  alignas(32) std::uint32_t skips[L];
  for (int l = 0; l < L; ++l) {
    skips[l] = g.bitmap[l] != 0 && context_ans::block_flagged(base + g.bitmap[l], b) ? ~0u : 0u;
    all = all && skips[l] != 0;
    any = any || skips[l] != 0;
  }
  g.skip = _mm256_and_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(skips)), identity);
}

/// decode_chunk's end checks on group g's lanes (the chunks at base +
/// off[l], len[l] bytes): states back at their initial value, rANS bytes and
/// raw bits used up exactly, zero trailing bits. Returns `bad` with the lanes
/// that fail them added.
inline unsigned finish_context_ans_x8_group(const context_ans_x8_group& g, const std::byte* base, const std::uint32_t* off,
                                            const std::uint32_t* len, unsigned bad) {
  constexpr int L = context_ans_x8_lanes;
  const __m256i state_low = _mm256_set1_epi32(static_cast<int>(context_ans_model::state_low));
  __m256i back = _mm256_and_si256(_mm256_and_si256(_mm256_cmpeq_epi32(g.X0, state_low), _mm256_cmpeq_epi32(g.X1, state_low)),
                                  _mm256_and_si256(_mm256_cmpeq_epi32(g.X2, state_low), _mm256_cmpeq_epi32(g.X3, state_low)));
  back = _mm256_andnot_si256(g.refused, back);
  bad |= ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(back))) & 0xffu;
  alignas(32) std::uint32_t p[L], bitpos[L];
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), g.P);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bitpos), g.B);
  for (int l = 0; l < L; ++l) {
    if (bad >> l & 1u) continue;
    const std::uint32_t raw_bytes = off[l] + len[l] - g.pend[l];
    const std::uint64_t used = bitpos[l] - std::uint64_t{g.pend[l]} * 8;
    bool ok = p[l] == g.pend[l] && (used + 7) / 8 == raw_bytes;
    if (ok && used % 8 != 0) ok = (static_cast<unsigned>(base[g.pend[l] + used / 8]) >> (used % 8)) == 0;
    if (!ok) bad |= 1u << l;
  }
  return bad;
}

/// The raw bits of a step's large lanes: k of them from bit B of each lane,
/// LSB first (byte B / 8, clamped to `limit_bytes`, and bit B % 8 in it),
/// not yet masked to k bits. Inlined into the decoder's step, its hot loop.
EBAC_FORCE_INLINE_LAMBDA inline __m256i context_ans_x8_raw_bits(const __m256i& B, const __m256i& k, const __m256i& large,
                                                                const __m256i& limit_bytes, const int* bytes,
                                                                const long long* words) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i qword_low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i at = _mm256_min_epu32(_mm256_srli_epi32(B, 3), limit_bytes);
  const __m256i shift = _mm256_and_si256(B, _mm256_set1_epi32(7));
  // A lane's k raw bits start `shift` (< 8) bits into byte `at`: one
  // 32-bit read a lane holds them when k <= 25 in every large lane (all
  // but the tightest bounds' widest codes), else two 64-bit reads of four
  // lanes each (twice the gathered elements).
  if (_mm256_testz_si256(_mm256_cmpgt_epi32(k, _mm256_set1_epi32(25)), large))
    return _mm256_srlv_epi32(_mm256_mask_i32gather_epi32(zero, bytes, at, large, 1), shift);
  const __m128i at_lo = _mm256_castsi256_si128(at), at_hi = _mm256_extracti128_si256(at, 1);
  const __m256i w0 = _mm256_mask_i32gather_epi64(zero, words, at_lo, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(large)), 1);
  const __m256i w1 =
      _mm256_mask_i32gather_epi64(zero, words, at_hi, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(large, 1)), 1);
  const __m256i s0 = _mm256_srlv_epi64(w0, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(shift)));
  const __m256i s1 = _mm256_srlv_epi64(w1, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(shift, 1)));
  return _mm256_blend_epi32(_mm256_permutevar8x32_epi32(s0, qword_low_halves), _mm256_permutevar8x32_epi32(s1, qword_low_halves),
                            0xf0);
}

/// Decodes Groups x 8 chunks of n codes each, the groups' steps taken in
/// turn: chunk l of group h is len[8 h + l] bytes at base + off[8 h + l];
/// its codes go to out[h] (8 n of them, 32-byte aligned), element i at
/// out[h][8 i + l]. bad[h] gets group h's corrupt lanes, bit l for chunk l
/// (0: all eight decoded; a corrupt lane's codes are garbage).
///
/// Why groups: a step is one chain of dependent gathers (the context needs
/// the code just decoded; the first-token entry needs the context; the
/// cumulative bounds need the token), and eight lanes are one chain. A
/// second group's chain is independent of the first, so the core overlaps
/// their latencies (Groups 2: sixteen chunks in flight).
///
/// Reads only base[0, limit + 8): every chunk must end at or before `limit`
/// (so that the 8-byte window at a valid chunk's last byte is in range);
/// a damaged chunk whose reads would run further reads clamped addresses,
/// and is refused by the checks at its end. limit + 8 < 2^32. `enc` is
/// bound to a host codebook (context_ans::bind): it reads first_token_fine.
template <int Groups>
inline void decode_context_ans_groups(const context_ans& enc, const std::byte* base, const std::uint32_t* off,
                                      const std::uint32_t* len, std::size_t n, std::uint32_t limit, std::uint32_t* const* out,
                                      unsigned* bad) {
  using model = context_ans_model;
  static_assert(model::lanes == 4 && model::scale_bits == 14 && model::max_classes == 8 && model::tokens < 256);
  static_assert(Groups == 1 || Groups == 2);
  constexpr int L = context_ans_x8_lanes;
  using lane_group = context_ans_x8_group;
  lane_group gr[Groups];
  for (int h = 0; h < Groups; ++h) bad[h] = start_context_ans_x8_group(enc, base, off + L * h, len + L * h, n, out[h], gr[h]);

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

  // A step reads a byte of renormalisation where some lane needs one.
  // Where that need varies at random from step to step, the branch around
  // the read costs more in mispredictions than the gather it skips (a
  // masked gather costs about what a full one does); where it comes in
  // runs, the branch is predicted and cheap. So a block reads the first
  // byte without a branch when in more than a quarter of the previous
  // block's steps the need differed from the same group's step four before
  // (the same state, the same branch in the loops below). A ReLU map at rel
  // 1e-1 needs a byte in 31% of its steps and changes in 45%: the CNN maps
  // decode 1.1-1.3x as fast at rel 1e-1 and 1e-2 without the branch. An
  // attention map's need changes in at most 17% of a block's steps at rel
  // 1e-2, where the branch stays (docs/benchmarks.md).
  std::size_t renorm_changes = 0;  // in the current block

  // Element i of group g's chunks, on their states S. Constants where the
  // loops below inline it: `skipping`, some lane of the block skips it (the
  // blocks no lane skips take no instruction for it); `renorm_always`, the
  // first byte of renormalisation read without a branch.
  auto step = [&](lane_group& g, std::size_t i, __m256i& S, const bool skipping,
                  const bool renorm_always) EBAC_FORCE_INLINE_LAMBDA {
    std::uint32_t* const o = g.out;
    // The context (context_ans_model::context), every lane at once.
    const __m256i up = i >= row ? _mm256_load_si256(reinterpret_cast<const __m256i*>(o + L * (i - row))) : zero;
    __m256i c = _mm256_add_epi32(_mm256_slli_epi32(magnitude_class(g.left), class_shift), magnitude_class(up));
    if (diagonal) {
      __m256i near = zero;
      if (row >= 2 && i > row) {
        const __m256i ul = _mm256_load_si256(reinterpret_cast<const __m256i*>(o + L * (i - row - 1)));
        const __m256i ur = _mm256_load_si256(reinterpret_cast<const __m256i*>(o + L * (i - row + 1)));
        near = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_or_si256(ul, ur), zero), one);
      }
      c = _mm256_add_epi32(_mm256_add_epi32(c, c), near);
    }
    if (skipping) c = _mm256_max_epi32(c, g.skip);
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
    g.refused = _mm256_or_si256(g.refused, _mm256_cmpgt_epi32(t, last_token));
    t = _mm256_andnot_si256(g.refused, t);
    // cum[t] and cum[t + 1] in one 32-bit read: below in the low half, above in the high one.
    const __m256i row_base = _mm256_mullo_epi32(c, _mm256_set1_epi32(static_cast<int>(model::tokens) + 1));
    __m256i bounds = _mm256_i32gather_epi32(cum, _mm256_add_epi32(row_base, t), 2);
    __m256i further =
        _mm256_andnot_si256(g.refused, _mm256_cmpgt_epi32(slot, _mm256_sub_epi32(_mm256_srli_epi32(bounds, 16), one)));
    while (!_mm256_testz_si256(further, further)) {  // cum[tokens] = 2^14 > slot: t stays below tokens
      t = _mm256_sub_epi32(t, further);
      bounds = _mm256_i32gather_epi32(cum, _mm256_add_epi32(row_base, t), 2);
      further = _mm256_andnot_si256(g.refused, _mm256_cmpgt_epi32(slot, _mm256_sub_epi32(_mm256_srli_epi32(bounds, 16), one)));
    }
    const __m256i below = _mm256_and_si256(bounds, _mm256_set1_epi32(0xffff));
    const __m256i above = _mm256_srli_epi32(bounds, 16);
    S = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_sub_epi32(above, below), _mm256_srli_epi32(S, model::scale_bits)),
                         _mm256_sub_epi32(slot, below));
    // Renormalise: at most two bytes (a state after a step is at least 2^9;
    // the second is rare).
    for (int r = 0; r < 2; ++r) {
      const __m256i need = _mm256_cmpgt_epi32(state_low, S);
      const bool some = !_mm256_testz_si256(need, need);
      if (r == 0) {
        g.renorm_seen = g.renorm_seen << 1 | static_cast<unsigned>(some);
        renorm_changes += (g.renorm_seen ^ g.renorm_seen >> 4) & 1u;
      }
      if (!some && (r == 1 || !renorm_always)) break;
      const __m256i at = _mm256_min_epu32(g.P, limit_bytes);
      const __m256i byte = _mm256_and_si256(_mm256_mask_i32gather_epi32(zero, bytes, at, need, 1), _mm256_set1_epi32(0xff));
      S = _mm256_blendv_epi8(S, _mm256_or_si256(_mm256_slli_epi32(S, 8), byte), need);
      g.P = _mm256_sub_epi32(g.P, need);
    }
    // The code: the token, or for a token above the direct ones its base
    // and the raw bits that follow (LSB first, from bit B of the lane).
    const __m256i large = _mm256_cmpgt_epi32(t, last_direct);
    __m256i v = t;
    if (!_mm256_testz_si256(large, large)) {
      const __m256i u = _mm256_sub_epi32(t, _mm256_set1_epi32(static_cast<int>(model::direct_tokens)));
      const __m256i k = _mm256_and_si256(_mm256_add_epi32(_mm256_srli_epi32(u, 1), _mm256_set1_epi32(4)), large);
      const __m256i base_code = _mm256_sllv_epi32(_mm256_or_si256(_mm256_set1_epi32(2), _mm256_and_si256(u, one)), k);
      const __m256i raw = context_ans_x8_raw_bits(g.B, k, large, limit_bytes, bytes, words);
      const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one);
      v = _mm256_blendv_epi8(t, _mm256_or_si256(base_code, _mm256_and_si256(raw, mask)), large);
      g.B = _mm256_add_epi32(g.B, k);
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(o + L * i), v);
    g.left = v;
  };
  // Element i on state i % 4 of every group; the groups take turns.
  auto each = [&](auto&& f) EBAC_FORCE_INLINE_LAMBDA {
    f(gr[0]);
    if constexpr (Groups == 2) f(gr[1]);
  };
  static_assert(context_ans::zero_block % 4 == 0);
  const __m256i identity = _mm256_set1_epi32(static_cast<int>(enc.identity_context()));
  bool renorm_always = false;  // from the previous block
  for (std::size_t b = 0; b < n; b += context_ans::zero_block) {
    const std::size_t e = n - b < context_ans::zero_block ? n : b + context_ans::zero_block;
    // The lanes that skip the block; where all do, its zeros at once.
    bool all = true, any = false;
    for (int h = 0; h < Groups; ++h) mark_context_ans_x8_skips(base, b, identity, gr[h], all, any);
    if (all) {
      for (int h = 0; h < Groups; ++h) {
        std::fill(gr[h].out + L * b, gr[h].out + L * e, 0u);
        gr[h].left = zero;
      }
      continue;
    }
    auto block = [&](const bool skipping, const bool renorm) EBAC_FORCE_INLINE_LAMBDA {
      std::size_t i = b;
      for (; i + 4 <= e; i += 4) {
        each([&](lane_group& g) EBAC_FORCE_INLINE_LAMBDA { step(g, i, g.X0, skipping, renorm); });
        each([&](lane_group& g) EBAC_FORCE_INLINE_LAMBDA { step(g, i + 1, g.X1, skipping, renorm); });
        each([&](lane_group& g) EBAC_FORCE_INLINE_LAMBDA { step(g, i + 2, g.X2, skipping, renorm); });
        each([&](lane_group& g) EBAC_FORCE_INLINE_LAMBDA { step(g, i + 3, g.X3, skipping, renorm); });
      }
      each([&](lane_group& g) EBAC_FORCE_INLINE_LAMBDA {  // the chunk's last block only
        if (i < e) step(g, i, g.X0, skipping, renorm);
        if (i + 1 < e) step(g, i + 1, g.X1, skipping, renorm);
        if (i + 2 < e) step(g, i + 2, g.X2, skipping, renorm);
      });
    };
    renorm_changes = 0;
    if (any) block(true, false);  // blocks some lanes skip are rare: one variant
    else if (renorm_always) block(false, true);
    else block(false, false);
    renorm_always = 4 * renorm_changes > Groups * (e - b);
  }

  // decode_chunk's end checks, lane by lane.
  for (int h = 0; h < Groups; ++h) bad[h] = finish_context_ans_x8_group(gr[h], base, off + L * h, len + L * h, bad[h]);
}

/// Decodes 8 chunks of n codes each: chunk l is len[l] bytes at base +
/// off[l]. Codes go to out (8 n of them, 32-byte aligned): element i of
/// chunk l at out[8 i + l]. Returns the lanes whose chunk is corrupt, bit l
/// for chunk l (0: all eight decoded; a corrupt lane's codes are garbage).
/// The rest as decode_context_ans_groups.
inline unsigned decode_context_ans_x8(const context_ans& enc, const std::byte* base, const std::uint32_t* off,
                                      const std::uint32_t* len, std::size_t n, std::uint32_t limit,
                                      std::uint32_t* EBAC_RESTRICT out) {
  std::uint32_t* const outs[1] = {out};
  unsigned bad[1];
  decode_context_ans_groups<1>(enc, base, off, len, n, limit, outs, bad);
  return bad[0];
}

/// Copies the codes of decode_context_ans_x8's interleaved output (element
/// i of lane l at lanes[8 i + l], n of them a lane, n a multiple of 8) to
/// to[l][0, n): 8 x 8 blocks transposed in registers, so the buffer is read
/// once (a strided copy per lane read it eight times).
inline void deinterleave_context_ans_x8(const std::uint32_t* EBAC_RESTRICT lanes, std::size_t n,
                                        std::uint32_t* const (&to)[8]) noexcept {
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint32_t* b = lanes + 8 * i;
    __m256i r[8];
    for (int k = 0; k < 8; ++k)
      r[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 8 * k));  // element i + k, lanes 0-7
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
