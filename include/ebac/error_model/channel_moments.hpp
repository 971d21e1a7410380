// ebac/error_model/channel_moments.hpp - the cheap per-channel statistics a
// trainer collects for the error model and the controller (docs/error-model.md,
// section 5): sum, sum of squares, non-zero count and count of one channel of
// an NCHW (or N x C) tensor.
//
// - the output gradient dy, per output channel: sum_squares feeds the i.i.d.
//   term and rms() the gradient scale;
// - the saved input x, per input channel: nonzero_share() is the non-zero
//   fraction (post-ReLU sparsity);
// - a weight gradient as one channel: rms() is the gradient RMS the
//   controller and the coherence factor use.
//
// `channel_moments` is the one policy both backends run: the host helper
// below and ebac/cuda/statistics.cuh add elements and merge partial results
// with the same functions, in double. Non-finite elements are counted in
// `non_finite` and left out of the sums.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

struct channel_moments {
  double sum = 0;
  double sum_squares = 0;
  std::uint64_t count = 0;       ///< finite elements
  std::uint64_t nonzero = 0;     ///< finite, non-zero elements
  std::uint64_t non_finite = 0;  ///< NaN / Inf elements (not in the sums)

  EBAC_HOST_DEVICE constexpr void add(float v) noexcept {
    // Exponent all ones: NaN or Inf (no <cmath> on the device path).
    if (!(v == v) || v - v != 0.0f) {
      ++non_finite;
      return;
    }
    const double d = v;
    sum += d;
    sum_squares += d * d;
    ++count;
    nonzero += (v != 0.0f);
  }
  EBAC_HOST_DEVICE constexpr channel_moments& merge(const channel_moments& o) noexcept {
    sum += o.sum;
    sum_squares += o.sum_squares;
    count += o.count;
    nonzero += o.nonzero;
    non_finite += o.non_finite;
    return *this;
  }
  [[nodiscard]] double rms() const noexcept { return count > 0 ? std::sqrt(sum_squares / static_cast<double>(count)) : 0.0; }
  [[nodiscard]] double mean() const noexcept { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  [[nodiscard]] double nonzero_share() const noexcept {
    return count > 0 ? static_cast<double>(nonzero) / static_cast<double>(count) : 0.0;
  }
};

/// Merge functor (CUB's reduction operator and std::accumulate's alike).
struct merge_moments {
  EBAC_HOST_DEVICE constexpr channel_moments operator()(channel_moments a, const channel_moments& b) const noexcept {
    return a.merge(b);
  }
};

/// Per-channel moments of a (batch x channels x inner) tensor, e.g. NCHW with
/// inner = H * W, or N x C with inner = 1. T: float, float16 or bfloat16.
template <class T>
std::vector<channel_moments> collect_channel_moments(const T* x, std::int64_t batch, std::int64_t channels, std::int64_t inner) {
  std::vector<channel_moments> out(static_cast<std::size_t>(channels > 0 ? channels : 0));
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < channels; ++c) {
      const T* p = x + (n * channels + c) * inner;
      channel_moments& m = out[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < inner; ++i) m.add(to_float(p[i]));
    }
  return out;
}

/// All channels merged: the tensor's moments (its RMS is the gradient RMS
/// when x is a weight gradient).
inline channel_moments total_moments(const std::vector<channel_moments>& per_channel) noexcept {
  channel_moments t;
  for (const auto& m : per_channel) t.merge(m);
  return t;
}

}  // namespace error_model
EBAC_NAMESPACE_END
