// tests/encoder/run_length.cpp - the tests of include/ebac/encoder/run_length.hpp.
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
  TEST_CASE("run_length: byte layout") {
    const ebac::run_length e{};
    std::vector<std::byte> buf(64);
    auto enc = [&](std::vector<std::uint32_t> v) {
      const std::size_t k = e.encode_chunk(v.data(), v.size(), buf.data());
      std::vector<int> r;
      for (std::size_t i = 0; i < k; ++i) r.push_back(static_cast<int>(buf[i]));
      return r;
    };
    // token = run << 4 | (code - 1); 15 in either nibble: a varint of the rest follows
    CHECK(enc({}) == std::vector<int>{});
    CHECK(enc({0, 0, 0, 5}) == std::vector<int>{0x34});
    CHECK(enc({7}) == std::vector<int>{0x06});
    CHECK(enc({0, 0}) == std::vector<int>{0x20});                         // a final run: code nibble 0, no code
    CHECK(enc({1, 0, 200}) == std::vector<int>{0x00, 0x1f, 0xb8, 0x01});  // 200 = 16 + 184
    CHECK(enc({16}) == std::vector<int>{0x0f, 0x00});
    std::vector<std::uint32_t> long_run(20, 0);
    long_run.push_back(3);
    CHECK(enc(long_run) == std::vector<int>{0xf2, 5});  // 15 + 5 zeros, then 3
    CHECK(enc(std::vector<std::uint32_t>(16, 0)) == std::vector<int>{0xf0, 1});
    CHECK(enc(std::vector<std::uint32_t>(15, 0)) == std::vector<int>{0xf0, 0});
    CHECK(enc({2, 1, 3, 1}) == std::vector<int>{0x01, 0x00, 0x02, 0x00});  // level indices: a byte each
    CHECK(e.max_chunk_bytes(10) >= 10 * 6);
  }

  TEST_CASE("run_length: round trips, truncations and mutations") {
    std::mt19937_64 rng(22);
    for (const auto& cs : code_sets(2)) check_encoder(ebac::run_length{}, cs, rng);
  }

  TEST_CASE("run_length: runs past the chunk, trailing bytes and overlong varints are rejected") {
    const ebac::run_length e{};
    std::vector<std::uint32_t> out(8);
    auto dec = [&](std::vector<std::uint8_t> b, std::size_t n) {
      auto t = std::unique_ptr<std::byte[]>(new std::byte[b.size() ? b.size() : 1]);
      for (std::size_t i = 0; i < b.size(); ++i) t[i] = static_cast<std::byte>(b[i]);
      return e.decode_chunk(t.get(), b.size(), out.data(), n);
    };
    CHECK(dec({0x80}, 8) == ebac::status::ok);
    CHECK(dec({0x90}, 8) != ebac::status::ok);        // run longer than the chunk
    CHECK(dec({0x80, 0}, 8) != ebac::status::ok);     // trailing byte
    CHECK(dec({0x81}, 8) != ebac::status::ok);        // a final run with a code nibble
    CHECK(dec({0xf0, 0}, 8) != ebac::status::ok);     // an escaped run (>= 15) in an 8-element chunk
    CHECK(dec({0x70}, 8) == ebac::status::ok);        // 7 zeros, then code 1
    CHECK(dec({0x70, 0x00}, 8) != ebac::status::ok);  // ... and a token too many
    CHECK(out[6] == 0);
    CHECK(out[7] == 1);
    CHECK(dec({0x0f, 0xf0, 0xff, 0xff, 0xff, 0x0f}, 1) != ebac::status::ok);  // code - 1 = 15 + 0xfffffff0: overflows
    CHECK(dec({0x0f, 0xef, 0xff, 0xff, 0xff, 0x0f}, 1) == ebac::status::ok);
    CHECK(out[0] == 0xffffffffu);
    CHECK(dec({0x0f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1) != ebac::status::ok);  // > 64 bits
    CHECK(dec({0x0f}, 1) != ebac::status::ok);  // escaped code without its varint
    CHECK(dec({}, 1) != ebac::status::ok);
    CHECK(dec({}, 0) == ebac::status::ok);
  }

}  // TEST_SUITE
