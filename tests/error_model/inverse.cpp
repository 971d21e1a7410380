// tests/error_model/inverse.cpp - the tests of include/ebac/error_model/inverse.hpp.
//
// The gradient-error model (error_model/): its pieces against brute force,
// and its predictions against weight-gradient errors measured with the real
// compressor on synthetic data whose statistics are known. Tolerances come
// from the chi-square distribution of a measured RMS (error_model/sampling.hpp)
// at two-sided 99.9%, with the degrees of freedom stated per test.
#include "../host/test_support.hpp"
#include "error_model_layers.hpp"

#include <ebac/error_model/batchnorm_model.hpp>
#include <ebac/error_model/channel_moments.hpp>
#include <ebac/error_model/distinct_rows.hpp>
#include <ebac/error_model/elementwise_model.hpp>
#include <ebac/error_model/energy_pyramid.hpp>
#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/iid_model.hpp>
#include <ebac/error_model/inverse.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/layernorm_model.hpp>
#include <ebac/error_model/matmul_model.hpp>
#include <ebac/error_model/quantizer_error.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/error_model/sampling.hpp>
#include <ebac/error_model/weight_error_model.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace em = ebac::error_model;

TEST_SUITE("host") {
  TEST_CASE("error_model: the inverse map lands the measured error on the target") {
    const auto g = conv(4, 8, 12, 12, 16, 3, 1, 1);
    auto x = normal(static_cast<std::size_t>(g.input_count()), 31);
    for (auto& v : x) v = std::max(v, 0.0f);
    const auto dy = normal(static_cast<std::size_t>(g.output_count()), 32);
    const em::flat_mask mask = em::find_flat_mask(g, x.data());
    const auto ds = em::collect_output_gradient_statistics(g, dy.data(), mask);
    std::vector<float> y(x.size());
    auto sigma_of = [&](double eb) {
      em::reconstruct_like_decoder(ebac::sign_preserving_quantizer::make(eb), x.data(), x.size(), y.data());
      return em::weight_error_model{}(ds, em::collect_input_error_statistics(g, x.data(), y.data(), mask, eb)).sigma;
    };
    for (double target : {1e-3, 1e-2, 1e-1}) {
      const auto sol = em::bound_solver{}(target, 1e-3, sigma_of);
      REQUIRE(sol.state == ebac::status::ok);
      CHECK(sol.converged);
      const outcome r = run_layer(g, x, dy, sol.eb);
      const auto iv = em::sampling_interval(static_cast<double>(g.weight_count()));
      INFO("target " << target << " eb " << sol.eb << " measured " << r.measured);
      // Solver tolerance (2%) widens the sampling interval.
      CHECK(r.measured / target >= iv.low * 0.98);
      CHECK(r.measured / target <= iv.high * 1.02);
    }
  }

  TEST_CASE("error_model: inverse solver handles saw-tooth maps, zero sensitivity and bad input") {
    const em::bound_solver s;
    auto saw = [](double eb) { return 3 * eb * (1 + 0.05 * std::sin(eb * 4000)); };
    const auto a = s(0.03, 1e-4, saw);
    CHECK(a.state == ebac::status::ok);
    CHECK(std::fabs(a.predicted_sigma / 0.03 - 1) < 0.06);
    em::bound_solver capped;
    capped.eb_max = 0.5;
    const auto z = capped(0.1, 1e-3, [](double) { return 0.0; });
    CHECK(z.converged);
    CHECK(z.eb == 0.5);
    CHECK(s(-1, 1e-3, saw).state == ebac::status::invalid_argument);
    CHECK(s(0.1, 0, saw).state == ebac::status::invalid_argument);
  }

}  // TEST_SUITE
