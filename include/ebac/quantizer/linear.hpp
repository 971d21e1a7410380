// ebac/quantizer/linear.hpp - linear quantizers with a verified bound.
//
// A quantizer maps a float to an integer code and back. It never trusts its
// own algebra: quantize_element() reconstructs the value exactly as the decoder
// will (same float operations, then rounding to the storage type) and checks
// |x - y| <= eb in exact arithmetic. Anything that fails - NaN, +-Inf, a code
// outside the bin range, a value whose reconstruction misses the bound, or
// (sign-preserving mode) a reconstruction that loses its sign - is reported
// as an outlier and stored losslessly by the pipeline.
//
// Both quantizers use only one multiply per direction and integer
// conversions, so there is nothing a compiler could contract into an FMA:
// host and device choose the same codes and reconstruct the same bits.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_cast.hpp>
#include <ebac/dtype.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

EBAC_NAMESPACE_BEGIN

enum class quantizer_id : std::uint8_t { linear = 1, sign_preserving = 2 };

/// |code| stays below this so that 2|code|-1 is exact in float.
inline constexpr std::int32_t quantizer_code_limit = 1 << 22;

namespace detail {

/// Largest float <= d (d >= 0); float max for huge d.
inline float float_at_most(double d) noexcept {
  if (!(d < static_cast<double>(std::numeric_limits<float>::max())))
    return std::numeric_limits<float>::max();
  float f = static_cast<float>(d);
  if (static_cast<double>(f) > d) f = std::nextafter(f, 0.0f);
  return f;
}

EBAC_HOST_DEVICE bool is_finite_float(float x) noexcept {
  return (float_bits(x) & 0x7f800000u) != 0x7f800000u;
}

/// |x - y| <= eb decided exactly (x, y finite floats, eb >= 0 a double).
/// The double difference is correctly rounded and rounding is monotone, so
/// only |d| == eb is ambiguous; there the exact error term (TwoSum) decides.
EBAC_HOST_DEVICE bool within_bound(float x, float y, double eb) noexcept {
  const double a = x, b = -static_cast<double>(y);
  const double s = a + b;
  const double m = s < 0 ? -s : s;
  if (m < eb) return true;
  if (m > eb) return false;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);  // exact: (a + b) - s
  return err == 0 || ((err < 0) != (s < 0));
}

}  // namespace detail

/// Plain linear quantizer: code q = round(x / 2eb), reconstruction q * 2eb.
/// Values with |x| < eb become 0, so it does not preserve signs near zero.
struct linear_quantizer {
  static constexpr quantizer_id id = quantizer_id::linear;
  static constexpr bool preserves_zero_and_sign = false;

  double eb = 0;         // the bound the caller is promised
  float step = 0;        // largest float <= 2eb: reconstruction = q * step
  float inv_step = 0;    // 1 / step, used only to pick a candidate code

  static linear_quantizer make(double eb) noexcept {
    linear_quantizer q;
    q.eb = eb;
    q.step = detail::float_at_most(2.0 * eb);
    q.inv_step = q.step > 0 ? static_cast<float>(1.0 / static_cast<double>(q.step)) : 0.0f;
    return q;
  }

  /// Candidate code; false when none fits the code range (or x is not finite).
  EBAC_HOST_DEVICE bool try_quantize(float x, std::int32_t& code) const noexcept {
    const float a = (x < 0 ? -x : x) * inv_step;
    if (!(a < static_cast<float>(quantizer_code_limit - 1))) return false;
    const std::int32_t t = static_cast<std::int32_t>(a);  // trunc, a >= 0
    const std::int32_t m = t + ((static_cast<float>(t) + 0.5f <= a) ? 1 : 0);
    code = x < 0 ? -m : m;
    return true;
  }

  EBAC_HOST_DEVICE float reconstruct(std::int32_t code) const noexcept {
    return static_cast<float>(code) * step;
  }
};

/// Zero- and sign-preserving quantizer: bins (2eb(q-1), 2eb q] centred at
/// (2q-1) eb for q > 0, code 0 only for x == 0, mirrored for x < 0. A ReLU
/// mask is therefore recoverable from the reconstruction.
struct sign_preserving_quantizer {
  static constexpr quantizer_id id = quantizer_id::sign_preserving;
  static constexpr bool preserves_zero_and_sign = true;

  double eb = 0;
  float half_step = 0;   // largest float <= eb: reconstruction = (2q-1) * half_step
  float inv_step = 0;    // 1 / (2 half_step)

  static sign_preserving_quantizer make(double eb) noexcept {
    sign_preserving_quantizer q;
    q.eb = eb;
    q.half_step = detail::float_at_most(eb);
    q.inv_step = q.half_step > 0 ? static_cast<float>(0.5 / static_cast<double>(q.half_step)) : 0.0f;
    return q;
  }

  EBAC_HOST_DEVICE bool try_quantize(float x, std::int32_t& code) const noexcept {
    if (x == 0.0f) { code = 0; return true; }
    const float a = (x < 0 ? -x : x) * inv_step;
    if (!(a < static_cast<float>(quantizer_code_limit - 1))) return false;
    std::int32_t t = static_cast<std::int32_t>(a);
    t += (static_cast<float>(t) < a) ? 1 : 0;  // ceil
    if (t < 1) t = 1;
    code = x < 0 ? -t : t;
    return true;
  }

  EBAC_HOST_DEVICE float reconstruct(std::int32_t code) const noexcept {
    if (code == 0) return 0.0f;
    const std::int64_t m = code < 0 ? -static_cast<std::int64_t>(code) : code;
    const float mag = static_cast<float>(2 * m - 1) * half_step;
    return code < 0 ? -mag : mag;
  }
};

/// The outcome of quantizing one element.
struct quantized {
  std::int32_t code;  // 0 for outliers (the integer field stays defined)
  bool outlier;       // true: store the raw bits instead
};

/// Quantize one element and verify its reconstruction in the decoder's own
/// arithmetic, including the rounding back to the storage type T.
template <class Quantizer, class T>
EBAC_HOST_DEVICE quantized quantize_element(const Quantizer& q, T x) noexcept {
  const float xf = to_float(x);
  std::int32_t code;
  if (!detail::is_finite_float(xf) || !q.try_quantize(xf, code)) return {0, true};
  const float yf = to_float(from_float<T>(q.reconstruct(code)));
  if (!detail::is_finite_float(yf) || !detail::within_bound(xf, yf, q.eb)) return {0, true};
  if constexpr (Quantizer::preserves_zero_and_sign) {
    if ((xf == 0.0f) != (yf == 0.0f) || ((xf < 0.0f) != (yf < 0.0f))) return {0, true};
  }
  return {code, false};
}

/// The decoder's reconstruction of a code, rounded to the storage type.
template <class T, class Quantizer>
EBAC_HOST_DEVICE T reconstruct_element(const Quantizer& q, std::int32_t code) noexcept {
  return from_float<T>(q.reconstruct(code));
}

EBAC_NAMESPACE_END
