// The AVX2 encoder of two context-ANS chunks side by side
// (ebac/encoder/context_ans_encode_x8.hpp) against context_ans::encode_chunk
// of each chunk: the same bytes, in every context set, for chunk lengths
// that end inside a round of four and that span several blocks of
// contexts; and the keys (context_ans_keys, eight at a time) against the
// token of each code, at every bit width's edges. Compiled with
// -march=x86-64-v3 (the vector code exists only where AVX2 is compiled in).
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/context_ans_encode_x8.hpp>

#include "context_ans_codebooks.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#if !EBAC_HOST_AVX2
#error "test_context_ans_encode_x8.cpp must be compiled with AVX2 (-march=x86-64-v3)"
#endif

namespace {
using model = ebac::detail::context_ans_model;
using context_ans_test::codebook_for;
using context_ans_test::make_codes;

/// The token of v computed here from its definition (docs/format.md), not
/// from the library: v below 32, else 32 + 2 (w - 6) + the bit under v's
/// leading one, w its bit width.
std::uint32_t token_by_definition(std::uint32_t v) {
  if (v < 32) return v;
  int w = 0;
  while (w < 32 && (std::uint64_t{v} >> w) != 0) ++w;
  return 32 + 2 * static_cast<std::uint32_t>(w - 6) + ((v >> (w - 2)) & 1u);
}
}  // namespace

TEST_SUITE("isa") {
  TEST_CASE("isa: context ANS keys: eight at a time, the token of every code at the edges of every bit width") {
    std::vector<std::uint32_t> codes;
    for (int w = 0; w <= 32; ++w) {  // 2^w - 1, 2^w, and the values around the bit under the lead
      const std::uint64_t p = std::uint64_t{1} << w;
      for (std::uint64_t v : {p - 1, p, p + 1, p + p / 2 - 1, p + p / 2})
        if (v <= 0xffffffffull) codes.push_back(static_cast<std::uint32_t>(v));
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 5000; ++i) codes.push_back(static_cast<std::uint32_t>(rng()) >> (rng() % 32));
    std::vector<std::uint8_t> context(codes.size());
    for (std::size_t i = 0; i < context.size(); ++i) context[i] = static_cast<std::uint8_t>(rng() % model::max_contexts);
    // Every offset, so the vector loop and its scalar tail both meet each value.
    for (std::size_t from : {std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
      const std::size_t m = codes.size() - from;
      std::vector<std::uint32_t> key(m);
      ebac::detail::context_ans_keys(codes.data() + from, context.data() + from, m, key.data());
      std::size_t wrong = 0;
      for (std::size_t j = 0; j < m; ++j)
        wrong += key[j] != std::uint32_t{context[from + j]} * model::tokens + token_by_definition(codes[from + j]);
      CHECK(wrong == 0);
    }
  }

  TEST_CASE("isa: context ANS x8 encoder: two or four chunks side by side give encode_chunk's bytes, in every context set") {
    struct shape {
      std::size_t n;
      std::uint32_t row;
      double zeros;
      int bits;
      int zero_blocks;  // context_ans_test::zero_blocks's pattern
    };
    // Lengths that end inside a round of four (1, 2, 3 past it), shorter than
    // a round, and over several blocks of 1024 contexts; rows of 1, 2, a
    // map's width and wider than the chunk; codes up to 2^30 and 2^32 - 1;
    // blocks of zeros (flagged, no steps: the chunks beside one that skips a
    // block step on, and where all skip it no round runs), and a chunk of
    // zeros only.
    const shape shapes[] = {{4096, 28, 0.8, 6, 0},  {4097, 28, 0.2, 14, 0},  {1001, 1, 0.5, 8, 0},    {779, 2, 0.4, 20, 0},
                            {3, 5000, 0.1, 10, 0},  {3002, 64, 0.05, 30, 0}, {2051, 7, 0.3, 32, 0},   {1, 1, 0.0, 12, 0},
                            {5001, 28, 0.3, 12, 1}, {4099, 1, 0.5, 8, 1},    {3075, 1024, 0.2, 9, 1}, {5000, 28, 1.0, 6, 0},
                            {4100, 28, 0.3, 12, 2}, {3073, 3, 0.5, 20, 2}};
    constexpr std::size_t shape_count = sizeof shapes / sizeof shapes[0];
    int checked = 0;
    for (int pairs : {1, 2})
      for (const shape& s : shapes)
        for (std::uint32_t classes : {8u, 4u, 2u, 1u})
          for (bool diagonal : {true, false}) {
            const int H = 2 * pairs;
            const std::uint32_t seed = 1000u + 10u * static_cast<std::uint32_t>(checked);
            std::vector<std::vector<std::uint32_t>> chunks;
            for (int h = 0; h < H; ++h) {
              chunks.push_back(make_codes(s.n, s.row, s.zeros, s.bits, seed + static_cast<std::uint32_t>(h)));
              context_ans_test::zero_blocks(chunks.back(), s.zero_blocks, h);
            }
            const ebac::context_ans_codebook cb = codebook_for(chunks, s.row, classes, diagonal);
            const ebac::context_ans enc = ebac::context_ans::bind(cb);
            const std::size_t cap = enc.max_chunk_bytes(s.n);
            std::vector<std::byte> side_by_side(4 * cap, std::byte{0xa5}), one(cap);
            const std::uint32_t* codes[4] = {};
            std::byte* out[4] = {};
            for (int h = 0; h < H; ++h) {
              codes[h] = chunks[static_cast<std::size_t>(h)].data();
              out[h] = side_by_side.data() + static_cast<std::size_t>(h) * cap;
            }
            std::size_t sizes[4] = {};
            if (pairs == 1) {
              const std::uint32_t* const c2[2] = {codes[0], codes[1]};
              std::byte* const o2[2] = {out[0], out[1]};
              const auto got = ebac::detail::encode_context_ans_x8(enc, c2, s.n, o2);
              std::copy(got.begin(), got.end(), sizes);
            } else {
              const std::uint32_t* const c4[4] = {codes[0], codes[1], codes[2], codes[3]};
              std::byte* const o4[4] = {out[0], out[1], out[2], out[3]};
              const auto got = ebac::detail::encode_context_ans_pairs<2>(enc, c4, s.n, o4);
              std::copy(got.begin(), got.end(), sizes);
            }
            const std::string label = std::to_string(H) + " chunks, n " + std::to_string(s.n) + " row " + std::to_string(s.row) +
                                      " classes " + std::to_string(classes) + (diagonal ? " diagonal" : "") + " zero blocks " +
                                      std::to_string(s.zero_blocks);
            bool same = true;
            for (int h = 0; h < H; ++h) {
              const std::size_t k = enc.encode_chunk(codes[h], s.n, one.data());
              const bool equal = sizes[h] == k && std::equal(one.begin(), one.begin() + static_cast<std::ptrdiff_t>(k), out[h]);
              INFO(label, " chunk ", h);
              CHECK(equal);
              same = same && equal;
              // And it decodes: the encoded codes back.
              std::vector<std::uint32_t> back(s.n);
              CHECK(enc.decode_chunk(out[h], sizes[h], back.data(), s.n) == ebac::status::ok);
              CHECK(back == chunks[static_cast<std::size_t>(h)]);
            }
            checked += same;
          }
    CHECK(checked == static_cast<int>(2 * shape_count * 4 * 2));
  }
}
