// ebac/encoder/huffman_lanes.hpp - one chunk's Huffman stream decoded by 32 lanes.
//
// A chunk's bit stream has token boundaries that only decoding finds, so the
// CUDA decoder splits it into 32 equal bit ranges and lets lane l decode the
// tokens that start in range l (huffman::decode_range): first from a guess
// (the range's first bit), then from where lane l-1's last token ended,
// until no lane's start changes. Lane 0 starts right, so lane k is right
// after at most k rounds; Huffman codes resynchronize within a few tokens,
// so a lane's second decode usually ends where its first did and the rounds
// stop early, and a lane decodes again only when its start moved. Then a
// prefix sum of the lanes' code counts places their codes, and the lane
// that holds the chunk's last code decodes with the exact count and checks
// what the serial decoder checks (a run past the chunk, the stream ending
// in the last byte), so a stream is accepted exactly when the serial
// decoder accepts it (host-tested on mutated streams). The rules live here;
// cuda/kernels/decode.cuh runs them with warp shuffles, the host test with
// arrays.
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/huffman.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

struct huffman_lanes {
  static constexpr unsigned count = 32;
  /// A start that is not known: the lane before hit an error on its path.
  static constexpr std::uint64_t lost = ~std::uint64_t{0};
  /// No limit on the codes a range may give (decode_range's max_elements).
  static constexpr std::uint64_t unlimited = ~std::uint64_t{0};

  std::uint64_t bits;  ///< the stream's bits
  std::uint64_t per;   ///< bits per lane range

  EBAC_HOST_DEVICE explicit huffman_lanes(std::size_t bytes) noexcept
      : bits(std::uint64_t{bytes} * 8), per((std::uint64_t{bytes} * 8 + count - 1) / count) {}

  /// Lane l's range of token starts is [first_guess(l), range_end(l)).
  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t first_guess(unsigned l) const noexcept { return l * per < bits ? l * per : bits; }
  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t range_end(unsigned l) const noexcept {
    return (l + 1) * per < bits ? (l + 1) * per : bits;
  }

  /// Where lane l + 1 starts after lane l decoded r.
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint64_t next_start(const huffman_range& r) noexcept {
    return r.corrupt ? lost : r.end_bit;
  }

  /// Lane l counting its tokens from `start`, in a chunk of m codes. A lane
  /// that counts past m stops there, corrupt: no lane before the one holding
  /// the chunk's last code can (its codes end before m), so the verdict is
  /// the same, and the lanes' counts add up without overflow whatever the
  /// stream claims (32 x m at most; a crafted stream of 2^32-zero runs
  /// could otherwise wrap the prefix sum and misplace the writes).
  [[nodiscard]] EBAC_HOST_DEVICE huffman_range count_from(const huffman& enc, const std::byte* in, std::size_t bytes,
                                                          std::uint64_t start, unsigned l, std::uint64_t m) const noexcept {
    if (start == lost) {
      huffman_range r;
      r.end_bit = lost;
      r.corrupt = true;
      return r;
    }
    return enc.decode_range(in, bytes, start, range_end(l), m, huffman_count_only{});
  }

  /// Once the starts agree: lane l, whose codes begin at code `first` of a
  /// chunk of m, holds the chunk's last code when first < m <= first + its
  /// count. Lanes before it must have decoded cleanly; lanes after it hold
  /// only what follows the last code (the serial decoder never reads it).
  [[nodiscard]] EBAC_HOST_DEVICE static bool holds_last(std::uint64_t first, std::uint64_t elements, std::uint64_t m) noexcept {
    return first < m && m <= first + elements;
  }

  /// The last lane's final decode (max_elements = m - first) must give
  /// exactly that many codes and end in the stream's last byte.
  [[nodiscard]] EBAC_HOST_DEVICE static bool last_lane_ok(const huffman_range& r, std::uint64_t wanted,
                                                          std::size_t bytes) noexcept {
    return !r.corrupt && r.elements == wanted && (r.end_bit + 7) / 8 == bytes;
  }
};

EBAC_NAMESPACE_END
