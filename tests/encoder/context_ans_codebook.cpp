// tests/encoder/context_ans_codebook.cpp - the tests of include/ebac/encoder/context_ans_codebook.hpp.
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
  TEST_CASE("context_ans: codebook sections that break the format are refused") {
    // version 0, context set 0, row 3, 64 contexts: the first with two tokens
    // 8192 + 8192 (varint 0x80 0x40), the rest unused.
    auto good = [] {
      std::vector<std::byte> b = bytes_of({0, 0, 3, 2, 0x80, 0x40, 0x80, 0x40});
      for (int c = 1; c < 64; ++c) b.push_back(std::byte{0});
      return b;
    };
    auto reads = [](const std::vector<std::byte>& b) {
      ebac::context_ans_codebook cb;
      auto in = exact_copy(b.data(), b.size());
      return ebac::context_ans_codebook::deserialize(in.get(), b.size(), cb);
    };
    {
      const auto b = good();
      ebac::context_ans_codebook cb;
      REQUIRE(ebac::context_ans_codebook::deserialize(b.data(), b.size(), cb) == ebac::status::ok);
      CHECK(cb.row == 3);
      CHECK_FALSE(cb.diagonal);
      CHECK(cb.freq[0] == 8192);
      CHECK(cb.freq[1] == 8192);
      CHECK(cb.cumulative[1] == 8192);
    }
    auto bad = good();
    bad[0] = std::byte{2};  // an unknown version
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[1] = std::byte{8};  // an unknown context set
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[1] = std::byte{1};  // the diagonal set: 128 contexts, so 64 are missing
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad.resize(bad.size() + 64, std::byte{0});  // with them it reads
    CHECK(reads(bad) == ebac::status::ok);
    bad = good();
    bad[1] = std::byte{2};  // 4 classes: 16 contexts, so 48 bytes are left over
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad.resize(bad.size() - 48);
    {
      ebac::context_ans_codebook cb;
      REQUIRE(ebac::context_ans_codebook::deserialize(bad.data(), bad.size(), cb) == ebac::status::ok);
      CHECK(cb.classes == 4);
      CHECK(cb.contexts() == 16);
    }
    bad[1] = std::byte{7};  // 1 class with the diagonal bit: 2 contexts
    bad.resize(bad.size() - 14);
    CHECK(reads(bad) == ebac::status::ok);
    bad = good();
    bad[2] = std::byte{0};  // row 0
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[7] = std::byte{0x41};  // second frequency 8320: the sum is not 2^14
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[3] = std::byte{87};  // more tokens than the alphabet
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad.push_back(std::byte{0});  // a byte left over
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad.pop_back();  // the last context missing
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    // k = 3 whose third frequency is 0: not the canonical form (k names the last non-zero)
    bad = bytes_of({0, 0, 3, 3, 0x80, 0x40, 0x80, 0x40, 0});
    for (int c = 1; c < 64; ++c) bad.push_back(std::byte{0});
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    CHECK(reads({}) == ebac::status::corrupt_stream);
  }

}  // TEST_SUITE
