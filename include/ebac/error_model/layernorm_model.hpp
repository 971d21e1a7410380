// ebac/error_model/layernorm_model.hpp - layer normalization, whose backward
// reads its saved input for both the gamma gradient and the input gradient.
//
// LayerNorm over the last extent D of a rows x D input (rows = every leading
// extent: batch, tokens, ...): per row r, xhat = (x - mu_r) / s_r and
// y = gamma xhat + beta, gamma and beta per feature. Frameworks save x with
// mu_r and 1/s_r (exact, tiny; PyTorch's native_layer_norm does), and
// backward computes, with g = gamma dy,
//     dgamma_d = sum_r dy_rd xhat_rd,      dbeta_d = sum_r dy_rd  (no x: exact),
//     dx_rd    = (1/s_r) (g_rd - mean_d(g_r) - xhat_rd m1_r),   m1_r = mean_d(g_r xhat_r).
// It is BatchNorm (batchnorm_model.hpp) with the roles of samples and features
// swapped: the statistics are per row, the affine parameters per feature.
// With x replaced by x + e (mu and s stay exact), xhat gains e / s_r, so
//     d(dgamma_d) = sum_r (dy_rd / s_r) e_rd,
// the weight gradient of a depthwise 1x1 convolution over D channels whose
// output gradient is dy scaled row by row by 1/s_r: the linear/conv model
// (weight_error_model.hpp) applies unchanged to that scaled gradient
// (layernorm_gamma_geometry, layernorm_scaled_output_gradient). The input
// gradient changes exactly by
//     d(dx_rd) = -(1/s_r) [ (e_rd / s_r)(m1_r + delta_r) + xhat_rd delta_r ],   delta_r = mean_d(g_rd e_rd) / s_r,
// and with mean_d(xhat^2) = 1 (LayerNorm makes it so, up to eps) and the
// row's errors independent of each other and of xhat (the compressor's
// errors at bounds well below the row's spread),
//     E[mean_d d(dx)^2] = (1/s^2) [ v/s^2 (m1^2 + E[delta^2]) + E[delta^2] ],
//     E[delta^2]        = v sum_d g_d^2 / (D^2 s^2),    v = mean_d e^2 of the row.
// Every input is a statistic the trainer has: s (saved), m1 (backward
// computes it), sum_d g^2 (one pass over dy) and v (the compressor's error
// statistics). docs/error-model.md section 6.2 has the derivation and the measured tables.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// One row of a LayerNorm's backward, as far as an input error is concerned:
/// the exact change of dx (host or device).
struct layernorm_row_backward {
  double mean = 0;     ///< mu_r, saved by the forward pass
  double inv_std = 1;  ///< 1 / s_r, saved by the forward pass
  double m1 = 0;       ///< mean_d(g xhat) over the row, g = gamma dy
  double delta = 0;    ///< mean_d(g e) / s_r over the row

  /// The exact change of dx at an element whose exact input is x, whose
  /// saved copy is off by e.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_change(double x, double e) const noexcept {
    const double xhat = (x - mean) * inv_std;
    return -inv_std * (e * inv_std * (m1 + delta) + xhat * delta);
  }
};

/// One row's expected input-gradient error from the trainer's statistics.
struct layernorm_row_error {
  double inv_std = 1;        ///< 1 / s_r
  double features = 1;       ///< D
  double m1 = 0;             ///< mean_d(g xhat), as backward computes it
  double sum_sq_gdy = 0;     ///< sum_d (gamma_d dy_rd)^2
  double mean_sq_error = 0;  ///< mean_d e_rd^2, the compressor's error over the row

  /// E[delta^2]: one random number per row, a sum of D independent errors.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double delta_square() const noexcept {
    return mean_sq_error * sum_sq_gdy * inv_std * inv_std / (features * features);
  }
  /// The part carried element by element by e (m1 + delta) / s^2.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_error_part() const noexcept {
    const double k = inv_std * inv_std;
    return k * k * mean_sq_error * (m1 * m1 + delta_square());
  }
  /// The part xhat delta / s: one random delta per row, so a measurement over
  /// few rows scatters around it with few degrees of freedom.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_shift_part() const noexcept {
    return inv_std * inv_std * delta_square();
  }
  /// Expected mean square of d(dx) over the row.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_square() const noexcept {
    return input_grad_error_part() + input_grad_shift_part();
  }
};

/// The geometry under which dgamma's error is a weight gradient: a depthwise
/// 1x1 convolution over D channels whose batch is the rows (H = W = 1), so
/// the rows x D layout is its N x C x 1 x 1 input.
[[nodiscard]] inline conv2d_geometry layernorm_gamma_geometry(std::int64_t rows, std::int64_t features) noexcept {
  conv2d_geometry g;
  g.batch = rows;
  g.in_channels = g.out_channels = g.groups = features;
  g.in_h = g.in_w = 1;
  return g;
}

