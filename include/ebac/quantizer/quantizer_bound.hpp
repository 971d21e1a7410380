// ebac/quantizer/quantizer_bound.hpp - the bound a tensor's quantizer is made with.
//
// Both backends (host compress, the CUDA make_quantizer_kernel) call it, so
// the header's eb_abs and every code agree byte for byte.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/quantizer/linear.hpp>

EBAC_NAMESPACE_BEGIN

/// The absolute bound the quantizer is made with (the stream header's
/// eb_abs): absolute_bound(), except for one case. A relative bound over a
/// constant tensor (every finite value equal to some v != 0) has range 0 and
/// promises exactness; a quantizer made with 0 would store every element as
/// an outlier, 1.26x the raw size for float32. (With level coding on, the
/// default, such a tensor is coded as one level and never gets here; this
/// is the quantizer's answer when level coding is off.) There is a bound
/// whose quantizer reconstructs v exactly: the one whose half step is |v|
/// for the sign-preserving quantizer (v is the centre of bin 1), whose step
/// is |v| for the linear one (v is one step); that is |v| (resp. |v| / 2)
/// divided by 1 - quantizer_bin_margin, nudged up by 2^-40 so that the
/// float_at_most of the quantizer lands on |v| and not one float below it.
/// When quantize_element confirms it on v, in the decoder's own
/// arithmetic and storage type, that bound is used: every finite element is
/// v, so every one comes back exactly and the promise |x - y| <= 0 holds,
/// while the stream shrinks to its headers. The header's eb_abs is then the
/// quantizer's bound, above the promised 0 (the reconstruction is exact);
/// when the check fails it stays 0 and every element is stored losslessly,
/// as before. It fails only for the smallest subnormal v, where the
/// quantizer's 1 / step overflows float (|v| below 0.5 / FLT_MAX for the
/// sign-preserving quantizer, 1 / FLT_MAX for the linear one).
template <class Quantizer, floating_element T>
EBAC_HOST_DEVICE double quantizer_bound(const error_bound& eb, const value_range& r) noexcept {
  const double promised = absolute_bound(eb, r);
  if (eb.mode != bound_mode::relative || !r.any_finite || !(r.min == r.max) || r.min == 0.0f) return promised;
  const double magnitude = r.min < 0.0f ? -static_cast<double>(r.min) : static_cast<double>(r.min);
  const double step = Quantizer::preserves_zero_and_sign ? magnitude : magnitude / 2;
  const double candidate = step / (1.0 - quantizer_bin_margin) * (1.0 + 0x1p-40);
  const Quantizer q = Quantizer::make(candidate);
  const quantized k = quantize_element(q, from_float<T>(r.min));
  const bool exact = !k.outlier && detail::float_bits(to_float(reconstruct_element<T>(q, k.code))) == detail::float_bits(r.min);
  return exact ? candidate : promised;
}

EBAC_NAMESPACE_END
