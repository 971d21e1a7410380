// ebac/error_model/error_statistics.hpp - what the compressor reports about
// the error it made on a saved input.
//
// The compressor knows every element's error e = y - x when it writes the
// stream, so it can report more than "var(e) = eb^2 / 3". The model needs:
//   - per channel, the mean error over the flat region (a repeated value's
//     error is one number, with a sign) and over the rest (the mean of the
//     other errors, which is not zero: small positive values all round up to
//     the first bin centre eb, and exact zeros contribute nothing);
//   - per channel group, the energy pyramid of what is left (the residual),
//     read at the kernel's centre tap so it lies on the output grid, split
//     into structured elements and the others. Structured: first-bin
//     elements (x != 0 reconstructed with |y| <= eb: the sign-preserving
//     quantizer's +-eb, the linear one's 0), whose error is a linear function
//     of x (eb - |x| or -x), and elements whose exact value repeats in the
//     channel, whose error repeats with it. Both follow the input's structure
//     instead of behaving like noise, so they inherit the coherence the
//     gradient itself has - a first-bin error only as far as it lies on its
//     channel's least-squares line in x (the sign part of eb sign(x) - x on
//     two-signed data goes to the other elements' pyramid);
//   - per channel group, the energy pyramid of the input x itself, which with
//     the gradient RMS measures that coherence (weight_error_model.hpp);
//   - per channel, sum e^2 and the non-zero count (the i.i.d. model).
// One pass over (x, y), O(N C H W).
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/energy_pyramid.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/reference_gradient.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

struct input_error_statistics {
  conv2d_geometry geometry{};
  double eb_abs = 0;                                ///< the absolute bound the errors obey
  std::vector<double> flat_mean;                    ///< [C] mean error over flat positions (0 if none)
  std::vector<double> rest_mean;                    ///< [C] mean error over the other positions
  std::vector<double> sum_squares;                  ///< [C] sum of e^2
  std::vector<std::int64_t> nonzero;                ///< [C] elements with x != 0
  std::vector<energy_pyramid> pyramids;             ///< [groups] residual at the centre tap, other elements
  std::vector<energy_pyramid> structured_pyramids;  ///< [groups] residual at the centre tap, structured elements
  std::vector<energy_pyramid> input_pyramids;       ///< [groups] x at the centre tap
  std::int64_t first_bin = 0;                       ///< elements with x != 0 and |y| <= eb
  std::int64_t repeated = 0;                        ///< non-zero elements whose value repeats in the channel
  double max_abs_error = 0;
  std::int64_t non_finite = 0;  ///< NaN/Inf inputs (stored exactly; excluded)

  [[nodiscard]] double total_sum_squares() const noexcept {
    double s = 0;
    for (double v : sum_squares) s += v;
    return s;
  }
  [[nodiscard]] double nonzero_share() const noexcept {
    std::int64_t z = 0;
    for (auto v : nonzero) z += v;
    const std::int64_t t = geometry.input_count();
    return t > 0 ? static_cast<double>(z) / static_cast<double>(t) : 0.0;
  }
  /// E[e^2] over the non-zero inputs: eb^2 / 3 for a uniform error.
  [[nodiscard]] double mean_square_nonzero() const noexcept {
    std::int64_t z = 0;
    for (auto v : nonzero) z += v;
    return z > 0 ? total_sum_squares() / static_cast<double>(z) : 0.0;
  }
};

