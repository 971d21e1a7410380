// ebac/predictor/no_prediction.hpp - the identity predictor.
//
// Codes are the pre-quantized values themselves. Cheapest to run, and the
// right choice for data without spatial correlation (cuSZp's "fixed" mode).
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>

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
  /// No passes (passes() == 0): never called, here so backends need no special case.
  template <bool Forward>
  EBAC_HOST_DEVICE static void pass_unit(std::uint32_t*, const axis_pass&, std::uint64_t, std::uint64_t, std::uint64_t,
                                         std::uint64_t) noexcept {}
  /// The codes are the zigzagged values themselves.
  void predict_chunk(const extents&, const std::uint32_t* q, std::uint32_t* codes, std::size_t m) const noexcept {
    for (std::size_t i = 0; i < m; ++i) codes[i] = detail::zigzag(static_cast<std::int32_t>(q[i]));
  }
  void unpredict_chunk(const extents&, std::uint32_t*, std::size_t) const noexcept {}
  template <class QAt>
  EBAC_HOST_DEVICE std::uint32_t residual(const extents&, std::uint64_t i, QAt&& q_at) const noexcept {
    return q_at(i);
  }
};

EBAC_NAMESPACE_END
