// ebac/format/outlier_index.hpp - the outlier index section, written and read in parallel.
//
// The section holds k LEB128 varints: the first outlier's index, then each
// index minus the previous one minus 1 (stream_header.hpp). The serial
// reader (host/decompress.hpp) walks them in order. The CUDA decoder cuts the
// section into segments of bytes instead: a varint starts at byte i when
// i == 0 or byte i-1 has its high bit clear, so each segment finds the
// varints that start in it without reading the ones before. With a varint's
// "step" = gap + 1, outlier j's index is (steps of varints 0..j) - 1, and
// its value is the j-th of the value section. So: (1) summarize every
// segment (how many varints start there, the sum of their steps), (2) an
// exclusive scan of the summaries, (3) each segment decodes its varints
// again and places them. A stream is accepted exactly when the serial
// reader accepts it (host-tested on damaged sections): every varint decodes
// within the section with a gap below n, every index is below n, and the
// section holds exactly k varints (then the last one ends at its last byte).
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN

/// The writer's side: the varint outlier j contributes, from the increasing
/// list of outlier indices (the first index itself, then index minus the
/// previous one minus 1). The CUDA writer sizes each with varint_size, places
/// them by a scan, and writes them with put_varint.
[[nodiscard]] EBAC_HOST_DEVICE std::uint64_t outlier_gap(const std::uint64_t* index, std::uint64_t j) noexcept {
  return j == 0 ? index[0] : index[j] - index[j - 1] - 1;
}

/// The serial writer (host backend): add the outlier indices in increasing
/// order; `bytes` is the section.
struct outlier_index_writer {
  std::vector<std::byte> bytes;
  std::uint64_t count = 0;
  std::uint64_t last = 0;
  void add(std::uint64_t index) {
    std::byte tmp[10];
    const std::size_t k = ::ebac::detail::put_varint(tmp, count == 0 ? index : index - last - 1);
    bytes.insert(bytes.end(), tmp, tmp + k);
    last = index;
    ++count;
  }
};

struct outlier_index_reader {
  const std::byte* section;  ///< the index section
  std::uint64_t bytes;       ///< its size
  std::uint64_t n;           ///< the tensor's elements: every gap and index is below n

  /// What a segment of the section holds; also the scan's running total.
  /// Step sums saturate at n + 1 (any index at or past n is corrupt anyway),
  /// so no crafted section can wrap them.
  struct summary {
    std::uint64_t starts = 0;  ///< varints that start in the segment(s)
    std::uint64_t steps = 0;   ///< sum of their gap + 1, at most n + 1
    bool corrupt = false;      ///< a varint there does not decode, or has a gap >= n
  };

  /// Associative combination of summaries in section order (the scan operator).
  struct combine {
    std::uint64_t cap;  ///< n + 1
    EBAC_HOST_DEVICE summary operator()(const summary& a, const summary& b) const noexcept {
      summary s;
      s.starts = a.starts + b.starts;  // at most the section's bytes
      s.steps = b.steps >= cap - a.steps ? cap : a.steps + b.steps;
      s.corrupt = a.corrupt || b.corrupt;
      return s;
    }
  };

  [[nodiscard]] EBAC_HOST_DEVICE combine op() const noexcept { return combine{n + 1}; }

  [[nodiscard]] EBAC_HOST_DEVICE bool starts_varint(std::uint64_t i) const noexcept {
    return i == 0 || (static_cast<unsigned>(section[i - 1]) & 0x80u) == 0;
  }

  /// The varint at byte i: its step (gap + 1), or false when it does not
  /// decode inside the section or its gap is not below n.
  [[nodiscard]] EBAC_HOST_DEVICE bool step_at(std::uint64_t i, std::uint64_t& step) const noexcept {
    const std::byte* p = section + i;
    std::uint64_t gap = 0;
    if (!::ebac::detail::get_varint(p, section + bytes, gap) || gap >= n) return false;
    step = gap + 1;
    return true;
  }

  /// Summary of bytes [begin, end) (clamped to the section).
  [[nodiscard]] EBAC_HOST_DEVICE summary summarize(std::uint64_t begin, std::uint64_t end) const noexcept {
    summary s;
    const combine add = op();
    for (std::uint64_t i = begin; i < end && i < bytes; ++i) {
      if (!starts_varint(i)) continue;
      summary one;
      one.starts = 1;
      one.corrupt = !step_at(i, one.steps);
      s = add(s, one);
    }
    return s;
  }

  /// Places the varints that start in [begin, end), given the summary of
  /// everything before `begin`: put(j, index) for outlier j. False when one
  /// of them or one before them is corrupt, lies past the k-th, or points at
  /// or past n.
  template <class Put>
  [[nodiscard]] EBAC_HOST_DEVICE bool place(std::uint64_t begin, std::uint64_t end, summary before, std::uint64_t k,
                                            Put&& put) const noexcept {
    if (before.corrupt) return false;  // indices after a corrupt varint are shifted: write none
    const combine add = op();
    for (std::uint64_t i = begin; i < end && i < bytes; ++i) {
      if (!starts_varint(i)) continue;
      summary one;
      one.starts = 1;
      if (!step_at(i, one.steps)) return false;
      const std::uint64_t j = before.starts;
      before = add(before, one);
      if (j >= k || before.steps > n) return false;  // past the k-th varint, or index = steps - 1 >= n
      put(j, before.steps - 1);
    }
    return true;
  }

  /// The whole section's verdict from its total summary: exactly k varints,
  /// none corrupt, the last index below n. (An empty section holds 0.)
  [[nodiscard]] EBAC_HOST_DEVICE bool complete(const summary& total, std::uint64_t k) const noexcept {
    return !total.corrupt && total.starts == k && total.steps <= n;
  }
};

EBAC_NAMESPACE_END
