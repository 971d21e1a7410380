// ebac/error_model/layer_geometry.hpp - the shape of a layer whose saved input
// is compressed: what the weight gradient sums over.
//
// The error model and the reference gradient both need to know which
// (input element, output-gradient element) pairs meet in a weight-gradient
// entry. One description covers all supported layers: a linear layer is a
// 1x1 convolution on a 1x1 image (each row of the input is one "sample"), so
// the same code path handles both and there is no second formula to drift.
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// 2-D convolution (NCHW input, OIHW weight, PyTorch semantics: weight shape
/// (out, in / groups, kh, kw), output extent (in + 2 pad - dil (k - 1) - 1) / stride + 1).
struct conv2d_geometry {
  std::int64_t batch = 1;        ///< N
  std::int64_t in_channels = 1;  ///< C
  std::int64_t in_h = 1, in_w = 1;
  std::int64_t out_channels = 1;  ///< O
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;

  /// A linear layer y = x W^T over `rows` input rows of `in_features`.
  static constexpr conv2d_geometry linear(std::int64_t rows, std::int64_t in_features, std::int64_t out_features) noexcept {
    conv2d_geometry g;
    g.batch = rows;
    g.in_channels = in_features;
    g.out_channels = out_features;
    return g;
  }

  [[nodiscard]] constexpr std::int64_t out_h() const noexcept {
    return (in_h + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1;
  }
  [[nodiscard]] constexpr std::int64_t out_w() const noexcept {
    return (in_w + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1;
  }
  [[nodiscard]] constexpr std::int64_t in_channels_per_group() const noexcept { return in_channels / groups; }
  [[nodiscard]] constexpr std::int64_t out_channels_per_group() const noexcept { return out_channels / groups; }
  [[nodiscard]] constexpr std::int64_t taps() const noexcept { return kernel_h * kernel_w; }
  /// Taps that, on average over the output positions, read inside the input
  /// rather than the zero padding: sum over taps of (valid output positions /
  /// all output positions). K for a 1x1 or unpadded kernel; about 0.82 K for a
  /// 3x3 "same" convolution on a 7x7 map, which a model that counts K taps
  /// per position over-predicts by 10% in sigma.
  [[nodiscard]] constexpr double effective_taps() const noexcept {
    auto axis = [](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
      double sum = 0;
      for (std::int64_t t = 0; t < k; ++t) {
        std::int64_t valid = 0;
        for (std::int64_t o = 0; o < out; ++o) {
          const std::int64_t i = o * s - p + t * d;
          valid += (i >= 0 && i < in);
        }
        sum += static_cast<double>(valid) / static_cast<double>(out);
      }
      return sum;
    };
    return axis(in_h, out_h(), kernel_h, stride_h, pad_h, dilation_h) *
           axis(in_w, out_w(), kernel_w, stride_w, pad_w, dilation_w);
  }
  /// Number of weight-gradient entries (the RMS the model predicts is over these).
  [[nodiscard]] constexpr std::int64_t weight_count() const noexcept { return out_channels * in_channels_per_group() * taps(); }
  [[nodiscard]] constexpr std::int64_t input_count() const noexcept { return batch * in_channels * in_h * in_w; }
  [[nodiscard]] constexpr std::int64_t output_count() const noexcept { return batch * out_channels * out_h() * out_w(); }

  /// ok, or invalid_argument for a shape PyTorch would reject. Extents are
  /// capped at 2^31 each so products of a few of them cannot overflow.
  [[nodiscard]] constexpr status validate() const noexcept {
    constexpr std::int64_t cap = std::int64_t{1} << 31;
    const std::int64_t pos[] = {batch,    in_channels, in_h,     in_w,       out_channels, kernel_h,
                                kernel_w, stride_h,    stride_w, dilation_h, dilation_w,   groups};
    for (std::int64_t v : pos)
      if (v < 1 || v > cap) return status::invalid_argument;
    if (pad_h < 0 || pad_w < 0 || pad_h > cap || pad_w > cap) return status::invalid_argument;
    if (in_channels % groups != 0 || out_channels % groups != 0) return status::invalid_argument;
    // The numerator of out_h()/out_w() must not be negative: C++ division
    // truncates toward zero, so -1 / 2 + 1 would pass as an extent of 1.
    if (in_h + 2 * pad_h - dilation_h * (kernel_h - 1) - 1 < 0) return status::invalid_argument;
    if (in_w + 2 * pad_w - dilation_w * (kernel_w - 1) - 1 < 0) return status::invalid_argument;
    return status::ok;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
