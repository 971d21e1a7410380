// ebac/error_model/constexpr_math.hpp - the few math functions the model's
// functors need in constant expressions (C++20's <cmath> is not constexpr)
// and in device code. Accurate to a few ulps; used for scale factors, never
// in the compressor's bit-exact paths.
#pragma once

#include <ebac/config.hpp>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// sqrt(v) for v >= 0 (0 for v <= 0 or NaN, v for +Inf): the argument is
/// scaled into [1, 4) by powers of 4 so Newton's iteration converges in a few
/// steps for any double.
EBAC_HOST_DEVICE constexpr double constexpr_sqrt(double v) noexcept {
  if (!(v > 0)) return 0;
  if (v > 1.7976931348623157e308) return v;
  double scale = 1;
  while (v >= 4) {
    v *= 0.25;
    scale *= 2;
  }
  while (v < 1) {
    v *= 4;
    scale *= 0.5;
  }
  double r = 1.5;
  for (int i = 0; i < 8; ++i) r = 0.5 * (r + v / r);
  return r * scale;
}

/// x^a for x > 0 and 0 <= a <= 1, by the binary expansion of a (x^(2^-i) is
/// i repeated square roots); 40 bits of a are plenty for a smoothing weight.
EBAC_HOST_DEVICE constexpr double constexpr_pow_unit(double x, double a) noexcept {
  if (!(x > 0)) return 0;
  if (a >= 1) return x;
  double result = 1, root = x;
  for (int i = 0; i < 40 && a > 0; ++i) {
    root = constexpr_sqrt(root);
    a *= 2;
    if (a >= 1) {
      result *= root;
      a -= 1;
    }
  }
  return result;
}

}  // namespace error_model
EBAC_NAMESPACE_END
