// ebac/host/encode_chunks.hpp - the host compressor's per-chunk steps:
// quantize a chunk (outliers recorded), zigzag it, encode it through a
// per-thread buffer; and the scans over a whole tensor that come first
// (its finite value range, its level palette).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// quantize_element_fast on quantize_block elements: codes, and 1 in
/// unsettled where quantize_element must decide.
template <class Q, class S>
inline void quantize_block_fast(const Q& quantizer, const S* EBAC_RESTRICT in, std::uint32_t* EBAC_RESTRICT codes,
                                std::uint8_t* EBAC_RESTRICT unsettled) noexcept {
  const Q q = quantizer;  // a local copy: the stores below cannot change it
  for (std::size_t i = 0; i < quantize_block; ++i) {
    const quantized r = quantize_element_fast(q, in[i]);
    codes[i] = static_cast<std::uint32_t>(r.code);
    unsettled[i] = r.outlier;
  }
}

/// A level quantizer's codes for quantize_block elements, and 1 in `found`
/// where an element is one of the palette's levels. One compare of every
/// element with each level, branch-free (the levels are distinct, so at most
/// one matches): the element-by-element search in level_quantizer::quantize
/// was a quarter of compressing a dropout mask, for the same codes.
template <class S>
inline void level_block(const level_quantizer& q, const S* EBAC_RESTRICT in, std::uint32_t* EBAC_RESTRICT codes,
                        std::uint8_t* EBAC_RESTRICT found) noexcept {
  using B = decltype(raw_bits(S{}));
  B bits[quantize_block];
  std::uint32_t index[quantize_block];
  for (std::size_t i = 0; i < quantize_block; ++i) {
    bits[i] = raw_bits(in[i]);
    index[i] = 0;
    found[i] = 0;
  }
  for (std::uint32_t k = 0; k < q.palette.count && k < max_levels; ++k) {
    const auto level = static_cast<B>(q.palette.bits[k]);
    for (std::size_t i = 0; i < quantize_block; ++i) {
      const bool equal = bits[i] == level;
      index[i] |= equal ? k : 0u;
      found[i] |= static_cast<std::uint8_t>(equal);
    }
  }
  for (std::size_t i = 0; i < quantize_block; ++i) codes[i] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(index[i]));
}

/// Quantizes one chunk (elements first .. first + m - 1 of the tensor) into
/// codes, recording outliers (their code is 0).
template <class Q, class S>
inline void quantize_chunk(const Q& q, const S* in, std::size_t m, std::uint64_t first, std::uint32_t* codes,
                           std::vector<std::uint64_t>& outliers) {
  if constexpr (!is_float_quantizer<Q>) {
    // Lossless quantizers one element at a time, as quantize does; a level
    // quantizer first takes whole blocks branch-free (level_block), every
    // element outside the palette being an outlier of code 0.
    std::size_t i = 0;
    if constexpr (std::is_same_v<Q, level_quantizer>) {
      for (; i + quantize_block <= m; i += quantize_block) {
        std::uint8_t found[quantize_block];
        level_block(q, in + i, codes + i, found);
        std::uint8_t all = 1;
        for (std::size_t j = 0; j < quantize_block; ++j) all &= found[j];
        if (all) continue;
        for (std::size_t j = 0; j < quantize_block; ++j)
          if (!found[j]) {
            codes[i + j] = 0;
            outliers.push_back(first + i + j);
          }
      }
    }
    for (; i < m; ++i) {
      const quantized r = quantize_at(q, in[i], first + i);
      codes[i] = static_cast<std::uint32_t>(r.code);
      if (r.outlier) outliers.push_back(first + i);
    }
  } else {
    // Two loops: a branch-free first pass the compiler vectorizes, then the
    // exact decision for the few elements it could not settle.
    std::uint8_t unsettled[4096];
    for (std::size_t b = 0; b < m; b += sizeof unsettled) {
      const std::size_t e = std::min(m, b + sizeof unsettled);
      std::size_t i = b;
      for (; i + quantize_block <= e; i += quantize_block) quantize_block_fast(q, in + i, codes + i, unsettled + (i - b));
      for (; i < e; ++i) {
        const quantized r = quantize_element_fast(q, in[i]);
        codes[i] = static_cast<std::uint32_t>(r.code);
        unsettled[i - b] = r.outlier;
      }
      for (std::size_t i = b; i < e; ++i) {
        if ((i - b) % 8 == 0 && i + 8 <= e) {  // skip 8 settled elements at once
          std::uint64_t any;
          std::memcpy(&any, unsettled + (i - b), 8);
          if (!any) {
            i += 7;
            continue;
          }
        }
        if (!unsettled[i - b]) continue;
        const quantized r = quantize_element(q, in[i]);
        codes[i] = static_cast<std::uint32_t>(r.code);
        if (r.outlier) outliers.push_back(first + i);
      }
    }
  }
}

inline void zigzag_in_place(std::uint32_t* f, std::size_t m) {
  for (std::size_t i = 0; i < m; ++i) f[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(f[i]));
}

