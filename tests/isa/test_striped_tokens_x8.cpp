// The striped token reader with AVX2 (zero runs eight codes a compare, value
// tokens eight at a time: ebac/encoder/striped_tokens.hpp) against the
// cursor, the same checks as tests/encoder/striped_tokens.cpp. Compiled
// with -march=x86-64-v3.
#include "../encoder/striped_tokens_check.hpp"

#if !EBAC_HOST_AVX2
#error "test_striped_tokens_x8.cpp must be compiled with AVX2 (-march=x86-64-v3)"
#endif

TEST_SUITE("isa") {
  TEST_CASE("isa: the striped block token reader with AVX2 gives the cursor's tokens, at every block size") {
    CHECK(striped_tokens_check::check_reader_against_cursor(7) > 2000);
  }

  TEST_CASE("isa: a whole chunk in the kept form with AVX2 (64-code windows) gives the cursor's tokens") {
    CHECK(striped_tokens_check::check_kept_tokens_against_cursor(8) > 1000);
  }
}