namespace detail {

/// y[i] - x[i] in double, 0 where x[i] is not finite (non-finite values
/// round-trip exactly).
template <class X, class Y>
double reconstruction_error(const X* x, const Y* y, std::int64_t i) {
  const double xv = as_double(x[i]), yv = as_double(y[i]);
  return std::isfinite(xv) ? yv - xv : 0.0;
}

/// s's per-channel moments of the error (its mean over the flat mask's
/// positions and over the rest, its sum of squares, the non-zero inputs)
/// and the tensor's non-finite inputs and largest |error|.
template <class X, class Y>
void collect_channel_errors(input_error_statistics& s, const conv2d_geometry& g, const X* x, const Y* y, const flat_mask& mask) {
  const std::int64_t C = g.in_channels, plane = g.in_h * g.in_w;
  s.flat_mean.assign(static_cast<std::size_t>(C), 0.0);
  s.rest_mean.assign(static_cast<std::size_t>(C), 0.0);
  s.sum_squares.assign(static_cast<std::size_t>(C), 0.0);
  s.nonzero.assign(static_cast<std::size_t>(C), 0);
  const double n_flat = static_cast<double>(mask.flat_positions);
  const double n_rest = static_cast<double>(g.batch * plane) - n_flat;
  for (std::int64_t c = 0; c < C; ++c) {
    double fs = 0, rs = 0, q = 0;
    std::int64_t nz = 0;
    for (std::int64_t n = 0; n < g.batch; ++n) {
      const std::int64_t base = (n * C + c) * plane;
      for (std::int64_t i = 0; i < plane; ++i) {
        const double xv = as_double(x[base + i]);
        if (!std::isfinite(xv)) ++s.non_finite;
        const double e = reconstruction_error(x, y, base + i);
        q += e * e;
        nz += (xv != 0);
        if (mask.flat.empty() || mask.flat[static_cast<std::size_t>(n * plane + i)] == 0) rs += e;
        else fs += e;
        const double a = std::fabs(e);
        if (a > s.max_abs_error) s.max_abs_error = a;
      }
    }
    s.flat_mean[static_cast<std::size_t>(c)] = n_flat > 0 ? fs / n_flat : 0.0;
    s.rest_mean[static_cast<std::size_t>(c)] = n_rest > 0 ? rs / n_rest : 0.0;
    s.sum_squares[static_cast<std::size_t>(c)] = q;
    s.nonzero[static_cast<std::size_t>(c)] = nz;
  }
}

/// Per channel, the least-squares line intercept + slope x of the error
/// over the channel's first-bin elements that are not repeated values.
struct error_lines {
  std::vector<double> slope, intercept;
};
template <class X, class Y, class FirstBin>
error_lines fit_first_bin_lines(const conv2d_geometry& g, const X* x, const Y* y, const std::vector<std::uint8_t>& rep,
                                FirstBin&& first_bin) {
  const std::int64_t C = g.in_channels, plane = g.in_h * g.in_w;
  error_lines lines{std::vector<double>(static_cast<std::size_t>(C), 0.0), std::vector<double>(static_cast<std::size_t>(C), 0.0)};
  for (std::int64_t c = 0; c < C; ++c) {
    double k = 0, sx = 0, sxx = 0, se = 0, sex = 0;
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t j = (n * C + c) * plane + i;
        if (!first_bin(j) || rep[static_cast<std::size_t>(j)] != 0) continue;
        const double xv = as_double(x[j]), e = reconstruction_error(x, y, j);
        k += 1;
        sx += xv;
        sxx += xv * xv;
        se += e;
        sex += e * xv;
      }
    const double var = k > 0 ? sxx - sx * sx / k : 0.0;
    const double a = var > 0 ? (sex - sx * se / k) / var : 0.0;
    lines.slope[static_cast<std::size_t>(c)] = a;
    lines.intercept[static_cast<std::size_t>(c)] = k > 0 ? (se - a * sx) / k : 0.0;
  }
  return lines;
}

}  // namespace detail

