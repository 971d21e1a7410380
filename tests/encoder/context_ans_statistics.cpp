// tests/encoder/context_ans_statistics.cpp - the tests of include/ebac/encoder/context_ans_statistics.hpp.
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

/// Adds to `counts` the (finest context, token) of each code of a chunk,
/// from the format's definitions, but for the blocks of 1024 codes (from
/// the chunk's first) that are all 0: those take no step.
void count_reference(const std::vector<std::uint32_t>& codes, std::uint32_t row, std::vector<std::uint64_t>& counts) {
  const std::size_t T = ebac::detail::context_ans_model::tokens;
  for (std::size_t b = 0; b < codes.size(); b += 1024) {
    const std::size_t e = std::min(codes.size(), b + 1024);
    bool zero = true;
    for (std::size_t i = b; i < e; ++i) zero = zero && codes[i] == 0;
    if (zero) continue;
    for (std::size_t i = b; i < e; ++i)
      ++counts[std::size_t{reference_context(codes, i, row, 8, true)} * T + reference_token(codes[i])];
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("context_ans: estimated_payload_bits is what encode_chunk writes, within 0.1% and 8 bytes") {
    // The host backend weighs predictors by this estimate instead of coding
    // (host/codec.hpp: cheapest_predictor). Checked against the bytes the
    // encoder writes, less the chunk's fixed 20 (byte count, four states).
    std::mt19937_64 rng(43);
    std::geometric_distribution<std::uint32_t> small(0.35), large(0.002);
    for (const std::uint32_t row : {28u, 128u}) {
      for (int kind = 0; kind < 3; ++kind) {
        // 0: sparse, runs of zeros and small codes; 1: codes like their upper
        // neighbour, many with raw bits; 2: independent codes up to 2^12.
        std::vector<std::uint32_t> codes(std::size_t{1} << 16);
        for (std::size_t i = 0; i < codes.size(); ++i) {
          if (kind == 0) codes[i] = rng() % 4 == 0 ? small(rng) : 0u;
          else if (kind == 1) codes[i] = i >= row && rng() % 3 != 0 ? codes[i - row] : large(rng);
          else codes[i] = static_cast<std::uint32_t>(rng() % 4096);
        }
        ebac::context_ans::statistics st(ebac::extents{1, row});
        st.add(codes.data(), codes.size());
        const auto cb = ebac::context_ans::learn(st);
        // The estimate is made on learn_frequencies' codebook (as the host
        // backend does): learn()'s frequencies, set, row and serialized bytes,
        // without the coding tables.
        const auto freq_only = ebac::context_ans::learn_frequencies(st);
        CHECK(freq_only.freq == cb.freq);
        CHECK(freq_only.classes == cb.classes);
        CHECK(freq_only.diagonal == cb.diagonal);
        CHECK(freq_only.row == cb.row);
        CHECK((freq_only.steps.empty() && freq_only.cumulative.empty() && freq_only.first_token_fine.empty()));
        std::vector<std::byte> a_bytes, b_bytes;
        cb.serialize(a_bytes);
        freq_only.serialize(b_bytes);
        CHECK(a_bytes == b_bytes);
        const double estimate = ebac::context_ans::estimated_payload_bits(st, freq_only) / 8;
        const double coded = static_cast<double>(ans_chunk(cb, codes).size()) - 20;
        CAPTURE(row);
        CAPTURE(kind);
        CAPTURE(estimate);
        CAPTURE(coded);
        CHECK(std::fabs(coded - estimate) <= 0.001 * coded + 8);
      }
    }
  }

  TEST_CASE("context_ans: estimated_payload_bits is each code's -log2(f / 2^14) in its context plus its raw bits, summed here") {
    // The estimate's own arithmetic, against a sum over the codes computed
    // from the format's contexts and tokens and std::log2 (the estimate reads
    // a table of log2's values; learn() weighs its context sets by the same).
    std::mt19937_64 rng(47);
    std::geometric_distribution<std::uint32_t> small(0.3);
    for (const std::uint32_t row : {1u, 28u, 300u}) {
      std::vector<std::uint32_t> codes(std::size_t{1} << 15);
      for (std::size_t i = 0; i < codes.size(); ++i)
        codes[i] = rng() % 3 == 0 ? small(rng) : (rng() % 50 == 0 ? static_cast<std::uint32_t>(rng() % 100000) : 0u);
      ebac::context_ans::statistics st(ebac::extents{1, row});
      st.add(codes.data(), codes.size());
      const auto cb = ebac::context_ans::learn_frequencies(st);
      double want = 0;
      for (std::size_t i = 0; i < codes.size(); ++i) {
        const std::uint32_t t = reference_token(codes[i]);
        const std::uint16_t f = cb.freq[std::size_t{reference_context(codes, i, row, cb.classes, cb.diagonal)} *
                                            ebac::detail::context_ans_model::tokens +
                                        t];
        REQUIRE(f > 0);
        want += 14.0 - std::log2(static_cast<double>(f)) + ebac::detail::context_ans_model::extra_bits(t);
      }
      const double got = ebac::context_ans::estimated_payload_bits(st, cb);
      CAPTURE(row);
      CAPTURE(want);
      CAPTURE(got);
      CHECK(std::fabs(got - want) <= 1e-9 * want);
    }
  }

  TEST_CASE("context_ans: statistics count every chunk's (context, token), whatever the chunk sizes and merges") {
    // Chunks of 1 to 5000 codes, added one call each into three statistics
    // that are then merged: totals() must be the count of each chunk's
    // (finest context, token) pairs computed here from the format's
    // definitions (blocks of zeros left out). Many small chunks in a row are the case where add()'s
    // extra tables are carried from call to call, not summed each time.
    std::mt19937_64 rng(41);
    const std::uint32_t row = 28;
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    std::vector<std::uint64_t> expected(std::size_t{ebac::detail::context_ans_model::max_contexts} * T, 0);
    std::vector<ebac::context_ans::statistics> st(3, ebac::context_ans::statistics(ebac::extents{4, row}));
    std::size_t chunks = 0;
    for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 7u, 256u, 256u, 256u, 1023u, 1024u, 1025u, 5000u, 256u, 17u}) {
      for (int again = 0; again < 40; ++again, ++chunks) {
        std::vector<std::uint32_t> codes(n);
        for (auto& v : codes) v = rng() % 2 == 0 ? 0u : static_cast<std::uint32_t>(rng() >> (32 + rng() % 32));
        count_reference(codes, row, expected);
        st[chunks % 3].add(codes.data(), n);
      }
    }
    // One read before more are added must not lose or double what follows.
    (void)st[1].totals();
    std::vector<std::uint32_t> more(300, 5);
    st[1].add(more.data(), more.size());
    for (std::size_t i = 0; i < more.size(); ++i) ++expected[std::size_t{reference_context(more, i, row, 8, true)} * T + 5];
    st[0].merge(st[1]);
    st[0].merge(st[2]);
    const std::vector<std::uint64_t> got = st[0].totals();
    REQUIRE(got.size() == expected.size());
    std::size_t differ = 0;
    for (std::size_t k = 0; k < got.size(); ++k) differ += got[k] != expected[k] ? 1 : 0;
    CHECK(differ == 0);
  }

  TEST_CASE(
      "context_ans: statistics leave out blocks of zeros and count zeros beside a non-zero neighbour as the format's contexts") {
    // A chunk's block of 1024 codes that are all 0 is flagged in its bitmap
    // and takes no rANS step (docs/format.md), so add() does not count it.
    // Chunks of zeros with one non-zero code placed just inside and just
    // outside what a block's first element reads (its left, upper-left,
    // upper and upper-right neighbours), for rows of 1, 2, 28, 1024 and wider
    // than a block: the totals must be the (context, token) computed here of
    // each element of the blocks [1024 k, 1024 (k + 1)) with a non-zero code.
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    for (std::uint32_t row : {1u, 2u, 28u, 1024u, 1025u, 3000u}) {
      CAPTURE(row);
      std::vector<std::uint64_t> expected(std::size_t{ebac::detail::context_ans_model::max_contexts} * T, 0);
      ebac::context_ans::statistics st(ebac::extents{4, row});
      const std::size_t n = 5000;
      // Where the non-zero code goes, relative to the second block's start
      // (b = 1024): b - row - 2 is read by no element of that block.
      std::vector<std::int64_t> at = {-1, 0, 1023, 1024, -static_cast<std::int64_t>(row) - 2};
      for (std::int64_t d = -static_cast<std::int64_t>(row) - 1; d <= -static_cast<std::int64_t>(row) + 1; ++d) at.push_back(d);
      for (std::int64_t d : at) {
        std::vector<std::uint32_t> codes(n, 0);
        const std::int64_t i = 1024 + d;
        if (i >= 0 && i < static_cast<std::int64_t>(n)) codes[static_cast<std::size_t>(i)] = 7;
        count_reference(codes, row, expected);
        st.add(codes.data(), n);
      }
      const std::vector<std::uint64_t> got = st.totals();
      std::size_t differ = 0;
      for (std::size_t k = 0; k < got.size(); ++k) differ += got[k] != expected[k] ? 1 : 0;
      CHECK(differ == 0);
    }
  }

}  // TEST_SUITE
