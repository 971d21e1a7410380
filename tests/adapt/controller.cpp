// tests/adapt/controller.cpp - the tests of include/ebac/adapt/controller.hpp.
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

namespace {

/// A layer whose model says sigma = k * eb (the forward map is close to
/// proportional), driven through `iters` iterations of a controller.
struct scripted_layer {
  double k;         // sigma per unit bound
  double grad_rms;  // gradient RMS
};

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("adapt: controller converges to the bound that meets the target and reports the achieved ratio") {
    ad::controller_config cfg;
    cfg.window = 10;
    cfg.initial_eb = 1e-4;
    ad::controller c(cfg, 2);
    const scripted_layer layers[2] = {{3.0, 0.02}, {0.5, 0.2}};
    for (int it = 0; it < 300; ++it) {
      for (std::size_t l = 0; l < 2; ++l) {
        const double eb = c.bound(l);
        REQUIRE(c.observe(l, {eb, layers[l].k * eb, layers[l].grad_rms, 8.0}) == ebac::status::ok);
      }
      c.end_iteration();
    }
    for (std::size_t l = 0; l < 2; ++l) {
      const double want = ad::default_target_relative_error * layers[l].grad_rms / layers[l].k;
      CHECK(c.bound(l) == doctest::Approx(want).epsilon(1e-3));
      const auto& r = c.last_report().layers[l];
      CHECK(r.achieved_relative_error == doctest::Approx(ad::default_target_relative_error).epsilon(1e-3));
      CHECK(r.compression_ratio == 8.0);
      CHECK(r.warning == ad::bound_warning::none);
    }
    CHECK_FALSE(c.last_report().any_warning());
  }

  TEST_CASE("adapt: a layer given its own target converges to it, the others keep tau, bad targets are refused") {
    ad::controller_config cfg;
    cfg.window = 10;
    cfg.initial_eb = 1e-4;
    ad::controller c(cfg, 2);
    REQUIRE(c.set_target(1, 0.05) == ebac::status::ok);
    CHECK(c.set_target(2, 0.05) == ebac::status::invalid_argument);
    CHECK(c.set_target(0, 0.0) == ebac::status::invalid_argument);
    CHECK(c.set_target(0, std::nan("")) == ebac::status::invalid_argument);
    CHECK(c.target(0) == ad::default_target_relative_error);
    CHECK(c.target(1) == 0.05);
    const scripted_layer layer{3.0, 0.02};
    for (int it = 0; it < 300; ++it) {
      for (std::size_t l = 0; l < 2; ++l) {
        const double eb = c.bound(l);
        REQUIRE(c.observe(l, {eb, layer.k * eb, layer.grad_rms, 8.0}) == ebac::status::ok);
      }
      c.end_iteration();
    }
    // Same layer statistics, half the target: half the bound.
    CHECK(c.bound(0) == doctest::Approx(ad::default_target_relative_error * layer.grad_rms / layer.k).epsilon(1e-3));
    CHECK(c.bound(1) == doctest::Approx(0.05 * layer.grad_rms / layer.k).epsilon(1e-3));
    CHECK(c.last_report().layers[1].target_relative_error == 0.05);
    CHECK(c.last_report().layers[1].achieved_relative_error == doctest::Approx(0.05).epsilon(1e-3));
  }

  TEST_CASE("adapt: a gradient that shrinks 10x pulls the bound down, the windows in between report the miss") {
    ad::controller_config cfg;
    cfg.window = 5;
    cfg.initial_eb = 1e-3;
    cfg.update.max_step = 2;
    ad::controller c(cfg, 1);
    const double k = 1.0;
    double g = 0.1;
    bool missed = false, limited = false;
    for (int it = 0; it < 400; ++it) {
      if (it == 200) g = 0.01;
      const double eb = c.bound(0);
      c.observe(0, {eb, k * eb, g, 4.0});
      if (c.end_iteration()) {
        const auto w = c.last_report().layers[0].warning;
        missed |= (it > 200 && w == ad::bound_warning::target_missed);
        limited |= (w == ad::bound_warning::step_limited);
      }
      if (it == 199) CHECK(c.bound(0) == doctest::Approx(0.1 * 0.1 / k).epsilon(1e-3));
    }
    CHECK(missed);  // right after the drop the old bound is 10x too large
    CHECK(c.bound(0) == doctest::Approx(0.1 * 0.01 / k).epsilon(1e-3));
    CHECK(c.last_report().layers[0].warning == ad::bound_warning::none);
    CHECK(limited);  // a 10x drop takes several updates at max_step 2
  }

  TEST_CASE("adapt: a layer whose target cannot be met is clamped at eb_min and flagged, the others are unaffected") {
    ad::controller_config cfg;
    cfg.window = 4;
    cfg.update.eb_min = 1e-5;
    ad::controller c(cfg, 2);
    for (int it = 0; it < 200; ++it) {
      c.observe(0, {c.bound(0), 1e6 * c.bound(0), 0.01, 1.0});  // would need eb = 1e-9
      c.observe(1, {c.bound(1), 2.0 * c.bound(1), 0.01, 6.0});
      c.end_iteration();
    }
    const auto& rep = c.last_report();
    CHECK(c.bound(0) == 1e-5);
    CHECK(rep.layers[0].warning == ad::bound_warning::target_unreachable);
    CHECK(rep.any_warning());
    CHECK(rep.warnings_text().find("layer 0: target cannot be met") != std::string::npos);
    CHECK(rep.layers[1].warning == ad::bound_warning::none);
    CHECK(c.bound(1) == doctest::Approx(0.1 * 0.01 / 2.0).epsilon(1e-3));
  }

  TEST_CASE("adapt: invalid observations are rejected and counted, an empty window keeps the bound") {
    ad::controller_config cfg;
    cfg.window = 2;
    ad::controller c(cfg, 1);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK(c.observe(0, {nan, 1, 1, 1}) == ebac::status::invalid_argument);
    CHECK(c.observe(0, {1e-3, -1, 1, 1}) == ebac::status::invalid_argument);
    CHECK(c.observe(3, {1e-3, 1, 1, 1}) == ebac::status::invalid_argument);
    c.end_iteration();
    CHECK(c.end_iteration());
    CHECK(c.last_report().layers[0].rejected == 2);
    CHECK(c.last_report().layers[0].warning == ad::bound_warning::no_data);
    CHECK(c.bound(0) == cfg.initial_eb);
    // A zero gradient gives no relative target: the bound stays, with a warning.
    c.observe(0, {1e-3, 1e-3, 0.0, 1});
    c.end_iteration();
    c.end_iteration();
    CHECK(c.last_report().layers[0].warning == ad::bound_warning::no_gradient);
  }

  TEST_CASE("adapt: a controller with an impossible configuration refuses to start") {
    ad::controller_config cfg;
    cfg.update.smoothing = 0;
    CHECK_THROWS_AS(ad::controller(cfg, 1), ebac::error);
    cfg = {};
    cfg.window = 0;
    CHECK_THROWS_AS(ad::controller(cfg, 1), ebac::error);
    cfg = {};
    cfg.update.eb_max = cfg.update.eb_min / 2;
    CHECK_THROWS_AS(ad::controller(cfg, 1), ebac::error);
  }

}  // TEST_SUITE
