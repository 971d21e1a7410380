// The body of the striped token reader's tests, shared by the project's
// build (tests/encoder/striped_tokens.cpp) and the AVX2 build
// (tests/isa/test_striped_tokens_x8.cpp): striped_token_reader against
// striped_cursor, the one-token-a-call reference, on code sets made to hit
// every path: zero runs of every length and at every offset (across the
// eight-code compares and the blocks), single zeros, literals, buckets of
// every width up to 2^32 - 1 (across the float conversion's 2^24 and the
// sign bit), and blocks of 1 to 512 tokens.
#pragma once

#include <ebac/encoder/striped_huffman.hpp>
#include <ebac/encoder/striped_tokens.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace striped_tokens_check {

struct token {
  std::uint32_t symbol, extra, nextra;
  bool operator==(const token&) const = default;
};

inline std::vector<token> reference_tokens(const std::vector<std::uint32_t>& codes) {
  std::vector<token> out;
  ebac::striped_tokenize(codes.data(), codes.size(), [&](ebac::striped_token t) {
    out.push_back({t.symbol, t.extra, t.nextra});
  });
  return out;
}

/// The reader's tokens, `room` at a time (the last call's short block and
/// then 0 end it; a short block before the end is an error).
inline std::vector<token> reader_tokens(const std::vector<std::uint32_t>& codes, std::size_t room, bool& short_block_early) {
  std::vector<token> out;
  std::vector<std::uint8_t> symbol(room + 1, 0xee);
  std::vector<std::uint32_t> extra(room + 1, 0xeeeeeeeeu);
  ebac::striped_token_reader reader{codes.data(), codes.size()};
  short_block_early = false;
  bool ended = false;
  for (;;) {
    const std::size_t got = reader.fill(symbol.data(), extra.data(), room);
    if (symbol[room] != 0xee || extra[room] != 0xeeeeeeeeu) short_block_early = true;  // wrote past room
    if (ended && got != 0) short_block_early = true;
    for (std::size_t k = 0; k < got; ++k)
      out.push_back({symbol[k], extra[k], static_cast<std::uint32_t>(ebac::striped_raw_bits[symbol[k]])});
    if (got == 0) break;
    if (got < room) ended = true;
  }
  return out;
}

/// One code of a mix: zero, a literal, or a value of a random bit width up to 32.
inline std::uint32_t random_code(std::mt19937& rng, int zero_percent) {
  if (static_cast<int>(rng() % 100) < zero_percent) return 0;
  switch (rng() % 4) {
    case 0: return rng() % 32;
    case 1: {
      const unsigned width = 6 + rng() % 27;  // 6 .. 32
      const std::uint32_t top = width == 32 ? 0x80000000u : 1u << (width - 1);
      return top | (static_cast<std::uint32_t>(rng()) & (top - 1));
    }
    case 2: {  // the edges: 31, 32, 2^k - 1, 2^k, 2^24 +- 1, 2^31, 2^32 - 1
      const std::uint32_t edges[] = {
          31,          32,          33,          63,         64, 255, 256, (1u << 24) - 1, 1u << 24, (1u << 24) + 1,
          0x7fffffffu, 0x80000000u, 0xffffffffu, 0xfffffffeu};
      return edges[rng() % (sizeof edges / sizeof edges[0])];
    }
    default: return 1 + rng() % 2000;
  }
}

/// Code sets: lengths 0 to 300 and a few long ones; runs of 1 to 5000 zeros.
inline std::vector<std::vector<std::uint32_t>> code_sets(std::mt19937& rng) {
  std::vector<std::vector<std::uint32_t>> sets;
  for (std::size_t n = 0; n <= 300; ++n) {
    std::vector<std::uint32_t> c(n);
    const int zeros = static_cast<int>(rng() % 101);
    for (auto& v : c) v = random_code(rng, zeros);
    sets.push_back(std::move(c));
  }
  for (int s = 0; s < 60; ++s) {  // runs of chosen lengths between values
    std::vector<std::uint32_t> c;
    const std::size_t target = 1 + rng() % 20000;
    while (c.size() < target) {
      const std::size_t run = rng() % 3 == 0 ? rng() % 5000 : rng() % 20;
      c.insert(c.end(), run, 0u);
      const std::size_t values = rng() % 12;
      for (std::size_t k = 0; k < values; ++k) c.push_back(random_code(rng, 0));
    }
    sets.push_back(std::move(c));
  }
  sets.push_back(std::vector<std::uint32_t>(16384, 0));            // all zero
  sets.push_back(std::vector<std::uint32_t>(16384, 0xffffffffu));  // all the widest
  std::vector<std::uint32_t> alternating(4099);
  for (std::size_t k = 0; k < alternating.size(); ++k) alternating[k] = k % 2 ? 0u : 40u;  // single zeros only
  sets.push_back(std::move(alternating));
  return sets;
}

