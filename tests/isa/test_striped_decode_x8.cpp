// The striped decoder in the x86-64-v3 build (ebac/encoder/striped_decode.hpp)
// against the reference decoder, the same checks as tests/encoder/striped_decode.cpp.
// Compiled with -march=x86-64-v3.
#include "../encoder/striped_decode_check.hpp"

#if !EBAC_HOST_AVX2
#error "test_striped_decode_x8.cpp must be compiled with AVX2 (-march=x86-64-v3)"
#endif

TEST_SUITE("isa") {
  TEST_CASE("isa: the striped decoder with AVX2 gives the reference's verdicts and codes") {
    CHECK(striped_decode_check::check_decoder_against_reference(12) == 19 * 6 * 35);
  }
}
