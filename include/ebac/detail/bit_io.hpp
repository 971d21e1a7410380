// ebac/detail/bit_io.hpp - LSB-first bit writers and a bounds-checked bit
// reader, shared by the encoders that put variable-length codes (huffman,
// context ANS's raw bits) and by the CUDA kernels that write segments of
// one stream from several threads (segment_bit_writer).
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace detail {

struct bit_writer {
  std::byte* p;
  std::uint64_t acc = 0;
  int bits = 0;
  EBAC_HOST_DEVICE void put(std::uint64_t v, int n) noexcept {  // n <= 32
    acc |= v << bits;
    bits += n;
    if (bits >= 32) {
      store_le<std::uint32_t>(p, static_cast<std::uint32_t>(acc));
      p += 4;
      acc >>= 32;
      bits -= 32;
    }
  }
  /// put() without a branch on a full word, which a mix of wide and narrow
  /// values mispredicts: the low word is stored every time and kept only
  /// when full, so 4 bytes at p must be writable on every call.
  EBAC_HOST_DEVICE void put_unbranched(std::uint64_t v, int n) noexcept {  // n <= 32
    acc |= v << bits;
    bits += n;
    store_le<std::uint32_t>(p, static_cast<std::uint32_t>(acc));
    const int full = bits >= 32 ? 1 : 0;
    p += 4 * full;
    acc >>= 32 * full;
    bits -= 32 * full;
  }
  EBAC_HOST_DEVICE std::byte* finish() noexcept {
    while (bits > 0) {
      *p++ = static_cast<std::byte>(acc & 0xffu);
      acc >>= 8;
      bits -= 8;
    }
    return p;
  }
};

/// bit_writer for one segment of a stream that other threads write at the
/// same time: the segment starts at bit `first_bit` of a little-endian word
/// array. Words wholly inside the segment are stored; its partial first and
/// last words, which it shares with the neighbouring segments, are combined
/// with or_word(index, bits) into words zeroed beforehand. The words then
/// hold exactly what bit_writer writes for the whole stream (the bytes past
/// its last one are zero).
template <class OrWord>
struct segment_bit_writer {
  std::uint32_t* words;
  OrWord or_word;
  std::uint64_t word;  // index of the word being filled
  bool shared_first;   // the first word also holds the previous segment's bits
  std::uint64_t acc = 0;
  int bits;
  EBAC_HOST_DEVICE segment_bit_writer(std::uint32_t* w, std::uint64_t first_bit, OrWord o) noexcept
      : words(w), or_word(o), word(first_bit / 32), shared_first(first_bit % 32 != 0), bits(static_cast<int>(first_bit % 32)) {}
  EBAC_HOST_DEVICE void put(std::uint64_t v, int n) noexcept {  // n <= 32
    acc |= v << bits;
    bits += n;
    if (bits >= 32) {
      const auto w = static_cast<std::uint32_t>(acc);
      if (shared_first) or_word(word, w);
      else words[word] = w;
      shared_first = false;
      ++word;
      acc >>= 32;
      bits -= 32;
    }
  }
  /// The partial last word, if any (also the first one when the segment
  /// ends inside its first word). It is shared with the next segment (or is
  /// the stream's last), so it was zeroed: OR-ing zero bits can be skipped.
  EBAC_HOST_DEVICE void finish() noexcept {
    if (acc != 0) or_word(word, static_cast<std::uint32_t>(acc));
  }
};

/// LSB-first bit reader that never reads outside [p, end): bytes past the
/// end read as zero and are counted, so the caller can reject the stream.
struct bit_reader {
  const std::byte* p;
  const std::byte* end;
  std::uint64_t buf = 0;
  int count = 0;
  std::uint64_t phantom_bits = 0;  // bits supplied past the end
  EBAC_HOST_DEVICE void refill() noexcept {
    while (count <= 56) {
      std::uint64_t b = 0;
      if (p < end) b = static_cast<std::uint64_t>(*p++);
      else phantom_bits += 8;
      buf |= b << count;
      count += 8;
    }
  }
  EBAC_HOST_DEVICE std::uint32_t peek(int n) noexcept {
    if (count < n) refill();
    return static_cast<std::uint32_t>(buf & ((n == 32) ? 0xffffffffull : ((1ull << n) - 1)));
  }
  EBAC_HOST_DEVICE void skip(int n) noexcept {
    buf >>= n;
    count -= n;
  }
  EBAC_HOST_DEVICE bool overran() const noexcept { return phantom_bits > static_cast<std::uint64_t>(count); }
};

EBAC_HOST_DEVICE std::uint32_t reverse_bits(std::uint32_t v, int n) noexcept {
  std::uint32_t r = 0;
  for (int i = 0; i < n; ++i) {
    r = (r << 1) | (v & 1u);
    v >>= 1;
  }
  return r;
}

}  // namespace detail
EBAC_NAMESPACE_END
