// ebac/encoder/run_length.hpp - zero-run-length coding in one-byte tokens.
//
// Chunk layout: a sequence of tokens, each one byte r << 4 | c followed by up
// to two varints: a run of `r` zeros (r == 15: 15 + a varint, for longer
// runs), then one non-zero code c + 1 (c == 15: 16 + a varint, for larger
// codes). After the last run of a chunk, when it ends the chunk, the token's
// c is 0 and no code follows. A run of up to 14 zeros and a code up to 15
// cost one byte together: a level tensor's indices or a sparse map's small
// codes take a byte each, never two varints. Suited to sparse code streams
// (post-ReLU activations, masks, smooth regions after prediction) when a
// codebook is not worth its bytes.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

EBAC_NAMESPACE_BEGIN

struct run_length {
  static constexpr encoder_id id = encoder_id::run_length;
  static constexpr bool needs_codebook = false;
  static constexpr std::string_view name = "rle";
  /// A run token may cover any number of zeros.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t) noexcept { return 0; }

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    // worst case: no zeros, every code > 15: a token and a 5-byte varint each
    // (a run of >= 15 zeros costs at most 6 bytes and covers 15 elements)
    return 6 * n + 10;
  }
  /// Codes known to fit in `bits` bits do not code shorter in the worst case.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept {
    return max_chunk_bytes(n);
  }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    std::byte* p = out;
    std::size_t i = 0;
    while (i < n) {
      std::size_t run = 0;
      while (i < n && codes[i] == 0) {
        ++run;
        ++i;
      }
      const std::uint32_t r = run < 15 ? static_cast<std::uint32_t>(run) : 15u;
      const std::uint32_t c = i == n ? 0u : (codes[i] - 1u < 15u ? codes[i] - 1u : 15u);
      *p++ = static_cast<std::byte>((r << 4) | c);
      if (r == 15) p += detail::put_varint(p, run - 15);
      if (i == n) break;
      if (c == 15) p += detail::put_varint(p, codes[i] - 16u);
      ++i;
    }
    return static_cast<std::size_t>(p - out);
  }

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept {
    const std::byte* p = in;
    const std::byte* end = in + bytes;
    std::size_t i = 0;
    while (i < n) {
      if (p == end) return status::corrupt_stream;
      const auto token = static_cast<std::uint32_t>(*p++);
      std::uint64_t run = token >> 4, v = token & 15u;
      if (run == 15) {
        std::uint64_t extra;
        if (n - i < 15 || !detail::get_varint(p, end, extra) || extra > n - i - 15) return status::corrupt_stream;
        run += extra;
      }
      if (run > n - i) return status::corrupt_stream;
      for (std::uint64_t k = 0; k < run; ++k) codes[i++] = 0;
      if (i == n) {
        if (v != 0) return status::corrupt_stream;  // a final run carries no code
        break;
      }
      if (v == 15) {
        std::uint64_t extra;
        if (!detail::get_varint(p, end, extra) || extra >= 0xffffffffull - 15) return status::corrupt_stream;
        v += extra;
      }
      codes[i++] = static_cast<std::uint32_t>(v) + 1u;
    }
    return p == end ? status::ok : status::corrupt_stream;
  }
};

EBAC_NAMESPACE_END
