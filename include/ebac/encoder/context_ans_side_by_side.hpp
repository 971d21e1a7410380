// ebac/encoder/context_ans_side_by_side.hpp - where the host codec codes
// context-ANS chunks side by side: the stage's SIMD paths
// (context_ans_encode_x8.hpp, context_ans_x8.hpp) behind one interface the
// host driver calls for every encoder.
//
// The driver (host/encode_stream.hpp, host/decode_chunks.hpp) asks, for
// whatever encoder it runs: encode these chunks side by side
// (encode_chunks_side_by_side: false, nothing done, where the encoder
// cannot), how many chunks a decoder takes at once
// (chunks_decoded_together), which chunks go in groups
// (plan_chunk_groups) and to decode one unit of groups
// (decode_chunk_group_unit). Context ANS where EBAC_HOST_AVX2 is 1
// (detail/host_avx2.hpp) says yes, with the same bytes and the same codes
// and verdicts as one chunk at a time; every other case says no, and the
// driver codes one chunk at a time. Only this header and the x8 ones test
// EBAC_HOST_AVX2; the driver has no such case.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/host_avx2.hpp>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/context_ans_encode_x8.hpp>
#include <ebac/encoder/context_ans_x8.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace detail {

/// The host codec's hook for encoding chunks side by side
/// (host/encode_stream.hpp); n codes in chunks of C, `threads` the
/// threads the codec runs on (resolved). Where encoder E can (context ANS
/// with AVX2): encodes the full chunks in fours (two pairs, whose rounds
/// overlap) where every thread still gets one, then in pairs, the last
/// chunk alone when it is short or odd, with the same bytes as one at a
/// time, and returns true. Elsewhere does nothing and returns false. The
/// codec's parts it runs on:
///   for_each(k, f)       f(0) .. f(k - 1), in parallel
///   codes_of(c, slot)    chunk c's codes, in the calling thread's scratch slot `slot` (0 .. 3)
///   scratch(bytes)       a buffer of the calling thread
///   emit(c, data, size)  chunk c's payload
///   encode_one(c)        chunk c on its own
template <class E, class ForEach, class CodesOf, class Scratch, class Emit, class EncodeOne>
bool encode_chunks_side_by_side([[maybe_unused]] const E& enc, [[maybe_unused]] std::uint64_t n, [[maybe_unused]] std::uint32_t C,
                                [[maybe_unused]] std::uint64_t threads, [[maybe_unused]] ForEach&& for_each,
                                [[maybe_unused]] CodesOf&& codes_of, [[maybe_unused]] Scratch&& scratch,
                                [[maybe_unused]] Emit&& emit, [[maybe_unused]] EncodeOne&& encode_one) {
#if EBAC_HOST_AVX2
  if constexpr (std::is_same_v<E, context_ans>) {
    const std::uint64_t chunks = (n + C - 1) / C;
    const std::uint64_t full = chunks > 0 && n - (chunks - 1) * C != C ? chunks - 1 : chunks;
    const std::uint64_t t = threads;
    const std::uint64_t quads = full / 4 >= t ? full / 4 : 0;
    const std::uint64_t pairs = (full - 4 * quads) / 2;
    const std::uint64_t paired = 4 * quads + 2 * pairs;  // chunks [0, paired) go four or two at a time
    for_each(static_cast<std::int64_t>(quads + pairs + (chunks - paired)), [&](std::int64_t ui) {
      const auto u = static_cast<std::uint64_t>(ui);
      if (u >= quads + pairs) {
        encode_one(paired + (u - quads - pairs));
        return;
      }
      auto encode = [&](auto pairs_constant, std::uint64_t c0) {
        constexpr int H = 2 * decltype(pairs_constant)::value;
        const std::size_t cap = enc.max_chunk_bytes(C);
        std::byte* const buf = scratch(H * cap);
        const std::uint32_t* codes[H];
        std::byte* out[H];
        for (int h = 0; h < H; ++h) {
          codes[h] = codes_of(c0 + static_cast<std::uint64_t>(h), h);
          out[h] = buf + static_cast<std::size_t>(h) * cap;
        }
        const auto bytes = encode_context_ans_pairs<H / 2>(enc, codes, C, out);
        for (int h = 0; h < H; ++h) emit(c0 + static_cast<std::uint64_t>(h), out[h], bytes[static_cast<std::size_t>(h)]);
      };
      if (u < quads) encode(std::integral_constant<int, 2>{}, 4 * u);
      else encode(std::integral_constant<int, 1>{}, 4 * quads + 2 * (u - quads));
    });
    return true;
  }
#endif
  return false;
}

