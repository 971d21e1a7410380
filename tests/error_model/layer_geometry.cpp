// tests/error_model/layer_geometry.cpp - the tests of include/ebac/error_model/layer_geometry.hpp.
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
  TEST_CASE("error_model: geometry follows PyTorch's output-size rule and rejects impossible layers") {
    const auto g = conv(2, 4, 9, 7, 6, 3, 2, 1, 2, 2);
    CHECK(g.validate() == ebac::status::ok);
    CHECK(g.out_h() == (9 + 2 - 2 * 2 - 1) / 2 + 1);
    CHECK(g.out_w() == (7 + 2 - 2 * 2 - 1) / 2 + 1);
    CHECK(g.weight_count() == 6 * 2 * 9);
    CHECK(conv(1, 3, 8, 8, 4, 3, 1, 0, 1, 2).validate() == ebac::status::invalid_argument);  // 3 % 2
    CHECK(conv(1, 2, 2, 2, 2, 5).validate() == ebac::status::invalid_argument);              // kernel larger than input
    CHECK(conv(1, 2, 2, 2, 2, 3, 1, -1).validate() == ebac::status::invalid_argument);
    static_assert(em::conv2d_geometry::linear(16, 128, 10).weight_count() == 1280);
    // Taps reading the zero padding do not count: a 3x3 "same" conv on 7x7
    // has (19/7)^2 valid taps per output position on average.
    CHECK(conv(1, 1, 7, 7, 1, 3, 1, 1).effective_taps() == doctest::Approx(19.0 * 19.0 / 49.0));
    CHECK(conv(1, 1, 7, 7, 1, 1).effective_taps() == 1.0);
  }

}  // TEST_SUITE
