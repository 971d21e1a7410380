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
// CUDA kernels (through cuda/kernels/lookback.cuh) pass cuda::atomic_ref, the
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

/// Predecessor words read at once by the walk: independent loads that are in
/// flight together, so a walk over w predecessors waits about w / 8 memory
/// round trips instead of w (one thread does the walk while its block waits).
inline constexpr int lookback_window = 8;

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
  std::uint64_t next = tile;  // the walk has summed tiles [next, tile)
  for (;;) {
    // Load up to lookback_window predecessors, nearest first, then take them
    // in order until an inclusive prefix (done) or a tile that has not
    // published yet (the next round waits on it: it has started, it will publish).
    std::uint64_t w[lookback_window];
    const int m = next < static_cast<std::uint64_t>(lookback_window) ? static_cast<int>(next) : lookback_window;
    if (m == 0) break;  // unreachable: tile 0 publishes an inclusive word, which ends the walk
    // Wait on the nearest word alone (it is needed whatever the others say),
    // then load the rest of the window.
    w[0] = load(next - 1);
    while (W::status(w[0]) == W::invalid) w[0] = load(next - 1);
    for (int i = 1; i < m; ++i) w[i] = load(next - 1 - static_cast<std::uint64_t>(i));
    for (int i = 0; i < m; ++i) {
      if (W::status(w[i]) == W::invalid) break;
      exclusive += W::value(w[i]);
      --next;
      if (W::status(w[i]) == W::inclusive) {
        store(tile, W::make(W::inclusive, exclusive + aggregate));
        return exclusive;
      }
    }
  }
  store(tile, W::make(W::inclusive, exclusive + aggregate));
  return exclusive;
}

}  // namespace detail
EBAC_NAMESPACE_END
