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
#include <ebac/quantizer/quantizer_id.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

EBAC_NAMESPACE_BEGIN

/// |code| stays below this so that 2|code|-1 is exact in float.
inline constexpr std::int32_t quantizer_code_limit = 1 << 22;

/// Both quantizers narrow their bins by this fraction of the bound. A value
/// that sits exactly on an edge of the un-narrowed grid (the 1/(1-p) of a
/// dropout mask, the 6 of a saturated ReLU6, a one-hot 1: anything at the
/// end of a value range, or a multiple of a round absolute bound) would
/// otherwise be exactly eb from both neighbouring reconstructions, and float
/// rounding would push it past the bound into the outliers. With the margin
/// such a value lies strictly inside a bin, (2q + 1) x 2^-10 x eb from its
/// edge, which float32 rounding (2^-24 relative) cannot cross for any code
/// below 2^13. The narrower bins cost log2(1 / (1 - 2^-10)) = 0.0014 bits
/// an element.
inline constexpr double quantizer_bin_margin = 0x1p-10;

namespace detail {

/// Largest float <= d (d >= 0); float max for huge d.
EBAC_HOST_DEVICE float float_at_most(double d) noexcept {
  if (!(d < 3.4028234663852886e38)) return 3.4028234663852886e38f;     // float max (also for NaN)
  float f = static_cast<float>(d);                                     // round to nearest
  if (static_cast<double>(f) > d) f = bits_float(float_bits(f) - 1u);  // f > d >= 0: one ulp down
  return f;
}

/// All ones when b, else zero: selects by masking, which (unlike a ternary
/// around float arithmetic) compilers vectorize under -ftrapping-math.
EBAC_HOST_DEVICE std::uint32_t mask(bool b) noexcept { return 0u - static_cast<std::uint32_t>(b); }

/// Bit pattern of float(quantizer_code_limit - 1): candidate magnitudes must stay below it.
inline constexpr std::uint32_t code_limit_bits = 0x4a7ffffcu;  // 4194303.0f
static_assert(quantizer_code_limit == (1 << 22));

/// The float difference fl(x - y) is within 2^-24 (relative) of the exact
/// one, so fl(|x - y|) <= eb (1 - 2^-22) proves |x - y| <= eb. Values closer
/// to the bound than that take the exact (double, TwoSum) check.
EBAC_HOST_DEVICE float settle_threshold(double eb) noexcept { return float_at_most(eb * (1.0 - 0x1p-22)); }

EBAC_HOST_DEVICE bool is_finite_float(float x) noexcept { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

/// |x - y| <= eb decided exactly (x, y finite floats, eb >= 0 a double).
/// The double difference is correctly rounded and rounding is monotone, so
/// only |d| == eb is ambiguous; there the exact error term (TwoSum) decides.
EBAC_HOST_DEVICE bool within_bound(float x, float y, double eb) noexcept {
  const double a = x, b = -static_cast<double>(y);
  const double s = a + b;
  const double m = s < 0 ? -s : s;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);  // exact: (a + b) - s (TwoSum)
  return (m < eb) | ((m == eb) & ((err == 0) | ((err < 0) != (s < 0))));
}

/// A float quantizer's top level: the largest magnitude of a 16-bit tensor
/// (the 6 of a saturated ReLU6, the 1/(1-p) of a float16 dropout mask). A
/// value rounded back to float16 or bfloat16 moves by up to half their
/// spacing, several times the bin margin, so a value on a multiple of 2 eb
/// can still fail the bound there and become an outlier: for a saturated map
/// that was a third of the tensor. With a top level, |x| == value gets the
/// code one past its natural one (a code no other value uses: nothing is
/// larger) and comes back exactly. The writer sets it for 16-bit tensors
/// only (float32 needs only the margin); the stream header carries it.
struct top_level {
  float value = 0;         ///< 0: none
  std::int32_t code = -1;  ///< the magnitude's code; -1 matches none
  /// The code magnitude for |x| (its bits ax), given its natural magnitude t.
  [[nodiscard]] EBAC_HOST_DEVICE std::int32_t select_code(std::uint32_t ax, std::int32_t t) const noexcept {
    const std::uint32_t hit = mask(ax == float_bits(value) && code >= 0);
    return static_cast<std::int32_t>((static_cast<std::uint32_t>(t) & ~hit) | (static_cast<std::uint32_t>(code) & hit));
  }
  /// The reconstruction for a code: `value` (with the code's sign) for the
  /// top code, else y.
  [[nodiscard]] EBAC_HOST_DEVICE float select_value(std::int32_t c, float y) const noexcept {
    const std::uint32_t m = static_cast<std::uint32_t>(c < 0 ? -static_cast<std::int64_t>(c) : c);
    const std::uint32_t hit = mask(code >= 0 && m == static_cast<std::uint32_t>(code));
    const std::uint32_t v = float_bits(value) | (static_cast<std::uint32_t>(c) & 0x80000000u);
    return bits_float((float_bits(y) & ~hit) | (v & hit));
  }
};

}  // namespace detail

