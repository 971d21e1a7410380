// tests/user_stage/varint_encoder.hpp - an encoder of a program's own, the
// worked example of docs/stages.md ("An encoder of your own").
//
// Not part of the library: this directory's test program is compiled with
//   EBAC_USER_ENCODERS_HEADER="varint_encoder.hpp"
// and the #define at the end of this file is the one registration line.
// The stage itself is deliberately trivial: each code as an LEB128 varint
// (one byte for codes below 128), so the tests can check its bytes by hand.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace user_stage {

struct varint_encoder {
  static constexpr ebac::encoder_id id = static_cast<ebac::encoder_id>(200);  // >= ebac::first_user_encoder_id
  static constexpr bool needs_codebook = false;
  static constexpr std::string_view name = "varint";  // pipelines say "lorenzo:sign:varint"
  /// Every code takes at least one byte: a reader refuses a shorter payload.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t n) noexcept { return n; }

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept { return 5 * n; }
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned bits) const noexcept {
    return (bits <= 7 ? 1 : bits <= 14 ? 2 : bits <= 21 ? 3 : bits <= 28 ? 4 : 5) * n;
  }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    std::size_t b = 0;
    for (std::size_t i = 0; i < n; ++i) b += ebac::detail::put_varint(out + b, codes[i]);
    return b;
  }

  [[nodiscard]] EBAC_HOST_DEVICE ebac::status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                           std::size_t n) const noexcept {
    const std::byte* p = in;
    const std::byte* const end = in + bytes;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t v;
      if (!ebac::detail::get_varint(p, end, v) || v > 0xffffffffu) return ebac::status::corrupt_stream;
      codes[i] = static_cast<std::uint32_t>(v);
    }
    return p == end ? ebac::status::ok : ebac::status::corrupt_stream;
  }
};

}  // namespace user_stage

#define EBAC_USER_ENCODERS ::user_stage::varint_encoder
