// tests/error_model/matmul_model.cpp - the tests of include/ebac/error_model/matmul_model.hpp.
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

TEST_CASE("error_model: a batched matmul's dB = A^T dC is the weight gradient of matmul_geometry on the side-by-side layout") {
  const std::int64_t G = 3, M = 7, K = 5, N = 4;
  const auto a = normal(static_cast<std::size_t>(G * M * K), 71), dc = normal(static_cast<std::size_t>(G * M * N), 72);
  const em::conv2d_geometry g = em::matmul_geometry(G, M, K, N);
  REQUIRE(g.validate() == ebac::status::ok);
  const auto x = em::matmul_rows_layout(a.data(), G, M, K), dy = em::matmul_rows_layout(dc.data(), G, M, N);
  CHECK(x[static_cast<std::size_t>((2 * G + 1) * K + 3)] ==
        a[static_cast<std::size_t>((1 * M + 2) * K + 3)]);  // row 2 of slice 1
  std::vector<double> w(static_cast<std::size_t>(g.weight_count()));
  REQUIRE(em::weight_gradient(g, x.data(), dy.data(), w.data()) == ebac::status::ok);
  for (std::int64_t s = 0; s < G; ++s)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n) {
        double db = 0;  // the slice's own product, written out
        for (std::int64_t m = 0; m < M; ++m)
          db += static_cast<double>(a[static_cast<std::size_t>((s * M + m) * K + k)]) *
                dc[static_cast<std::size_t>((s * M + m) * N + n)];
        CHECK(w[static_cast<std::size_t>((s * N + n) * K + k)] == doctest::Approx(db).epsilon(1e-12));
      }
}
