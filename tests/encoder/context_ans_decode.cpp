// tests/encoder/context_ans_decode.cpp - the tests of include/ebac/encoder/context_ans_decode.hpp.
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
  TEST_CASE("context_ans: the decoder's first-token tables name the token holding each 64th and 16th slot") {
    // Frequency tables drawn here: some contexts unused, some with one token of
    // 2^14, most with many tokens of 1-3 (boundaries off every multiple of 16)
    // beside a few large ones. The token holding slot s is found from the
    // frequencies by the test's own running sum.
    using model = ebac::detail::context_ans_model;
    constexpr std::uint32_t T = model::tokens;
    std::mt19937 rng(20261205);
    int checked = 0, contexts = 0;
    for (int round = 0; round < 20; ++round) {
      ebac::context_ans_codebook cb{};
      cb.classes = round % 2 == 0 ? 8u : 4u;
      cb.diagonal = round % 3 != 0;
      for (std::uint32_t c = 0; c < cb.contexts(); ++c) {
        std::uint16_t* f = cb.freq.data() + std::size_t{c} * T;
        const std::uint32_t kind = rng() % 4;
        if (kind == 0) continue;  // unused
        if (kind == 1) {
          f[rng() % T] = model::scale;
          continue;
        }
        std::uint32_t left = model::scale;
        for (std::uint32_t t = 0; t + 1 < T && left > 0; ++t) {
          if (rng() % 3 == 0) continue;
          const std::uint32_t want = kind == 2 ? 1 + rng() % 3 : rng() % 900;
          const std::uint32_t v = std::min(want, left);
          f[t] = static_cast<std::uint16_t>(v);
          left -= v;
        }
        f[T - 1] = static_cast<std::uint16_t>(f[T - 1] + left);
      }
      cb.derive();
      REQUIRE(cb.first_token.size() == std::size_t{cb.contexts()} * 256);
      // One row more in first_token_fine, cumulative and steps: the identity
      // (token 0 at every slot, frequency 2^14; a step that changes no state).
      REQUIRE(cb.first_token_fine.size() == std::size_t{cb.contexts() + 1} * 1024);
      REQUIRE(cb.cumulative.size() == std::size_t{cb.contexts() + 1} * (T + 1));
      REQUIRE(cb.steps.size() == std::size_t{cb.contexts()} * T + 1);
      CHECK(std::all_of(cb.first_token_fine.end() - 1024, cb.first_token_fine.end(), [](std::uint8_t t) { return t == 0; }));
      CHECK(cb.cumulative[std::size_t{cb.contexts()} * (T + 1)] == 0);
      CHECK(std::all_of(cb.cumulative.end() - T, cb.cumulative.end(), [](std::uint16_t c) { return c == model::scale; }));
      for (std::uint32_t s0 : {1u << 23, (1u << 23) + 12345u, (1u << 31) - 1u}) {
        std::byte space[8] = {};
        std::byte* p = space + 8;
        std::uint32_t s = s0;
        ebac::detail::context_ans_encode_step(cb.steps.back(), s, p);
        CHECK(s == s0);
        CHECK(p == space + 8);
      }
      for (std::uint32_t c = 0; c < cb.contexts(); ++c) {
        const std::uint16_t* f = cb.freq.data() + std::size_t{c} * T;
        std::vector<std::uint32_t> holder;  // holder[s]: the token holding slot s
        for (std::uint32_t t = 0; t < T; ++t) holder.insert(holder.end(), f[t], t);
        const bool unused = holder.empty();
        if (!unused) REQUIRE(holder.size() == model::scale);
        bool same = true;
        for (std::uint32_t b = 0; b < 1024; ++b) {
          const std::uint32_t want = unused ? ebac::context_ans_codebook::unused_context : holder[16 * b];
          same = same && cb.first_token_fine[std::size_t{c} * 1024 + b] == want;
          if (b < 256) {
            const std::uint32_t want_coarse = unused ? ebac::context_ans_codebook::unused_context : holder[64 * b];
            same = same && cb.first_token[std::size_t{c} * 256 + b] == want_coarse;
          }
        }
        CHECK_MESSAGE(same, "round " << round << ": context " << c << ": a first-token entry is not the token holding its slot");
        checked += same;
        ++contexts;
      }
    }
    CHECK(checked == contexts);
  }

  TEST_CASE("context_ans: a chunk that reaches a context the tensor never had is refused") {
    // Tables only for context 0, token 1: decoding a 1 moves the next element to
    // context (class 1, 0), which has no table.
    ebac::context_ans_codebook cb{};
    cb.row = 100;
    cb.freq[1] = 16384;
    cb.derive();
    const auto enc = ebac::context_ans::bind(cb);
    const std::vector<std::uint32_t> one{1};
    std::vector<std::byte> buf(enc.max_chunk_bytes(2));
    const std::size_t k = enc.encode_chunk(one.data(), 1, buf.data());
    std::uint32_t out[2] = {};
    CHECK(enc.decode_chunk(buf.data(), k, out, 1) == ebac::status::ok);
    CHECK(enc.decode_chunk(buf.data(), k, out, 2) == ebac::status::corrupt_stream);
    CHECK_FALSE(reference_decode(enc, buf.data(), k, 2).has_value());
  }

}  // TEST_SUITE
