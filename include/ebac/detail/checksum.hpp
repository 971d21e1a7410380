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

inline constexpr std::uint64_t checksum_k1 = 0x9e3779b185ebca87ull, checksum_k2 = 0xc2b2ae3d27d4eb4full,
                               checksum_k3 = 0x165667b19e3779f9ull;

/// The four lanes' start for a checksum of n bytes.
EBAC_HOST_DEVICE void checksum_start(std::uint64_t (&lane)[4], std::uint64_t n) noexcept {
  lane[0] = checksum_k1 ^ n;
  lane[1] = checksum_k2 + n;
  lane[2] = checksum_k3;
  lane[3] = ~checksum_k1;
}
/// One 32-byte stripe into the lanes.
EBAC_HOST_DEVICE void checksum_stripe(std::uint64_t (&lane)[4], const std::byte* p) noexcept {
  for (int l = 0; l < 4; ++l) lane[l] = rotl64(lane[l] + load_le<std::uint64_t>(p + 8 * l) * checksum_k2, 31) * checksum_k1;
}
/// The lanes and the last n % 32 bytes (`tail`, `m` of them) into the checksum.
EBAC_HOST_DEVICE std::uint64_t checksum_finish(const std::uint64_t (&lane)[4], const std::byte* tail, std::size_t m) noexcept {
  std::uint64_t h = rotl64(lane[0], 1) + rotl64(lane[1], 7) + rotl64(lane[2], 12) + rotl64(lane[3], 18);
  std::size_t i = 0;
  for (; i + 8 <= m; i += 8) h = rotl64(h ^ (load_le<std::uint64_t>(tail + i) * checksum_k2), 27) * checksum_k1 + checksum_k3;
  for (; i < m; ++i) h = rotl64(h ^ (static_cast<std::uint64_t>(tail[i]) * checksum_k3), 11) * checksum_k1;
  h ^= h >> 33;
  h *= checksum_k2;
  h ^= h >> 29;
  h *= checksum_k3;
  h ^= h >> 32;
  return h;
}

EBAC_HOST_DEVICE std::uint64_t checksum64(const std::byte* p, std::size_t n) noexcept {
  std::uint64_t lane[4];
  checksum_start(lane, n);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) checksum_stripe(lane, p + i);
  return checksum_finish(lane, p + i, n - i);
}

/// checksum64 of n bytes that arrive in pieces (a stream read from a file or
/// a pipe): the same value, with n known before the first byte.
class checksum64_stream {
 public:
  explicit checksum64_stream(std::uint64_t n) noexcept { checksum_start(lane_, n); }
  void update(const std::byte* p, std::size_t len) noexcept {
    if (have_ > 0) {  // complete the stripe the last piece began
      const std::size_t take = len < 32 - have_ ? len : 32 - have_;
      for (std::size_t i = 0; i < take; ++i) pending_[have_ + i] = p[i];
      have_ += take;
      p += take;
      len -= take;
      if (have_ < 32) return;
      checksum_stripe(lane_, pending_);
      have_ = 0;
    }
    for (; len >= 32; p += 32, len -= 32) checksum_stripe(lane_, p);
    for (std::size_t i = 0; i < len; ++i) pending_[i] = p[i];
    have_ = len;
  }
  /// The checksum, once all n bytes went through update().
  [[nodiscard]] std::uint64_t finish() const noexcept { return checksum_finish(lane_, pending_, have_); }

 private:
  std::uint64_t lane_[4];
  std::byte pending_[32] = {};
  std::size_t have_ = 0;
};

}  // namespace detail
EBAC_NAMESPACE_END
