// tests/error_model/elementwise_model.cpp - the tests of include/ebac/error_model/elementwise_model.hpp.
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

TEST_CASE(
    "error_model: elementwise nonlinearities - backward factors are the derivatives, and the dy^2-weighted histogram predicts "
    "the input-gradient change") {
  // The test's own functions; their derivatives by central differences are
  // the reference the library's closed forms must match.
  auto gelu = [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); };
  auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  auto sigm = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto diff = [](auto f, double x) { return (f(x + 1e-5) - f(x - 1e-5)) / 2e-5; };
  for (const double x : {-4.0, -1.3, -0.2, 0.0, 0.4, 1.0, 2.7}) {
    CAPTURE(x);
    CHECK(em::backward_factor(em::elementwise_function::gelu, x) == doctest::Approx(diff(gelu, x)).epsilon(1e-8));
    CHECK(em::backward_factor(em::elementwise_function::silu, x) == doctest::Approx(diff(silu, x)).epsilon(1e-8));
    // tanh and sigmoid: backward reads the output, so g is a function of it.
    CHECK(em::backward_factor(em::elementwise_function::tanh, std::tanh(x)) ==
          doctest::Approx(diff([](double v) { return std::tanh(v); }, x)).epsilon(1e-8));
    CHECK(em::backward_factor(em::elementwise_function::sigmoid, sigm(x)) == doctest::Approx(diff(sigm, x)).epsilon(1e-8));
  }
  CHECK(em::parse_elementwise_function("gelu") == em::elementwise_function::gelu);
  CHECK_FALSE(em::parse_elementwise_function("relu").has_value());
  CHECK(em::saves_output(em::elementwise_function::tanh));
  CHECK_FALSE(em::saves_output(em::elementwise_function::gelu));

  // Saved tensors as a transformer MLP has them: pre-activations with a
  // heavy-ish tail and a few exact zeros, output gradients whose scale
  // grows with |x|. 64 x 1024 elements, the real "fast" pipeline.
  const std::size_t rows = 64, cols = 1024, n = rows * cols;
  const auto z = normal(n, 61), u = normal(n, 62), scale = normal(n, 63);
  std::vector<float> pre(n), dy(n);
  for (std::size_t i = 0; i < n; ++i) {
    pre[i] = i % 997 == 0 ? 0.0f : static_cast<float>(z[i] * (1.0 + 0.5 * std::fabs(scale[i])));
    dy[i] = static_cast<float>(u[i] * (0.5 + std::fabs(scale[(i * 7919) % n]) / 3));
  }
  const ebac::extents shape{rows, cols};
  struct kind {
    em::elementwise_function f;
    double (*g)(double);  // the test's derivative in terms of the saved value, by differences
    std::vector<double> bounds;
  };
  const kind kinds[] = {
      {em::elementwise_function::gelu,
       [](double s) {
         return (0.5 * (s + 1e-5) * std::erfc(-(s + 1e-5) / std::sqrt(2.0)) -
                 0.5 * (s - 1e-5) * std::erfc(-(s - 1e-5) / std::sqrt(2.0))) /
                2e-5;
       },
       {0.002, 0.02, 0.2, 1.0}},
      {em::elementwise_function::silu,
       [](double s) { return ((s + 1e-5) / (1 + std::exp(-(s + 1e-5))) - (s - 1e-5) / (1 + std::exp(-(s - 1e-5)))) / 2e-5; },
       {0.002, 0.02, 0.2, 1.0}},
      // (differences cancel where tanh and sigmoid saturate: their identities instead)
      {em::elementwise_function::tanh, [](double t) { return (1 - t) * (1 + t); }, {0.001, 0.01, 0.1}},
      {em::elementwise_function::sigmoid, [](double p) { return p - p * p; }, {0.001, 0.01, 0.05}},
  };
  for (const kind& k : kinds) {
    std::vector<float> s(n);
    for (std::size_t i = 0; i < n; ++i)
      s[i] = k.f == em::elementwise_function::tanh      ? std::tanh(pre[i])
             : k.f == em::elementwise_function::sigmoid ? static_cast<float>(1 / (1 + std::exp(-static_cast<double>(pre[i]))))
                                                        : pre[i];
    for (const double eb : k.bounds) {
      CAPTURE(static_cast<int>(k.f));
      CAPTURE(eb);
      const auto y = round_trip(s, shape, eb);
      // Measured with the test's own derivative; also the spread of the terms
      // gives the measurement's effective degrees of freedom.
      double sum = 0, sum2 = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double d = dy[i] * (k.g(y[i]) - k.g(s[i]));
        sum += d * d;
        sum2 += d * d * d * d;
      }
      const double measured = std::sqrt(sum / static_cast<double>(n));
      CHECK(std::sqrt(em::elementwise_input_grad_change_mean_square(k.f, s.data(), y.data(), dy.data(), n)) ==
            doctest::Approx(measured).epsilon(1e-6));
      // The model reads what backward has: the reconstruction and dy.
      const em::elementwise_statistics st = em::collect_elementwise_statistics(y.data(), dy.data(), n);
      const double predicted = std::sqrt(em::elementwise_input_grad_mean_square(k.f, st, eb));
      const double dof = sum * sum / sum2;
      const em::sigma_ratio_interval iv = em::sampling_interval(dof);
      MESSAGE("f ", static_cast<int>(k.f), " eb ", eb, ": predicted ", predicted, " measured ", measured, " ratio ",
              predicted / measured, " dof ", dof);
      if (k.f == em::elementwise_function::tanh && eb >= 0.1) {
        // A bin of 0.2 next to tanh's saturation at +-1: the density piles up
        // against the edge, far from the model's linear density (documented
        // in docs/error-model.md 6.3); held to the band instead.
        CHECK(predicted / measured >= 0.8);
        CHECK(predicted / measured <= 1.25);
        continue;
      }
      CHECK(measured / predicted >= iv.low);
      CHECK(measured / predicted <= iv.high);
    }
  }
}

