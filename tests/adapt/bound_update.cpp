// tests/adapt/bound_update.cpp - the tests of include/ebac/adapt/bound_update.hpp.
//
// The adaptive controller and the batch planner on scripted traces: they
// must converge where a target can be met, follow a changing gradient scale,
// and say clearly (a warning, an error state and a message with the numbers)
// when a target or a budget cannot be met, instead of returning nonsense.
#include "../host/test_support.hpp"

#include <ebac/adapt/batch_planner.hpp>
#include <ebac/adapt/bound_update.hpp>
#include <ebac/adapt/controller.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace ad = ebac::adapt;

TEST_SUITE("host") {
  TEST_CASE("adapt: bound_update is constexpr and moves toward target / sensitivity, smoothed and step-limited") {
    constexpr ad::bound_update u{};
    constexpr ad::window_summary w{2.0, 0.5, 0.04, 10};  // sensitivity 2, grad 0.5 -> target 0.05 -> wanted 0.025
    constexpr auto r = u(0.01, w);
    static_assert(r.wanted_eb > 0.0249 && r.wanted_eb < 0.0251);
    static_assert(r.eb > 0.0158 && r.eb < 0.0159);  // geometric half-way: sqrt(0.01 * 0.025)
    static_assert(r.warning == ad::bound_warning::none);
    constexpr auto big = u(1e-6, w);  // wants x25000: limited to x4
    static_assert(big.eb > 3.99e-6 && big.eb < 4.01e-6 && big.warning == ad::bound_warning::step_limited);
    CHECK(u(0.01, ad::window_summary{}).warning == ad::bound_warning::no_data);
    CHECK(u(0.01, ad::window_summary{2.0, 0.0, 0.0, 5}).warning == ad::bound_warning::no_gradient);
    CHECK(u(0.01, ad::window_summary{2.0, 0.0, 0.0, 5}).eb == 0.01);
  }

}  // TEST_SUITE
