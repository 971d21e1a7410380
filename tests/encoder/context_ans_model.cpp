// tests/encoder/context_ans_model.cpp - the tests of include/ebac/encoder/context_ans_model.hpp.
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
  TEST_CASE("context_ans: learned frequencies sum to 2^14 and never drop a token that occurs") {
    ebac::context_ans::statistics st(ebac::extents{3, 0});
    CHECK(st.row == 1);  // an empty last extent still gives a usable row
    // Statistics count the diagonal set (context 2 (8 left + up) + diagonal bit).
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    CHECK(T == 86);
    st.add_count(0, 0, std::uint64_t{1} << 50);  // large enough to need the rescaling
    for (std::uint32_t t = 1; t < T; ++t) st.add_count(0, t, 1);
    // Fine context 2 (8 left + up) + d: left 0, up 5 and 7, diagonal bit 1,
    // one token each, often enough that merging classes 4-7 (k = 4) would cost
    // a bit a code: the 8 classes win; the diagonal bit tells nothing here, so
    // the flat set (fewer table bytes, the same bits) wins over it.
    st.add_count(11, 3, 1000000);
    st.add_count(15, 4, 1000000);
    const auto cb = ebac::context_ans::learn(st);
    CHECK(cb.classes == 8);
    CHECK_FALSE(cb.diagonal);
    std::uint32_t sum0 = 0;
    for (std::size_t t = 0; t < T; ++t) {
      CHECK(cb.freq[t] >= 1);
      sum0 += cb.freq[t];
    }
    CHECK(sum0 == 16384);
    CHECK(cb.freq[0] == 16384 - (T - 1));
    CHECK(cb.freq[5 * T + 3] == 16384);
    CHECK(cb.freq[7 * T + 4] == 16384);
    for (std::size_t c = 0; c < 128; ++c)
      if (c != 0 && c != 5 && c != 7)
        for (std::size_t t = 0; t < T; ++t) CHECK(cb.freq[c * T + t] == 0);
    // Few codes: the tables of 64 contexts would cost more than they save, so
    // a coarser set is kept (one context: every code is a zero).
    const auto small = learn_ans(std::vector<std::uint32_t>(50, 0), 7);
    CHECK(small.classes == 1);
    CHECK_FALSE(small.diagonal);
    // Serialized and read back: the same tables.
    std::vector<std::byte> ser;
    cb.serialize(ser);
    CHECK(ser.size() <= ebac::context_ans_codebook::max_serialized_bytes);
    // learn() weighs the sets by serialized_bytes(), which must be what serialize writes.
    CHECK(cb.serialized_bytes() == ser.size());
    for (const auto& other : {small, learn_ans(std::vector<std::uint32_t>{0, 3, 900, 0, 1, 70000, 2, 2, 0}, 3)}) {
      std::vector<std::byte> b;
      other.serialize(b);
      CHECK(other.serialized_bytes() == b.size());
    }
    ebac::context_ans_codebook back;
    auto in = exact_copy(ser.data(), ser.size());
    REQUIRE(ebac::context_ans_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
    CHECK(back.row == cb.row);
    CHECK(back.classes == cb.classes);
    CHECK(back.diagonal == cb.diagonal);
    CHECK(back.freq == cb.freq);
    CHECK(back.cumulative == cb.cumulative);
  }

  TEST_CASE("context_ans: the diagonal context set is kept where it pays, and decodes") {
    // Rows of 16 of random bits in the first row and column, every other code
    // its upper-left neighbour: left and up say nothing, the diagonal bit
    // (upper-left or upper-right non-zero) does (0 when it is 0; 1 two times
    // in three otherwise): about 0.69 bits a code against 1.
    const std::uint32_t row = 16;
    std::vector<std::uint32_t> codes(row * 400);
    std::mt19937_64 rng(31);
    for (std::size_t i = 0; i < codes.size(); ++i)
      codes[i] = (i < row || i % row == 0) ? static_cast<std::uint32_t>(rng() % 2) : codes[i - row - 1];
    const auto cb = learn_ans(codes, row);
    CHECK(cb.diagonal);
    const auto enc = ebac::context_ans::bind(cb);
    for (std::size_t n : {codes.size(), std::size_t{17}, std::size_t{1000}}) {
      std::vector<std::byte> buf(enc.max_chunk_bytes(n));
      const std::size_t k = enc.encode_chunk(codes.data(), n, buf.data());
      std::vector<std::uint32_t> back(n);
      REQUIRE(enc.decode_chunk(buf.data(), k, back.data(), n) == ebac::status::ok);
      CHECK(std::equal(back.begin(), back.end(), codes.begin()));
      const ref_codes ref = reference_decode(enc, buf.data(), k, n);
      REQUIRE(ref.has_value());
      CHECK(std::equal(ref->begin(), ref->end(), codes.begin()));
    }
  }

  TEST_CASE("context_ans: a code's token, raw-bit count and token base are the format's") {
    // At both edges of every bit width and a few values between: the token
    // from its definition, the raw-bit count w - 2 (none below 32), and the
    // token's base plus the code's low raw bits giving the code back.
    using model = ebac::detail::context_ans_model;
    std::vector<std::uint32_t> values;
    for (std::uint32_t v = 0; v < 70; ++v) values.push_back(v);
    for (int w = 6; w <= 32; ++w) {
      const std::uint64_t lo = std::uint64_t{1} << (w - 1), hi = (std::uint64_t{1} << w) - 1;
      for (std::uint64_t v : {lo, lo + 1, lo + lo / 2 - 1, lo + lo / 2, hi - 1, hi})
        values.push_back(static_cast<std::uint32_t>(v));
    }
    for (std::uint32_t v : values) {
      CAPTURE(v);
      std::uint32_t w = 0;
      for (std::uint32_t x = v; x; x >>= 1) ++w;
      const int raw = v < 32 ? 0 : static_cast<int>(w) - 2;
      const std::uint32_t t = model::token(v);
      CHECK(t == reference_token(v));
      CHECK(model::raw_bits_of(v) == raw);
      CHECK(model::extra_bits(t) == raw);
      CHECK((model::token_base(t) | (v & static_cast<std::uint32_t>((std::uint64_t{1} << raw) - 1))) == v);
    }
  }

  TEST_CASE("context_ans: a block's contexts (what the encoder and the statistics use) are the format's, for every set and row") {
    std::mt19937_64 rng(37);
    // Zeros, small codes, every bit width up to 32: each class and the diagonal bit both ways.
    std::vector<std::uint32_t> codes(3000);
    for (auto& v : codes) v = rng() % 3 == 0 ? 0u : static_cast<std::uint32_t>(rng() >> (32 + rng() % 32));
    std::size_t compared = 0;
    for (std::uint32_t row : {1u, 2u, 3u, 28u, 1023u, 2999u, 5000u, 0xffffffffu})
      for (std::uint32_t classes : {1u, 2u, 4u, 8u})
        for (bool diagonal : {false, true})
          for (auto [b, e] : {std::pair<std::size_t, std::size_t>{0, 3000},
                              {0, 1},
                              {1, 2},
                              {27, 29},
                              {28, 30},
                              {29, 1053},
                              {1000, 3000},
                              {2998, 3000}}) {
            CAPTURE(row);
            CAPTURE(classes);
            CAPTURE(diagonal);
            CAPTURE(b);
            std::vector<std::uint8_t> got(e - b, 0xff);
            ebac::detail::context_ans_model::contexts(codes.data(), b, e, row, classes, diagonal, got.data());
            for (std::size_t i = b; i < e; ++i, ++compared)
              if (got[i - b] != reference_context(codes, i, row, classes, diagonal)) {
                CAPTURE(i);
                FAIL_CHECK("context differs");
                break;
              }
          }
    CHECK(compared == 8 * 4 * 2 * (3000 + 1 + 1 + 2 + 2 + 1024 + 2000 + 2));
    // The encoder codes a chunk in blocks of contexts from its end, four states
    // a round: lengths around the block's size and every remainder mod 4
    // decode (by the reference decoder) to the codes.
    for (std::uint32_t row : {1u, 28u}) {
      const auto cb = learn_ans(codes, row);
      const auto enc = ebac::context_ans::bind(cb);
      for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 1022u, 1023u, 1024u, 1025u, 1026u, 1027u, 2047u, 2048u, 2049u, 2050u, 3000u}) {
        CAPTURE(row);
        CAPTURE(n);
        std::vector<std::byte> buf(enc.max_chunk_bytes(n));
        const std::size_t k = enc.encode_chunk(codes.data(), n, buf.data());
        const ref_codes ref = reference_decode(enc, buf.data(), k, n);
        REQUIRE(ref.has_value());
        CHECK(std::equal(ref->begin(), ref->end(), codes.begin()));
      }
    }
  }

}  // TEST_SUITE
