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
//
// A program's own encoders join the list without touching the library:
// compile every unit of the program with EBAC_USER_ENCODERS_HEADER naming a
// header that defines them and, in it, `#define EBAC_USER_ENCODERS` to their
// comma-separated types (docs/stages.md, "An encoder of your own";
// tests/user_stage/ is a worked example). Their ids are
// first_user_encoder_id or above, so the library's never collide with them;
// a program without them refuses their streams ("unknown encoder id").
// Every unit must see the same list (it is part of inline functions): set
// both as compile definitions of the whole program, never in one file.
#pragma once

#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/run_length.hpp>
#include <ebac/encoder/striped_huffman.hpp>
#include <ebac/status.hpp>

#ifdef EBAC_USER_ENCODERS_HEADER
// The header may include ebac's encoder building blocks (config.hpp,
// status.hpp, encoder/encoder_id.hpp, detail/bytes.hpp), not this registry
// or anything that reads it (pipeline.hpp, format/, host/, ebac.hpp).
#include EBAC_USER_ENCODERS_HEADER
#ifndef EBAC_USER_ENCODERS
#error "EBAC_USER_ENCODERS_HEADER must #define EBAC_USER_ENCODERS (the comma-separated encoder types it defines)"
#endif
#endif

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

template <class... E>
struct encoder_list {};

/// Ids from here up belong to a program's own encoders; the library's stay below.
inline constexpr std::uint8_t first_user_encoder_id = 128;

/// The library's encoders.
#define EBAC_LIBRARY_ENCODERS block_bitpack, run_length, huffman, context_ans, striped_huffman
using library_encoders = encoder_list<EBAC_LIBRARY_ENCODERS>;

/// The registered encoders: the library's, then a program's own.
#ifdef EBAC_USER_ENCODERS
using encoders = encoder_list<EBAC_LIBRARY_ENCODERS, EBAC_USER_ENCODERS>;
#else
using encoders = library_encoders;
#endif

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
/// get(std::type_identity<E>{}) for the registered encoder E with this id,
/// or `otherwise` for an id none has: the non-throwing, constexpr lookup
/// behind every per-id property below (visit_encoder is the throwing one).
template <class R, class Get>
constexpr R encoder_property(encoder_id id, R otherwise, Get&& get) noexcept {
  (void)find_encoder(encoders{}, [&](auto t) {
    if (decltype(t)::type::id != id) return false;
    otherwise = get(t);
    return true;
  });
  return otherwise;
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
  return detail::encoder_property(id, std::string_view("?"), [](auto t) { return decltype(t)::type::name; });
}

/// Whether encoder `id` keeps a codebook section (codebook_encoder), and the
/// least payload section a stream of n codes can have under it (a reader
/// refuses less, before allocating for elements that are not there).
/// Both false / 0 for an unregistered id.
[[nodiscard]] constexpr bool encoder_needs_codebook(encoder_id id) noexcept {
  return detail::encoder_property(id, false, [](auto t) { return decltype(t)::type::needs_codebook; });
}
[[nodiscard]] constexpr std::uint64_t encoder_min_payload_bytes(encoder_id id, std::uint64_t n) noexcept {
  return detail::encoder_property(id, std::uint64_t{0}, [n](auto t) { return decltype(t)::type::min_payload_bytes(n); });
}


namespace detail {
/// What the registry needs of its list, checked where the list is formed:
/// each entry an encoder (concepts.hpp), ids and names unique, ids not 0
/// (a stored stream's "no encoder"), the library's below first_user_encoder_id.
template <bool Builtin, class... Es>
consteval bool valid_encoder_list(encoder_list<Es...>) {
  constexpr std::uint8_t ids[] = {static_cast<std::uint8_t>(Es::id)...};
  constexpr std::string_view names[] = {Es::name...};
  constexpr std::size_t n = sizeof...(Es);
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] == 0 || names[i].empty()) return false;
    if (Builtin && ids[i] >= first_user_encoder_id) return false;
    for (std::size_t j = i + 1; j < n; ++j)
      if (ids[i] == ids[j] || names[i] == names[j]) return false;
  }
  return (encoder<Es> && ...);
}
template <class... Es>
consteval bool user_ids_valid(encoder_list<Es...>) {
  return ((static_cast<std::uint8_t>(Es::id) >= first_user_encoder_id) && ...);
}
}  // namespace detail

static_assert(detail::valid_encoder_list<true>(library_encoders{}),
              "the library's encoders: ids in [1, first_user_encoder_id), ids and names unique");
static_assert(detail::valid_encoder_list<false>(encoders{}),
              "every registered encoder satisfies ebac::encoder, with a unique id (not 0) and a unique, non-empty name");
#ifdef EBAC_USER_ENCODERS
static_assert(detail::user_ids_valid(encoder_list<EBAC_USER_ENCODERS>{}),
              "a program's own encoder ids are ebac::first_user_encoder_id (128) or above");
#endif

EBAC_NAMESPACE_END
