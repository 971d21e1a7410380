// tests/error_bound.cpp - the tests of include/ebac/error_bound.hpp.
//
// Error bound description: validation, modes, value range, absolute bound.
#include "host/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace ebac_test;

TEST_SUITE("host") {
  TEST_CASE("error_bound: modes parse and print") {
    ebac::bound_mode m{};
    CHECK((ebac::parse_bound_mode("abs", m) && m == ebac::bound_mode::absolute));
    CHECK((ebac::parse_bound_mode("absolute", m) && m == ebac::bound_mode::absolute));
    CHECK((ebac::parse_bound_mode("rel", m) && m == ebac::bound_mode::relative));
    CHECK((ebac::parse_bound_mode("relative", m) && m == ebac::bound_mode::relative));
    CHECK_FALSE(ebac::parse_bound_mode("", m));
    CHECK_FALSE(ebac::parse_bound_mode("ABS", m));
    CHECK(ebac::to_string(ebac::bound_mode::absolute) == "abs");
    CHECK(ebac::to_string(ebac::bound_mode::relative) == "rel");
  }

  TEST_CASE("error_bound: validate accepts finite positive bounds only") {
    using ebac::bound_mode;
    for (double v : {1e-300, 1e-6, 0.5, 1.0, 1e6}) {
      CAPTURE(v);
      CHECK(ebac::error_bound{v, bound_mode::absolute}.validate() == ebac::status::ok);
      CHECK(ebac::error_bound{v, bound_mode::relative}.validate() == ebac::status::ok);
    }
    CHECK(ebac::error_bound{1e300, bound_mode::absolute}.validate() == ebac::status::ok);
    for (double v :
         {0.0, -0.0, -1e-3, std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
      CAPTURE(v);
      CHECK(ebac::error_bound{v, bound_mode::absolute}.validate() == ebac::status::invalid_argument);
      CHECK(ebac::error_bound{v, bound_mode::relative}.validate() == ebac::status::invalid_argument);
    }
    CHECK(ebac::error_bound{1e-3, static_cast<bound_mode>(0)}.validate() == ebac::status::invalid_argument);
    CHECK(ebac::error_bound{1e-3, static_cast<bound_mode>(3)}.validate() == ebac::status::invalid_argument);
  }

  TEST_CASE("error_bound: a relative bound above 1e6 is rejected as documented") {
    // error_bound::validate's contract: "(and, relative, <= 1e6: a larger
    // relative bound is almost certainly a unit mistake)".
    using ebac::bound_mode;
    CHECK(ebac::error_bound{1e6, bound_mode::relative}.validate() == ebac::status::ok);
    CHECK(ebac::error_bound{std::nextafter(1e6, 1e7), bound_mode::relative}.validate() == ebac::status::invalid_argument);
    CHECK(ebac::error_bound{1e7, bound_mode::relative}.validate() == ebac::status::invalid_argument);
    CHECK(ebac::error_bound{1e300, bound_mode::relative}.validate() == ebac::status::invalid_argument);
    std::vector<float> x(64, 1.0f);
    x[3] = 2.0f;
    ebac::compress_options o;
    o.bound = {1e7, bound_mode::relative};
    o.threads = 1;
    const ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> fast{};
    CHECK_THROWS_AS((void)ebac::host::compress(x.data(), ebac::extents{64}, fast, o), ebac::error);
  }

  TEST_CASE("value_range: finite values only, merge, span") {
    ebac::value_range r;
    CHECK_FALSE(r.any_finite);
    CHECK(r.span() == 0.0);
    r.add(std::nanf(""));
    r.add(std::numeric_limits<float>::infinity());
    r.add(-std::numeric_limits<float>::infinity());
    CHECK_FALSE(r.any_finite);
    CHECK(r.span() == 0.0);
    r.add(2.5f);
    CHECK(r.any_finite);
    CHECK(r.span() == 0.0);
    r.add(-1.0f);
    r.add(0.5f);
    CHECK(r.span() == 3.5);
    ebac::value_range o;
    o.add(std::numeric_limits<float>::max());
    ebac::value_range empty;
    r.merge(empty);
    CHECK(r.span() == 3.5);
    r.merge(o);
    CHECK(r.span() == static_cast<double>(std::numeric_limits<float>::max()) + 1.0);
    empty.merge(o);
    CHECK(empty.any_finite);
    CHECK(empty.span() == 0.0);
    ebac::value_range w;
    w.add(std::numeric_limits<float>::max());
    w.add(-std::numeric_limits<float>::max());
    CHECK(w.span() == 2.0 * static_cast<double>(std::numeric_limits<float>::max()));  // no float overflow
  }

  TEST_CASE("absolute_bound: absolute passes through, relative scales by the span") {
    ebac::value_range r;
    r.add(-2.0f);
    r.add(6.0f);
    CHECK(ebac::absolute_bound({1e-3, ebac::bound_mode::absolute}, r) == 1e-3);
    CHECK(ebac::absolute_bound({1e-3, ebac::bound_mode::relative}, r) == 1e-3 * 8.0);
    ebac::value_range c;
    c.add(3.0f);
    CHECK(ebac::absolute_bound({1e-3, ebac::bound_mode::relative}, c) == 0.0);  // constant: exact
    CHECK(ebac::absolute_bound({1e-3, ebac::bound_mode::relative}, ebac::value_range{}) == 0.0);
  }

  TEST_CASE("float_order_key: order-preserving and invertible (the key the host range and the CUDA range kernel reduce)") {
    std::mt19937 rng(12);
    std::vector<float> v = {0.0f, -0.0f, 1e-45f,        -1e-45f,        1.17549435e-38f, -1.17549435e-38f,
                            1.0f, -1.0f, 3.4028235e38f, -3.4028235e38f, INFINITY,        -INFINITY};
    for (int i = 0; i < 20000; ++i) v.push_back(ebac::detail::bits_float(static_cast<std::uint32_t>(rng())));
    const std::vector<float> with_nan = v;  // for the range checks below
    std::erase_if(v, [](float x) { return std::isnan(x); });
    for (float a : v) {
      CHECK(ebac::detail::float_bits(ebac::detail::float_from_order_key(ebac::detail::float_order_key(a))) ==
            ebac::detail::float_bits(a));
    }
    CHECK(ebac::detail::float_order_key(-0.0f) == ebac::detail::float_order_key(0.0f) - 1);  // -0 just below +0
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {
      const float a = v[i], b = v[i + 1];
      const auto ka = ebac::detail::float_order_key(a), kb = ebac::detail::float_order_key(b);
      if (a < b) CHECK(ka < kb);
      if (a > b) CHECK(ka > kb);
      if (a == b && std::signbit(a) == std::signbit(b)) CHECK(ka == kb);
      if (a == b && std::signbit(a) != std::signbit(b)) CHECK(ka + (std::signbit(a) ? 1 : -1) == kb);  // +-0: -0 one below
    }
    {
      ebac::value_range whole;  // NaN, +-Inf and the finite extremes: the range is the extremes
      whole.add_block(with_nan.data(), with_nan.size());
      CHECK(whole.min == -std::numeric_limits<float>::max());
      CHECK(whole.max == std::numeric_limits<float>::max());
    }
    // add_block finds the finite range that plain float comparisons find, on
    // slices with and without NaN, +-Inf, the extremes and signed zeros, folded
    // in one block or several.
    for (int t = 0; t < 400; ++t) {
      CAPTURE(t);
      const std::size_t from = rng() % with_nan.size(), len = 1 + rng() % 64;
      std::vector<float> s(with_nan.begin() + static_cast<std::ptrdiff_t>(from),
                           with_nan.begin() + static_cast<std::ptrdiff_t>(std::min(with_nan.size(), from + len)));
      if (t % 4 == 0) s.push_back(t % 8 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::quiet_NaN());
      if (t % 5 == 0) s.push_back(t % 10 ? INFINITY : -INFINITY);
      if (t % 7 == 0) s.push_back(t % 14 ? 0.0f : -0.0f);
      if (t % 11 == 0) s.assign(s.size(), std::numeric_limits<float>::quiet_NaN());
      bool any = false;
      float lo = 0, hi = 0;
      for (float x : s)
        if (std::isfinite(x)) {
          if (!any || x < lo) lo = x;
          if (!any || x > hi) hi = x;
          any = true;
        }
      ebac::value_range r;
      if (t % 2) {
        r.add_block(s.data(), s.size());
      } else {
        for (std::size_t i = 0; i < s.size(); i += 3) r.add_block(s.data() + i, std::min<std::size_t>(3, s.size() - i));
      }
      REQUIRE(r.any_finite == any);
      if (!any) continue;
      CHECK(r.min == lo);  // float ==: a zero of either sign is the same value
      CHECK(r.max == hi);
      CHECK(r.span() == static_cast<double>(hi) - static_cast<double>(lo));
    }
    CHECK(!ebac::value_range::from_keys(1, 0).any_finite);
  }

}  // TEST_SUITE
