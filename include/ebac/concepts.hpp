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
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/status.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

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
concept encoder = std::is_trivially_copyable_v<E> && requires(const E e, const std::uint32_t* codes, std::uint32_t* out_codes,
                                                              std::size_t n, std::byte* out, const std::byte* in) {
  { E::id } -> std::convertible_to<encoder_id>;
  { E::needs_codebook } -> std::convertible_to<bool>;
  { E::name } -> std::convertible_to<std::string_view>;
  { E::min_payload_bytes(std::uint64_t{}) } -> std::same_as<std::uint64_t>;
  { e.max_chunk_bytes(n) } -> std::same_as<std::size_t>;
  { e.encode_chunk(codes, n, out) } -> std::same_as<std::size_t>;
  { e.decode_chunk(in, n, out_codes, n) } -> std::same_as<status>;
  { e.max_chunk_bytes(n, 32u) } -> std::same_as<std::size_t>;  // for codes of at most that many bits
};

/// An encoder with a per-stream codebook (needs_codebook: the stream's
/// codebook section), learned from the statistics of the tensor's codes. The
/// host backend gathers `statistics` over the chunks in any grouping, learns
/// the codebook, serializes it, and encodes with the functor bound to it;
/// decoding deserializes and binds (encoder/huffman.hpp is the model).
/// Statistics constructible from the tensor's `extents` are constructed so
/// (an encoder whose contexts need the row width: encoder/context_ans.hpp);
/// the codebook then carries what the decoder needs of the geometry.
template <class E>
concept codebook_encoder = encoder<E> && E::needs_codebook &&
    requires(typename E::statistics& s, const typename E::statistics& cs, const typename E::codebook& cb,
             const std::uint32_t* codes, std::size_t n, std::vector<std::byte>& bytes, const std::byte* in,
             typename E::codebook& out) {
  {s.add(codes, n)};
  {s.merge(cs)};
  { E::learn(cs) } -> std::same_as<typename E::codebook>;
  { E::bind(cb) } -> std::same_as<E>;
  {cb.serialize(bytes)};
  { E::codebook::deserialize(in, n, out) } -> std::same_as<status>;
  { E::codebook::max_serialized_bytes } -> std::convertible_to<std::size_t>;
};

/// A codebook encoder that can say, from the statistics and the codebook
/// learned from them, about how many bits its chunks' payloads take, without
/// coding anything (per-chunk fixed bytes aside: min_payload_bytes). The
/// host backend then weighs predictor candidates on a sample by this
/// estimate instead of coding the sample with each (encoder/context_ans.hpp).
/// learn_frequencies gives the codebook learn() does without the tables only
/// coding reads: enough to serialize it and to estimate.
template <class E>
concept estimating_encoder = codebook_encoder<E> && requires(const typename E::statistics& cs, const typename E::codebook& cb) {
  { E::estimated_payload_bits(cs, cb) } -> std::convertible_to<double>;
  { E::learn_frequencies(cs) } -> std::same_as<typename E::codebook>;
};

/// A codebook encoder that codes a chunk from tokens it forms from the codes
/// (encoder/striped_huffman.hpp), and whose statistics count those tokens:
/// the host backend's statistics pass keeps each chunk's tokens so that the
/// coding pass does not form them again (host/encode_stream.hpp). keeps(n,
/// codes_or) says whether a chunk of n codes whose bitwise OR is codes_or
/// fits the kept form: at most n tokens, a symbol byte and 16 raw bits each.
template <class E>
concept token_encoder = codebook_encoder<E> &&
    requires(const E& e, typename E::statistics& s, const std::uint32_t* codes, std::size_t n, std::uint8_t* symbol,
             std::uint16_t* extra, std::byte* out) {
  { E::keeps(n, std::uint32_t{}) } -> std::same_as<bool>;
  { E::tokenize(codes, n, symbol, extra) } -> std::same_as<std::size_t>;
  {s.add_symbols(symbol, n)};
  { e.encode_tokens(symbol, extra, n, n, out) } -> std::same_as<std::size_t>;
};

EBAC_NAMESPACE_END
