// ebac/quantizer/element_ops.hpp - one element through any quantizer.
//
// The quantizers differ in what they need: the floating-point ones
// (linear.hpp) verify their reconstruction against the bound in the storage
// type; the lossless ones (exact, levels) map a value to a code and back;
// pool_window also needs the element's position. Backends loop over these
// three calls only, so a host loop or a kernel written once serves every
// quantizer:
//   quantize_at(q, x, i)      -> {code, outlier}
//   reconstruct_at<S>(q, c, i) -> the element a code stands for
//   code_valid<S>(q, c)        -> whether a decoded code is one the writer can
//                                 have produced (a lossless decoder checks it
//                                 instead of trusting the stream; float codes
//                                 are all meaningful)
// S is the element's storage type (storage_t<T>), i its flat index.
#pragma once

#include <ebac/config.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

template <class Q, class S>
EBAC_HOST_DEVICE quantized quantize_at(const Q& q, S x, std::uint64_t i) noexcept {
  if constexpr (requires { q.quantize(x, i); }) return q.quantize(x, i);
  else if constexpr (requires { q.quantize(x); }) return q.quantize(x);
  else return quantize_element(q, x);
}

template <class S, class Q>
EBAC_HOST_DEVICE S reconstruct_at(const Q& q, std::int32_t code, std::uint64_t i) noexcept {
  if constexpr (requires { q.template reconstruct<S>(code, i); }) return q.template reconstruct<S>(code, i);
  else if constexpr (requires { q.template reconstruct<S>(code); }) return q.template reconstruct<S>(code);
  else return reconstruct_element<S>(q, code);
}

template <class S, class Q>
EBAC_HOST_DEVICE bool code_valid(const Q& q, std::int32_t code) noexcept {
  if constexpr (requires { q.template valid_code<S>(code); }) return q.template valid_code<S>(code);
  else return true;
}

/// Whether a quantizer's reconstruction is exact (integer and level codes).
template <class Q>
inline constexpr bool is_lossless_quantizer = requires(const Q& q, std::int32_t c) {
  q.template valid_code<std::uint8_t>(c);
};

EBAC_NAMESPACE_END
