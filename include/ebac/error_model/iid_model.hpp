// ebac/error_model/iid_model.hpp - the first-principles model of DESIGN.md.
//
// If the errors e of the saved input are independent, zero-mean and
// uncorrelated with the output gradient, each weight-gradient entry's error
// is a sum of many independent terms, so it is nearly Normal with
//     sigma^2 = E[e^2] * sum_j dy_j^2      (j over the entry's M pairs),
// and averaging over the K taps and all entries of a group,
//     sigma^2 = K * sum_g S2_g * E2_g / P,
// S2_g = sum of dy^2 over the group's output channels, E2_g = sum over its
// input channels of the per-element mean of e^2, P = number of weights.
// With a uniform error on the non-zero inputs, E[e^2] = eb^2 / 3 times the
// non-zero share, and sigma is proportional to eb, which inverts in closed
// form. This model under-predicts layers whose saved input repeats values
// (see energy_pyramid.hpp); weight_error_model.hpp corrects for that, and
// this one stays as the baseline and as the controller's first guess.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/constexpr_math.hpp>

#include <cmath>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// sigma = eb * slope with slope^2 = taps * sum_dy2 * nonzero_share * mean_sq_per_eb2 / weights.
/// mean_sq_per_eb2 is E[e^2] / eb^2 on a non-zero input: 1/3 for a uniform
/// error (the default), the measured value when the compressor reports it.
struct iid_weight_error {
  double taps = 1;     ///< K = KH * KW
  double sum_dy2 = 0;  ///< sum of dy^2 over the layer (all groups; equal group sizes)
  double in_channels_per_group = 1;
  double nonzero_share = 1;  ///< share of saved-input elements that are not exactly zero
  double weights = 1;        ///< P = O * C/G * K
  double mean_sq_per_eb2 = 1.0 / 3.0;

  /// d sigma / d eb.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double slope() const noexcept {
    const double s2 = taps * sum_dy2 * in_channels_per_group * nonzero_share * mean_sq_per_eb2 / weights;
    return s2 > 0 ? constexpr_sqrt(s2) : 0.0;
  }
  /// Forward map: absolute error bound -> predicted sigma of the weight-gradient error.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double operator()(double eb) const noexcept { return eb * slope(); }
  /// Inverse map: target sigma -> the absolute bound that meets it (0 if the
  /// layer has no gradient or no non-zero input: any bound meets the target).
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double inverse(double target_sigma) const noexcept {
    const double k = slope();
    return k > 0 ? target_sigma / k : 0.0;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
