// ebac/encoder/striped_tokens.hpp: the block token reader gives the
// cursor's tokens (the body: striped_tokens_check.hpp; its AVX2 twin runs in
// tests/isa/test_striped_tokens_x8.cpp).
#include "striped_tokens_check.hpp"

TEST_SUITE("host") {
  TEST_CASE("striped tokens: the block reader gives the cursor's tokens, at every block size") {
    CHECK(striped_tokens_check::check_reader_against_cursor(7) > 2000);
  }

  TEST_CASE("striped tokens: a whole chunk in the kept form gives the cursor's tokens") {
    CHECK(striped_tokens_check::check_kept_tokens_against_cursor(8) > 1000);
  }

  TEST_CASE("striped tokens: a zero run's token is what the decoder reads back as that run") {
    // The decoder's view (striped_symbol: a run symbol's least length and
    // raw-bit count), not the tokenizer's formula: base + raw bits == L.
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t L = 1; L <= 4096; ++L) lengths.push_back(L);
    for (int b = 12; b < 32; ++b)
      for (std::uint64_t L : {std::uint64_t{1} << b, (std::uint64_t{1} << b) + 1, (std::uint64_t{2} << b) - 1})
        lengths.push_back(L);
    lengths.push_back(0xffffffffu);
    for (std::uint64_t L : lengths) {
      const ebac::striped_token t = ebac::striped_run_token(L);
      const ebac::striped_symbol_value v = ebac::striped_symbol(t.symbol);
      if (L == 1) {  // a single zero is the literal 0
        CHECK(t.symbol == 0u);
        CHECK(t.nextra == 0u);
        continue;
      }
      REQUIRE(t.symbol < ebac::striped_alphabet::size);
      CHECK(v.run);
      CHECK(t.nextra == v.nextra);
      CHECK(t.extra < (std::uint64_t{1} << t.nextra));
      CHECK(std::uint64_t{v.base} + t.extra == L);
    }
  }

  TEST_CASE("striped tokens: the raw-bit table is each symbol's raw-bit count") {
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s)
      CHECK(ebac::striped_raw_bits[s] == ebac::striped_symbol(s).nextra);
  }
}
