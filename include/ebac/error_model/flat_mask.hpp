// ebac/error_model/flat_mask.hpp - where the saved input is "flat": every
// channel that has a dominant repeated value holds exactly that value.
//
// Why: a value that repeats over many positions (the background of an image,
// and everything computed from it in the first layers) is quantized to the
// same reconstruction everywhere, so its error is one number repeated, not
// independent noise. The output gradient over such a region is coherent too,
// and their product adds up linearly instead of in quadrature. The model
// splits every channel's error into its mean over this region, its mean over
// the rest, and a residual; the mask says which positions are which. It is
// computed from the saved input at compression time (one sort per channel)
// and costs one bit per (sample, position) to keep for the backward pass.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/reference_gradient.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

struct flat_mask {
  std::int64_t batch = 0, height = 0, width = 0;
  std::vector<std::uint8_t> flat;      ///< [n][h][w]: 1 where every dominant channel holds its value
  std::int64_t dominant_channels = 0;  ///< channels with a repeated non-zero value >= min_share
  std::int64_t flat_positions = 0;

  [[nodiscard]] bool at(std::int64_t n, std::int64_t h, std::int64_t w) const noexcept {
    return !flat.empty() && flat[static_cast<std::size_t>((n * height + h) * width + w)] != 0;
  }
  [[nodiscard]] double share() const noexcept {
    const std::int64_t t = batch * height * width;
    return t > 0 ? static_cast<double>(flat_positions) / static_cast<double>(t) : 0.0;
  }
};

/// Default share of a channel's elements one repeated value must cover to
/// count as dominant (5%: the corpus' image backgrounds cover 50%, while
/// post-ReLU channels without flat regions repeat no non-zero value at all;
/// 1%-25% gave the same accuracy, see docs/error-model.md).
inline constexpr double default_dominant_share = 0.05;

/// Finds the mask of an NCHW input (geometry.in_*). Zeros are ignored (their
/// error is exactly zero under the zero-preserving quantizer, so they need
/// no coherent term), and so are NaN and Inf (stored losslessly).
template <class X>
flat_mask find_flat_mask(const conv2d_geometry& g, const X* x, double min_share = default_dominant_share) {
  flat_mask m;
  m.batch = g.batch;
  m.height = g.in_h;
  m.width = g.in_w;
  const std::int64_t plane = g.in_h * g.in_w, per_channel = g.batch * plane;
  m.flat.assign(static_cast<std::size_t>(per_channel), 1);
  std::vector<double> vals;
  vals.reserve(static_cast<std::size_t>(per_channel));
  for (std::int64_t c = 0; c < g.in_channels; ++c) {
    vals.clear();
    for (std::int64_t n = 0; n < g.batch; ++n) {
      const X* p = x + (n * g.in_channels + c) * plane;
      for (std::int64_t i = 0; i < plane; ++i) {
        const double v = detail::as_double(p[i]);
        if (v != 0 && std::isfinite(v)) vals.push_back(v);
      }
    }
    if (vals.empty()) continue;
    std::sort(vals.begin(), vals.end());
    double mode = vals[0];
    std::size_t best = 0;
    for (std::size_t i = 0; i < vals.size();) {
      std::size_t j = i;
      while (j < vals.size() && vals[j] == vals[i]) ++j;
      if (j - i > best) {
        best = j - i;
        mode = vals[i];
      }
      i = j;
    }
    if (best < 2 || static_cast<double>(best) < min_share * static_cast<double>(per_channel)) continue;
    ++m.dominant_channels;
    for (std::int64_t n = 0; n < g.batch; ++n) {
      const X* p = x + (n * g.in_channels + c) * plane;
      std::uint8_t* f = m.flat.data() + n * plane;
      for (std::int64_t i = 0; i < plane; ++i) f[i] &= static_cast<std::uint8_t>(detail::as_double(p[i]) == mode);
    }
  }
  if (m.dominant_channels == 0) std::fill(m.flat.begin(), m.flat.end(), std::uint8_t{0});
  for (std::uint8_t b : m.flat) m.flat_positions += b;
  return m;
}

/// Per element (NCHW): 1 where the input is non-zero, finite, and its exact
/// value occurs at least twice in its channel. Such an element's error is the
/// same number wherever the value occurs (8-bit image data: every pixel), so
/// its share of a gradient entry adds up coherently, not like noise.
template <class X>
std::vector<std::uint8_t> find_repeated_values(const conv2d_geometry& g, const X* x) {
  const std::int64_t plane = g.in_h * g.in_w, per_channel = g.batch * plane;
  std::vector<std::uint8_t> rep(static_cast<std::size_t>(g.input_count()), 0);
  std::vector<std::pair<double, std::int64_t>> vals;
  vals.reserve(static_cast<std::size_t>(per_channel));
  for (std::int64_t c = 0; c < g.in_channels; ++c) {
    vals.clear();
    for (std::int64_t n = 0; n < g.batch; ++n)
      for (std::int64_t i = 0; i < plane; ++i) {
        const std::int64_t j = (n * g.in_channels + c) * plane + i;
        const double v = detail::as_double(x[j]);
        if (v != 0 && std::isfinite(v)) vals.emplace_back(v, j);
      }
    std::sort(vals.begin(), vals.end());
    for (std::size_t i = 0; i < vals.size();) {
      std::size_t k = i;
      while (k < vals.size() && vals[k].first == vals[i].first) ++k;
      if (k - i >= 2)
        for (std::size_t m = i; m < k; ++m) rep[static_cast<std::size_t>(vals[m].second)] = 1;
      i = k;
    }
  }
  return rep;
}

/// A mask with no flat positions (the model then keeps only the channel means).
inline flat_mask empty_flat_mask(const conv2d_geometry& g) {
  flat_mask m;
  m.batch = g.batch;
  m.height = g.in_h;
  m.width = g.in_w;
  m.flat.assign(static_cast<std::size_t>(g.batch * g.in_h * g.in_w), 0);
  return m;
}

}  // namespace error_model
EBAC_NAMESPACE_END
