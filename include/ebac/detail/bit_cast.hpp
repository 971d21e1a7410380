// ebac/detail/bit_cast.hpp - float <-> bits on host and device.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>
#include <cstring>

EBAC_NAMESPACE_BEGIN
namespace detail {

EBAC_HOST_DEVICE std::uint32_t float_bits(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

EBAC_HOST_DEVICE float bits_float(std::uint32_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

EBAC_HOST_DEVICE std::uint64_t double_bits(double d) noexcept {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(d));
#else
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

EBAC_HOST_DEVICE double bits_double(std::uint64_t u) noexcept {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

}  // namespace detail
EBAC_NAMESPACE_END
