// ebac/concepts.hpp - what a predictor, quantizer and encoder must provide.
//
// Pipelines are composed at compile time and checked here; a stage that does
// not fit fails with the name of the missing requirement instead of a page of
// template errors. Every stage is a trivially copyable value so a kernel can
// take it by value; no virtual call happens per element.
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/status.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

template <class P>
concept predictor = std::is_trivially_copyable_v<P> && requires(const P p, const extents& e, std::uint32_t v) {
  { P::id } -> std::convertible_to<predictor_id>;
  { p.passes() } -> std::convertible_to<int>;
  { p.validate(e) } -> std::same_as<status>;
  { p.pass(e, 0) } -> std::same_as<axis_pass>;
};

template <class Q>
concept quantizer = std::is_trivially_copyable_v<Q> && requires(const Q q, float x, std::int32_t& c) {
  { Q::id } -> std::convertible_to<quantizer_id>;
  { Q::preserves_zero_and_sign } -> std::convertible_to<bool>;
  { Q::make(1.0) } -> std::same_as<Q>;
  { q.try_quantize(x, c) } -> std::same_as<bool>;
  { q.reconstruct(std::int32_t{}) } -> std::same_as<float>;
  { q.eb } -> std::convertible_to<double>;
};

template <class E>
concept encoder = std::is_trivially_copyable_v<E> &&
    requires(const E e, const std::uint32_t* codes, std::uint32_t* out_codes, std::size_t n, std::byte* out,
             const std::byte* in) {
      { E::id } -> std::convertible_to<encoder_id>;
      { E::needs_codebook } -> std::convertible_to<bool>;
      { e.max_chunk_bytes(n) } -> std::same_as<std::size_t>;
      { e.encode_chunk(codes, n, out) } -> std::same_as<std::size_t>;
      { e.decode_chunk(in, n, out_codes, n) } -> std::same_as<status>;
    };

EBAC_NAMESPACE_END
