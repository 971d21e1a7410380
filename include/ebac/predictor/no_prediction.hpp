// ebac/predictor/no_prediction.hpp - the identity predictor.
//
// Codes are the pre-quantized values themselves. Cheapest to run, and the
// right choice for data without spatial correlation (cuSZp's "fixed" mode).
#pragma once

#include <ebac/config.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/status.hpp>

EBAC_NAMESPACE_BEGIN

struct no_prediction {
  static constexpr predictor_id id = predictor_id::none;
  [[nodiscard]] constexpr int passes() const noexcept { return 0; }
  [[nodiscard]] status validate(const extents&) const noexcept { return status::ok; }
  [[nodiscard]] EBAC_HOST_DEVICE axis_pass pass(const extents&, int) const noexcept { return {}; }
  /// Every element is its own block (lorenzo::independent_elements).
  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t independent_elements(const extents&) const noexcept { return 1; }
  [[nodiscard]] EBAC_HOST_DEVICE no_prediction on_blocks(const extents&, std::uint64_t count, extents& sub) const noexcept {
    sub = extents{};  // not extents{count}: the initializer_list constructor is host-only
    sub.rank = 1;
    sub.dims[0] = count;
    return *this;
  }
};

EBAC_NAMESPACE_END
