// Lorenzo's inverse along a contiguous line with AVX2
// (lorenzo::prefix_sum_avx2, which inverse_line takes where AVX2 is compiled
// in) against the running sum written here: every length from 0 to 70 (no
// vector, one, several, each with a remainder of 0-7), values across the
// whole uint32 range so that the sums wrap, and the lines of whole Lorenzo
// passes and chunks of both kinds (2-D rows, flat tiles) against the
// reference residual's inverse. Compiled with -march=x86-64-v3.
#include <ebac/predictor/lorenzo.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#if !EBAC_HOST_AVX2
#error "test_lorenzo_x8.cpp must be compiled with AVX2 (-march=x86-64-v3)"
#endif

TEST_SUITE("isa") {
  TEST_CASE("isa: Lorenzo's line inverse eight at a time is the running sum, wrapping, at every length and offset") {
    std::mt19937 rng(41);
    int same = 0, lines = 0;
    for (std::uint64_t n = 0; n <= 70; ++n)
      for (std::size_t offset : {0u, 1u, 3u, 7u}) {  // unaligned starts
        std::vector<std::uint32_t> buf(n + 8 + 16, 0x5a5a5a5au);
        std::uint32_t* line = buf.data() + 8 + offset;
        for (std::uint64_t c = 0; c < n; ++c) line[c] = static_cast<std::uint32_t>(rng()) >> (rng() % 2 ? 0 : 20);
        std::vector<std::uint32_t> want(line, line + n);
        std::uint32_t sum = 0;
        for (auto& v : want) v = sum += v;  // wraps modulo 2^32
        const std::vector<std::uint32_t> guard_before(buf.begin(), buf.begin() + 8 + static_cast<std::ptrdiff_t>(offset));
        const std::vector<std::uint32_t> guard_after(line + n, buf.data() + buf.size());
        ebac::lorenzo::prefix_sum_avx2(line, n);
        const bool ok =
            std::vector<std::uint32_t>(line, line + n) == want &&
            std::vector<std::uint32_t>(buf.begin(), buf.begin() + 8 + static_cast<std::ptrdiff_t>(offset)) == guard_before &&
            std::vector<std::uint32_t>(line + n, buf.data() + buf.size()) == guard_after;
        CHECK_MESSAGE(ok, "length " << n << ", offset " << offset << ": not the running sum, or a write outside the line");
        same += ok;
        ++lines;
      }
    CHECK(same == lines);
  }

  TEST_CASE("isa: Lorenzo's chunk inverse with AVX2 undoes predict_chunk, 2-D and flat") {
    std::mt19937 rng(42);
    struct shape {
      ebac::extents e;
      ebac::lorenzo l;
    };
    const shape shapes[] = {{ebac::extents{6, 3, 28, 28}, ebac::lorenzo::along_last(2, 4, 64)},
                            {ebac::extents{5, 7, 13}, ebac::lorenzo::along_last(2, 3, 8)},
                            {ebac::extents{3, 4, 9, 17}, ebac::lorenzo::along_last(3, 4, 16)},
                            {ebac::extents{10007}, ebac::lorenzo::flat()},
                            {ebac::extents{999}, ebac::lorenzo::flat(37)}};
    for (const shape& s : shapes) {
      std::uint64_t n = 0;
      REQUIRE(s.e.count(n) == ebac::status::ok);
      std::vector<std::uint32_t> q(n);
      for (auto& v : q) v = static_cast<std::uint32_t>(rng());
      std::vector<std::uint32_t> work = q, codes(n);
      s.l.predict_chunk(s.e, work.data(), codes.data(), n);
      for (auto& c : codes) c = static_cast<std::uint32_t>(ebac::detail::unzigzag(c));
      s.l.unpredict_chunk(s.e, codes.data(), n);
      CHECK_MESSAGE(codes == q,
                    "extents of " << n << " elements, " << int(s.l.dims) << "-D: the inverse is not the quantized field");
    }
  }
}  // TEST_SUITE
