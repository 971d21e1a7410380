// tests/encoder/block_bitpack.cpp - the tests of include/ebac/encoder/block_bitpack.hpp.
//
// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
//
// The CUDA backend computes each Lorenzo residual directly (the predictor's
// residual()); the host backend runs one pass per axis. They must agree bit
// for bit.
#include "../host/test_support.hpp"
#include "encoder_references.hpp"

#include <ebac/ebac.hpp>
#include <ebac/element_code.hpp>
#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/predictor/tiled_prefix.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <functional>
#include <limits>
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
  TEST_CASE("block_bitpack: byte layout") {
    const ebac::block_bitpack e{};
    std::vector<std::byte> buf(e.max_chunk_bytes(100));
    const std::vector<std::uint32_t> zeros(64, 0);
    CHECK(e.encode_chunk(zeros.data(), 64, buf.data()) == 2);  // two all-zero blocks: width bytes only
    CHECK(buf[0] == std::byte{0});
    CHECK(buf[1] == std::byte{0});
    std::vector<std::uint32_t> ones(33, 1);
    CHECK(e.encode_chunk(ones.data(), 33, buf.data()) == 2 + 4 + 4);
    CHECK(buf[0] == std::byte{1});
    CHECK(buf[1] == std::byte{1});
    CHECK(buf[2] == std::byte{0xff});  // 32 one-bit codes, LSB first
    CHECK(buf[6] == std::byte{0x01});  // the 33rd code, zero padded
    CHECK(buf[7] == std::byte{0});
    std::vector<std::uint32_t> v = {5, 0, 0, 0x80000000u};
    CHECK(e.encode_chunk(v.data(), 4, buf.data()) == 1 + 4 * 32);
    CHECK(buf[0] == std::byte{32});
    CHECK(e.encode_chunk(v.data(), 0, buf.data()) == 0);
    CHECK(e.max_chunk_bytes(0) == 0);
    CHECK(e.max_chunk_bytes(33) == 2 * 129);
  }

  TEST_CASE("block_bitpack: round trips, truncations and mutations") {
    std::mt19937_64 rng(21);
    for (const auto& cs : code_sets(1)) check_encoder(ebac::block_bitpack{}, cs, rng);
  }

  TEST_CASE("block_bitpack: width bytes above 32 and wrong sizes are rejected") {
    const ebac::block_bitpack e{};
    std::vector<std::uint32_t> codes(40, 3);
    std::vector<std::byte> buf(e.max_chunk_bytes(40));
    const std::size_t bytes = e.encode_chunk(codes.data(), 40, buf.data());
    std::vector<std::uint32_t> out(40);
    for (int w : {33, 64, 255}) {
      auto t = exact_copy(buf.data(), bytes);
      t[1] = static_cast<std::byte>(w);
      CHECK(e.decode_chunk(t.get(), bytes, out.data(), 40) != ebac::status::ok);
    }
    auto longer = std::unique_ptr<std::byte[]>(new std::byte[bytes + 4]{});
    std::memcpy(longer.get(), buf.data(), bytes);
    CHECK(e.decode_chunk(longer.get(), bytes + 4, out.data(), 40) != ebac::status::ok);  // trailing bytes
    std::vector<std::uint32_t> out70(70);
    CHECK(e.decode_chunk(buf.data(), bytes, out70.data(), 70) != ebac::status::ok);  // 3 blocks do not fit these bytes
  }

}  // TEST_SUITE

TEST_SUITE("host") {
  TEST_CASE("block_bitpack::packed_word (one word per thread) equals pack_block's words") {
    std::mt19937 rng(3);
    for (int w = 1; w <= 32; ++w) {
      CAPTURE(w);
      for (std::size_t m : {std::size_t{32}, std::size_t{1}, std::size_t{17}}) {
        std::uint32_t codes[32] = {};
        const std::uint32_t mask = w == 32 ? 0xffffffffu : ((1u << w) - 1);
        for (std::size_t i = 0; i < m; ++i) codes[i] = rng() & mask;
        if (m == 32) codes[31] = mask;  // the top bit of the last word
        std::byte packed[4 * 32];
        REQUIRE(ebac::block_bitpack::pack_block(codes, m, w, packed) == 4 * static_cast<std::size_t>(w));
        for (int l = 0; l < w; ++l) {
          CAPTURE(l);
          CHECK(ebac::block_bitpack::packed_word(codes, w, l) == ebac::detail::load_le<std::uint32_t>(packed + 4 * l));
        }
      }
    }
  }

  TEST_CASE("block_bitpack::code_at (one code per thread) equals unpack_block") {
    std::mt19937 rng(5);
    for (int w = 1; w <= 32; ++w) {
      CAPTURE(w);
      std::uint32_t codes[32];
      const std::uint32_t mask = w == 32 ? 0xffffffffu : ((1u << w) - 1);
      for (auto& c : codes) c = rng() & mask;
      codes[31] = mask;
      // Exactly the block's bytes on the heap, so a read past them trips ASan.
      std::vector<std::byte> packed(4 * static_cast<std::size_t>(w));
      REQUIRE(ebac::block_bitpack::pack_block(codes, 32, w, packed.data()) == packed.size());
      std::uint32_t back[32];
      ebac::block_bitpack::unpack_block(packed.data(), w, back, 32);
      for (int v = 0; v < 32; ++v) {
        CAPTURE(v);
        CHECK(ebac::block_bitpack::code_at(packed.data(), w, v) == back[v]);
        CHECK(back[v] == codes[v]);
      }
    }
  }

}  // TEST_SUITE
