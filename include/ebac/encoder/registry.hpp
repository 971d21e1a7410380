// ebac/encoder/registry.hpp - every encoder a stream may name, in one list.
//
// An encoder is a policy in its own header (concepts.hpp: encoder, and
// codebook_encoder for one with a per-stream codebook) that states its id,
// its name, and the least payload a stream of n codes can have. Adding one
// is its header plus its type in `encoders` below: the pipeline names
// (pipeline.hpp), the stream reader's checks (format/stream_header.hpp),
// the stages a header names (format/stream_stages.hpp), the size bounds
// (format/max_compressed_bytes.hpp) and the host backend all go through
// this list.
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/run_length.hpp>
#include <ebac/status.hpp>

#include <cstdint>
#include <string_view>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

template <class... E>
struct encoder_list {};

/// The registered encoders.
using encoders = encoder_list<block_bitpack, run_length, huffman>;

namespace detail {
template <class F, class E0, class... Es>
constexpr bool find_encoder(encoder_list<E0, Es...>, F&& pick) {
  if (pick(std::type_identity<E0>{})) return true;
  if constexpr (sizeof...(Es) > 0) return find_encoder(encoder_list<Es...>{}, pick);
  else return false;
}
template <class R, class F, class E0, class... Es>
R visit_encoder_in(encoder_list<E0, Es...>, encoder_id id, F& f) {
  if (id == E0::id) return f(std::type_identity<E0>{});
  if constexpr (sizeof...(Es) > 0) return visit_encoder_in<R>(encoder_list<Es...>{}, id, f);
  else fail(status::invalid_argument, "unknown encoder id");
}
}  // namespace detail

/// Calls f(std::type_identity<E>{}) for the registered encoder E with this
/// id and returns what it returns; throws status::invalid_argument for an
/// id no encoder has (a validated stream header never names one).
template <class F>
decltype(auto) visit_encoder(encoder_id id, F&& f) {
  using R = decltype(f(std::type_identity<block_bitpack>{}));
  return detail::visit_encoder_in<R>(encoders{}, id, f);
}

/// Whether a registered encoder has the raw id `raw` (a stream header's byte).
[[nodiscard]] constexpr bool encoder_registered(std::uint8_t raw) noexcept {
  return detail::find_encoder(encoders{}, [&](auto t) { return static_cast<std::uint8_t>(decltype(t)::type::id) == raw; });
}

/// The registered encoder named `name` (E::name, as pipeline triples spell
/// it): its id in `id`; false when none has that name.
[[nodiscard]] constexpr bool encoder_named(std::string_view name, encoder_id& id) noexcept {
  return detail::find_encoder(encoders{}, [&](auto t) {
    using E = typename decltype(t)::type;
    if (E::name != name) return false;
    id = E::id;
    return true;
  });
}

/// E::name of a registered encoder's id, or "?" for none.
[[nodiscard]] constexpr std::string_view encoder_name(encoder_id id) noexcept {
  std::string_view n = "?";
  (void)detail::find_encoder(encoders{}, [&](auto t) {
    using E = typename decltype(t)::type;
    if (E::id != id) return false;
    n = E::name;
    return true;
  });
  return n;
}

/// Whether encoder `id` keeps a codebook section (codebook_encoder), and the
/// least payload section a stream of n codes can have under it (a reader
/// refuses less, before allocating for elements that are not there).
/// Both false / 0 for an unregistered id.
[[nodiscard]] constexpr bool encoder_needs_codebook(encoder_id id) noexcept {
  return detail::find_encoder(encoders{}, [&](auto t) {
    using E = typename decltype(t)::type;
    return E::id == id && E::needs_codebook;
  });
}
[[nodiscard]] constexpr std::uint64_t encoder_min_payload_bytes(encoder_id id, std::uint64_t n) noexcept {
  std::uint64_t b = 0;
  (void)detail::find_encoder(encoders{}, [&](auto t) {
    using E = typename decltype(t)::type;
    if (E::id != id) return false;
    b = E::min_payload_bytes(n);
    return true;
  });
  return b;
}

EBAC_NAMESPACE_END
