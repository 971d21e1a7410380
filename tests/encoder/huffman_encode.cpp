// tests/encoder/huffman_encode.cpp - the tests of include/ebac/encoder/huffman_encode.hpp.
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
  TEST_CASE("huffman: segments coded apart (one warp a chunk on the device) give the serial tokens and bytes") {
    struct token {
      std::uint32_t symbol, extra;
      int extra_bits;
      bool operator==(const token&) const = default;
    };
    for_each_coded_set(4, [&](const coded_set& c) {
      const auto& cs = c.cs;
      const auto& cb = c.cb;
      const bool runs = c.runs;
      const std::size_t m = cs.codes.size();
      const std::vector<std::byte>& serial = c.stream;
      const std::size_t bytes = serial.size();
      std::vector<token> expect;
      ebac::detail::huffman_tokenize(cs.codes.data(), m, runs, [&](std::uint32_t s, std::uint32_t e, int k) {
        expect.push_back({s, e, k});
      });
      for (std::size_t segments : {std::size_t{1}, std::size_t{3}, std::size_t{32}}) {
        CAPTURE(segments);
        const std::size_t seg = (m + segments - 1) / segments;  // the kernel's split: lane l takes [l seg, (l + 1) seg)
        auto bounds = [&](std::size_t l) {
          const std::size_t b = std::min(l * seg, m);
          return std::pair{b, std::min(b + seg, m)};
        };
        std::vector<token> got;
        std::vector<std::uint64_t> offset(segments + 1, 0);
        for (std::size_t l = 0; l < segments; ++l) {
          const auto [b, e] = bounds(l);
          std::uint64_t bits = 0;
          ebac::detail::huffman_tokenize_segment(cs.codes.data(), m, b, e, runs, [&](std::uint32_t s, std::uint32_t x, int k) {
            got.push_back({s, x, k});
            bits += cb.length[s] + static_cast<std::uint64_t>(k);
          });
          offset[l + 1] = offset[l] + bits;
        }
        CHECK(got == expect);
        const std::uint64_t total = offset[segments];
        REQUIRE((total + 7) / 8 == bytes);
        // Scratch starts as garbage, as device memory would; only the shared words are zeroed first.
        std::vector<std::uint32_t> words((bytes + 3) / 4 + 1, 0xdeadbeefu);
        for (std::size_t l = 0; l < segments; ++l)
          if (offset[l] % 32) words[offset[l] / 32] = 0;
        if (total % 32) words[total / 32] = 0;
        for (std::size_t l = segments; l-- > 0;) {  // any order: the segments touch disjoint bits
          const auto [b, e] = bounds(l);
          auto or_word = [&](std::uint64_t i, std::uint32_t v) { words[i] |= v; };
          ebac::detail::segment_bit_writer<decltype(or_word)> w(words.data(), offset[l], or_word);
          ebac::detail::huffman_tokenize_segment(cs.codes.data(), m, b, e, runs, [&](std::uint32_t s, std::uint32_t x, int k) {
            w.put(cb.code_lsb[s], cb.length[s]);
            if (k) w.put(x, k);
          });
          w.finish();
        }
        CHECK(std::memcmp(words.data(), serial.data(), bytes) == 0);
      }
    });
  }

}  // TEST_SUITE
