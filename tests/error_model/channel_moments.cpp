// tests/error_model/channel_moments.cpp - the tests of include/ebac/error_model/channel_moments.hpp.
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
  TEST_CASE("error_model: channel moments (the statistics both backends collect) add up, skip non-finite values, merge") {
    const std::int64_t N = 3, C = 4, HW = 5;
    std::vector<float> x(static_cast<std::size_t>(N * C * HW));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0) ? 0.0f : static_cast<float>(i) * 0.25f - 7.0f;
    x[6] = NAN;
    x[22] = -INFINITY;
    const auto m = em::collect_channel_moments(x.data(), N, C, HW);
    REQUIRE(m.size() == 4);
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0, q = 0;
      std::uint64_t cnt = 0, nz = 0, bad = 0;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < HW; ++i) {
          const float v = x[static_cast<std::size_t>((n * C + c) * HW + i)];
          if (!std::isfinite(v)) {
            ++bad;
            continue;
          }
          s += v;
          q += static_cast<double>(v) * v;
          ++cnt;
          nz += v != 0;
        }
      const auto& mc = m[static_cast<std::size_t>(c)];
      CHECK(mc.sum == s);
      CHECK(mc.sum_squares == q);
      CHECK(mc.count == cnt);
      CHECK(mc.nonzero == nz);
      CHECK(mc.non_finite == bad);
    }
    const auto t = em::total_moments(m);
    CHECK(t.count + t.non_finite == x.size());
    CHECK(t.non_finite == 2);
    // Splitting a channel anywhere and merging gives the same counts and sums
    // (exactly here: the values are multiples of 1/4 and small).
    const auto whole = em::collect_channel_moments(x.data(), 1, 1, static_cast<std::int64_t>(x.size()))[0];
    for (std::int64_t cut : {0, 1, 17, 59, 60}) {
      auto a = em::collect_channel_moments(x.data(), 1, 1, cut)[0];
      const auto b = em::collect_channel_moments(x.data() + cut, 1, 1, static_cast<std::int64_t>(x.size()) - cut)[0];
      a = em::merge_moments{}(a, b);
      CHECK(a.sum == whole.sum);
      CHECK(a.sum_squares == whole.sum_squares);
      CHECK(a.count == whole.count);
      CHECK(a.nonzero == whole.nonzero);
    }
    // RMS and mean over the finite values, summed here from x (exact: small
    // multiples of 1/4).
    double sq = 0, sum = 0;
    std::uint64_t finite = 0;
    for (float v : x)
      if (std::isfinite(v)) {
        sq += static_cast<double>(v) * v;
        sum += v;
        ++finite;
      }
    REQUIRE(finite == x.size() - 2);
    CHECK(whole.rms() == doctest::Approx(std::sqrt(sq / static_cast<double>(finite))).epsilon(1e-15));
    CHECK(whole.mean() == doctest::Approx(sum / static_cast<double>(finite)).epsilon(1e-15));
    CHECK(em::channel_moments{}.rms() == 0.0);  // nothing counted: 0, not NaN
    const ebac::float16 h[3] = {ebac::from_float<ebac::float16>(1.5f), ebac::from_float<ebac::float16>(0.0f),
                                ebac::from_float<ebac::float16>(-2.0f)};
    const auto hm = em::collect_channel_moments(h, 1, 1, 3)[0];
    CHECK(hm.sum == -0.5);
    CHECK(hm.nonzero == 2);
  }

}  // TEST_SUITE
