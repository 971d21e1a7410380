// ebac/dtype.hpp - the element types ebac compresses.
//
// float16 and bfloat16 are plain 16-bit storage types with conversions written
// in integer arithmetic, so the host and the CUDA backend round identically
// and no CUDA header (or PyTorch's __CUDA_NO_HALF_CONVERSIONS__) is involved.
// All quantizer arithmetic happens in float, of which both are subsets.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_cast.hpp>

#include <cstdint>
#include <string_view>

EBAC_NAMESPACE_BEGIN

enum class dtype : std::uint8_t { f32 = 1, f16 = 2, bf16 = 3 };

struct float16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};

constexpr std::size_t size_of(dtype t) noexcept { return t == dtype::f32 ? 4 : 2; }

constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
  }
  return "?";
}

/// Parses "f32"/"f16"/"bf16" (also "float32", "float16", "bfloat16").
constexpr bool parse_dtype(std::string_view s, dtype& out) noexcept {
  if (s == "f32" || s == "float32" || s == "float") { out = dtype::f32; return true; }
  if (s == "f16" || s == "float16" || s == "half") { out = dtype::f16; return true; }
  if (s == "bf16" || s == "bfloat16") { out = dtype::bf16; return true; }
  return false;
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of<float16> { static constexpr dtype value = dtype::f16; };
template <> struct dtype_of<bfloat16> { static constexpr dtype value = dtype::bf16; };

template <class T>
concept element = requires { dtype_of<T>::value; };

/// Unsigned integer with the element's bit pattern (lossless storage).
template <class T> struct bits_of;
template <> struct bits_of<float> { using type = std::uint32_t; };
template <> struct bits_of<float16> { using type = std::uint16_t; };
template <> struct bits_of<bfloat16> { using type = std::uint16_t; };

// --- conversions -----------------------------------------------------------

EBAC_HOST_DEVICE float to_float(float x) noexcept { return x; }

EBAC_HOST_DEVICE float to_float(bfloat16 x) noexcept {
  return detail::bits_float(static_cast<std::uint32_t>(x.bits) << 16);
}

EBAC_HOST_DEVICE float to_float(float16 x) noexcept {
  // Branch-free (so conversion loops vectorize): shifting exponent and
  // mantissa into place and scaling by 2^112 is exact for normal and
  // subnormal halves alike; Inf/NaN are selected by mask.
  const std::uint32_t h = x.bits;
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  const std::uint32_t scaled = detail::float_bits(detail::bits_float(em << 13) * 0x1p112f);
  const std::uint32_t special = 0u - static_cast<std::uint32_t>(em >= 0x7c00u);
  const std::uint32_t inf_nan = 0x7f800000u | ((em & 0x3ffu) << 13);
  return detail::bits_float(sign | (scaled & ~special) | (inf_nan & special));
}

/// Round-to-nearest-even conversion, identical on host and device.
template <class T> EBAC_HOST_DEVICE T from_float(float f) noexcept;

template <> EBAC_HOST_DEVICE float from_float<float>(float f) noexcept { return f; }

template <> EBAC_HOST_DEVICE bfloat16 from_float<bfloat16>(float f) noexcept {
  const std::uint32_t u = detail::float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it a (quiet) NaN
    return bfloat16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  return bfloat16{static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

template <> EBAC_HOST_DEVICE float16 from_float<float16>(float f) noexcept {
  // Branch-free round-to-nearest-even. Subnormal halves: adding 0.5f puts
  // the half's unit 2^-24 at the float's last mantissa bit, so the float
  // addition itself rounds (ties to even) and the low bits are the result.
  const std::uint32_t u = detail::float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  const std::uint32_t r = a - 0x38000000u;
  const std::uint32_t normal = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
  const std::uint32_t sub = detail::float_bits(detail::bits_float(a) + 0.5f) - 0x3f000000u;
  const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(a > 0x7f800000u);
  const std::uint32_t is_inf = 0u - static_cast<std::uint32_t>(a >= 0x477ff000u);  // >= 65520 rounds to Inf
  const std::uint32_t is_sub = 0u - static_cast<std::uint32_t>(a < 0x38800000u);
  std::uint32_t h = (normal & ~is_sub) | (sub & is_sub);
  h = (h & ~is_inf) | (0x7c00u & is_inf);
  h = (h & ~is_nan) | ((0x7e00u | ((a >> 13) & 0x3ffu)) & is_nan);
  return float16{static_cast<std::uint16_t>(sign | h)};
}

/// The element's bit pattern as an unsigned integer.
EBAC_HOST_DEVICE std::uint32_t raw_bits(float x) noexcept { return detail::float_bits(x); }
EBAC_HOST_DEVICE std::uint16_t raw_bits(float16 x) noexcept { return x.bits; }
EBAC_HOST_DEVICE std::uint16_t raw_bits(bfloat16 x) noexcept { return x.bits; }

template <class T> EBAC_HOST_DEVICE T from_raw_bits(typename bits_of<T>::type b) noexcept;
template <> EBAC_HOST_DEVICE float from_raw_bits<float>(std::uint32_t b) noexcept { return detail::bits_float(b); }
template <> EBAC_HOST_DEVICE float16 from_raw_bits<float16>(std::uint16_t b) noexcept { return float16{b}; }
template <> EBAC_HOST_DEVICE bfloat16 from_raw_bits<bfloat16>(std::uint16_t b) noexcept { return bfloat16{b}; }

EBAC_NAMESPACE_END
