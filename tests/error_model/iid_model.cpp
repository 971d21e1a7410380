// tests/error_model/iid_model.cpp - the tests of include/ebac/error_model/iid_model.hpp.
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
  TEST_CASE("error_model: the i.i.d. closed form is constexpr and inverts itself") {
    constexpr em::iid_weight_error m{9, 1000, 32, 0.5, 32 * 32 * 9};
    static_assert(m.slope() > 0);
    static_assert(m.inverse(m(0.01)) > 0.0099999 && m.inverse(m(0.01)) < 0.0100001);
    constexpr auto iv = em::sampling_interval(1000);
    static_assert(iv.low < 1 && iv.high > 1 && iv.high - iv.low < 0.25);
    CHECK(em::constexpr_sqrt(2.0) == doctest::Approx(std::sqrt(2.0)).epsilon(1e-15));
    CHECK(em::constexpr_sqrt(1e300) == doctest::Approx(1e150).epsilon(1e-14));
    CHECK(em::constexpr_pow_unit(8.0, 1.0 / 3.0) == doctest::Approx(2.0).epsilon(1e-9));
  }

}  // TEST_SUITE
