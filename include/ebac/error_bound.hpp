// ebac/error_bound.hpp - how the caller states the error bound.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

EBAC_NAMESPACE_BEGIN

enum class bound_mode : std::uint8_t {
  absolute = 1,  ///< |x - y| <= eb
  relative = 2,  ///< |x - y| <= eb * (max - min), range over the finite values
};

constexpr std::string_view to_string(bound_mode m) noexcept { return m == bound_mode::absolute ? "abs" : "rel"; }

constexpr bool parse_bound_mode(std::string_view s, bound_mode& out) noexcept {
  if (s == "abs" || s == "absolute") {
    out = bound_mode::absolute;
    return true;
  }
  if (s == "rel" || s == "relative") {
    out = bound_mode::relative;
    return true;
  }
  return false;
}

struct error_bound {
  double value = 0;
  bound_mode mode = bound_mode::relative;

  /// A bound is valid when it is finite and > 0 (and, relative, <= 1e6: a
  /// larger relative bound is almost certainly a unit mistake).
  [[nodiscard]] status validate() const noexcept {
    if (!(value > 0) || !std::isfinite(value)) return status::invalid_argument;
    if (mode != bound_mode::absolute && mode != bound_mode::relative) return status::invalid_argument;
    if (mode == bound_mode::relative && value > 1e6) return status::invalid_argument;
    return status::ok;
  }
};

namespace detail {
/// Order-preserving int32 key of a float's bits: a < b as floats (for
/// non-NaN values; -0 sorts just below +0) exactly when key(a) < key(b).
/// The host's value_range and the CUDA range kernel both reduce keys.
[[nodiscard]] EBAC_HOST_DEVICE std::int32_t float_order_key(float x) noexcept {
  const std::uint32_t b = float_bits(x);
  return static_cast<std::int32_t>(b ^ ((static_cast<std::uint32_t>(static_cast<std::int32_t>(b) >> 31)) & 0x7fffffffu));
}
/// The float whose key is k (inverse of float_order_key).
[[nodiscard]] EBAC_HOST_DEVICE float float_from_order_key(std::int32_t k) noexcept {
  const auto u = static_cast<std::uint32_t>(k);
  return bits_float(u ^ ((static_cast<std::uint32_t>(k >> 31)) & 0x7fffffffu));
}
}  // namespace detail

/// Finite value range of a tensor. Float min/max are exact, so the range is
/// accumulated in float (vectorizable) and the span taken in double.
struct value_range {
  float min = 0, max = 0;
  bool any_finite = false;

  /// Folds a block of floats in; NaN and +-Inf are ignored. Works on the
  /// floats' bit patterns mapped to order-preserving integers, so the loop is
  /// plain integer min/max and vectorizes.
  EBAC_HOST_DEVICE void add_block(const float* x, std::size_t n) noexcept {
    std::int32_t lo = 0x7fffffff, hi = -0x7fffffff - 1;
    // Runs of a constant count: at -O2 GCC (12) vectorizes only a loop whose
    // trip count is a known multiple of the vector width.
    std::size_t i = 0;
    for (; i + key_run <= n; i += key_run) add_keys<key_run>(x + i, lo, hi);
    add_keys<0>(x + i, lo, hi, n - i);
    merge(from_keys(lo, hi));
  }
  /// The smallest and largest order keys of the finite values among Count
  /// (Count 0: n) floats at x, folded into lo and hi.
  static constexpr std::size_t key_run = 64;
  template <std::size_t Count>
  EBAC_HOST_DEVICE static void add_keys(const float* x, std::int32_t& lo_out, std::int32_t& hi_out,
                                        std::size_t n = Count) noexcept {
    std::int32_t lo = lo_out, hi = hi_out;
    const std::size_t count = Count != 0 ? Count : n;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t b = detail::float_bits(x[i]);
      const std::int32_t key = detail::float_order_key(x[i]);
      const std::uint32_t fm = 0u - static_cast<std::uint32_t>((b & 0x7f800000u) != 0x7f800000u);
      const auto klo = static_cast<std::int32_t>((static_cast<std::uint32_t>(key) & fm) | (0x7fffffffu & ~fm));
      const auto khi = static_cast<std::int32_t>((static_cast<std::uint32_t>(key) & fm) | (0x80000000u & ~fm));
      lo = klo < lo ? klo : lo;
      hi = khi > hi ? khi : hi;
    }
    lo_out = lo;
    hi_out = hi;
  }
  /// The range of finite keys [lo, hi] (empty when lo > hi: no finite value).
  [[nodiscard]] EBAC_HOST_DEVICE static value_range from_keys(std::int32_t lo, std::int32_t hi) noexcept {
    if (lo > hi) return {};
    return value_range{detail::float_from_order_key(lo), detail::float_from_order_key(hi), true};
  }
  EBAC_HOST_DEVICE void add(float x) noexcept { add_block(&x, 1); }
  EBAC_HOST_DEVICE void merge(const value_range& o) noexcept {
    if (!o.any_finite) return;
    if (!any_finite) {
      *this = o;
      return;
    }
    if (o.min < min) min = o.min;
    if (o.max > max) max = o.max;
  }
  [[nodiscard]] EBAC_HOST_DEVICE double span() const noexcept {
    return any_finite ? static_cast<double>(max) - static_cast<double>(min) : 0.0;
  }
};

/// The absolute bound a relative one stands for. A constant (or empty, or
/// all-non-finite) tensor has range 0 and hence bound 0: everything that is
/// not exactly representable is then stored losslessly, which keeps the
/// promise |x - y| <= rel * range.
EBAC_HOST_DEVICE double absolute_bound(const error_bound& eb, const value_range& r) noexcept {
  return eb.mode == bound_mode::absolute ? eb.value : eb.value * r.span();
}

EBAC_NAMESPACE_END
