// ebac/quantizer/exact.hpp - integer and boolean elements as their own codes.
//
// Integer tensors (labels, indices) and bool masks are coded losslessly: an
// element's code is its value, the predictor and encoder then work on those
// codes exactly as on quantized floats (Lorenzo differences of indices are
// the "delta coding" of the format). A value outside the code range
// (|v| >= 2^22, e.g. a large int64) is an outlier and is stored raw.
#pragma once

#include <ebac/config.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/quantizer_id.hpp>

#include <cstdint>
#include <limits>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

struct exact_quantizer {
  static constexpr quantizer_id id = quantizer_id::exact;
  static constexpr bool preserves_zero_and_sign = true;  // it preserves everything

  /// S: the storage type of an integer element (storage_t<T>).
  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE quantized quantize(S x) const noexcept {
    static_assert(std::is_integral_v<S>);
    const auto v = static_cast<std::int64_t>(x);
    const bool ok = v > -quantizer_code_limit && v < quantizer_code_limit;
    return {ok ? static_cast<std::int32_t>(v) : 0, !ok};
  }

  /// The element a code stands for; only meaningful when valid_code() holds.
  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE S reconstruct(std::int32_t code) const noexcept {
    return static_cast<S>(code);
  }

  /// Whether a decoded code is one quantize() can have produced for S: a
  /// decoder checks this instead of trusting the stream.
  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE bool valid_code(std::int32_t code) const noexcept {
    const auto lo = static_cast<std::int64_t>(std::numeric_limits<S>::min());
    const auto hi = static_cast<std::int64_t>(std::numeric_limits<S>::max());
    return code > -quantizer_code_limit && code < quantizer_code_limit && code >= lo && code <= hi;
  }
};

EBAC_NAMESPACE_END