/// How many chunks the host decodes together with encoder E
/// (host/decode_chunks.hpp), each in its own buffer: chunk c in buffer c % this.
template <class E>
inline constexpr std::size_t chunks_decoded_together =
#if EBAC_HOST_AVX2
    std::is_same_v<E, context_ans> ? context_ans_x8_lanes : 1;
#else
    1;
#endif

/// Which chunks of a payload of n codes in chunks of C the host decodes in
/// groups of chunks_decoded_together<E> full chunks, and how parallel units
/// cover the groups. None (all zero) where E decodes one chunk at a time.
struct chunk_groups {
  std::uint64_t groups = 0;         ///< groups of up to eight chunks
  std::uint64_t grouped = 0;        ///< the chunks [0, grouped) the groups decode
  std::uint64_t units = 0;          ///< parallel units [0, units) covering groups [0, groups)
  std::uint64_t groups_a_unit = 1;  ///< groups a unit decodes together
};

/// The groups for encoder E on `threads` (resolved) threads.
template <class E>
chunk_groups plan_chunk_groups([[maybe_unused]] std::uint64_t n, [[maybe_unused]] std::uint32_t C,
                               [[maybe_unused]] std::uint64_t threads) {
  chunk_groups p;
#if EBAC_HOST_AVX2
  constexpr std::uint64_t G = context_ans_x8_lanes;
  const std::uint64_t t = threads;
  if constexpr (std::is_same_v<E, context_ans>) {
    // A group is eight chunks' work for one thread: grouping where there
    // are fewer groups than threads would leave threads idle
    // that single chunks keep busy. Chunks of up to 2^22 codes keep a
    // lane's bit position within 32 bits. The full chunks left over, when
    // there are at least four, make a last group whose free lanes decode
    // its first chunk again: eight lanes take about as long as four chunks
    // one at a time (a tensor of 31 chunks of 2^16 codes decoded 7 alone).
    const std::uint64_t full = n / C;
    std::uint64_t g = full / G, k = g * G;
    if (full % G >= G / 2) {
      ++g;
      k = full;
    }
    if (C <= (1u << 22) && (t <= 1 || g >= t)) {
      p.groups = g;
      p.grouped = k;
    }
  }
  // Two groups a unit where there are enough of them
  // (decode_context_ans_groups: their steps overlap; 1.14-1.25x one at a
  // time at rel 1e-3 and 1e-4), one where two a unit would leave threads idle.
  p.units = p.groups;
  constexpr std::uint64_t GU = context_ans_x8_groups;
  static_assert(GU == 2);
  if (p.groups >= GU && (t <= 1 || p.groups / GU >= t)) p.units = (p.groups + GU - 1) / GU;
  p.groups_a_unit = p.units == p.groups ? 1 : GU;
#endif
  return p;
}

#if EBAC_HOST_AVX2
/// decode_chunk_group_unit's sizes, at namespace scope (GCC 12 fails on
/// constexpr locals used as array bounds in a lambda of this template).
inline constexpr std::uint64_t group_chunks = context_ans_x8_lanes;  ///< chunks a group
inline constexpr std::uint64_t unit_groups = context_ans_x8_groups;  ///< groups a unit, at most
#endif