/// Row r's mean and 1 / sqrt(var + eps) of a rows x D input, as a LayerNorm
/// saves them (biased variance, two passes in double).
template <class T>
void layernorm_saved_statistics(std::int64_t features, const T* row, double eps, double& mean, double& inv_std) {
  double s = 0;
  for (std::int64_t d = 0; d < features; ++d) s += detail::as_double(row[d]);
  mean = s / static_cast<double>(features);
  double q = 0;
  for (std::int64_t d = 0; d < features; ++d) {
    const double v = detail::as_double(row[d]) - mean;
    q += v * v;
  }
  inv_std = 1.0 / std::sqrt(q / static_cast<double>(features) + eps);
}

/// dy scaled row by row by the saved 1/s_r: the output gradient under which
/// d(dgamma) is the weight-gradient error of layernorm_gamma_geometry.
template <class D>
std::vector<double> layernorm_scaled_output_gradient(std::int64_t rows, std::int64_t features, const D* dy,
                                                     const std::vector<double>& inv_std) {
  std::vector<double> out(static_cast<std::size_t>(rows * features));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t d = 0; d < features; ++d) {
      const auto j = static_cast<std::size_t>(r * features + d);
      out[j] = detail::as_double(dy[j]) * inv_std[static_cast<std::size_t>(r)];
    }
  return out;
}

/// A LayerNorm's backward with the saved (exact) statistics, in double: the
/// host reference that measures what an input error does. `in` is the saved
/// input as backward reads it (exact or decompressed); mean and inv_std are
/// the forward's (from the exact input). gamma may be null (1). dgamma (D)
/// and dx (rows x D) are overwritten. invalid_argument for empty sizes.
template <class T, class D>
status layernorm_backward(std::int64_t rows, std::int64_t features, const T* in, const std::vector<double>& mean,
                          const std::vector<double>& inv_std, const D* dy, const float* gamma, std::vector<double>& dgamma,
                          std::vector<double>& dx) {
  if (rows <= 0 || features <= 0 || mean.size() != static_cast<std::size_t>(rows) ||
      inv_std.size() != static_cast<std::size_t>(rows))
    return status::invalid_argument;
  dgamma.assign(static_cast<std::size_t>(features), 0.0);
  dx.assign(static_cast<std::size_t>(rows * features), 0.0);
  std::vector<double> g(static_cast<std::size_t>(features)), xhat(g.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto rr = static_cast<std::size_t>(r);
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t d = 0; d < features; ++d) {
      const auto j = static_cast<std::size_t>(r * features + d), dd = static_cast<std::size_t>(d);
      const double dyv = detail::as_double(dy[j]);
      xhat[dd] = (detail::as_double(in[j]) - mean[rr]) * inv_std[rr];
      g[dd] = (gamma ? static_cast<double>(gamma[d]) : 1.0) * dyv;
      dgamma[dd] += dyv * xhat[dd];
      sum_g += g[dd];
      sum_gx += g[dd] * xhat[dd];
    }
    const double mean_g = sum_g / static_cast<double>(features), m1 = sum_gx / static_cast<double>(features);
    for (std::int64_t d = 0; d < features; ++d) {
      const auto dd = static_cast<std::size_t>(d);
      dx[static_cast<std::size_t>(r * features + d)] = inv_std[rr] * (g[dd] - mean_g - xhat[dd] * m1);
    }
  }
  return status::ok;
}

/// The model's expected mean square of d(dx) over a rows x D LayerNorm
/// input: layernorm_row_error per row, averaged. Its statistics come from
/// what a trainer has: the saved statistics (mean, inv_std, from the exact
/// input), the output gradient dy and gamma (null: 1), the compressor's error
/// y - x per row, and m1 as backward computes it, from the reconstruction y.
template <class T, class D>
double layernorm_input_grad_mean_square(std::int64_t rows, std::int64_t features, const T* x, const T* y,
                                        const std::vector<double>& mean, const std::vector<double>& inv_std, const D* dy,
                                        const float* gamma) {
  if (rows <= 0 || features <= 0) return 0.0;
  double sum = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto rr = static_cast<std::size_t>(r);
    layernorm_row_error e;
    e.inv_std = inv_std[rr];
    e.features = static_cast<double>(features);
    double sum_gx = 0;
    for (std::int64_t d = 0; d < features; ++d) {
      const auto j = static_cast<std::size_t>(r * features + d);
      const double gdy = (gamma ? static_cast<double>(gamma[d]) : 1.0) * detail::as_double(dy[j]);
      const double yv = detail::as_double(y[j]), err = yv - detail::as_double(x[j]);
      sum_gx += gdy * (yv - mean[rr]) * inv_std[rr];
      e.sum_sq_gdy += gdy * gdy;
      e.mean_sq_error += err * err;
    }
    e.m1 = sum_gx / static_cast<double>(features);
    e.mean_sq_error /= static_cast<double>(features);
    sum += e.input_grad_square();
  }
  return sum / static_cast<double>(rows);
}

}  // namespace error_model
EBAC_NAMESPACE_END
