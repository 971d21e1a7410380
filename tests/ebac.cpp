// tests/ebac.cpp - the tests of include/ebac/ebac.hpp.
#include "host/test_support.hpp"

#include <ebac/ebac.hpp>

#include <cmath>
#include <doctest/doctest.h>
#include <vector>

TEST_SUITE("host") {
  TEST_CASE("fast pipeline round-trips a small tensor within the bound") {
    std::vector<float> x = {0.0f, 1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
    ebac::extents e{7};
    ebac::compress_options o;
    o.bound = {1e-2, ebac::bound_mode::absolute};
    ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> p;
    const auto s = ebac::host::compress(x.data(), e, p, o);
    const auto y = ebac::host::decompress<float>(s.data(), s.size());
    REQUIRE(y.size() == x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(std::fabs(static_cast<double>(x[i]) - y[i]) <= 1e-2);
      CHECK((x[i] == 0) == (y[i] == 0));
    }
  }

}  // TEST_SUITE
