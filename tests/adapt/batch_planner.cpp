// tests/adapt/batch_planner.cpp - the tests of include/ebac/adapt/batch_planner.hpp.
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
  TEST_CASE("adapt: planner finds the largest batch, and is constexpr") {
    constexpr std::array<ad::layer_memory, 3> layers{{{1e6, 10}, {2e6, 4}, {5e5, 1}}};  // 0.1 + 0.5 + 0.5 MB per sample
    // The saved bytes only (no working set): the arithmetic of the budget alone.
    constexpr ad::planner_config cfg{.budget_bytes = 1e9, .static_bytes = 2e8, .safety_margin = 0.1, .working_set_tensors = 0};
    constexpr ad::batch_plan p = ad::plan_batch(cfg, layers);
    static_assert(p.state == ad::plan_state::ok);
    static_assert(p.max_micro_batch == 636);  // (0.9e9 - 2e8) / 1.1e6 = 636.4
    static_assert(p.micro_batch == 636 && p.accumulation_steps == 1);
    CHECK(p.peak_bytes <= cfg.budget_bytes * 0.9);
    CHECK(p.peak_bytes + p.bytes_per_sample > cfg.budget_bytes * 0.9);  // one more does not fit
    // lr and tau for the batch: linear scaling from 0.1 at 16, tau / sqrt(636 / 16).
    CHECK(p.learning_rate == doctest::Approx(0.1 * 636 / 16));
    CHECK(p.target_relative_error == doctest::Approx(ad::default_target_relative_error / std::sqrt(636.0 / 16)));
    CHECK(ad::describe(cfg, p).find("global batch 636") != std::string::npos);
  }

  TEST_CASE("adapt: planner falls back to gradient accumulation for a target batch that does not fit") {
    const std::array<ad::layer_memory, 1> layers{{{4e6, 5}}};  // 0.8 MB per sample
    ad::planner_config cfg{.budget_bytes = 1e8, .static_bytes = 1e7, .safety_margin = 0.1, .target_global_batch = 1000};
    cfg.working_set_tensors = 0;
    cfg.scaling = ad::lr_scaling::square_root;
    cfg.warmup_samples = 50000;
    const auto p = ad::plan_batch(cfg, layers);
    REQUIRE(p.ok());
    CHECK(p.max_micro_batch == 100);  // (0.9e8 - 1e7) / 8e5
    CHECK(p.accumulation_steps == 10);
    CHECK(p.micro_batch == 100);
    CHECK(p.global_batch == 1000);
    CHECK(p.state == ad::plan_state::accumulating);
    CHECK(p.learning_rate == doctest::Approx(0.1 * std::sqrt(1000.0 / 16)));
    CHECK(p.warmup_steps == 50);
    CHECK(ad::describe(cfg, p).find("accumulated") != std::string::npos);
    cfg.target_global_batch = 1001;  // 11 steps of 91 = 1001
    const auto q = ad::plan_batch(cfg, layers);
    CHECK(q.accumulation_steps == 11);
    CHECK(q.micro_batch == 91);
    CHECK(q.global_batch == 1001);
    cfg.target_global_batch = 1003;  // 11 x 92 = 1012: rounded up, and said so
    const auto r = ad::plan_batch(cfg, layers);
    CHECK(r.state == ad::plan_state::rounded_up);
    CHECK(r.global_batch == 1012);
    CHECK(ad::describe(cfg, r).find("rounded up") != std::string::npos);
    cfg.target_global_batch = 64;  // fits: no accumulation
    CHECK(ad::plan_batch(cfg, layers).accumulation_steps == 1);
  }

  TEST_CASE("adapt: planner reports a budget too small for batch 1, static memory over budget, and bad inputs") {
    const std::array<ad::layer_memory, 1> layers{{{1e9, 2}}};  // 500 MB per sample even compressed
    ad::planner_config cfg{.budget_bytes = 1e9, .static_bytes = 6e8};
    cfg.working_set_tensors = 0;
    const auto p = ad::plan_batch(cfg, layers);
    CHECK(p.state == ad::plan_state::batch_one_too_large);
    CHECK_FALSE(p.ok());
    CHECK(p.micro_batch == 0);
    const std::string msg = ad::describe(cfg, p);
    CHECK(msg.find("too small for batch 1") != std::string::npos);
    CHECK(msg.find("477 MiB") != std::string::npos);  // the per-sample need, in numbers
    cfg.static_bytes = 9.5e8;
    CHECK(ad::plan_batch(cfg, layers).state == ad::plan_state::static_too_large);
    CHECK(ad::describe(cfg, ad::plan_batch(cfg, layers)).find("exceeds the budget") != std::string::npos);
    cfg.static_bytes = 0;
    const std::array<ad::layer_memory, 1> bad{{{1e6, 0}}};
    CHECK(ad::plan_batch(cfg, bad).state == ad::plan_state::invalid_config);
    const std::array<ad::layer_memory, 1> nan{{{std::numeric_limits<double>::quiet_NaN(), 2}}};
    CHECK(ad::plan_batch(cfg, nan).state == ad::plan_state::invalid_config);
    cfg.safety_margin = 1.0;
    CHECK(ad::plan_batch(cfg, layers).state == ad::plan_state::invalid_config);
    cfg.safety_margin = 0.1;
    cfg.working_set_tensors = -1;
    CHECK(ad::plan_batch(cfg, layers).state == ad::plan_state::invalid_config);
    cfg.working_set_tensors = 1;
    cfg.working_bytes_per_sample = std::numeric_limits<double>::quiet_NaN();
    CHECK(ad::plan_batch(cfg, layers).state == ad::plan_state::invalid_config);
  }

  TEST_CASE("adapt: planner counts the working set beside the saved bytes, derived or measured by a probe step") {
    // Two saved tensors of 2 MB and 1 MB per sample at 10x: 0.3 MB saved per sample.
    constexpr std::array<ad::layer_memory, 2> layers{{{2e6, 10}, {1e6, 10}}};
    // Derived: 3.5 x the largest raw tensor (2 MB) x (1 - 0.3 / 3) = 6.3 MB per sample, 6.6 MB in all.
    constexpr ad::planner_config derived{.budget_bytes = 1e9, .safety_margin = 0};
    constexpr ad::batch_plan d = ad::plan_batch(derived, layers);
    static_assert(d.state == ad::plan_state::ok);
    CHECK(d.saved_bytes_per_sample == doctest::Approx(3e5));
    CHECK(d.working_bytes_per_sample == doctest::Approx(6.3e6));
    CHECK(d.max_micro_batch == 151);  // 1e9 / 6.6e6 = 151.5
    // Stored raw (plain training), backward's released saved tensors offset the working set: no floor.
    constexpr std::array<ad::layer_memory, 2> raw_layers{{{2e6, 1}, {1e6, 1}}};
    CHECK(ad::plan_batch(derived, raw_layers).working_bytes_per_sample == 0);
    CHECK(ad::plan_batch(derived, raw_layers).max_micro_batch == 333);  // 1e9 / 3e6
    // A probe step at batch 32 rose 110 MB, 6 MB of it static (gradients): (104e6 / 32) - 3e5 = 2.95 MB working.
    constexpr ad::probe_step probe{.peak_rise_bytes = 110e6, .batch = 32, .static_bytes = 6e6};
    constexpr double w = ad::working_from_probe(probe, derived, layers);
    static_assert(w > 2.9499e6 && w < 2.9501e6);
    ad::planner_config measured = derived;
    measured.static_bytes = 6e6;
    measured.working_bytes_per_sample = w;
    // The derived 6.3 MB is a floor: above the probe's 2.95 MB, it wins unless the floor is switched off.
    CHECK(ad::plan_batch(measured, layers).working_bytes_per_sample == doctest::Approx(6.3e6));
    measured.working_set_tensors = 0;
    const auto m = ad::plan_batch(measured, layers);
    REQUIRE(m.ok());
    // The probe's own batch reproduces its rise, and the plan is the largest batch whose modelled peak fits.
    CHECK(measured.static_bytes + 32 * m.bytes_per_sample == doctest::Approx(110e6));
    CHECK(m.max_micro_batch == 305);  // (1e9 - 6e6) / (0.3 + 2.95) MB = 305.85
    CHECK(ad::describe(measured, m).find("working set") != std::string::npos);
    measured.working_set_tensors = 1;  // a floor of 1.8 MB, under the probe's 2.95 MB: the probe's figure stands
    CHECK(ad::plan_batch(measured, layers).working_bytes_per_sample == doctest::Approx(w));
    // Measurement noise below the saved bytes clamps to an empty working set; a bad probe is refused.
    CHECK(ad::working_from_probe({.peak_rise_bytes = 5e6, .batch = 32}, derived, layers) == 0);
    CHECK(ad::working_from_probe({.peak_rise_bytes = 5e6, .batch = 0}, derived, layers) < 0);
    CHECK(ad::working_from_probe({.peak_rise_bytes = -1, .batch = 8}, derived, layers) < 0);
  }

  TEST_CASE("adapt: two probe steps are read as a line: slope per sample, a positive intercept static") {
    // Rises of 40 MB at batch 8 and 72 MB at batch 16 (2 MB static each): 4 MB per sample, 6 MB fixed.
    constexpr ad::probe_step small{.peak_rise_bytes = 40e6, .batch = 8, .static_bytes = 2e6};
    constexpr ad::probe_step large{.peak_rise_bytes = 72e6, .batch = 16, .static_bytes = 2e6};
    constexpr ad::probe_step line = ad::probe_line(small, large);
    static_assert(line.batch == 16);
    CHECK(line.static_bytes == doctest::Approx(8e6));
    CHECK((line.peak_rise_bytes - line.static_bytes) / 16 == doctest::Approx(4e6));
    // The order of the two does not matter.
    CHECK(ad::probe_line(large, small).peak_rise_bytes == doctest::Approx(line.peak_rise_bytes));
    // A small probe that under-counts by a fixed slack (intercept < 0): the slope alone, nothing static
    // added, so the per-sample cost is above the large probe's rise / batch.
    constexpr ad::probe_step slack_small{.peak_rise_bytes = 20e6, .batch = 8};
    constexpr ad::probe_step slack_large{.peak_rise_bytes = 52e6, .batch = 16};
    constexpr ad::probe_step s = ad::probe_line(slack_small, slack_large);
    CHECK(s.static_bytes == 0);
    CHECK(s.peak_rise_bytes / 16 == doctest::Approx(4e6));
    // A rise that falls with the batch (noise): the step with the larger rise per sample stands alone.
    constexpr ad::probe_step falling =
        ad::probe_line({.peak_rise_bytes = 40e6, .batch = 8}, {.peak_rise_bytes = 30e6, .batch = 16});
    CHECK(falling.batch == 8);
    CHECK(falling.peak_rise_bytes == 40e6);
    // The planner takes the slope as the whole cost of a sample, even below the saved bytes its statistics
    // count (0.3 MB per sample here): (1e9 - 8e6) / 4e6 = 248; and 0.2 MB per sample gives a working set of -0.1.
    constexpr std::array<ad::layer_memory, 2> layers{{{2e6, 10}, {1e6, 10}}};
    ad::planner_config c{.budget_bytes = 1e9, .static_bytes = line.static_bytes, .safety_margin = 0};
    c.measured_bytes_per_sample = (line.peak_rise_bytes - line.static_bytes) / static_cast<double>(line.batch);
    CHECK(ad::plan_batch(c, layers).max_micro_batch == 248);
    c.measured_bytes_per_sample = 2e5;
    CHECK(ad::plan_batch(c, layers).working_bytes_per_sample == doctest::Approx(-1e5));
    CHECK(ad::plan_batch(c, layers).bytes_per_sample == doctest::Approx(2e5));
    c.measured_bytes_per_sample = std::numeric_limits<double>::infinity();
    CHECK(ad::plan_batch(c, layers).state == ad::plan_state::invalid_config);
    // Not two valid steps at different batches: batch 0.
    CHECK(ad::probe_line(small, small).batch == 0);
    CHECK(ad::probe_line(small, {.peak_rise_bytes = -1, .batch = 4}).batch == 0);
    CHECK(ad::probe_line(small, {.peak_rise_bytes = 1e6, .batch = 0}).batch == 0);
  }

}  // TEST_SUITE