/// x: the original saved input, y: its reconstruction (both NCHW with the
/// geometry's input shape), mask: find_flat_mask(g, x).
template <class X, class Y>
input_error_statistics collect_input_error_statistics(const conv2d_geometry& g, const X* x, const Y* y, const flat_mask& mask,
                                                      double eb_abs) {
  input_error_statistics s;
  s.geometry = g;
  s.eb_abs = eb_abs;
  const std::int64_t C = g.in_channels, H = g.in_h, W = g.in_w, plane = H * W;
  auto err = [&](std::int64_t i) { return detail::reconstruction_error(x, y, i); };
  detail::collect_channel_errors(s, g, x, y, mask);
  const std::int64_t Ho = g.out_h(), Wo = g.out_w(), Cg = g.in_channels_per_group();
  auto first_bin = [&](std::int64_t j) {
    const double xv = detail::as_double(x[j]), yv = detail::as_double(y[j]);
    return xv != 0 && std::isfinite(xv) && std::fabs(yv) <= eb_abs;
  };
  const std::vector<std::uint8_t> rep = find_repeated_values(g, x);
  auto structured = [&](std::int64_t j) { return rep[static_cast<std::size_t>(j)] != 0 || first_bin(j); };
  for (std::int64_t j = 0; j < g.input_count(); ++j) {
    s.first_bin += first_bin(j);
    s.repeated += rep[static_cast<std::size_t>(j)];
  }
  // Input index read by the centre tap at output (n, c, oh, ow), or -1 in the padding.
  auto centre = [&](std::int64_t n, std::int64_t c, std::int64_t oh, std::int64_t ow) -> std::int64_t {
    const std::int64_t ih = centre_tap_input(oh, g.stride_h, g.pad_h, g.kernel_h, g.dilation_h);
    const std::int64_t iw = centre_tap_input(ow, g.stride_w, g.pad_w, g.kernel_w, g.dilation_w);
    if (ih < 0 || ih >= H || iw < 0 || iw >= W) return -1;
    return ((n * C + c) * H + ih) * W + iw;
  };
  auto residual = [&](std::int64_t n, std::int64_t c, std::int64_t j) {
    const std::int64_t p = j % plane;
    const bool flat = !mask.flat.empty() && mask.flat[static_cast<std::size_t>(n * plane + p)] != 0;
    const double mean = flat ? s.flat_mean[static_cast<std::size_t>(c)] : s.rest_mean[static_cast<std::size_t>(c)];
    return err(j) - mean;
  };
  // A first-bin element's error (eb sign(x) - x, or -x) is structured only as far as it is a
  // function of x that the gradient's coherence reaches: per channel, its least-squares line
  // b_c + a_c x over the channel's first-bin elements. On one-signed data (post-ReLU) that is
  // the whole error (eb - x); on two-signed data (LayerNorm outputs, attention values) the
  // sign part eb sign(x) is orthogonal to x on the channel and is left to the noise-like term.
  const detail::error_lines lines = detail::fit_first_bin_lines(g, x, y, rep, first_bin);
  const std::vector<double>& slope = lines.slope;
  const std::vector<double>& intercept = lines.intercept;
  // The part of element j's residual that carries the gradient's coherence, and the rest.
  auto coherent_part = [&](std::int64_t n, std::int64_t c, std::int64_t j) {
    if (rep[static_cast<std::size_t>(j)] != 0) return residual(n, c, j);
    const double line = intercept[static_cast<std::size_t>(c)] + slope[static_cast<std::size_t>(c)] * detail::as_double(x[j]);
    return residual(n, c, j) - (err(j) - line);
  };
  for (std::int64_t grp = 0; grp < g.groups; ++grp) {
    const std::int64_t c0 = grp * Cg;
    s.pyramids.push_back(
        build_energy_pyramid(g.batch, Cg, Ho, Wo, [&](std::int64_t n, std::int64_t cl, std::int64_t oh, std::int64_t ow) {
          const std::int64_t j = centre(n, c0 + cl, oh, ow);
          if (j < 0) return 0.0;
          return structured(j) ? residual(n, c0 + cl, j) - coherent_part(n, c0 + cl, j) : residual(n, c0 + cl, j);
        }));
    s.structured_pyramids.push_back(
        build_energy_pyramid(g.batch, Cg, Ho, Wo, [&](std::int64_t n, std::int64_t cl, std::int64_t oh, std::int64_t ow) {
          const std::int64_t j = centre(n, c0 + cl, oh, ow);
          return j < 0 || !structured(j) ? 0.0 : coherent_part(n, c0 + cl, j);
        }));
    s.input_pyramids.push_back(
        build_energy_pyramid(g.batch, Cg, Ho, Wo, [&](std::int64_t n, std::int64_t cl, std::int64_t oh, std::int64_t ow) {
          const std::int64_t j = centre(n, c0 + cl, oh, ow);
          if (j < 0) return 0.0;
          const double xv = detail::as_double(x[j]);
          return std::isfinite(xv) ? xv : 0.0;
        }));
  }
  return s;
}

}  // namespace error_model
EBAC_NAMESPACE_END