TEST_CASE(
    "error_model: a GELU's input-gradient change carried into the producing linear layer's weight gradient matches the model") {
  // GELU(X W^T): the pre-activation is saved; dW = (dy g(s))^T X.
  const std::int64_t rows = 512, in = 64, out = 256;
  const auto x = normal(static_cast<std::size_t>(rows * in), 81), w = normal(static_cast<std::size_t>(out * in), 82, 0.15);
  const auto dy = normal(static_cast<std::size_t>(rows * out), 83);
  std::vector<float> s(static_cast<std::size_t>(rows * out));
  for (std::int64_t n = 0; n < rows; ++n)
    for (std::int64_t o = 0; o < out; ++o) {
      double v = 0;
      for (std::int64_t i = 0; i < in; ++i)
        v += static_cast<double>(x[static_cast<std::size_t>(n * in + i)]) * w[static_cast<std::size_t>(o * in + i)];
      s[static_cast<std::size_t>(n * out + o)] = static_cast<float>(v);
    }
  auto gelu_grad = [](double v) {  // the test's own derivative, by central differences
    auto f = [](double t) { return 0.5 * t * std::erfc(-t / std::sqrt(2.0)); };
    return (f(v + 1e-5) - f(v - 1e-5)) / 2e-5;
  };
  const ebac::extents shape{static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(out)};
  for (const double eb : {0.01, 0.1}) {
    CAPTURE(eb);
    const auto y = round_trip(s, shape, eb);
    // Measured: the change of dW = sum_n d(dx)_no X_ni, written out.
    std::vector<double> ddx(s.size());
    for (std::size_t j = 0; j < s.size(); ++j) ddx[j] = dy[j] * (gelu_grad(y[j]) - gelu_grad(s[j]));
    double sum = 0;
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) {
        double d = 0;
        for (std::int64_t n = 0; n < rows; ++n)
          d += ddx[static_cast<std::size_t>(n * out + o)] * x[static_cast<std::size_t>(n * in + i)];
        sum += d * d;
      }
    const double measured = std::sqrt(sum / static_cast<double>(out * in));
    const em::elementwise_statistics st = em::collect_elementwise_statistics(y.data(), dy.data(), s.size());
    const double predicted = std::sqrt(em::elementwise_propagated_weight_grad_mean_square(
        em::elementwise_function::gelu, st, eb, y.data(), dy.data(), rows, out, x.data(), in));
    // O x I = 16384 sums of 512 independent terms each; 3% more for q read
    // at histogram bin centres (the input-gradient test above: within 1-2%).
    const em::sigma_ratio_interval iv = em::sampling_interval(static_cast<double>(out * in));
    MESSAGE("eb ", eb, ": predicted ", predicted, " measured ", measured, " ratio ", predicted / measured);
    CHECK(measured / predicted >= iv.low * 0.97);
    CHECK(measured / predicted <= iv.high * 1.03);
  }
}
