// ebac/encoder/striped_decode.hpp: the striped decoder gives the reference
// decoder's verdicts and codes on chunks made to cross its fast rounds'
// limits (the body: striped_decode_check.hpp; its AVX2 twin runs in
// tests/isa/test_striped_decode_x8.cpp).
#include "striped_decode_check.hpp"

#include <ebac/encoder/striped_codebook.hpp>
#include <ebac/encoder/striped_decode.hpp>

TEST_SUITE("host") {
  TEST_CASE("striped decode: the reference's verdicts and codes, across the fast rounds' limits") {
    CHECK(striped_decode_check::check_decoder_against_reference(11) == 19 * 6 * 35);
  }

  TEST_CASE("striped decode: bits that start no code look up an entry of length 0 that no chunk's run fits") {
    ebac::striped_codebook cb;
    cb.length[1] = 1;  // one symbol: half of the table starts no code
    REQUIRE(cb.finalize());
    std::size_t invalid = 0;
    for (std::uint64_t bits = 0; bits < cb.table.size(); ++bits) {
      if ((cb.table[bits] & 0xffu) != 0) continue;
      ++invalid;
      const ebac::detail::striped_lookup k = ebac::detail::striped_look_up(cb.table.data(), bits);
      CHECK(k.length == 0);
      CHECK(k.taken() > (std::uint64_t{1} << 24));  // more than any chunk holds: the decoder's long-run branch
    }
    CHECK(invalid == cb.table.size() / 2);
  }
}
