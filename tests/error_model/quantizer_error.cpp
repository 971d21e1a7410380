// tests/error_model/quantizer_error.cpp - the tests of include/ebac/error_model/quantizer_error.hpp.
//
// The gradient-error model (error_model/): its pieces against brute force,
// and its predictions against weight-gradient errors measured with the real
// compressor on synthetic data whose statistics are known. Tolerances come
// from the chi-square distribution of a measured RMS (error_model/sampling.hpp)
// at two-sided 99.9%, with the degrees of freedom stated per test.
#include "../host/test_support.hpp"

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
  TEST_CASE("error_model: closed-form squared errors match the quantizers, zeros are exact, small values are biased") {
    const double eb = 0.01;
    const auto sq = ebac::sign_preserving_quantizer::make(eb);
    const auto lq = ebac::linear_quantizer::make(eb);
    std::vector<float> x, ys, yl;
    for (int i = 0; i <= 400; ++i) x.push_back(static_cast<float>(i * 0.5 * eb / 100));  // [0, 2eb]
    ys.resize(x.size());
    yl.resize(x.size());
    em::reconstruct_like_decoder(sq, x.data(), x.size(), ys.data());
    em::reconstruct_like_decoder(lq, x.data(), x.size(), yl.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double es = static_cast<double>(ys[i]) - x[i], el = static_cast<double>(yl[i]) - x[i];
      if (x[i] == 0) {
        CHECK(es == 0);
        CHECK(el == 0);
        continue;
      }
      if (x[i] <= 2 * eb * (1 - 1e-6))
        CHECK(es * es == doctest::Approx(em::sign_preserving_square_error{eb}(x[i])).epsilon(1e-5));
      if (x[i] < eb * (1 - 1e-6)) CHECK(el * el == doctest::Approx(em::linear_square_error{eb}(x[i])).epsilon(1e-5));
    }
    // Away from zero the error is uniform: mean e^2 = eb^2 / 3 within the
    // chi-square-like sampling interval of a mean of n bounded terms (sd of
    // e^2 for a uniform e is eb^2 * sqrt(4/45), so 4 sd of the mean is tiny).
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(3 * eb, 500 * eb);
    const std::size_t n = 200000;
    std::vector<float> big(n), back(n);
    for (auto& v : big) v = static_cast<float>(u(rng));
    em::reconstruct_like_decoder(sq, big.data(), n, back.data());
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m += (static_cast<double>(back[i]) - big[i]) * (static_cast<double>(back[i]) - big[i]);
    m /= static_cast<double>(n);
    CHECK(std::fabs(m / (eb * eb / 3) - 1) < 4 * std::sqrt(4.0 / 45.0) * 3 / std::sqrt(static_cast<double>(n)));
    static_assert(em::sign_preserving_square_error{1}(0) == 0);
    static_assert(em::sign_preserving_square_error{1}(0.5) == 0.25);
    static_assert(em::linear_square_error{1}(0.5) == 0.25);
  }

}  // TEST_SUITE
