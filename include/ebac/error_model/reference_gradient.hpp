// ebac/error_model/reference_gradient.hpp - exact weight gradients on the host.
//
// The error model is judged against reality: the weight gradient computed
// with the original saved input and with its decompressed copy. Both are
// computed here in double, directly from the definition, so that the
// difference measures the compressor and not the rounding of a fast
// float GEMM. Slow by design (no blocking, no im2col); it is a ruler.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {
namespace detail {

template <class T>
inline double as_double(T v) noexcept {
  if constexpr (std::is_arithmetic_v<T>) return static_cast<double>(v);
  else return static_cast<double>(to_float(v));
}

}  // namespace detail

/// dW[o][c][kh][kw] = sum over (n, oh, ow) of dy[n][o][oh][ow] *
/// x[n][group(o) * C/G + c][oh * stride - pad + kh * dil][ow * stride - pad + kw * dil]
/// (out-of-range input positions are the zero padding). x is NCHW, dy is
/// N x O x out_h x out_w, dw (O x C/G x KH x KW) is overwritten.
/// Returns invalid_argument for a bad geometry, else ok.
template <class X, class D>
status weight_gradient(const conv2d_geometry& g, const X* x, const D* dy, double* dw) {
  if (g.validate() != status::ok) return status::invalid_argument;
  const std::int64_t Ho = g.out_h(), Wo = g.out_w(), H = g.in_h, W = g.in_w;
  const std::int64_t Cg = g.in_channels_per_group(), Og = g.out_channels_per_group();
  const std::int64_t KH = g.kernel_h, KW = g.kernel_w;
  for (std::int64_t i = 0; i < g.weight_count(); ++i) dw[i] = 0;
  std::vector<double> dyrow(static_cast<std::size_t>(Ho * Wo)), xplane(static_cast<std::size_t>(H * W));
  for (std::int64_t n = 0; n < g.batch; ++n) {
    for (std::int64_t o = 0; o < g.out_channels; ++o) {
      const std::int64_t grp = o / Og;
      const D* dyp = dy + (n * g.out_channels + o) * Ho * Wo;
      for (std::int64_t i = 0; i < Ho * Wo; ++i) dyrow[static_cast<std::size_t>(i)] = detail::as_double(dyp[i]);
      for (std::int64_t c = 0; c < Cg; ++c) {
        const X* xp = x + (n * g.in_channels + grp * Cg + c) * H * W;
        for (std::int64_t i = 0; i < H * W; ++i) xplane[static_cast<std::size_t>(i)] = detail::as_double(xp[i]);
        double* w = dw + (o * Cg + c) * KH * KW;
        for (std::int64_t kh = 0; kh < KH; ++kh) {
          for (std::int64_t kw = 0; kw < KW; ++kw) {
            double acc = 0;
            for (std::int64_t oh = 0; oh < Ho; ++oh) {
              const std::int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
              if (ih < 0 || ih >= H) continue;
              const double* xr = xplane.data() + ih * W;
              const double* dr = dyrow.data() + oh * Wo;
              for (std::int64_t ow = 0; ow < Wo; ++ow) {
                const std::int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
                if (iw >= 0 && iw < W) acc += dr[ow] * xr[iw];
              }
            }
            w[kh * KW + kw] += acc;
          }
        }
      }
    }
  }
  return status::ok;
}

/// Root mean square of n doubles (0 for n == 0).
inline double rms(const double* v, std::size_t n) noexcept {
  if (n == 0) return 0;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += v[i] * v[i];
  return std::sqrt(s / static_cast<double>(n));
}

/// RMS of a - b over n entries: the measured gradient error.
inline double rms_difference(const double* a, const double* b, std::size_t n) noexcept {
  if (n == 0) return 0;
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s / static_cast<double>(n));
}

}  // namespace error_model
EBAC_NAMESPACE_END
