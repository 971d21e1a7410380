// ebac/error_model/batchnorm_model.hpp - batch normalization, whose backward
// reads its saved input for both the gamma gradient and the input gradient.
//
// Training-mode BN over channel c (M = N H W elements): xhat = (x - mu) / s,
// y = gamma xhat + beta. Frameworks save x together with mu and 1/s (exact,
// tiny), and backward computes
//     dgamma = sum_j dy_j xhat_j,
//     dx_j   = gamma / s * (dy_j - mean(dy) - xhat_j m1),   m1 = mean(dy xhat).
// With x replaced by x + e (mu and s stay exact), xhat gains e / s, so
//     d(dgamma) = (1/s) sum_j dy_j e_j,
// which is the weight gradient of a depthwise 1x1 convolution scaled by 1/s:
// the linear/conv model applies unchanged with groups = C, one group per
// channel. The input gradient changes by
//     d(dx_j) = -(gamma / s^2) [ e_j (m1 + delta / s) + xhat_j delta ],   delta = mean(dy e),
// and with E[xhat^2] = 1 and e independent of xhat,
//     E[d(dx)^2] = (gamma / s^2)^2 [ E[e^2] (m1^2 + E[delta^2] / s^2) + E[delta^2] ],
//     E[delta^2] = E[(sum dy e)^2] / M^2 = s^2 E[d(dgamma)^2] / M^2.
// Every input is a statistic the trainer has: gamma, s (saved), m1 = dgamma / M
// (computed by backward anyway), and E[e^2] from the compressor.
#pragma once

#include <ebac/config.hpp>

#include <cmath>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// Per-channel BN error propagation. `sum_sq_dgamma_unscaled` is the
/// weight-error model's expected (sum_j dy_j e_j)^2 for the channel (the
/// depthwise-1x1 group sum); the functor applies the 1/s scaling.
struct batchnorm_channel_error {
  double gamma = 1;
  double inv_std = 1;        ///< 1 / s, as saved by the forward pass
  double elements = 1;       ///< M = N H W
  double m1 = 0;             ///< mean(dy xhat) = dgamma / M
  double mean_sq_error = 0;  ///< E[e^2] over the channel

  /// Expected squared error of dgamma.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double gamma_grad_square(double sum_sq_dgamma_unscaled) const noexcept {
    return sum_sq_dgamma_unscaled * inv_std * inv_std;
  }
  /// Expected squared error of one element of dx (mean over the channel).
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_square(double sum_sq_dgamma_unscaled) const noexcept {
    return input_grad_error_part(sum_sq_dgamma_unscaled) + input_grad_shift_part(sum_sq_dgamma_unscaled);
  }
  /// The part carried element by element by e_j (m1 + delta / s): it averages
  /// over all M elements of the channel.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_error_part(double sum_sq_dgamma_unscaled) const noexcept {
    const double delta2 = sum_sq_dgamma_unscaled / (elements * elements);  // E[delta^2]
    const double k = gamma * inv_std * inv_std;
    return k * k * mean_sq_error * (m1 * m1 + delta2 * inv_std * inv_std);
  }
  /// The part xhat_j delta: one random number (delta) per channel, so a
  /// measurement over few channels scatters around it with few degrees of freedom.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_shift_part(double sum_sq_dgamma_unscaled) const noexcept {
    const double delta2 = sum_sq_dgamma_unscaled / (elements * elements);
    const double k = gamma * inv_std * inv_std;
    return k * k * delta2;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
