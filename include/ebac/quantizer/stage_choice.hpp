// ebac/quantizer/stage_choice.hpp - which quantizer codes a tensor.
//
// The writer decides per tensor, from the data, in the same way on every
// backend (each computes the level palette and the value range, then asks
// these functions):
//   * at most max_levels distinct values: palette indices (levels.hpp),
//     lossless, with no prediction (the indices of a mask or a one-hot row
//     are categories; a difference of two of them predicts nothing). For a
//     floating-point tensor only when the bound would not do better, see
//     levels_pay;
//   * otherwise an integer tensor: its own values (exact.hpp) under the
//     pipeline's predictor, or with a pooling geometry its offsets inside
//     the pooling windows (pool_window.hpp), with no prediction;
//   * otherwise a floating-point tensor: the pipeline's quantizer.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// The finite value range of a floating-point tensor whose distinct values
/// are the palette's (what a pass over the tensor would find).
template <floating_element T>
EBAC_HOST_DEVICE value_range palette_range(const level_palette& p) noexcept {
  using B = typename bits_of<T>::type;
  value_range r;
  for (std::uint32_t i = 0; i < p.count; ++i) {
    const float f = to_float(from_raw_bits<T>(static_cast<B>(p.bits[i])));
    if (detail::is_finite_float(f)) r.add(f);
  }
  return r;
}

/// The top level of a 16-bit tensor's quantizer (detail::top_level): its
/// largest finite magnitude, or 0 when it has no finite non-zero value.
EBAC_HOST_DEVICE float top_level_of(const value_range& r) noexcept {
  if (!r.any_finite) return 0.0f;
  const float a = r.min < 0.0f ? -r.min : r.min, b = r.max < 0.0f ? -r.max : r.max;
  return a > b ? a : b;
}

/// Whether a floating-point tensor of these levels is coded as palette
/// indices rather than by the bound's quantizer q. Indices win unless q
/// codes every level without an outlier and gives two of them the same code
/// (a bound coarse against the levels' spacing carries less information
/// than the indices). Integer logic only, so every backend decides alike.
template <floating_element T, class Q>
EBAC_HOST_DEVICE bool levels_pay(const level_palette& p, const Q& q) noexcept {
  using B = typename bits_of<T>::type;
  std::int32_t code[max_levels];
  for (std::uint32_t i = 0; i < p.count; ++i) {
    const quantized k = quantize_element(q, from_raw_bits<T>(static_cast<B>(p.bits[i])));
    if (k.outlier) return true;
    code[i] = k.code;
  }
  for (std::uint32_t i = 0; i < p.count; ++i)
    for (std::uint32_t j = 0; j < i; ++j)
      if (code[i] == code[j]) return false;
  return true;
}

EBAC_NAMESPACE_END
