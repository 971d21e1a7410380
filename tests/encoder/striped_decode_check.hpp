// The body of the striped decoder's tests, shared by the project's build
// (tests/encoder/striped_decode.cpp) and the AVX2 build
// (tests/isa/test_striped_decode_x8.cpp, where its stores of zeros are
// AVX2): the decoder (ebac/encoder/striped_decode.hpp) against the
// reference decoder written bit by bit from docs/format.md
// (encoder_references.hpp), on chunks made to cross its two loops' limits:
// sizes around the 17 codes of room its fast rounds need and around the
// eight bytes before a chunk's end; zero runs of every length across the
// 16 zeros stored behind each token; a codebook of one symbol, whose table
// is half bits that start no code. Each chunk is decoded as written, then
// asked for fewer and more codes than it holds (a run past the end, streams
// that run out), truncated and mutated: the decoder must give the
// reference's verdict and, where both accept, its codes. Every input and
// output is an allocation of exactly its size (the sanitizer build).
#pragma once

#include "encoder_references.hpp"

#include <ebac/encoder/striped_huffman.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace striped_decode_check {

/// n codes of one of six kinds: 0 zero runs of 1 to 40 between literals,
/// 1 literals and buckets up to 2^32 - 1, 2 runs up to 5000 and rare
/// values, 3 all zero, 4 one value at the end, 5 all ones (one symbol).
inline std::vector<std::uint32_t> make_codes(std::mt19937_64& rng, std::size_t n, int kind) {
  std::vector<std::uint32_t> c(n, 0);
  for (std::size_t i = 0; i < n;) {
    switch (kind) {
      case 0: i += 1 + rng() % 40; break;  // a run (or one zero) ...
      case 1: break;
      case 2: i += 1 + rng() % 5000; break;
      case 3: return c;
      case 4: c[n - 1] = 77; return c;
      default: c[i++] = 1; continue;
    }
    if (i >= n) break;
    const std::uint64_t r = rng();
    c[i++] = kind == 1 && r % 4 == 0 ? static_cast<std::uint32_t>(rng() >> (rng() % 32)) : static_cast<std::uint32_t>(1 + r % 31);
  }
  return c;
}

/// The decoder of enc gives the reference's verdict (and codes) on `bytes`
/// bytes of `stream` asked for n codes.
inline void agree(const ebac::striped_huffman& enc, const std::byte* stream, std::size_t bytes, std::size_t n) {
  auto in = exact_copy(stream, bytes);
  check_against_reference(enc, in.get(), bytes, n, reference_decode(enc, in.get(), bytes, n));
}

/// Returns how many decodes it compared: 19 sizes x 6 kinds x (1 + 6 + 4 + 24).
inline std::size_t check_decoder_against_reference(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::size_t checked = 0;
  for (std::size_t n : {1, 2, 3, 5, 8, 16, 17, 18, 19, 33, 67, 68, 69, 70, 100, 257, 1000, 4099, 16384}) {
    for (int kind = 0; kind < 6; ++kind) {
      CAPTURE(n);
      CAPTURE(kind);
      const std::vector<std::uint32_t> codes = make_codes(rng, n, kind);
      ebac::striped_huffman::statistics st;
      st.add(codes.data(), n);
      const ebac::striped_codebook cb = ebac::striped_huffman::learn(st);
      const ebac::striped_huffman enc = ebac::striped_huffman::bind(cb);
      std::vector<std::byte> buf(enc.max_chunk_bytes(n));
      buf.resize(enc.encode_chunk(codes.data(), n, buf.data()));
      const std::size_t bytes = buf.size();
      {
        auto in = exact_copy(buf.data(), bytes);
        std::vector<std::uint32_t> out(n, 0xdeadbeefu);
        REQUIRE(enc.decode_chunk(in.get(), bytes, out.data(), n) == ebac::status::ok);
        CHECK(out == codes);
        ++checked;
      }
      for (std::size_t m : {n - 1, n + 1, n / 2, n > 17 ? n - 17 : 0, n + 17, n + 1000}) {
        CAPTURE(m);
        agree(enc, buf.data(), bytes, m);
        ++checked;
      }
      for (std::size_t cut : {bytes - 1, bytes > 8 ? bytes - 8 : 0, bytes > 9 ? bytes - 9 : 0, bytes / 2}) {
        CAPTURE(cut);
        agree(enc, buf.data(), cut, n);
        ++checked;
      }
      for (int k = 0; k < 24; ++k) {
        std::vector<std::byte> t = buf;
        const std::size_t pos = rng() % bytes;
        t[pos] ^= static_cast<std::byte>(1 + rng() % 255);
        CAPTURE(pos);
        agree(enc, t.data(), bytes, n);
        ++checked;
      }
    }
  }
  return checked;
}

}  // namespace striped_decode_check
