// tests/encoder/context_ans.cpp - the tests of include/ebac/encoder/context_ans.hpp.
//
// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
#include "../host/test_support.hpp"
#include "encoder_references.hpp"

#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/pipeline.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using namespace ebac_test;
namespace A = ebac::huffman_alphabet;

TEST_SUITE("host") {
  TEST_CASE("context_ans: byte layout") {
    // All zeros: the chunk's one block is all zero, flagged in a bitmap of
    // one byte (bit 31 of the byte count says it follows) and takes no step:
    // R = 16, the four states at 2^23, no raw bits. Nothing was counted, so
    // no context has a table.
    {
      const std::vector<std::uint32_t> zeros(10, 0);
      const auto cb = learn_ans(zeros, 5);
      CHECK(std::all_of(cb.freq.begin(), cb.freq.end(), [](std::uint16_t f) { return f == 0; }));
      const auto buf = ans_chunk(cb, zeros);
      CHECK(buf == bytes_of({16, 0, 0, 0x80, 0x01, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0}));
      std::vector<std::uint32_t> back(10, 99);
      CHECK(ebac::context_ans::bind(cb).decode_chunk(buf.data(), buf.size(), back.data(), back.size()) == ebac::status::ok);
      CHECK(back == zeros);
    }
    // One code 77 = 0b1001101: bit width 7, the bit below the leading one 0:
    // token 32 + 2 x (7 - 6) + 0 = 34, raw bits 01101 -> byte 0x0d.
    {
      const std::vector<std::uint32_t> one{77};
      const auto cb = learn_ans(one, 1);
      CHECK_FALSE(cb.diagonal);  // the smaller tables win on one code
      CHECK(cb.freq[34] == 16384);
      CHECK(ans_chunk(cb, one) == bytes_of({16, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0x0d}));
    }
    // A set table of two tokens at 1/2 each, one code 1 (token 1, start
    // 8192): x' = (x / 8192) * 2^14 + x % 8192 + 8192 = 2^24 + 8192 from
    // x = 2^23, on state 0; the other three stay at 2^23.
    {
      const std::vector<std::uint32_t> codes{1};
      ebac::context_ans_codebook cb{};
      cb.row = 1;
      cb.freq[0] = 8192;
      cb.freq[1] = 8192;
      cb.derive();
      const auto buf = ans_chunk(cb, codes);
      // state 0 = 2^24 + 8192 = 0x01002000; no renormalisation (limit 2^9 * 2^8 * 8192 = 2^30)
      CHECK(buf == bytes_of({16, 0, 0, 0, 0x00, 0x20, 0x00, 0x01, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0}));
      std::uint32_t back = 99;
      CHECK(ebac::context_ans::bind(cb).decode_chunk(buf.data(), buf.size(), &back, 1) == ebac::status::ok);
      CHECK(back == 1);
    }
  }

  TEST_CASE(
      "context_ans: blocks of zeros are flagged, take no step and decode as zeros, and chunks without a bitmap still decode") {
    // 5000 codes, rows of 28: blocks of 1024 (the last one 904 long). Blocks
    // 1 and 4 are all zero, so the bitmap is 0b10010; the others hold small
    // codes and zeros, some of block 2's beside block 1's zeros.
    std::mt19937_64 rng(71);
    const std::size_t n = 5000;
    std::vector<std::uint32_t> codes(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (i / 1024 != 1 && i / 1024 != 4 && rng() % 3 == 0) codes[i] = static_cast<std::uint32_t>(1 + rng() % 40);
    const auto cb = learn_ans(codes, 28);
    const ebac::context_ans enc = ebac::context_ans::bind(cb);
    const auto buf = ans_chunk(cb, codes);
    REQUIRE(buf.size() > 5);
    CHECK((static_cast<unsigned>(buf[3]) & 0x80u) != 0);  // bit 31 of the byte count: a bitmap follows
    CHECK(static_cast<unsigned>(buf[4]) == 0x12u);
    std::vector<std::uint32_t> back(n, 99);
    CHECK(enc.decode_chunk(buf.data(), buf.size(), back.data(), n) == ebac::status::ok);
    CHECK(back == codes);
    auto refused = [&](std::vector<std::byte> b) {
      std::vector<std::uint32_t> out(n);
      return enc.decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream;
    };
    {  // no block left flagged: the writer would have left the bitmap out
      auto b = buf;
      b[4] = std::byte{0};
      CHECK(refused(b));
    }
    {  // a bit past the chunk's five blocks
      auto b = buf;
      b[4] |= std::byte{0x20};
      CHECK(refused(b));
    }
    {  // under a version-0 codebook no chunk has a bitmap
      ebac::context_ans v0 = enc;
      v0.zero_blocks = false;
      std::vector<std::uint32_t> out(n);
      CHECK(v0.decode_chunk(buf.data(), buf.size(), out.data(), n) == ebac::status::corrupt_stream);
    }
    {  // a chunk cut inside its bitmap
      std::vector<std::uint32_t> out(n);
      CHECK(enc.decode_chunk(buf.data(), 4, out.data(), n) == ebac::status::corrupt_stream);
    }
    {  // the head: the one-byte bitmap, then the rANS bytes the count names, the four states first
      // The chunk's own bytes, read here byte by byte (not by the reader under test).
      auto le32 = [&](std::size_t at) {
        return static_cast<std::uint32_t>(buf[at]) | static_cast<std::uint32_t>(buf[at + 1]) << 8 |
               static_cast<std::uint32_t>(buf[at + 2]) << 16 | static_cast<std::uint32_t>(buf[at + 3]) << 24;
      };
      ebac::context_ans::chunk_head h;
      REQUIRE(enc.read_head(buf.data(), buf.size(), n, h));
      CHECK(h.bitmap_length == 1);
      CHECK(h.rans_bytes == (le32(0) & 0x7fffffffu));
      for (std::size_t s = 0; s < 4; ++s) CHECK(h.states[s] == le32(5 + 4 * s));
      // A count one past what the chunk holds after its bitmap, and one that
      // leaves no room for the four states: refused before any rANS byte is read.
      for (const std::uint32_t count : {static_cast<std::uint32_t>(buf.size() - 4), 15u}) {
        auto b = buf;
        ebac::detail::store_le<std::uint32_t>(b.data(), count | 0x80000000u);
        CHECK_FALSE(enc.read_head(b.data(), b.size(), n, h));
        CHECK(refused(b));
      }
      // An initial state below 2^23 or from 2^31: no encoder writes one.
      for (const std::uint32_t state : {(1u << 23) - 1, 1u << 31}) {
        for (std::size_t s = 0; s < 4; ++s) {
          auto b = buf;
          ebac::detail::store_le<std::uint32_t>(b.data() + 5 + 4 * s, state);
          CHECK_FALSE(enc.read_head(b.data(), b.size(), n, h));
          CHECK(refused(b));
        }
      }
      CHECK_FALSE(enc.read_head(buf.data(), 3, n, h));
    }
    // A chunk with no block of zeros has no bitmap and no flag: the bytes of
    // version 0, which a version-0 codebook (streams written before the
    // bitmap) decodes, and writes when it encodes.
    std::vector<std::uint32_t> dense(n);
    for (auto& v : dense) v = static_cast<std::uint32_t>(rng() % 3);
    dense[0] = 1;
    for (std::size_t b = 0; b < n; b += 1024) dense[b] = 1;  // no block all zero
    auto cb0 = learn_ans(dense, 28);
    const auto with = ans_chunk(cb0, dense);
    CHECK((static_cast<unsigned>(with[3]) & 0x80u) == 0);
    std::vector<std::byte> image;
    cb0.serialize(image);
    CHECK(static_cast<unsigned>(image[0]) == 1u);  // the writer's version
    image[0] = std::byte{0};
    ebac::context_ans_codebook old;
    REQUIRE(ebac::context_ans_codebook::deserialize(image.data(), image.size(), old) == ebac::status::ok);
    CHECK(old.version == 0);
    const ebac::context_ans enc0 = ebac::context_ans::bind(old);
    CHECK_FALSE(enc0.zero_blocks);
    std::vector<std::uint32_t> out(n);
    CHECK(enc0.decode_chunk(with.data(), with.size(), out.data(), n) == ebac::status::ok);
    CHECK(out == dense);
    CHECK(ans_chunk(old, dense) == with);
    {  // the same chunk with a bitmap that flags no block: not the writer's form, refused
      std::vector<std::byte> b = with;
      b[3] |= std::byte{0x80};
      b.insert(b.begin() + 4, std::byte{0});
      CHECK(enc0.decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream);  // version 0: no bitmap at all
      CHECK(ebac::context_ans::bind(cb0).decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream);
    }
    // Version 0 codes a block of zeros step by step (when its tables have token 0 where it falls).
    std::vector<std::uint32_t> gap = dense;
    std::fill(gap.begin() + 1024, gap.begin() + 2048, 0u);
    std::vector<std::byte> zimage;
    auto cbg = learn_ans(dense, 28);  // counted without the gap: (context 0, token 0) occurs in dense
    cbg.version = 0;
    cbg.serialize(zimage);
    ebac::context_ans_codebook oldg;
    REQUIRE(ebac::context_ans_codebook::deserialize(zimage.data(), zimage.size(), oldg) == ebac::status::ok);
    const auto stepwise = ans_chunk(oldg, gap);
    CHECK((static_cast<unsigned>(stepwise[3]) & 0x80u) == 0);
    CHECK(ebac::context_ans::bind(oldg).decode_chunk(stepwise.data(), stepwise.size(), out.data(), n) == ebac::status::ok);
    CHECK(out == gap);
  }

  TEST_CASE("context_ans: round trips, truncations and mutations, rows of 1, 7 and 64") {
    std::mt19937_64 rng(29);
    for (std::uint32_t row : {1u, 7u, 64u}) {
      CAPTURE(row);
      for (const auto& cs : code_sets(5)) {
        const auto cb = learn_ans(cs.codes, row);
        check_encoder(ebac::context_ans::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
      }
    }
  }

}  // TEST_SUITE
