// ebac/encoder/run_length.hpp - zero-run-length coding with varints.
//
// Chunk layout: repeated (zero_run, code - 1) varint pairs; a chunk may end
// after a zero run. Suited to sparse code streams (post-ReLU activations,
// smooth regions after prediction) when a codebook is not worth its bytes.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

struct run_length {
  static constexpr encoder_id id = encoder_id::run_length;
  static constexpr bool needs_codebook = false;

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    return 6 * n + 10;  // worst case: no zeros, a 1-byte run and a 5-byte code each
  }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n,
                                            std::byte* out) const noexcept {
    std::byte* p = out;
    std::size_t i = 0;
    while (i < n) {
      std::size_t run = 0;
      while (i < n && codes[i] == 0) { ++run; ++i; }
      p += detail::put_varint(p, run);
      if (i == n) break;
      p += detail::put_varint(p, codes[i] - 1u);
      ++i;
    }
    return static_cast<std::size_t>(p - out);
  }

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes,
                                                     std::uint32_t* codes, std::size_t n) const noexcept {
    const std::byte* p = in;
    const std::byte* end = in + bytes;
    std::size_t i = 0;
    while (i < n) {
      std::uint64_t run, v;
      if (!detail::get_varint(p, end, run) || run > n - i) return status::corrupt_stream;
      for (std::uint64_t k = 0; k < run; ++k) codes[i++] = 0;
      if (i == n) break;
      if (!detail::get_varint(p, end, v) || v >= 0xffffffffull) return status::corrupt_stream;
      codes[i++] = static_cast<std::uint32_t>(v) + 1u;
    }
    return p == end ? status::ok : status::corrupt_stream;
  }
};

EBAC_NAMESPACE_END
