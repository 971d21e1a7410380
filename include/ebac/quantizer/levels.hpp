// ebac/quantizer/levels.hpp - few-level tensors as indices into their palette.
//
// A dropout mask holds two values (0 and 1/(1-p)), a one-hot row two, a
// ternary weight three, a bool mask two. Such a tensor is coded losslessly
// whatever its dtype and bound: the writer finds its distinct values (bit
// patterns; at most max_levels), orders them by how often they occur (most
// frequent first, ties by bit pattern), and codes every element as the index
// of its value. The most frequent value is code 0, so zero-run symbols
// (Huffman, run-length) cover its runs, and bit-packing needs
// ceil(log2(levels)) bits an element. The palette is the stage's parameter
// section (docs/format.md).
//
// Finding the palette is split into per-chunk sets (level_set::add over a
// chunk, in any order) and a merge (in chunk order), so the host and the
// CUDA backend compute the same palette: the result depends only on the
// multiset of values, not on how it was traversed.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/dtype.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// The most levels a palette holds (the format's limit too).
inline constexpr std::uint32_t max_levels = 16;

/// The distinct bit patterns of some elements with their counts, up to a
/// capacity; `overflow` once more than `capacity` distinct values were seen
/// (the set then stops tracking: such a tensor is not coded as levels).
struct level_set {
  std::uint64_t value[max_levels]{};
  std::uint64_t count[max_levels]{};
  std::uint32_t size = 0;
  std::uint32_t capacity = max_levels;
  bool overflow = false;

  EBAC_HOST_DEVICE void add(std::uint64_t bits, std::uint64_t times = 1) noexcept {
    if (overflow) return;
    for (std::uint32_t i = 0; i < size; ++i)
      if (value[i] == bits) {
        count[i] += times;
        return;
      }
    if (size == capacity) {
      overflow = true;
      return;
    }
    value[size] = bits;
    count[size] = times;
    ++size;
  }

  EBAC_HOST_DEVICE void merge(const level_set& o) noexcept {
    if (o.overflow) overflow = true;
    for (std::uint32_t i = 0; i < o.size && !overflow; ++i) add(o.value[i], o.count[i]);
  }

  /// Most frequent first, ties by bit pattern: the canonical palette order.
  EBAC_HOST_DEVICE void sort() noexcept {
    for (std::uint32_t i = 1; i < size; ++i)  // insertion sort: at most 16 entries
      for (std::uint32_t j = i; j > 0; --j) {
        const bool before = count[j] > count[j - 1] || (count[j] == count[j - 1] && value[j] < value[j - 1]);
        if (!before) break;
        const std::uint64_t v = value[j], c = count[j];
        value[j] = value[j - 1];
        count[j] = count[j - 1];
        value[j - 1] = v;
        count[j - 1] = c;
      }
  }
};

/// A palette: the stage's parameters.
struct level_palette {
  std::uint64_t bits[max_levels]{};  ///< the levels' bit patterns, zero-extended
  std::uint32_t count = 0;           ///< 1..max_levels in a valid stream

  /// Bytes the parameter section takes for elements of `element_bytes`.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t serialized_bytes(std::size_t element_bytes) const noexcept {
    return 1 + count * element_bytes;
  }
  /// u8 count, then each level's bits in the element's width, little-endian.
  EBAC_HOST_DEVICE void serialize(std::byte* p, std::size_t element_bytes) const noexcept {
    p[0] = static_cast<std::byte>(count);
    for (std::uint32_t i = 0; i < count; ++i)
      for (std::size_t b = 0; b < element_bytes; ++b)
        p[1 + i * element_bytes + b] = static_cast<std::byte>((bits[i] >> (8 * b)) & 0xffu);
  }
  /// Reads and validates a parameter section: a count in 1..max_levels, the
  /// exact size, and distinct levels (a writer never repeats one).
  [[nodiscard]] EBAC_HOST_DEVICE static status deserialize(const std::byte* p, std::size_t bytes, std::size_t element_bytes,
                                                           level_palette& out) noexcept {
    if (bytes < 1) return status::corrupt_stream;
    const auto k = static_cast<std::uint32_t>(p[0]);
    if (k < 1 || k > max_levels || bytes != 1 + k * element_bytes) return status::corrupt_stream;
    out = level_palette{};
    out.count = k;
    for (std::uint32_t i = 0; i < k; ++i) {
      std::uint64_t v = 0;
      for (std::size_t b = 0; b < element_bytes; ++b) v |= static_cast<std::uint64_t>(p[1 + i * element_bytes + b]) << (8 * b);
      for (std::uint32_t j = 0; j < i; ++j)
        if (out.bits[j] == v) return status::corrupt_stream;
      out.bits[i] = v;
    }
    return status::ok;
  }
};

/// Codes an element as the index of its bit pattern in the palette. S is the
/// element's storage type (storage_t<T>); lossless. The code is
/// unzigzag(index): the pipeline zigzags codes before the encoder (a
/// predictor's residuals are signed), so the encoder sees the index itself,
/// 0..levels-1, and a two-level mask costs bit-packing one bit an element.
struct level_quantizer {
  static constexpr quantizer_id id = quantizer_id::levels;
  static constexpr bool preserves_zero_and_sign = true;  // every value comes back exactly

  level_palette palette;

  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE quantized quantize(S x) const noexcept {
    const auto b = static_cast<std::uint64_t>(raw_bits(x));
    std::uint32_t index = palette.count;
    for (std::uint32_t i = 0; i < palette.count; ++i) index = (index == palette.count && palette.bits[i] == b) ? i : index;
    const bool outlier = index == palette.count;  // a value outside the palette (never, for the writer's own) is stored raw
    return {outlier ? 0 : detail::unzigzag(index), outlier};
  }

  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE S reconstruct(std::int32_t code) const noexcept {
    using B = decltype(raw_bits(S{}));
    const std::uint32_t i = detail::zigzag(code);
    return from_raw_bits<S>(static_cast<B>(palette.bits[i < palette.count ? i : 0u]));
  }

  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE bool valid_code(std::int32_t code) const noexcept {
    return detail::zigzag(code) < palette.count;
  }
};

/// The palette of a finished (merged) level set, or count 0 when the set
/// overflowed or is empty. Reads the set member by member, and only its
/// first `size` entries: a copy of the whole struct would also read its
/// padding, which a device kernel's member-wise store never writes (the
/// CUDA backend's choose_stages_kernel, whose copy of the merged set from
/// global memory was what compute-sanitizer initcheck reported).
[[nodiscard]] EBAC_HOST_DEVICE level_palette palette_of(const level_set& merged) noexcept {
  level_palette p;
  const bool overflow = merged.overflow;
  const std::uint32_t size = merged.size;
  if (overflow || size == 0 || size > max_levels) return p;
  level_set s;
  s.size = size;
  for (std::uint32_t i = 0; i < size; ++i) {
    s.value[i] = merged.value[i];
    s.count[i] = merged.count[i];
  }
  s.sort();
  p.count = size;
  for (std::uint32_t i = 0; i < size; ++i) p.bits[i] = s.value[i];
  return p;
}

EBAC_NAMESPACE_END