/// Checks every code set at several block sizes; returns how many (set, room) pairs agreed.
inline int check_reader_against_cursor(std::uint32_t seed) {
  std::mt19937 rng(seed);
  int agreed = 0, tried = 0;
  for (const auto& codes : code_sets(rng)) {
    const std::vector<token> want = reference_tokens(codes);
    for (std::size_t room :
         {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{7}, std::size_t{64}, ebac::striped_huffman::token_block}) {
      bool bad_block = false;
      const std::vector<token> got = reader_tokens(codes, room, bad_block);
      const bool ok = got == want && !bad_block;
      CHECK_MESSAGE(ok, codes.size() << " codes, blocks of " << room << ": " << got.size() << " tokens, the cursor gives "
                                     << want.size() << (bad_block ? "; a block was short or overran" : ""));
      agreed += ok;
      ++tried;
    }
    // The statistics count the cursor's symbols.
    ebac::striped_huffman::statistics st;
    st.add(codes.data(), codes.size());
    std::vector<std::uint64_t> hist(ebac::striped_alphabet::size, 0);
    for (const token& t : want) ++hist[t.symbol];
    CHECK(st.count == hist);
  }
  CHECK(agreed == tried);
  return agreed;
}

/// striped_tokenize_kept (a whole chunk of at most 2^16 codes below 2^16,
/// raw bits in 16 bits) against the cursor: the code sets above brought
/// below 2^16, and runs and islands at every offset of the 64-code windows
/// and across them, chunks that start or end in a run, tails of every length;
/// returns how many sets agreed.
inline int check_kept_tokens_against_cursor(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<std::uint32_t>> sets;
  for (auto codes : code_sets(rng)) {
    if (codes.size() > (std::size_t{1} << 16)) codes.resize(std::size_t{1} << 16);
    for (auto& v : codes)
      if (v >= (1u << 16)) v = 1 + v % 0xffffu;  // non-zero stays non-zero
    sets.push_back(std::move(codes));
  }
  for (std::size_t n : {1, 2, 63, 64, 65, 127, 128, 129, 191, 192, 193, 300})
    for (std::size_t at = 0; at < n; at += (n > 64 ? 5 : 1))
      for (std::size_t len : {1, 2, 3, 62, 63, 64, 65, 130}) {
        std::vector<std::uint32_t> run(n, 7u), island(n, 0u);  // a run among values, values among zeros
        for (std::size_t i = at; i < n && i < at + len; ++i) run[i] = 0, island[i] = 40000u + static_cast<std::uint32_t>(i);
        sets.push_back(std::move(run));
        sets.push_back(std::move(island));
      }
  sets.push_back(std::vector<std::uint32_t>(std::size_t{1} << 16, 0u));       // one run of 2^16
  sets.push_back(std::vector<std::uint32_t>(std::size_t{1} << 16, 0xffffu));  // no zero, the widest kept code
  int agreed = 0;
  for (const auto& codes : sets) {
    const std::vector<token> want = reference_tokens(codes);
    std::vector<std::uint8_t> symbol(codes.size() + 1, 0xee);
    std::vector<std::uint16_t> extra(codes.size() + 1, 0xeeee);
    const std::size_t k = ebac::striped_tokenize_kept(codes.data(), codes.size(), symbol.data(), extra.data());
    std::vector<token> got;
    for (std::size_t i = 0; i < k && i < codes.size(); ++i)
      got.push_back({symbol[i], extra[i], static_cast<std::uint32_t>(ebac::striped_raw_bits[symbol[i]])});
    const bool ok = k <= codes.size() && got == want && symbol[codes.size()] == 0xee && extra[codes.size()] == 0xeeee;
    CHECK_MESSAGE(ok, codes.size() << " codes: " << k << " tokens, the cursor gives " << want.size());
    agreed += ok;
  }
  CHECK(agreed == static_cast<int>(sets.size()));
  return agreed;
}

}  // namespace striped_tokens_check
