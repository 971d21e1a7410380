// GPU test of ebac/cuda/statistics.cuh (CTest label gpu): the device's
// per-channel moments equal the host helper's (same policy functor; sums in
// another order, so equal to a relative 1e-12, counts exactly).
#include <ebac/cuda/statistics.cuh>
#include <ebac/error_model/channel_moments.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

namespace em = ebac::error_model;

TEST_SUITE("gpu") {
  TEST_CASE("cuda statistics: per-channel moments match the host helper (f32, odd sizes, NaN/Inf, sparse)") {
    struct shape_case {
      std::int64_t n, c, inner;
    };
    const char* quick = std::getenv("EBAC_GPU_TEST_QUICK");  // the sanitizer runs: a smaller large case
    const std::int64_t large = quick && *quick && *quick != '0' ? 100003 : 1000003;
    for (const shape_case s :
         {shape_case{4, 3, 28 * 28}, shape_case{2, 65, 7}, shape_case{128, 10, 1}, shape_case{1, 1, large}}) {
      const std::size_t total = static_cast<std::size_t>(s.n * s.c * s.inner);
      std::mt19937 rng(static_cast<std::uint32_t>(total));
      std::normal_distribution<float> nd(0.0f, 2.0f);
      std::vector<float> x(total);
      for (auto& v : x) v = std::max(0.0f, nd(rng));  // half exact zeros
      if (total > 20) {
        x[1] = NAN;
        x[7] = INFINITY;
        x[13] = -INFINITY;
      }
      const auto host = em::collect_channel_moments(x.data(), s.n, s.c, s.inner);

      float* d_x = nullptr;
      em::channel_moments* d_m = nullptr;
      REQUIRE(cudaMalloc(&d_x, total * sizeof(float)) == cudaSuccess);
      REQUIRE(cudaMalloc(&d_m, static_cast<std::size_t>(s.c) * sizeof(em::channel_moments)) == cudaSuccess);
      REQUIRE(cudaMemcpy(d_x, x.data(), total * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
      REQUIRE(cudaMemset(d_m, 0xff, static_cast<std::size_t>(s.c) * sizeof(em::channel_moments)) ==
              cudaSuccess);  // every field written
      REQUIRE(ebac::cuda::channel_moments(d_x, s.n, s.c, s.inner, d_m) == cudaSuccess);
      std::vector<em::channel_moments> dev(static_cast<std::size_t>(s.c));
      REQUIRE(cudaMemcpy(dev.data(), d_m, dev.size() * sizeof(em::channel_moments), cudaMemcpyDeviceToHost) == cudaSuccess);
      cudaFree(d_x);
      cudaFree(d_m);
      for (std::size_t c = 0; c < dev.size(); ++c) {
        CAPTURE(c);
        CHECK(dev[c].count == host[c].count);
        CHECK(dev[c].nonzero == host[c].nonzero);
        CHECK(dev[c].non_finite == host[c].non_finite);
        CHECK(dev[c].sum == doctest::Approx(host[c].sum).epsilon(1e-12));
        CHECK(dev[c].sum_squares == doctest::Approx(host[c].sum_squares).epsilon(1e-12));
      }
    }
  }

  TEST_CASE("cuda statistics: bad sizes are refused without a launch") {
    em::channel_moments* d_m = nullptr;
    REQUIRE(cudaMalloc(&d_m, sizeof(em::channel_moments)) == cudaSuccess);
    CHECK(ebac::cuda::channel_moments(static_cast<const float*>(nullptr), -1, 1, 1, d_m) == cudaErrorInvalidValue);
    CHECK(ebac::cuda::channel_moments(static_cast<const float*>(nullptr), 1, 1, 1, d_m) == cudaErrorInvalidValue);
    CHECK(ebac::cuda::channel_moments(static_cast<const float*>(nullptr), 0, 0, 1, nullptr) == cudaSuccess);
    cudaFree(d_m);
  }

}  // TEST_SUITE
