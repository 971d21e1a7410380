// ebac/detail/checksum.hpp - a fast 64-bit checksum of the stream bytes.
//
// Detects truncation and bit rot in files; it is not a cryptographic hash.
// Four independent multiply-rotate lanes over 32-byte stripes keep it well
// above memory speed for the compressed sizes it sees.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace detail {

EBAC_HOST_DEVICE std::uint64_t rotl64(std::uint64_t x, int r) noexcept { return (x << r) | (x >> (64 - r)); }

EBAC_HOST_DEVICE std::uint64_t checksum64(const std::byte* p, std::size_t n) noexcept {
  constexpr std::uint64_t k1 = 0x9e3779b185ebca87ull, k2 = 0xc2b2ae3d27d4eb4full, k3 = 0x165667b19e3779f9ull;
  std::uint64_t lane[4] = {k1 ^ n, k2 + n, k3, ~k1};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; ++l) lane[l] = rotl64(lane[l] + load_le<std::uint64_t>(p + i + 8 * l) * k2, 31) * k1;
  std::uint64_t h = rotl64(lane[0], 1) + rotl64(lane[1], 7) + rotl64(lane[2], 12) + rotl64(lane[3], 18);
  for (; i + 8 <= n; i += 8) h = rotl64(h ^ (load_le<std::uint64_t>(p + i) * k2), 27) * k1 + k3;
  for (; i < n; ++i) h = rotl64(h ^ (static_cast<std::uint64_t>(p[i]) * k3), 11) * k1;
  h ^= h >> 33; h *= k2; h ^= h >> 29; h *= k3; h ^= h >> 32;
  return h;
}

}  // namespace detail
EBAC_NAMESPACE_END
