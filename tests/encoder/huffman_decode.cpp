// tests/encoder/huffman_decode.cpp - the tests of include/ebac/encoder/huffman_decode.hpp.
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
  TEST_CASE("huffman: garbage chunk bytes decode as the format says (rejected, or the reference decoder's codes)") {
    std::mt19937_64 rng(27);
    std::vector<std::uint64_t> h(A::size, 0);
    std::uint64_t a = 1, b = 1;
    for (std::uint32_t s = 0; s < 40; ++s) {
      h[s] = a;
      const auto c = a + b;
      a = b;
      b = c;
    }
    h[A::run_base] = 3;
    h[A::run_base + 30] = 1;
    h[A::escape] = 2;
    const auto skewed = codebook_of(h, true);
    std::vector<std::uint64_t> flat(A::size, 1);
    const auto uniform = codebook_of(flat, true);
    std::size_t whole_chunks = 0;
    for (const auto* cb : {&skewed, &uniform}) {
      const auto enc = ebac::huffman::bind(*cb);
      const reference_huffman ref(cb->length.data());
      for (int t = 0; t < 3000; ++t) {
        const std::size_t bytes = rng() % 80, n = rng() % 300;
        auto in = std::unique_ptr<std::byte[]>(new std::byte[bytes ? bytes : 1]);
        for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::byte>(rng());
        CAPTURE(t);
        CAPTURE(bytes);
        CAPTURE(n);
        check_against_reference(enc, in.get(), bytes, n, ref.decode(in.get(), bytes, n));
        // The count these bytes do decode to, when they happen to be a whole
        // chunk, and one code either side of it.
        if (const auto whole = ref.whole_count(in.get(), bytes, 100000)) {
          ++whole_chunks;
          for (std::size_t m : {*whole, *whole + 1, *whole > 0 ? *whole - 1 : std::size_t{2}})
            check_against_reference(enc, in.get(), bytes, m, ref.decode(in.get(), bytes, m));
        }
      }
    }
    CHECK(whole_chunks > 100);  // the accepted side was exercised too
  }

}  // TEST_SUITE
