// tests/encoder/huffman_lanes.cpp - the tests of include/ebac/encoder/huffman_lanes.hpp.
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

/// The CUDA decoder's lane protocol (encoder/huffman_lanes.hpp), replayed
/// with arrays: what a warp computes with shuffles and ballots.
ebac::status lanes_decode(const ebac::huffman& enc, const std::byte* in, std::size_t bytes, std::uint32_t* codes, std::size_t m,
                          int& rounds) {
  using L = ebac::huffman_lanes;
  constexpr unsigned W = L::count;
  const L lanes(bytes);
  std::uint64_t start[W];
  ebac::huffman_range res[W];
  bool decoded[W] = {};
  for (unsigned l = 0; l < W; ++l) start[l] = lanes.first_guess(l);
  for (rounds = 1;; ++rounds) {
    REQUIRE(rounds <= static_cast<int>(W) + 1);
    for (unsigned l = 0; l < W; ++l)
      if (!decoded[l]) {
        res[l] = lanes.count_from(enc, in, bytes, start[l], l, m);
        decoded[l] = true;
      }
    bool changed = false;
    for (unsigned l = 1; l < W; ++l) {
      const std::uint64_t s = L::next_start(res[l - 1]);
      if (s != start[l]) {
        start[l] = s;
        decoded[l] = false;
        changed = true;
      }
    }
    if (!changed) break;
  }
  std::uint64_t first[W], sum = 0;
  for (unsigned l = 0; l < W; ++l) {
    first[l] = sum;
    sum += res[l].elements;
  }
  unsigned last = W;
  for (unsigned l = 0; l < W && last == W; ++l)
    if (L::holds_last(first[l], res[l].elements, m)) last = l;
  if (last == W) return ebac::status::corrupt_stream;
  for (unsigned l = 0; l < last; ++l)
    if (res[l].corrupt) return ebac::status::corrupt_stream;
  for (unsigned l = 0; l <= last; ++l) {
    const std::uint64_t wanted = l == last ? m - first[l] : res[l].elements;
    const auto r = enc.decode_range(in, bytes, start[l], lanes.range_end(l), l == last ? wanted : L::unlimited,
                                    [&](std::uint64_t k, std::uint32_t c) { codes[first[l] + k] = c; });
    if (l == last ? !L::last_lane_ok(r, wanted, bytes) : (r.corrupt || r.elements != wanted)) return ebac::status::corrupt_stream;
  }
  return ebac::status::ok;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("huffman: 32 lanes decode what the serial decoder decodes, and reject what it rejects") {
    std::mt19937_64 rng(41);
    int max_rounds = 0;
    std::uint64_t streams = 0, round_sum = 0;
    for_each_coded_set(5, [&](const coded_set& c) {
      const auto& cs = c.cs;
      const auto& enc = c.enc;
      const auto& stream = c.stream;
      const std::size_t m = cs.codes.size();
      std::vector<std::uint32_t> got(m, 0xdeadbeefu);
      int rounds = 0;
      REQUIRE(lanes_decode(enc, stream.data(), stream.size(), got.data(), m, rounds) == ebac::status::ok);
      CHECK(got == cs.codes);
      max_rounds = std::max(max_rounds, rounds);
      round_sum += static_cast<std::uint64_t>(rounds);
      ++streams;
      // Damaged and cut streams: the same verdict as the serial decoder, and the same codes when accepted.
      for (int trial = 0; trial < 40; ++trial) {
        auto bad = stream;
        if (trial % 4 == 3 && bad.size() > 1) bad.resize(rng() % bad.size());
        else if (!bad.empty()) bad[rng() % bad.size()] ^= static_cast<std::byte>(1 + rng() % 255);
        std::vector<std::uint32_t> serial(m), lanes(m);
        const auto s1 = enc.decode_chunk(bad.data(), bad.size(), serial.data(), m);
        int r2 = 0;
        const auto s2 = lanes_decode(enc, bad.data(), bad.size(), lanes.data(), m, r2);
        CHECK(s1 == s2);
        if (s1 == ebac::status::ok && s2 == ebac::status::ok) CHECK(serial == lanes);
      }
    });
    MESSAGE("lane rounds: max " << max_rounds << ", mean " << static_cast<double>(round_sum) / static_cast<double>(streams)
                                << " over " << streams << " streams");
  }

  TEST_CASE("huffman: runs of 2^32 zeros cost the lanes one step each, and cannot wrap their counts") {
    // A codebook a stream may carry (it validates): code 0 and the longest run
    // class, one bit each. Every 32-bit token then claims 2^32 - 1 zeros.
    std::vector<std::uint64_t> h(A::size, 0);
    const std::uint32_t longest = A::run_base + A::run_classes - 1;
    h[0] = 1;
    h[longest] = 1;
    const auto cb = codebook_of(h, true);
    const auto enc = ebac::huffman::bind(cb);
    REQUIRE(cb.length[longest] == 1);
    constexpr int tokens = 64;
    std::vector<std::byte> stream(4 * tokens + 8);
    ebac::detail::bit_writer w{stream.data()};
    for (int t = 0; t < tokens; ++t) {
      w.put(cb.code_lsb[longest], 1);
      w.put(0x7fffffffu, 31);
    }
    stream.resize(static_cast<std::size_t>(w.finish() - stream.data()));
    const std::uint64_t per_token = (std::uint64_t{1} << 32) - 1;
    // Counting only: 64 x (2^32 - 1) zeros, counted token by token (the
    // element-by-element loop would take minutes here and, on the GPU, was
    // kept by nvcc even with a sink that drops the codes).
    const auto counted = enc.decode_range(stream.data(), stream.size(), 0, 8 * stream.size(), ebac::huffman_lanes::unlimited,
                                          ebac::huffman_count_only{});
    CHECK_FALSE(counted.corrupt);
    CHECK(counted.elements == tokens * per_token);
    CHECK(counted.end_bit == 32u * tokens);
    // A lane counts no further than its chunk: at most m codes, corrupt when a
    // token would pass m (reaching m exactly just stops the count).
    const ebac::huffman_lanes lanes(stream.size());
    for (const std::uint64_t m : std::vector<std::uint64_t>{1, 1000, per_token - 1, per_token, 3 * per_token}) {
      CAPTURE(m);
      const auto r = lanes.count_from(enc, stream.data(), stream.size(), 0, 0, m);
      CHECK(r.elements <= m);
      CHECK(r.corrupt == (m < 2 * per_token && m != per_token));  // lane 0's range (2048 bits / 32) holds 2 tokens
    }
    // And the verdict stays the serial decoder's: a chunk of 1000 codes cannot be this stream.
    std::vector<std::uint32_t> serial(1000), lane_codes(1000);
    int rounds = 0;
    CHECK(enc.decode_chunk(stream.data(), stream.size(), serial.data(), serial.size()) == ebac::status::corrupt_stream);
    CHECK(lanes_decode(enc, stream.data(), stream.size(), lane_codes.data(), lane_codes.size(), rounds) ==
          ebac::status::corrupt_stream);
  }

}  // TEST_SUITE
