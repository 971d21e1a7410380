// tests/encoder/striped_codebook.cpp - the tests of include/ebac/encoder/striped_codebook.hpp.
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
  TEST_CASE("striped: lengths stay within 11 bits on Fibonacci histograms, and every symbol codes") {
    std::mt19937_64 rng(42);
    std::vector<std::uint64_t> h(ebac::striped_alphabet::size, 0);
    std::uint64_t a = 1, b = 1;
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
      h[s] = a;
      const auto c = a + b;
      a = b;
      b = std::min<std::uint64_t>(c, std::uint64_t{1} << 40);
    }
    const auto cb = ebac::striped_codebook::from_histogram(h.data());
    std::uint64_t kraft = 0;
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
      REQUIRE(cb.length[s] >= 1);
      REQUIRE(cb.length[s] <= 11);
      kraft += std::uint64_t{1} << (11 - cb.length[s]);
    }
    CHECK(kraft <= 2048);
    // One value of every bucket (both ends), every literal, a run of every
    // class a 2^16 chunk can hold, each closed by a non-zero code.
    code_set cs{"every symbol", {}};
    for (std::uint32_t v = 0; v < 32; ++v) cs.codes.push_back(v);
    for (unsigned width = 6; width <= 32; ++width)
      for (std::uint32_t m = 0; m < 4; ++m) {
        const std::uint32_t low = static_cast<std::uint32_t>((std::uint64_t{4 + m} << (width - 3)));
        cs.codes.push_back(low);
        cs.codes.push_back(static_cast<std::uint32_t>(low + ((std::uint64_t{1} << (width - 3)) - 1)));
      }
    for (unsigned k = 1; k <= 15; ++k) {
      cs.codes.insert(cs.codes.end(), (std::size_t{1} << k) + (k % 3), 0u);
      cs.codes.push_back(7);
    }
    check_encoder(ebac::striped_huffman::bind(cb), cs, rng, false);
  }

  TEST_CASE("striped: codebook sections that break the format are refused, and what is accepted decodes as the format says") {
    std::vector<std::uint64_t> h(ebac::striped_alphabet::size, 0);
    for (std::uint32_t s = 0; s < 60; ++s) h[s * 2] = 1 + s * s;
    const auto cb = ebac::striped_codebook::from_histogram(h.data());
    std::vector<std::byte> ser;
    cb.serialize(ser);
    ebac::striped_codebook out;
    for (std::size_t l = 0; l < ser.size(); ++l) {
      auto t = exact_copy(ser.data(), l);
      CAPTURE(l);
      CHECK(ebac::striped_codebook::deserialize(t.get(), l, out) != ebac::status::ok);
    }
    // A length of 12, a symbol past the alphabet, an over-full code: refused.
    auto refused = [&](std::vector<std::uint8_t> bytes) {
      std::vector<std::byte> b(bytes.size());
      for (std::size_t i = 0; i < bytes.size(); ++i) b[i] = static_cast<std::byte>(bytes[i]);
      auto t = exact_copy(b.data(), b.size());
      return ebac::striped_codebook::deserialize(t.get(), b.size(), out) != ebac::status::ok;
    };
    CHECK(refused({1, 5, 12}));             // one symbol, length 12
    CHECK(refused({1, 171, 1}));            // symbol 171
    CHECK(refused({3, 0, 1, 0, 1, 0, 1}));  // three codes of one bit
    CHECK(refused({1, 0, 0}));              // length 0
    CHECK_FALSE(refused({2, 0, 1, 0, 1}));  // two codes of one bit: a complete code
    std::mt19937_64 rng(43);
    std::vector<std::uint32_t> codes(3000);
    for (auto& c : codes) c = static_cast<std::uint32_t>(rng() % 120);
    std::size_t usable = 0;
    for (std::size_t pos = 0; pos < ser.size(); ++pos)
      for (std::uint8_t x : {0x01, 0x02, 0x10, 0x80, 0xff}) {
        auto t = exact_copy(ser.data(), ser.size());
        t[pos] ^= static_cast<std::byte>(x);
        if (ebac::striped_codebook::deserialize(t.get(), ser.size(), out) != ebac::status::ok) continue;
        ++usable;
        std::uint64_t kraft = 0;
        for (auto l : out.length)
          if (l) kraft += std::uint64_t{1} << (11 - l);
        CHECK(kraft <= 2048);
        // Garbage through a codebook the stream names: decoded as the format says.
        const ebac::striped_huffman enc = ebac::striped_huffman::bind(out);
        std::vector<std::byte> garbage(200);
        for (auto& g : garbage) g = static_cast<std::byte>(rng());
        garbage[0] = std::byte{60}, garbage[1] = std::byte{50}, garbage[2] = std::byte{40};
        auto gin = exact_copy(garbage.data(), garbage.size());
        for (std::size_t n : {1u, 7u, 100u, 400u})
          check_against_reference(enc, gin.get(), garbage.size(), n, reference_decode(enc, gin.get(), garbage.size(), n));
      }
    CHECK(usable > 0);
  }

}  // TEST_SUITE
