// ebac/dtype.hpp - the element types ebac compresses.
//
// Floating-point tensors (float32, float16, bfloat16) are compressed under an
// error bound. Integer and boolean tensors (max-pool indices, masks, labels:
// a trainer saves them too) are coded losslessly. float16 and bfloat16 are
// plain 16-bit storage types with conversions written in integer
// arithmetic, so the host and the CUDA backend round identically and no CUDA
// header (or PyTorch's __CUDA_NO_HALF_CONVERSIONS__) is involved. All
// quantizer arithmetic happens in float, of which both are subsets.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_cast.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

/// Stream dtype ids (the format's byte 8; docs/format.md).
enum class dtype : std::uint8_t { f32 = 1, f16 = 2, bf16 = 3, b8 = 4, u8 = 5, i8 = 6, i16 = 7, i32 = 8, i64 = 9 };

/// Smallest and largest dtype id: a reader rejects anything outside.
inline constexpr std::uint8_t dtype_id_min = 1, dtype_id_max = 9;

struct float16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};

EBAC_HOST_DEVICE constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
    case dtype::i32: return 4;
    case dtype::f16:
    case dtype::bf16:
    case dtype::i16: return 2;
    case dtype::i64: return 8;
    case dtype::b8:
    case dtype::u8:
    case dtype::i8: return 1;
  }
  return 0;
}

/// Floating-point dtypes are compressed under a bound; the others losslessly.
EBAC_HOST_DEVICE constexpr bool is_floating(dtype t) noexcept { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::b8: return "bool";
    case dtype::u8: return "u8";
    case dtype::i8: return "i8";
    case dtype::i16: return "i16";
    case dtype::i32: return "i32";
    case dtype::i64: return "i64";
  }
  return "?";
}

/// Parses a dtype name: f32 f16 bf16 bool u8 i8 i16 i32 i64, and the long
/// spellings float32 float16 bfloat16 uint8 int8 int16 int32 int64 (also
/// float, half).
constexpr bool parse_dtype(std::string_view s, dtype& out) noexcept {
  struct spelling {
    std::string_view name;
    dtype t;
  };
  constexpr spelling spellings[] = {
      {"f32", dtype::f32},  {"float32", dtype::f32}, {"float", dtype::f32},     {"f16", dtype::f16},  {"float16", dtype::f16},
      {"half", dtype::f16}, {"bf16", dtype::bf16},   {"bfloat16", dtype::bf16}, {"bool", dtype::b8},  {"u8", dtype::u8},
      {"uint8", dtype::u8}, {"i8", dtype::i8},       {"int8", dtype::i8},       {"i16", dtype::i16},  {"int16", dtype::i16},
      {"i32", dtype::i32},  {"int32", dtype::i32},   {"i64", dtype::i64},       {"int64", dtype::i64}};
  for (const spelling& e : spellings)
    if (s == e.name) {
      out = e.t;
      return true;
    }
  return false;
}

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr dtype value = dtype::f32;
};
template <>
struct dtype_of<float16> {
  static constexpr dtype value = dtype::f16;
};
template <>
struct dtype_of<bfloat16> {
  static constexpr dtype value = dtype::bf16;
};
template <>
struct dtype_of<bool> {
  static constexpr dtype value = dtype::b8;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr dtype value = dtype::u8;
};
template <>
struct dtype_of<std::int8_t> {
  static constexpr dtype value = dtype::i8;
};
template <>
struct dtype_of<std::int16_t> {
  static constexpr dtype value = dtype::i16;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr dtype value = dtype::i32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr dtype value = dtype::i64;
};

/// Any element type ebac compresses.
template <class T>
concept element = requires {
  dtype_of<T>::value;
};

/// The element types compressed under an error bound.
template <class T>
concept floating_element = element<T> && is_floating(dtype_of<T>::value);

/// The element types coded losslessly (integers and bool).
template <class T>
concept integer_element = element<T> && !is_floating(dtype_of<T>::value);

