// ebac/quantizer/level_search.hpp - finding a tensor's level palette in parallel pieces.
//
// The host backend counts each chunk's distinct values serially and merges
// the chunks' level_sets in chunk order (host::detail::find_levels). The
// CUDA backend splits the same work differently: inside a chunk each thread
// of a block counts every blockDim-th element (level_counter), the block
// merges its threads' sets by a pairwise tree (level_tree_step), and one
// block merges the chunks' sets by the same tree in chunk order. The
// palette depends only on the multiset of values (palette_of sorts by count,
// then bit pattern), and a tree merge in index order holds the same values
// with the same counts as the serial merge, so both backends find the same
// palette; tests/quantizer/level_search.cpp runs the device's split on the
// host against find_levels.
#pragma once

#include <ebac/config.hpp>
#include <ebac/quantizer/levels.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// One thread's share of a level search: its elements' bit patterns go into
/// a level_set of the given capacity, a run of equal values counted at once
/// (masks and one-hot rows are mostly runs).
struct level_counter {
  level_set set;
  std::uint64_t run_value = 0;
  std::uint64_t run_length = 0;

  EBAC_HOST_DEVICE explicit level_counter(std::uint32_t capacity) noexcept { set.capacity = capacity; }

  /// True once more distinct values than the capacity were seen (counting
  /// can stop: the tensor has no palette).
  [[nodiscard]] EBAC_HOST_DEVICE bool full() const noexcept { return set.overflow; }

  /// Marks the set as overflowed without reading anything (another chunk
  /// already has too many values).
  EBAC_HOST_DEVICE void give_up() noexcept {
    run_length = 0;
    set.overflow = true;
  }

  EBAC_HOST_DEVICE void add(std::uint64_t bits) noexcept {
    if (run_length != 0 && bits == run_value) {
      ++run_length;
      return;
    }
    flush();
    run_value = bits;
    run_length = 1;
  }

  /// The set with the last run counted in.
  [[nodiscard]] EBAC_HOST_DEVICE level_set finish() noexcept {
    flush();
    return set;
  }

 private:
  EBAC_HOST_DEVICE void flush() noexcept {
    if (run_length != 0) set.add(run_value, run_length);
    run_length = 0;
  }
};

/// Pairs of a round of the pairwise merge tree over `count` sets with the
/// given stride (1, 2, 4, ... while stride < count).
[[nodiscard]] EBAC_HOST_DEVICE std::uint64_t level_tree_pairs(std::uint64_t count, std::uint64_t stride) noexcept {
  return (count + 2 * stride - 1) / (2 * stride);
}

/// Pair p of the round with this stride: sets[2 p stride + stride] is merged
/// into sets[2 p stride] (when it exists). The pairs of a round touch
/// disjoint sets, so they run in parallel; after the rounds stride = 1, 2,
/// 4, ... below count, sets[0] holds the merge of all of them in index
/// order: the values and counts that merging them one by one gives, and
/// overflow exactly when their union has more values than the capacity.
EBAC_HOST_DEVICE void level_tree_step(level_set* sets, std::uint64_t count, std::uint64_t stride, std::uint64_t pair) noexcept {
  const std::uint64_t left = 2 * stride * pair, right = left + stride;
  if (right < count) sets[left].merge(sets[right]);
}

EBAC_NAMESPACE_END
