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

  TEST_CASE("striped tokens: the raw-bit table is each symbol's raw-bit count") {
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s)
      CHECK(ebac::striped_raw_bits[s] == ebac::striped_symbol(s).nextra);
  }
}
