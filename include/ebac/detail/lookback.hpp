// ebac/detail/lookback.hpp - decoupled look-back over one 64-bit word per tile.
//
// A single-pass prefix sum (Merrill and Garland, "Single-pass Parallel
// Prefix Scan with Decoupled Look-back", 2016): tile t publishes its own
// aggregate ("partial"), then walks back over its predecessors, adding
// partial aggregates until it meets an inclusive prefix, and publishes its
// own inclusive prefix. Status and value share one 64-bit word (2 status
// bits, 62 value bits), so one atomic load always sees a consistent pair
// and no fence is needed between them. Tiles must be processed in an order
// where every predecessor of a running tile has started (the CUDA kernel
// takes tile numbers from an atomic counter), so the walk cannot wait on a
// tile that never runs.
//
// The protocol is written once, over caller-supplied atomic accessors: the
// CUDA kernel (cuda/kernels/fused_bitpack.cuh) passes cuda::atomic_ref, the
// host test passes std::atomic with threads racing over the tiles.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace detail {

struct lookback_word {
  static constexpr std::uint64_t invalid = 0;    ///< nothing published yet (words start zeroed)
  static constexpr std::uint64_t partial = 1;    ///< the tile's own aggregate
  static constexpr std::uint64_t inclusive = 2;  ///< the sum of tiles [0, t]
  static constexpr std::uint64_t max_value = (std::uint64_t{1} << 62) - 1;
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint64_t make(std::uint64_t status, std::uint64_t value) noexcept {
    return (value << 2) | status;
  }
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint64_t status(std::uint64_t w) noexcept { return w & 3u; }
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint64_t value(std::uint64_t w) noexcept { return w >> 2; }
};

/// Exclusive prefix of tile `tile` whose own aggregate is `aggregate`
/// (values and sums < 2^62). load(i) / store(i, word) read and write tile
/// i's word atomically; one thread per tile calls this.
EBAC_EXEC_CHECK_DISABLE
template <class Load, class Store>
EBAC_HOST_DEVICE std::uint64_t lookback_exclusive(std::uint64_t tile, std::uint64_t aggregate, Load&& load, Store&& store) {
  using W = lookback_word;
  if (tile == 0) {
    store(0, W::make(W::inclusive, aggregate));
    return 0;
  }
  store(tile, W::make(W::partial, aggregate));
  std::uint64_t exclusive = 0;
  for (std::uint64_t p = tile; p-- > 0;) {
    std::uint64_t w = load(p);
    while (W::status(w) == W::invalid) w = load(p);  // the predecessor has started: it will publish
    exclusive += W::value(w);
    if (W::status(w) == W::inclusive) break;
  }
  store(tile, W::make(W::inclusive, exclusive + aggregate));
  return exclusive;
}

}  // namespace detail
EBAC_NAMESPACE_END
