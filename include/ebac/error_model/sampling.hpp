// ebac/error_model/sampling.hpp - how far a measured sigma may fall from the
// model's sigma by chance alone.
//
// A measured sigma is the RMS of P gradient-error entries. If the entries are
// independent Normal(0, sigma_i^2) with mean sigma_i^2 = sigma^2, then
// P sigma_hat^2 / sigma^2 is chi-square with P degrees of freedom, so
// sigma_hat / sigma lies in [sqrt(q_lo / P), sqrt(q_hi / P)] with the
// probability between the two quantiles. Entries are rarely fully
// independent (they share the same input errors and output gradient), so
// callers pass an effective number of degrees of freedom, never more than P.
// Quantiles use the Wilson-Hilferty cube approximation (relative error below
// 1% for dof >= 10; the tests use dof in the hundreds or more).
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/constexpr_math.hpp>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// p-quantile of chi-square(dof) / dof for a standard-normal quantile z
/// (z = 3.29 for the 99.95% point, -3.29 for the 0.05% point).
EBAC_HOST_DEVICE constexpr double chi_square_over_dof(double dof, double z) noexcept {
  if (!(dof > 0)) return 0;
  const double a = 2.0 / (9.0 * dof);
  const double t = 1 - a + z * constexpr_sqrt(a);
  return t > 0 ? t * t * t : 0.0;
}

/// Interval for measured / true sigma that holds with two-sided probability
/// 1 - 2 Phi(-z) when the measurement has `dof` independent squared terms.
struct sigma_ratio_interval {
  double low = 0, high = 0;
};

EBAC_HOST_DEVICE constexpr sigma_ratio_interval sampling_interval(double dof, double z = 3.29) noexcept {
  return {constexpr_sqrt(chi_square_over_dof(dof, -z)), constexpr_sqrt(chi_square_over_dof(dof, z))};
}

/// Satterthwaite's effective degrees of freedom of a sum of independent
/// mean-square terms: (sum v_i)^2 / sum (v_i^2 / dof_i).
EBAC_HOST_DEVICE constexpr double satterthwaite_dof(const double* value, const double* dof, int n) noexcept {
  double s = 0, d = 0;
  for (int i = 0; i < n; ++i) {
    if (!(value[i] > 0) || !(dof[i] > 0)) continue;
    s += value[i];
    d += value[i] * value[i] / dof[i];
  }
  return d > 0 ? s * s / d : 0.0;
}

}  // namespace error_model
EBAC_NAMESPACE_END
