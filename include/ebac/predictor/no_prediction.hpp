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
};

EBAC_NAMESPACE_END
