// ebac/detail/bytes.hpp - little-endian loads/stores and bounded varints.
//
// Every reader takes the end of its buffer and reports failure instead of
// reading past it: the stream decoder is fed hostile bytes by the fuzzer.
#pragma once

#include <ebac/config.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

EBAC_NAMESPACE_BEGIN
namespace detail {

template <class U>
EBAC_HOST_DEVICE void store_le(std::byte* p, U v) noexcept {
#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(p, &v, sizeof(U));  // one unaligned store on little-endian hosts
#else
  for (std::size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
#endif
}

template <class U>
EBAC_HOST_DEVICE U load_le(const std::byte* p) noexcept {
#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  U v;
  std::memcpy(&v, p, sizeof(U));
  return v;
#else
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
  return v;
#endif
}

/// LEB128 unsigned varint. Returns bytes written (at most 10).
EBAC_HOST_DEVICE std::size_t put_varint(std::byte* p, std::uint64_t v) noexcept {
  std::size_t n = 0;
  while (v >= 0x80) {
    p[n++] = static_cast<std::byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  p[n++] = static_cast<std::byte>(v);
  return n;
}

/// Bytes put_varint writes for v (1..10).
EBAC_HOST_DEVICE std::uint32_t varint_size(std::uint64_t v) noexcept {
  std::uint32_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

/// Reads a varint from [p, end); false on truncation or more than 64 bits.
EBAC_HOST_DEVICE bool get_varint(const std::byte*& p, const std::byte* end, std::uint64_t& v) noexcept {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= end) return false;
    const auto b = static_cast<std::uint64_t>(*p++);
    if (shift == 63 && (b & 0x7e)) return false;  // would overflow 64 bits
    v |= (b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

EBAC_HOST_DEVICE std::uint32_t zigzag(std::int32_t v) noexcept {
  return (static_cast<std::uint32_t>(v) << 1) ^ static_cast<std::uint32_t>(v >> 31);
}
EBAC_HOST_DEVICE std::int32_t unzigzag(std::uint32_t u) noexcept { return static_cast<std::int32_t>((u >> 1) ^ (0u - (u & 1u))); }

/// Number of significant bits (0 for 0).
EBAC_HOST_DEVICE int bit_width(std::uint32_t v) noexcept {
#if defined(__CUDA_ARCH__)
  return 32 - __clz(v);
#elif defined(__GNUC__)
  return v ? 32 - __builtin_clz(v) : 0;
#else
  int w = 0;
  while (v) {
    ++w;
    v >>= 1;
  }
  return w;
#endif
}

}  // namespace detail
EBAC_NAMESPACE_END
