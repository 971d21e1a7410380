// ebac/error_model/batchnorm_propagation.hpp - how a BatchNorm's compressed
// saved input reaches the weight gradient of the convolution before it.
//
// The weight-error model (weight_error_model.hpp) covers a layer's error from
// its *own* compressed input. In training every saved tensor is compressed,
// and a training-mode BatchNorm reads its saved input x (the convolution's
// output) to compute the gradient it hands back:
//     dx_j = gamma / s * (dy_j - mean(dy) - xhat_j m1),   xhat = (x - mu) / s,  m1 = mean(dy xhat).
// mu and 1/s are saved exactly. With x replaced by x + e the change is exact:
//     d(dx)_j = -(gamma / s^2) [ e_j (m1 + delta / s) + xhat_j delta ],   delta = mean(dy e)
// (batchnorm_model.hpp gives its expectation; this header gives the change
// itself, for one step's tensors). The convolution receives dx as its output
// gradient, so its weight gradient changes by weight_gradient(input, d(dx)).
// Why this is not negligible next to the layer's own error: xhat_j delta is
// proportional to the convolution's own output, so it sums coherently
// against the convolution's input (on the accuracy study's ResNet, 0.3-3x
// the own-input error at rel 1e-2; docs/study/README.md). It is the first-
// order term: errors that travel further (through later BatchNorms and a
// residual path) are left out.
//
// The per-element rule is a constexpr functor (host or device); the host
// helper below computes the per-channel statistics it needs.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// One channel of a training-mode BatchNorm's backward, as far as an input
/// error is concerned.
struct batchnorm_channel_backward {
  double gamma = 1;
  double mean = 0;     ///< mu, saved by the forward pass
  double inv_std = 1;  ///< 1 / s, saved by the forward pass
  double m1 = 0;       ///< mean(dy xhat) over the channel
  double delta = 0;    ///< mean(dy e) over the channel

  /// The exact change of dx at an element whose exact input is x and whose
  /// saved copy is off by e.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr double input_grad_change(double x, double e) const noexcept {
    const double xhat = (x - mean) * inv_std;
    return -gamma * inv_std * inv_std * (e * (m1 + delta * inv_std) + xhat * delta);
  }
};

/// Channel c's batch mean and 1 / sqrt(var + eps) of an N x C x plane input
/// (NCHW), as a training-mode BatchNorm saves them (biased variance, two
/// passes in double).
template <class T>
void batchnorm_saved_statistics(std::int64_t N, std::int64_t C, std::int64_t plane, const T* x, double eps, std::int64_t c,
                                double& mean, double& inv_std) {
  const double M = static_cast<double>(N * plane);
  double s = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t i = 0; i < plane; ++i) s += detail::as_double(x[(n * C + c) * plane + i]);
  mean = s / M;
  double q = 0;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t i = 0; i < plane; ++i) {
      const double d = detail::as_double(x[(n * C + c) * plane + i]) - mean;
      q += d * d;
    }
  inv_std = 1.0 / std::sqrt(q / M + eps);
}

/// d(dx) of a training-mode BatchNorm2d over an N x C x plane input x (NCHW,
/// plane = H W) whose saved copy is x_hat, for output gradient dy. gamma may
/// be null (affine=False: 1); eps as given to the layer. `out` (N C plane
/// doubles) is overwritten. invalid_argument for empty or negative sizes or
/// a negative eps.
template <class T, class D>
status batchnorm_input_grad_change(std::int64_t N, std::int64_t C, std::int64_t plane, const T* x, const T* x_hat, const D* dy,
                                   const float* gamma, double eps, double* out) {
  if (N <= 0 || C <= 0 || plane <= 0 || !(eps >= 0)) return status::invalid_argument;
  const double M = static_cast<double>(N * plane);
  for (std::int64_t c = 0; c < C; ++c) {
    auto at = [&](std::int64_t n, std::int64_t i) { return (n * C + c) * plane + i; };
    batchnorm_channel_backward b;
    b.gamma = gamma ? static_cast<double>(gamma[c]) : 1.0;
    batchnorm_saved_statistics(N, C, plane, x, eps, c, b.mean, b.inv_std);
    double m1 = 0, delta = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t j = at(n, i);
        const double xv = detail::as_double(x[j]), g = detail::as_double(dy[j]);
        m1 += g * (xv - b.mean) * b.inv_std;
        delta += g * (detail::as_double(x_hat[j]) - xv);
      }
    b.m1 = m1 / M;
    b.delta = delta / M;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t j = at(n, i);
        const double xv = detail::as_double(x[j]);
        out[j] = b.input_grad_change(xv, detail::as_double(x_hat[j]) - xv);
      }
  }
  return status::ok;
}

/// RMS change of the weight gradient of the convolution `g` (input `conv_input`)
/// whose output a BatchNorm2d reads, when that BatchNorm's saved input is off
/// by the change `dx_change` (from batchnorm_input_grad_change). Host
/// reference: exact, in double, slow (reference_gradient.hpp). Returns a
/// negative value for an invalid geometry.
template <class X>
double propagated_weight_error(const conv2d_geometry& g, const X* conv_input, const double* dx_change) {
  if (g.validate() != status::ok) return -1.0;
  std::vector<double> dw(static_cast<std::size_t>(g.weight_count()));
  if (weight_gradient(g, conv_input, dx_change, dw.data()) != status::ok) return -1.0;
  return rms(dw.data(), dw.size());
}

}  // namespace error_model
EBAC_NAMESPACE_END
