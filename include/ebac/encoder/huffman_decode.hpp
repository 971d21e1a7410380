// ebac/encoder/huffman_decode.hpp - huffman::decode_range: the tokens of a
// chunk's stream from a bit on, a table lookup for codes of up to
// table_bits bits and a canonical walk for longer ones. The serial decoder
// (decode_chunk) is one range; the CUDA decoder gives each lane of a warp
// one (encoder/huffman_lanes.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/encoder/huffman_codebook.hpp>
#include <ebac/encoder/huffman_functor.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

EBAC_HOST_DEVICE status huffman::decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                              std::size_t n) const noexcept {
  const huffman_range r =
      decode_range(in, bytes, 0, ~std::uint64_t{0}, n, [&](std::uint64_t k, std::uint32_t c) { codes[k] = c; });
  // Every code decoded, and the stream ends within the last byte the encoder wrote.
  return (r.corrupt || r.elements != n || (r.end_bit + 7) / 8 != bytes) ? status::corrupt_stream : status::ok;
}

template <class Put>
EBAC_HOST_DEVICE huffman_range huffman::decode_range(const std::byte* in, std::size_t bytes, std::uint64_t start,
                                                     std::uint64_t range_end, std::uint64_t max_elements,
                                                     Put&& put) const noexcept {
  namespace A = huffman_alphabet;
  huffman_range out;
  out.end_bit = start;
  if (start >= range_end || max_elements == 0) return out;
  if (start > std::uint64_t{bytes} * 8) {  // no token starts past the stream
    out.corrupt = true;
    return out;
  }
  detail::bit_reader r{in + start / 8, in + bytes};
  if (start % 8) {
    r.peek(8);
    r.skip(static_cast<int>(start % 8));
  }
  auto position = [&]() -> std::uint64_t {
    return static_cast<std::uint64_t>(r.p - in) * 8 + r.phantom_bits - static_cast<std::uint64_t>(r.count);
  };
  auto fail = [&](std::uint64_t elements) {
    out.corrupt = true;
    out.elements = elements;
    out.end_bit = position();
    return out;
  };
  std::uint64_t i = 0;
  while (i < max_elements) {
    std::uint32_t sym;
    const std::uint32_t e = table[r.peek(A::table_bits)];
    if (e & 0xffu) {
      sym = e >> 8;
      r.skip(static_cast<int>(e & 0xffu));
    } else {  // long code: canonical walk, MSB of the code first
      std::uint32_t code = 0;
      int len = 0;
      for (;;) {
        code = (code << 1) | r.peek(1);
        r.skip(1);
        ++len;
        if (len > A::max_code_length) return fail(i);
        if (code - first_code[len] < count[len]) {
          sym = sorted[offset[len] + (code - first_code[len])];
          break;
        }
      }
    }
    if (r.overran()) return fail(i);
    if (sym < A::literals) {
      put(i++, sym);
    } else if (sym == A::escape) {
      put(i++, r.peek(32));
      r.skip(32);
    } else {
      const int k = static_cast<int>(sym - A::run_base) + 1;
      const std::uint64_t run = (std::uint64_t{1} << k) + r.peek(k);
      r.skip(k);
      if (run > max_elements - i) return fail(i);
      if constexpr (std::is_same_v<std::remove_cvref_t<Put>, huffman_count_only>) {
        i += run;  // counting only: a run of up to 2^32 zeros costs one step, not 2^32
      } else {
        for (std::uint64_t j = 0; j < run; ++j) put(i++, 0u);
      }
    }
    if (r.overran()) return fail(i);
    if (position() >= range_end) break;
  }
  out.elements = i;
  out.end_bit = position();
  return out;
}

EBAC_NAMESPACE_END