/// An encoder's empty statistics for a tensor of extents e: constructed from
/// them when the encoder models the geometry (a row width, as
/// encoder/context_ans.hpp does), default-constructed otherwise.
template <class E>
typename E::statistics make_statistics(const extents& e) {
  if constexpr (std::is_constructible_v<typename E::statistics, const extents&>) return typename E::statistics(e);
  else return typename E::statistics{};
}

/// Encodes one chunk through the call's per-thread buffer, so the chunk's own
/// vector is sized once to its real length (no zero-fill of the worst case).
template <class E>
void encode_into(const E& enc, const std::uint32_t* codes, std::size_t m, std::vector<std::byte>& out,
                 per_thread_scratch<std::byte>& scratch) {
  std::byte* buf = scratch.get(enc.max_chunk_bytes(m));
  const std::size_t k = enc.encode_chunk(codes, m, buf);
  out.assign(buf, buf + k);
}

template <class T>
value_range finite_range(const T* in, std::uint64_t n, std::uint32_t chunk, int threads) {
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  std::vector<value_range> part(chunks);
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t c) {
    const std::uint64_t b = static_cast<std::uint64_t>(c) * chunk, e = std::min<std::uint64_t>(n, b + chunk);
    value_range r;
    if constexpr (std::is_same_v<T, float>) {
      r.add_block(in + b, static_cast<std::size_t>(e - b));
    } else {
      float buf[1024];
      for (std::uint64_t i = b; i < e; i += 1024) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(1024, e - i));
        for (std::size_t j = 0; j < k; ++j) buf[j] = to_float(in[i + j]);
        r.add_block(buf, k);
      }
    }
    part[static_cast<std::size_t>(c)] = r;
  });
  value_range all;
  for (const auto& r : part) all.merge(r);
  return all;
}

/// Elements find_levels counts at once when all are values it has seen.
inline constexpr std::size_t level_scan_block = 256;

/// Adds level_scan_block elements to `s` when every one is a value `s`
/// holds (true), else changes nothing (false).
template <class S>
inline bool count_known_levels(const S* EBAC_RESTRICT in, level_set& s) noexcept {
  using B = decltype(raw_bits(S{}));
  B bits[level_scan_block];
  for (std::size_t i = 0; i < level_scan_block; ++i) bits[i] = raw_bits(in[i]);
  std::uint64_t counts[max_levels];
  std::uint64_t total = 0;
  for (std::uint32_t k = 0; k < s.size && k < max_levels; ++k) {
    const auto level = static_cast<B>(s.value[k]);
    std::uint32_t count = 0;
    for (std::size_t i = 0; i < level_scan_block; ++i) count += bits[i] == level ? 1u : 0u;
    counts[k] = count;
    total += count;
  }
  if (total != level_scan_block) return false;  // the values are distinct: each element matched at most once
  for (std::uint32_t k = 0; k < s.size && k < max_levels; ++k) s.count[k] += counts[k];
  return true;
}

/// The palette of a tensor with at most `capacity` distinct values (bit
/// patterns), or an empty one. Per-chunk sets merged in chunk order
/// (levels.hpp); once any chunk has seen more values than the capacity the
/// others stop early: the answer (no palette) no longer depends on them.
template <class S>
level_palette find_levels(const S* in, std::uint64_t n, std::uint32_t chunk, std::uint32_t capacity, int threads) {
  if (capacity == 0 || n == 0) return {};
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  std::vector<level_set> sets(chunks);
  std::atomic<bool> too_many{false};
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
    const auto c = static_cast<std::uint64_t>(ci);
    level_set& s = sets[c];
    s.capacity = capacity;
    if (too_many.load(std::memory_order_relaxed)) {
      s.overflow = true;
      return;
    }
    const std::uint64_t b = c * chunk, e = std::min<std::uint64_t>(n, b + chunk);
    std::uint64_t i = b;
    while (i < e && !s.overflow) {
      // A block of elements all among the values already seen (a mask, once
      // both its values were met) is counted by one branch-free compare of
      // each element with each value; a block with a new value is read
      // run by run below. Counted either way, the set is the same.
      if (s.size != 0 && i + level_scan_block <= e && count_known_levels(in + i, s)) {
        i += level_scan_block;
        continue;
      }
      // Runs of one value: count a run at once, up to the block's end.
      const std::uint64_t stop = std::min<std::uint64_t>(e, i + level_scan_block);
      while (i < stop && !s.overflow) {
        const auto v = raw_bits(in[i]);
        std::uint64_t j = i + 1;
        while (j < e && raw_bits(in[j]) == v) ++j;
        s.add(static_cast<std::uint64_t>(v), j - i);
        i = j;
      }
    }
    if (s.overflow) too_many.store(true, std::memory_order_relaxed);
  });
  level_set all;
  all.capacity = capacity;
  for (const level_set& s : sets) all.merge(s);
  return palette_of(all);
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