/// Plain linear quantizer: code q = round(x / s), reconstruction q * s with
/// s = 2 eb (1 - quantizer_bin_margin).
/// Values with |x| < eb become 0, so it does not preserve signs near zero.
struct linear_quantizer {
  static constexpr quantizer_id id = quantizer_id::linear;
  static constexpr bool preserves_zero_and_sign = false;

  double eb = 0;          // the bound the caller is promised
  float step = 0;         // largest float <= 2eb (1 - margin): reconstruction = q * step
  float inv_step = 0;     // 1 / step, used only to pick a candidate code
  float settle = 0;       // a float |x - y| <= settle proves |x - y| <= eb exactly
  detail::top_level top;  // |x| == top.value comes back exactly (see top_level)

  EBAC_HOST_DEVICE static linear_quantizer make(double eb) noexcept {
    linear_quantizer q;
    q.eb = eb;
    q.step = detail::float_at_most(2.0 * eb * (1.0 - quantizer_bin_margin));
    q.inv_step = q.step > 0 ? static_cast<float>(1.0 / static_cast<double>(q.step)) : 0.0f;
    q.settle = detail::settle_threshold(eb);
    return q;
  }

  /// This quantizer with a top level (0: none; see detail::top_level).
  [[nodiscard]] EBAC_HOST_DEVICE linear_quantizer with_top(float value) const noexcept {
    linear_quantizer q = *this;
    q.top = {};
    std::int32_t c = 0;
    if (value > 0.0f && q.try_quantize(value, c) && c + 1 < quantizer_code_limit) q.top = {value, c + 1};
    return q;
  }

  /// Candidate code (0 when none fits the code range or x is not finite).
  /// Comparisons act on the bit patterns of non-negative floats (which order
  /// like integers) so the loop has no float compares and vectorizes even
  /// under the default -ftrapping-math.
  EBAC_HOST_DEVICE bool try_quantize(float x, std::int32_t& code) const noexcept {
    const std::uint32_t xb = detail::float_bits(x);
    std::uint32_t ab = detail::float_bits(detail::bits_float(xb & 0x7fffffffu) * inv_step);
    const std::uint32_t ok = detail::mask(ab < detail::code_limit_bits);  // 0 for NaN/Inf
    ab &= ok;
    const std::int32_t t = static_cast<std::int32_t>(detail::bits_float(ab));  // trunc, 0 <= a < 2^22
    const std::int32_t m = t + static_cast<std::int32_t>(detail::float_bits(static_cast<float>(t) + 0.5f) <= ab);
    const std::int32_t sign = static_cast<std::int32_t>(xb) >> 31;  // 0 or -1
    code = (top.select_code(xb & 0x7fffffffu, m) ^ sign) - sign;
    return ok != 0;
  }

  EBAC_HOST_DEVICE float reconstruct(std::int32_t code) const noexcept {
    return top.select_value(code, static_cast<float>(code) * step);
  }
};

/// Zero- and sign-preserving quantizer: bins (2h(q-1), 2h q] centred at
/// (2q-1) h for q > 0, h = eb (1 - quantizer_bin_margin), code 0 only for
/// x == 0, mirrored for x < 0. A ReLU mask is therefore recoverable from the
/// reconstruction.
struct sign_preserving_quantizer {
  static constexpr quantizer_id id = quantizer_id::sign_preserving;
  static constexpr bool preserves_zero_and_sign = true;

  double eb = 0;
  float half_step = 0;    // largest float <= eb (1 - margin): reconstruction = (2q-1) * half_step
  float inv_step = 0;     // 1 / (2 half_step)
  float settle = 0;       // a float |x - y| <= settle proves |x - y| <= eb exactly
  detail::top_level top;  // |x| == top.value comes back exactly (see top_level)

  EBAC_HOST_DEVICE static sign_preserving_quantizer make(double eb) noexcept {
    sign_preserving_quantizer q;
    q.eb = eb;
    q.half_step = detail::float_at_most(eb * (1.0 - quantizer_bin_margin));
    q.inv_step = q.half_step > 0 ? static_cast<float>(0.5 / static_cast<double>(q.half_step)) : 0.0f;
    q.settle = detail::settle_threshold(eb);
    return q;
  }

  /// This quantizer with a top level (0: none; see detail::top_level).
  [[nodiscard]] EBAC_HOST_DEVICE sign_preserving_quantizer with_top(float value) const noexcept {
    sign_preserving_quantizer q = *this;
    q.top = {};
    std::int32_t c = 0;
    if (value > 0.0f && q.try_quantize(value, c) && c + 1 < quantizer_code_limit) q.top = {value, c + 1};
    return q;
  }

