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

  TEST_CASE("striped: kept tokens count and code as the codes do") {
    using E = ebac::striped_huffman;
    std::vector<code_set> sets = code_sets(5);
    // At the kept form's limits: a run of 2^16 zeros (class 16, no raw
    // bits), one of 2^16 - 1 (class 15, 2^15 - 1 in its raw bits), and
    // codes just below 2^16 (13 raw bits).
    sets.push_back({"run of 2^16", std::vector<std::uint32_t>(std::size_t{1} << 16, 0u)});
    sets.push_back({"run of 2^16 - 1", std::vector<std::uint32_t>((std::size_t{1} << 16) - 1, 0u)});
    sets.back().codes.push_back(7);
    sets.push_back({"below 2^16", std::vector<std::uint32_t>{0xffffu, 0, 0, 0x8000u, 0xfffeu, 0, 31, 32}});
    std::size_t kept = 0;
    for (const auto& cs : sets) {
      CAPTURE(cs.name);
      std::uint32_t any = 0;
      for (std::uint32_t v : cs.codes) any |= v;
      const bool fits = cs.codes.size() <= (std::size_t{1} << 16) && any < (1u << 16);
      CHECK(E::keeps(cs.codes.size(), any) == fits);
      if (!fits || cs.codes.empty()) continue;
      ++kept;
      std::vector<std::uint8_t> symbol(cs.codes.size());
      std::vector<std::uint16_t> extra(cs.codes.size());
      const std::size_t k = E::tokenize(cs.codes.data(), cs.codes.size(), symbol.data(), extra.data());
      REQUIRE(k <= cs.codes.size());
      // The tokens are the reference cursor's, raw bits included.
      ebac::striped_cursor cursor{cs.codes.data(), cs.codes.size()};
      ebac::striped_token t;
      std::size_t i = 0;
      while (cursor.next(t)) {
        REQUIRE(i < k);
        CHECK(symbol[i] == t.symbol);
        CHECK(extra[i] == t.extra);
        ++i;
      }
      CHECK(i == k);
      E::statistics st;
      st.add_symbols(symbol.data(), k);
      CHECK(st.count == striped_histogram(cs.codes));
      const auto cb = E::learn(st);
      const E enc = E::bind(cb);
      std::vector<std::byte> a(enc.max_chunk_bytes(cs.codes.size())), b(a.size());
      const std::size_t na = enc.encode_chunk(cs.codes.data(), cs.codes.size(), a.data());
      const std::size_t nb = enc.encode_tokens(symbol.data(), extra.data(), k, cs.codes.size(), b.data());
      REQUIRE(na == nb);
      CHECK(std::memcmp(a.data(), b.data(), na) == 0);
    }
    CHECK(kept > 10);
    CHECK_FALSE(E::keeps((std::size_t{1} << 16) + 1, 0));
    CHECK_FALSE(E::keeps(16, 1u << 16));
  }

}  // TEST_SUITE
