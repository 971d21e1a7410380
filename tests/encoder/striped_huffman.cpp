// tests/encoder/striped_huffman.cpp - the tests of include/ebac/encoder/striped_huffman.hpp.
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

namespace {

/// The striped codebook of a code set's own tokens, counted here from the
/// format's token rules (not the encoder's statistics).
std::vector<std::uint64_t> striped_histogram(const std::vector<std::uint32_t>& codes) {
  std::vector<std::uint64_t> h(171, 0);
  for (std::size_t i = 0; i < codes.size();) {
    std::size_t j = i;
    while (j < codes.size() && codes[j] == 0) ++j;
    if (j - i >= 2) {  // a run of L zeros: class floor(log2 L)
      unsigned k = 0;
      while ((std::uint64_t{2} << k) <= j - i) ++k;
      ++h[139 + k];
      i = j;
      continue;
    }
    const std::uint32_t v = codes[i++];
    if (v < 32) {
      ++h[v];
    } else {
      unsigned b = 0;
      while (b < 32 && (v >> b) != 0) ++b;
      ++h[32 + 4 * (b - 6) + ((v >> (b - 3)) & 3u)];
    }
  }
  return h;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("striped: round trips, truncations and mutations, and statistics that count the format's tokens") {
    std::mt19937_64 rng(41);
    for (const auto& cs : code_sets(4)) {
      CAPTURE(cs.name);
      ebac::striped_huffman::statistics st;
      // Added in two parts and merged: sums do not depend on the grouping
      // (the chunk is cut after a non-zero code, so no run is split).
      std::size_t cut = cs.codes.size() / 2;
      while (cut > 0 && cs.codes[cut - 1] == 0) --cut;
      ebac::striped_huffman::statistics second;
      st.add(cs.codes.data(), cut);
      second.add(cs.codes.data() + cut, cs.codes.size() - cut);
      st.merge(second);
      CHECK(st.count == striped_histogram(cs.codes));
      const auto cb = ebac::striped_huffman::learn(st);
      for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
        CHECK(cb.length[s] <= 11);
        CHECK((cb.length[s] != 0) == (st.count[s] != 0));  // every token that occurs has a code
      }
      check_encoder(ebac::striped_huffman::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
      std::vector<std::byte> ser;
      cb.serialize(ser);
      ebac::striped_codebook back;
      auto in = exact_copy(ser.data(), ser.size());
      REQUIRE(ebac::striped_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
      CHECK(back.length == cb.length);
      CHECK(back.code_lsb == cb.code_lsb);
    }
  }

}  // TEST_SUITE
