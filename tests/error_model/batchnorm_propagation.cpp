// tests/error_model/batchnorm_propagation.cpp - the tests of include/ebac/error_model/batchnorm_propagation.hpp.
//
// The BatchNorm propagation term (error_model/batchnorm_propagation.hpp)
// against a direct evaluation of BatchNorm's backward with the exact and the
// perturbed saved input.
#include "../host/test_support.hpp"

#include <ebac/error_model/batchnorm_propagation.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace em = ebac::error_model;

namespace {

/// Training-mode BatchNorm2d input gradient, written out from the textbook
/// formula, with mean and 1/s taken from `stats_from` (what the forward saved)
/// and x-hat from `in` (what backward reads).
std::vector<double> bn_dx(std::int64_t N, std::int64_t C, std::int64_t P, const std::vector<float>& stats_from,
                          const std::vector<float>& in, const std::vector<float>& dy, const std::vector<float>& gamma,
                          double eps) {
  std::vector<double> dx(in.size());
  const double M = static_cast<double>(N * P);
  for (std::int64_t c = 0; c < C; ++c) {
    std::vector<std::size_t> idx;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < P; ++i) idx.push_back(static_cast<std::size_t>((n * C + c) * P + i));
    double mu = 0, var = 0, mdy = 0, m1 = 0;
    for (auto j : idx) mu += stats_from[j];
    mu /= M;
    for (auto j : idx) var += (stats_from[j] - mu) * (stats_from[j] - mu);
    const double inv = 1.0 / std::sqrt(var / M + eps);
    for (auto j : idx) {
      mdy += dy[j];
      m1 += dy[j] * (in[j] - mu) * inv;
    }
    mdy /= M;
    m1 /= M;
    for (auto j : idx) dx[j] = gamma[static_cast<std::size_t>(c)] * inv * (dy[j] - mdy - (in[j] - mu) * inv * m1);
  }
  return dx;
}

struct bn_case {
  std::int64_t N = 3, C = 4, H = 5, W = 5;
  std::vector<float> conv_in, x, x_hat, dy, gamma;
  em::conv2d_geometry g;
  explicit bn_case(std::uint32_t seed, double eb) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0, 1);
    std::uniform_real_distribution<double> ud(-eb, eb);
    g.batch = N;
    g.in_channels = 2;
    g.in_h = H + 2;
    g.in_w = W + 2;
    g.out_channels = C;
    g.kernel_h = g.kernel_w = 3;  // no padding: out = in - 2 = H x W
    conv_in.resize(static_cast<std::size_t>(N * 2 * (H + 2) * (W + 2)));
    for (auto& v : conv_in) v = static_cast<float>(std::max(0.0, nd(rng)));  // post-ReLU-like
    const std::size_t n = static_cast<std::size_t>(N * C * H * W);
    x.resize(n);
    x_hat.resize(n);
    dy.resize(n);
    for (std::size_t j = 0; j < n; ++j) {
      x[j] = static_cast<float>(2.0 + 3.0 * nd(rng));
      x_hat[j] = static_cast<float>(x[j] + ud(rng));
      dy[j] = static_cast<float>(nd(rng));
    }
    for (std::int64_t c = 0; c < C; ++c) gamma.push_back(static_cast<float>(0.5 + 0.4 * c));
  }
};

}  // namespace

TEST_CASE("error_model: BatchNorm input-gradient change equals backward(x_hat) - backward(x) with the saved statistics") {
  for (double eb : {1e-3, 1e-1}) {
    const bn_case t(11, eb);
    const std::int64_t P = t.H * t.W;
    const auto d0 = bn_dx(t.N, t.C, P, t.x, t.x, t.dy, t.gamma, 1e-5);
    const auto d1 = bn_dx(t.N, t.C, P, t.x, t.x_hat, t.dy, t.gamma, 1e-5);
    std::vector<double> got(t.x.size());
    REQUIRE(em::batchnorm_input_grad_change(t.N, t.C, P, t.x.data(), t.x_hat.data(), t.dy.data(), t.gamma.data(), 1e-5,
                                            got.data()) == ebac::status::ok);
    double scale = 0, worst = 0;
    for (std::size_t j = 0; j < got.size(); ++j) {
      scale = std::max(scale, std::abs(d1[j] - d0[j]));
      worst = std::max(worst, std::abs(got[j] - (d1[j] - d0[j])));
    }
    CHECK(scale > 0);
    CHECK(worst <= 1e-9 * scale);

    // The convolution before it: its weight-gradient change, computed both ways.
    std::vector<double> w0(static_cast<std::size_t>(t.g.weight_count())), w1(w0.size()), diff(w0.size());
    REQUIRE(em::weight_gradient(t.g, t.conv_in.data(), d0.data(), w0.data()) == ebac::status::ok);
    REQUIRE(em::weight_gradient(t.g, t.conv_in.data(), d1.data(), w1.data()) == ebac::status::ok);
    for (std::size_t i = 0; i < w0.size(); ++i) diff[i] = w1[i] - w0[i];
    const double want = em::rms(diff.data(), diff.size());
    CHECK(want > 0);
    CHECK(em::propagated_weight_error(t.g, t.conv_in.data(), got.data()) == doctest::Approx(want).epsilon(1e-9));
  }
}

TEST_CASE("error_model: BatchNorm propagation - exact input gives no change, no gamma means 1, bad input is refused") {
  const bn_case t(5, 1e-2);
  const std::int64_t P = t.H * t.W;
  std::vector<double> out(t.x.size(), 7.0);
  REQUIRE(em::batchnorm_input_grad_change(t.N, t.C, P, t.x.data(), t.x.data(), t.dy.data(), t.gamma.data(), 1e-5, out.data()) ==
          ebac::status::ok);
  CHECK(*std::max_element(out.begin(), out.end()) == 0.0);
  CHECK(*std::min_element(out.begin(), out.end()) == 0.0);

  std::vector<float> ones(static_cast<std::size_t>(t.C), 1.0f);
  std::vector<double> a(t.x.size()), b(t.x.size());
  REQUIRE(em::batchnorm_input_grad_change(t.N, t.C, P, t.x.data(), t.x_hat.data(), t.dy.data(), ones.data(), 1e-5, a.data()) ==
          ebac::status::ok);
  REQUIRE(em::batchnorm_input_grad_change(t.N, t.C, P, t.x.data(), t.x_hat.data(), t.dy.data(),
                                          static_cast<const float*>(nullptr), 1e-5, b.data()) == ebac::status::ok);
  CHECK(a == b);

  CHECK(em::batchnorm_input_grad_change(0, t.C, P, t.x.data(), t.x_hat.data(), t.dy.data(), t.gamma.data(), 1e-5, out.data()) ==
        ebac::status::invalid_argument);
  CHECK(em::batchnorm_input_grad_change(t.N, t.C, P, t.x.data(), t.x_hat.data(), t.dy.data(), t.gamma.data(), -1.0, out.data()) ==
        ebac::status::invalid_argument);
  em::conv2d_geometry bad = t.g;
  bad.kernel_h = 0;
  CHECK(em::propagated_weight_error(bad, t.conv_in.data(), out.data()) < 0);
}