/// Unsigned integer with the element's bit pattern (lossless storage).
template <class T>
struct bits_of;
template <>
struct bits_of<float> {
  using type = std::uint32_t;
};
template <>
struct bits_of<float16> {
  using type = std::uint16_t;
};
template <>
struct bits_of<bfloat16> {
  using type = std::uint16_t;
};
template <>
struct bits_of<bool> {
  using type = std::uint8_t;
};
template <>
struct bits_of<std::uint8_t> {
  using type = std::uint8_t;
};
template <>
struct bits_of<std::int8_t> {
  using type = std::uint8_t;
};
template <>
struct bits_of<std::int16_t> {
  using type = std::uint16_t;
};
template <>
struct bits_of<std::int32_t> {
  using type = std::uint32_t;
};
template <>
struct bits_of<std::int64_t> {
  using type = std::uint64_t;
};

/// How the backends hold an element in memory. A bool is read and written as
/// its byte: a byte other than 0 or 1 in a bool tensor is not a valid bool,
/// but it still comes back exactly, and no bool with such a byte is ever
/// loaded (which would be undefined behaviour).
template <class T>
struct storage_of {
  using type = T;
};
template <>
struct storage_of<bool> {
  using type = std::uint8_t;
};
template <class T>
using storage_t = typename storage_of<T>::type;

// --- conversions -----------------------------------------------------------

EBAC_HOST_DEVICE float to_float(float x) noexcept { return x; }

EBAC_HOST_DEVICE float to_float(bfloat16 x) noexcept { return detail::bits_float(static_cast<std::uint32_t>(x.bits) << 16); }

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
template <class T>
EBAC_HOST_DEVICE T from_float(float f) noexcept;

template <>
EBAC_HOST_DEVICE float from_float<float>(float f) noexcept {
  return f;
}

template <>
EBAC_HOST_DEVICE bfloat16 from_float<bfloat16>(float f) noexcept {
  const std::uint32_t u = detail::float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it a (quiet) NaN
    return bfloat16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  return bfloat16{static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

template <>
EBAC_HOST_DEVICE float16 from_float<float16>(float f) noexcept {
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

template <class T>
EBAC_HOST_DEVICE T from_raw_bits(typename bits_of<T>::type b) noexcept;
template <>
EBAC_HOST_DEVICE float from_raw_bits<float>(std::uint32_t b) noexcept {
  return detail::bits_float(b);
}
template <>
EBAC_HOST_DEVICE float16 from_raw_bits<float16>(std::uint16_t b) noexcept {
  return float16{b};
}
template <>
EBAC_HOST_DEVICE bfloat16 from_raw_bits<bfloat16>(std::uint16_t b) noexcept {
  return bfloat16{b};
}

// Integer elements: their two's complement bits. (bool is held as its byte,
// storage_t<bool> = uint8_t, so it never reaches these.)
EBAC_HOST_DEVICE std::uint8_t raw_bits(std::uint8_t x) noexcept { return x; }
EBAC_HOST_DEVICE std::uint8_t raw_bits(std::int8_t x) noexcept { return static_cast<std::uint8_t>(x); }
EBAC_HOST_DEVICE std::uint16_t raw_bits(std::int16_t x) noexcept { return static_cast<std::uint16_t>(x); }
EBAC_HOST_DEVICE std::uint32_t raw_bits(std::int32_t x) noexcept { return static_cast<std::uint32_t>(x); }
EBAC_HOST_DEVICE std::uint64_t raw_bits(std::int64_t x) noexcept { return static_cast<std::uint64_t>(x); }
template <>
EBAC_HOST_DEVICE std::uint8_t from_raw_bits<std::uint8_t>(std::uint8_t b) noexcept {
  return b;
}
template <>
EBAC_HOST_DEVICE std::int8_t from_raw_bits<std::int8_t>(std::uint8_t b) noexcept {
  return static_cast<std::int8_t>(b);
}
template <>
EBAC_HOST_DEVICE std::int16_t from_raw_bits<std::int16_t>(std::uint16_t b) noexcept {
  return static_cast<std::int16_t>(b);
}
template <>
EBAC_HOST_DEVICE std::int32_t from_raw_bits<std::int32_t>(std::uint32_t b) noexcept {
  return static_cast<std::int32_t>(b);
}
template <>
EBAC_HOST_DEVICE std::int64_t from_raw_bits<std::int64_t>(std::uint64_t b) noexcept {
  return static_cast<std::int64_t>(b);
}

EBAC_NAMESPACE_END
