// tests/encoder/huffman.cpp - the tests of include/ebac/encoder/huffman.hpp.
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
  TEST_CASE("huffman: round trips with and without zero runs, truncations and mutations") {
    std::mt19937_64 rng(23);
    for (const auto& cs : code_sets(3)) {
      for (bool runs : {false, true}) {
        CAPTURE(runs);
        const auto cb = codebook_of(histogram(cs.codes, runs), runs);
        for (std::uint32_t s = 0; s < A::size; ++s) REQUIRE(cb.length[s] <= A::max_code_length);
        CHECK(kraft_units(cb.length) <= (std::uint64_t{1} << A::max_code_length));
        check_encoder(ebac::huffman::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
        // The serialized codebook describes the same code.
        std::vector<std::byte> ser;
        cb.serialize(ser);
        ebac::huffman_codebook back;
        auto in = exact_copy(ser.data(), ser.size());
        REQUIRE(ebac::huffman_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
        CHECK(back.use_runs == cb.use_runs);
        CHECK(back.length == cb.length);
        CHECK(back.code_lsb == cb.code_lsb);
      }
    }
  }

}  // TEST_SUITE