/// Decodes unit u (< p.units) of plan p: its groups of eight chunks side by
/// side, each group's chunks placed (place(c, C): distinct buffers for the
/// chunks of one group) before any is taken (done(c, codes, C)); a corrupt
/// chunk gets status::corrupt_stream in errors[c]. Where the groups cannot
/// go side by side (their chunks beyond 32-bit offsets of the first, or
/// the 8 bytes after the last not readable), each group alone, else its
/// chunks one at a time (decode_one(c)). `readable`: the bytes from
/// `payload` to the end of the stream; interleaved(k) a buffer of k codes
/// of the calling thread.
template <class E, class Interleaved, class Place, class Done, class DecodeOne>
void decode_chunk_group_unit([[maybe_unused]] const E& enc, [[maybe_unused]] const chunk_groups& p,
                             [[maybe_unused]] std::uint64_t u, [[maybe_unused]] const std::byte* payload,
                             [[maybe_unused]] std::size_t readable, [[maybe_unused]] const std::vector<std::uint64_t>& offsets,
                             [[maybe_unused]] std::uint32_t C, [[maybe_unused]] Interleaved&& interleaved,
                             [[maybe_unused]] std::vector<status>& errors, [[maybe_unused]] Place&& place,
                             [[maybe_unused]] Done&& done, [[maybe_unused]] DecodeOne&& decode_one) {
#if EBAC_HOST_AVX2
  if constexpr (std::is_same_v<E, context_ans>) {
    const std::uint64_t groups = p.groups, grouped = p.grouped, groups_a_unit = p.groups_a_unit;
    // Decodes groups [g0, g0 + k) (k <= unit_groups) together; false, with nothing
    // placed, where their chunks are not all within the reach of 32-bit byte
    // offsets from the first, or the 8 bytes after the last are not readable.
    auto decode_groups = [&](std::uint64_t g0, std::uint64_t k) -> bool {
      const std::uint64_t c0 = g0 * group_chunks;
      const std::uint64_t c_end = std::min(grouped, (g0 + k) * group_chunks);
      const std::byte* base = payload + offsets[c0];
      const std::uint64_t span = offsets[c_end] - offsets[c0];
      const std::uint64_t after = readable - offsets[c0];  // bytes readable from base
      if (after < span + 8 || span + 8 >= (std::uint64_t{1} << 28)) return false;
      const auto limit = static_cast<std::uint32_t>(std::min<std::uint64_t>(after - 8, (std::uint64_t{1} << 28) - 1));
      std::uint32_t off[unit_groups * group_chunks], len[unit_groups * group_chunks];
      std::uint32_t* lanes[unit_groups];
      // Each group's eight lanes' codes, 32-byte aligned, then room for a free lane's.
      const std::size_t stride = (group_chunks * C + 8 + C + 7) / 8 * 8;
      std::uint32_t* const raw = interleaved(k * stride + 8);
      auto* const aligned = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(raw) + 31) & ~std::uintptr_t{31});
      for (std::uint64_t h = 0; h < k; ++h) {
        const std::uint64_t first = c0 + h * group_chunks;
        const std::uint64_t used =
            std::min<std::uint64_t>(group_chunks, c_end - first);  // lanes [used, group_chunks) decode chunk `first` again
        for (std::uint64_t l = 0; l < group_chunks; ++l) {
          const std::uint64_t c = l < used ? first + l : first;
          off[h * group_chunks + l] = static_cast<std::uint32_t>(offsets[c] - offsets[c0]);
          len[h * group_chunks + l] = static_cast<std::uint32_t>(offsets[c + 1] - offsets[c]);
        }
        lanes[h] = aligned + h * stride;
      }
      unsigned bad[unit_groups] = {};
      if (k == 2) decode_context_ans_groups<2>(enc, base, off, len, C, limit, lanes, bad);
      else decode_context_ans_groups<1>(enc, base, off, len, C, limit, lanes, bad);
      // Group by group: a group places its eight chunks before it takes any.
      for (std::uint64_t h = 0; h < k; ++h) {
        const std::uint64_t first = c0 + h * group_chunks;
        const std::uint64_t used = std::min<std::uint64_t>(group_chunks, c_end - first);
        std::uint32_t* to[group_chunks];
        for (std::uint64_t l = 0; l < group_chunks; ++l) to[l] = l < used ? place(first + l, C) : lanes[h] + group_chunks * C;
        deinterleave_context_ans_x8(lanes[h], C, to);  // C is a multiple of 32
        for (std::uint64_t l = 0; l < used; ++l) {
          const std::uint64_t c = first + l;
          if (bad[h] >> l & 1u) errors[c] = status::corrupt_stream;
          else done(c, to[l], static_cast<std::size_t>(C));
        }
      }
      return true;
    };
    const std::uint64_t g0 = u * groups_a_unit;
    const std::uint64_t k = std::min(groups_a_unit, groups - g0);
    if (decode_groups(g0, k)) return;
    for (std::uint64_t g = g0; g < g0 + k; ++g)  // each group alone, or its chunks one at a time
      if (!decode_groups(g, 1))
        for (std::uint64_t c = g * group_chunks; c < std::min(grouped, (g + 1) * group_chunks); ++c) decode_one(c);
  }
#endif
}

}  // namespace detail
EBAC_NAMESPACE_END
