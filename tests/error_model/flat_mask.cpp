// tests/error_model/flat_mask.cpp - the tests of include/ebac/error_model/flat_mask.hpp.
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
  TEST_CASE("error_model: the flat mask finds a repeated background and ignores zeros") {
    const auto g = conv(2, 3, 6, 6, 1, 1);
    std::vector<float> x(static_cast<std::size_t>(g.input_count()));
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(1, 2);
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t i = 0; i < 36; ++i) {
          float v = u(rng);
          if (i < 18 && c < 2) v = c == 0 ? -0.8f : 0.25f;  // background in channels 0 and 1
          if (c == 2 && i % 2 == 0) v = 0;                  // channel 2: many zeros, no repeats
          x[static_cast<std::size_t>((n * 3 + c) * 36 + i)] = v;
        }
    const auto m = em::find_flat_mask(g, x.data());
    CHECK(m.dominant_channels == 2);
    CHECK(m.flat_positions == 2 * 18);
    CHECK(m.at(1, 0, 5));
    CHECK_FALSE(m.at(1, 5, 5));
    const auto none = em::find_flat_mask(g, x.data(), 0.9);
    CHECK(none.flat_positions == 0);
  }

}  // TEST_SUITE
