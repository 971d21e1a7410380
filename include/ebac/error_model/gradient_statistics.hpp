// ebac/error_model/gradient_statistics.hpp - what a trainer collects from a
// layer's output gradient dL/dy during the backward pass it runs anyway.
//
// Everything here is a reduction over dy that costs about as much as the bias
// gradient (one pass, no product with the saved input):
//   - per output channel: sum of dy^2 (the first-principles model and the
//     RMS), sum of dy (the bias gradient) and sum of dy over the flat region
//     of the saved input (a masked bias gradient);
//   - per channel group: the energy pyramid of dy (energy_pyramid.hpp),
//     about N H W / 3 numbers.
// None of it is, or needs, the weight gradient itself.
//
// Sums follow the centre tap of the kernel: output position (oh, ow) is
// paired with input position (oh s - p + (KH/2) d, ow s - p + (KW/2) d), the
// same pairing the error statistics use, so a flat region of the input and
// the output positions that read it line up.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/energy_pyramid.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/reference_gradient.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// Input row/column read by the kernel's centre tap for output index o.
constexpr std::int64_t centre_tap_input(std::int64_t o, std::int64_t stride, std::int64_t pad, std::int64_t kernel,
                                        std::int64_t dilation) noexcept {
  return o * stride - pad + (kernel / 2) * dilation;
}

struct output_gradient_statistics {
  conv2d_geometry geometry{};
  std::vector<double> sum;               ///< [O] sum of dy where the centre tap reads inside the input
  std::vector<double> flat_sum;          ///< [O] the part of `sum` whose centre tap reads a flat position
  std::vector<double> sum_squares;       ///< [O] sum of dy^2
  std::vector<energy_pyramid> pyramids;  ///< [groups] of dy on the output grid
  /// RMS of the layer's weight gradient as the trainer last saw it (0 when
  /// unknown). With the input's pyramid it measures how coherent the gradient
  /// is, which first-bin errors inherit (weight_error_model.hpp).
  double weight_grad_rms = 0;

  [[nodiscard]] double total_sum_squares() const noexcept {
    double s = 0;
    for (double v : sum_squares) s += v;
    return s;
  }
  /// RMS of dy over all its elements.
  [[nodiscard]] double rms() const noexcept {
    const std::int64_t n = geometry.output_count();
    return n > 0 ? std::sqrt(total_sum_squares() / static_cast<double>(n)) : 0.0;
  }
};

/// One pass over dy (N x O x out_h x out_w). The mask must describe the
/// layer's saved input (geometry.batch x in_h x in_w).
template <class D>
output_gradient_statistics collect_output_gradient_statistics(const conv2d_geometry& g, const D* dy, const flat_mask& mask) {
  output_gradient_statistics s;
  s.geometry = g;
  const std::int64_t Ho = g.out_h(), Wo = g.out_w(), O = g.out_channels;
  s.sum.assign(static_cast<std::size_t>(O), 0.0);
  s.flat_sum.assign(static_cast<std::size_t>(O), 0.0);
  s.sum_squares.assign(static_cast<std::size_t>(O), 0.0);
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t o = 0; o < O; ++o) {
      const D* p = dy + (n * O + o) * Ho * Wo;
      double a = 0, f = 0, q = 0;
      for (std::int64_t oh = 0; oh < Ho; ++oh) {
        const std::int64_t ih = centre_tap_input(oh, g.stride_h, g.pad_h, g.kernel_h, g.dilation_h);
        for (std::int64_t ow = 0; ow < Wo; ++ow) {
          const double v = detail::as_double(p[oh * Wo + ow]);
          q += v * v;
          const std::int64_t iw = centre_tap_input(ow, g.stride_w, g.pad_w, g.kernel_w, g.dilation_w);
          if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
          a += v;
          if (mask.at(n, ih, iw)) f += v;
        }
      }
      s.sum[static_cast<std::size_t>(o)] += a;
      s.flat_sum[static_cast<std::size_t>(o)] += f;
      s.sum_squares[static_cast<std::size_t>(o)] += q;
    }
  const std::int64_t Og = g.out_channels_per_group();
  for (std::int64_t grp = 0; grp < g.groups; ++grp) {
    s.pyramids.push_back(
        build_energy_pyramid(g.batch, Og, Ho, Wo, [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
          return detail::as_double(dy[((n * O + grp * Og + c) * Ho + h) * Wo + w]);
        }));
  }
  return s;
}

}  // namespace error_model
EBAC_NAMESPACE_END