  EBAC_HOST_DEVICE bool try_quantize(float x, std::int32_t& code) const noexcept {
    const std::uint32_t xb = detail::float_bits(x);
    const std::uint32_t axb = xb & 0x7fffffffu;
    std::uint32_t ab = detail::float_bits(detail::bits_float(axb) * inv_step);
    const std::uint32_t ok = detail::mask(ab < detail::code_limit_bits);  // 0 for NaN/Inf
    ab &= ok;
    std::int32_t t = static_cast<std::int32_t>(detail::bits_float(ab));
    t += static_cast<std::int32_t>(detail::float_bits(static_cast<float>(t)) < ab);  // ceil
    t += static_cast<std::int32_t>(t < 1);                                           // x != 0 -> |code| >= 1
    t = top.select_code(axb, t);
    const std::int32_t sign = static_cast<std::int32_t>(xb) >> 31;
    code = static_cast<std::int32_t>(static_cast<std::uint32_t>((t ^ sign) - sign) & detail::mask(axb != 0));
    return ok != 0;
  }

  EBAC_HOST_DEVICE float reconstruct(std::int32_t code) const noexcept {
    // 2|code| - 1 in wrapping unsigned arithmetic: exact for valid codes
    // (|code| < 2^22), and defined (if meaningless) for a corrupt stream's.
    const std::uint32_t sign = static_cast<std::uint32_t>(code >> 31);
    const std::uint32_t m = (static_cast<std::uint32_t>(code) ^ sign) - sign;
    const auto odd = static_cast<std::int32_t>((2u * m - 1u) & 0x7fffffffu);
    const std::uint32_t mag =
        detail::float_bits(top.select_value(static_cast<std::int32_t>(m), static_cast<float>(odd) * half_step));
    // Masks, not a ternary: a conditional float multiply would keep the
    // compiler from vectorizing (it may not speculate a trapping operation).
    return detail::bits_float((mag | (sign << 31)) & (0u - static_cast<std::uint32_t>(code != 0)));
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
  // Written without early returns so that host loops over it vectorize.
  const float xf = to_float(x);
  std::int32_t code;
  bool ok = q.try_quantize(xf, code);
  code = ok ? code : 0;
  const float yf = to_float(from_float<T>(q.reconstruct(code)));
  const bool finite = detail::is_finite_float(yf), within = detail::within_bound(xf, yf, q.eb);
  ok = ok & finite & within;
  if constexpr (Quantizer::preserves_zero_and_sign) { ok = ok & ((xf == 0.0f) == (yf == 0.0f)) & ((xf < 0.0f) == (yf < 0.0f)); }
  return {ok ? code : 0, !ok};
}

/// Vectorizable first pass of quantize_element: `outlier == false` means the
/// code is final and equals what quantize_element returns; `outlier == true`
/// means "not settled here" and the caller must run quantize_element (which
/// decides exactly; NaN, Inf, range overflow and values whose error lies
/// within 2^-22 of the bound all land there). Uses only integer compares.
template <class Quantizer, class T>
EBAC_HOST_DEVICE quantized quantize_element_fast(const Quantizer& q, T x) noexcept {
  const float xf = to_float(x);
  std::int32_t code;
  const std::uint32_t ok = detail::mask(q.try_quantize(xf, code));
  code = static_cast<std::int32_t>(static_cast<std::uint32_t>(code) & ok);
  const float yf = to_float(from_float<T>(q.reconstruct(code)));
  const std::uint32_t xb = detail::float_bits(xf), yb = detail::float_bits(yf);
  const std::uint32_t db = detail::float_bits(xf - yf) & 0x7fffffffu;  // NaN/Inf compare above settle
  std::uint32_t settled = ok & detail::mask(db <= detail::float_bits(q.settle));
  if constexpr (Quantizer::preserves_zero_and_sign) {
    const std::uint32_t xz = detail::mask((xb & 0x7fffffffu) == 0), yz = detail::mask((yb & 0x7fffffffu) == 0);
    settled &= ~(xz ^ yz) & (xz | (static_cast<std::uint32_t>(static_cast<std::int32_t>(xb ^ yb) >> 31) ^ 0xffffffffu));
  }
  return {static_cast<std::int32_t>(static_cast<std::uint32_t>(code) & settled), settled == 0};
}

/// The decoder's reconstruction of a code, rounded to the storage type.
template <class T, class Quantizer>
EBAC_HOST_DEVICE T reconstruct_element(const Quantizer& q, std::int32_t code) noexcept {
  return from_float<T>(q.reconstruct(code));
}

EBAC_NAMESPACE_END
