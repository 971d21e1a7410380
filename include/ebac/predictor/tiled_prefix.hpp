// ebac/predictor/tiled_prefix.hpp - the flat Lorenzo inverse in rounds of blocks.
//
// Inverting flat 1-D Lorenzo is a prefix sum (wrapping uint32) that restarts
// at every tile start. A GPU decoder that holds one block of 32 residuals per
// warp does it in rounds of W consecutive blocks: each warp scans its own
// block, and what the block's sum starts from is the sum of the earlier
// blocks of its tile - the carry from earlier rounds (if the tile began
// before this round) plus the totals of the earlier warps of this round that
// lie in the same tile. This is that bookkeeping, shared by the kernel
// (cuda/kernels/fused_bitpack_decode.cuh) and its host test.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

struct tiled_prefix_rounds {
  std::uint64_t tile_blocks = 1;  ///< tile / 32 (tiles hold whole blocks), >= 1

  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t tile_start(std::uint64_t block) const noexcept {
    return block / tile_blocks * tile_blocks;
  }

  /// Sum of the blocks of block (first + w)'s tile that come before it, for
  /// w in [0, count] of a round of `count` blocks starting at block `first`:
  /// `totals[k]` is block first + k's sum, `carry` the sum of the blocks of
  /// block `first`'s tile before `first`. With w == count it is the carry
  /// for the next round.
  [[nodiscard]] EBAC_HOST_DEVICE std::uint32_t before(std::uint64_t first, const std::uint32_t* totals, unsigned w,
                                                      std::uint32_t carry) const noexcept {
    const std::uint64_t start = tile_start(first + w);
    std::uint32_t sum = start < first ? carry : 0u;
    for (unsigned k = 0; k < w; ++k)
      if (first + k >= start) sum += totals[k];
    return sum;
  }
};

EBAC_NAMESPACE_END
