// tests/error_model/energy_pyramid.cpp - the tests of include/ebac/error_model/energy_pyramid.hpp.
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
  TEST_CASE("error_model: the energy pyramid is an orthonormal split of the field's energy") {
    // Sum over cells of mean + deviation energy = sum of squares, for any grid
    // (odd sizes give partial edge blocks and parents with 1 or 2 children).
    for (auto [n, c, h, w] :
         {std::array<std::int64_t, 4>{3, 2, 7, 5}, {1, 1, 1, 1}, {4, 3, 16, 16}, {2, 1, 1, 9}, {5, 2, 13, 1}}) {
      const auto f = normal(static_cast<std::size_t>(n * c * h * w), 7);
      const auto p = em::build_energy_pyramid(
          n, c, h, w, [&](auto i, auto j, auto a, auto b) { return f[static_cast<std::size_t>(((i * c + j) * h + a) * w + b)]; });
      double sq = 0;
      for (float v : f) sq += static_cast<double>(v) * v;
      CHECK(p.total_energy() == doctest::Approx(sq).epsilon(1e-9));
      for (const auto& l : p.levels) {
        for (double v : l.mean_energy) CHECK(v >= 0);
        for (double v : l.dev_energy) CHECK(v >= 0);
      }
    }
  }

  TEST_CASE("error_model: on a 1x1 grid the pyramid pairing is the batch mean/deviation split of a linear layer") {
    // For a linear layer sum_{o,c} E_oc^2 with E = dy^T e: the batch-mean part
    // is (sum_o S_o^2)(sum_c m_c^2) N-scaled, the deviations pair per sample.
    const std::int64_t N = 6, O = 3, C = 4;
    const auto dy = normal(static_cast<std::size_t>(N * O), 3), e = normal(static_cast<std::size_t>(N * C), 4);
    const auto pd =
        em::build_energy_pyramid(N, O, 1, 1, [&](auto n, auto o, auto, auto) { return dy[static_cast<std::size_t>(n * O + o)]; });
    const auto pe =
        em::build_energy_pyramid(N, C, 1, 1, [&](auto n, auto c, auto, auto) { return e[static_cast<std::size_t>(n * C + c)]; });
    double mean_d = 0, mean_e = 0, dev = 0, dev_dd = 0;
    std::vector<double> md(O, 0), me(C, 0);
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t o = 0; o < O; ++o) md[o] += static_cast<double>(dy[n * O + o]) / N;
      for (std::int64_t c = 0; c < C; ++c) me[c] += static_cast<double>(e[n * C + c]) / N;
    }
    for (double v : md) mean_d += N * v * v;
    for (double v : me) mean_e += N * v * v;
    for (std::int64_t n = 0; n < N; ++n) {
      double a = 0, b = 0;
      for (std::int64_t o = 0; o < O; ++o) a += (dy[n * O + o] - md[o]) * (dy[n * O + o] - md[o]);
      for (std::int64_t c = 0; c < C; ++c) b += (e[n * C + c] - me[c]) * (e[n * C + c] - me[c]);
      dev += a * b / ((N - 1.0) / N);
      dev_dd += a * a / ((N - 1.0) / N);
    }
    CHECK(em::pyramid_inner(pd, pe) == doctest::Approx(mean_d * mean_e + dev).epsilon(1e-9));
    CHECK(em::pyramid_inner(pe, pd) == doctest::Approx(mean_d * mean_e + dev).epsilon(1e-9));
    // A field paired with itself: its mean energy squared plus each sample's
    // deviation energy squared, over the same (N-1)/N share.
    CHECK(em::pyramid_inner(pd, pd) == doctest::Approx(mean_d * mean_d + dev_dd).epsilon(1e-9));
    // One sample: no deviation part (a batch of one has no spread).
    const auto p1 =
        em::build_energy_pyramid(1, O, 1, 1, [&](auto, auto o, auto, auto) { return dy[static_cast<std::size_t>(o)]; });
    double sq1 = 0;
    for (std::int64_t o = 0; o < O; ++o) sq1 += static_cast<double>(dy[o]) * dy[o];
    CHECK(em::pyramid_inner(p1, p1) == doctest::Approx(sq1 * sq1).epsilon(1e-9));
    const auto other = em::build_energy_pyramid(N, C, 2, 1, [](auto, auto, auto, auto) { return 1.0; });
    CHECK(em::pyramid_inner(pd, other) < 0);  // different grids are refused
  }

}  // TEST_SUITE
