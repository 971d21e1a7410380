// tests/error_model/distinct_rows.cpp - the tests of include/ebac/error_model/distinct_rows.hpp.
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

namespace {

/// A linear layer's input whose rows repeat as a ViT's patch embedding does:
/// `patterns` rows appear `copies` times each (scattered over the batch), the
/// other rows are distinct; each repeated row's output gradient is its
/// pattern's common part plus a little noise, as alike as the gradients of
/// identical background patches are.
struct repeated_rows_layer {
  em::conv2d_geometry g;
  std::vector<float> x, dy;
};

repeated_rows_layer make_repeated_rows_layer(std::int64_t rows, std::int64_t in, std::int64_t out, std::int64_t patterns,
                                             std::int64_t copies, std::uint32_t seed) {
  repeated_rows_layer L{em::conv2d_geometry::linear(rows, in, out), normal(static_cast<std::size_t>(rows * in), seed),
                        normal(static_cast<std::size_t>(rows * out), seed + 1, 0.2)};
  const auto pattern_x = normal(static_cast<std::size_t>(patterns * in), seed + 2);
  const auto pattern_dy = normal(static_cast<std::size_t>(patterns * out), seed + 3);
  for (std::int64_t p = 0; p < patterns; ++p)
    for (std::int64_t c = 0; c < copies; ++c) {
      const std::int64_t r = (c * patterns + p) * 2;  // every other row, interleaved
      REQUIRE(r < rows);
      for (std::int64_t i = 0; i < in; ++i)
        L.x[static_cast<std::size_t>(r * in + i)] = pattern_x[static_cast<std::size_t>(p * in + i)];
      for (std::int64_t o = 0; o < out; ++o)
        L.dy[static_cast<std::size_t>(r * out + o)] += pattern_dy[static_cast<std::size_t>(p * out + o)];
    }
  return L;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("error_model: identical input rows merge exactly: the weight-gradient change of the merged layer is the layer's") {
    const std::int64_t R = 96, I = 24, O = 10;
    const repeated_rows_layer L = make_repeated_rows_layer(R, I, O, 4, 6, 301);
    const em::row_groups groups = em::group_identical_rows(R, I, L.x.data());
    CHECK(groups.count() == R - 4 * 5);  // 24 repeated rows in 4 groups, 72 distinct ones
    CHECK(groups.rows() == R);
    CHECK_FALSE(groups.all_distinct());
    for (std::int64_t r = 0; r < R; ++r) {  // a row's group starts with an identical row, at or before it
      const std::int64_t f = groups.first[static_cast<std::size_t>(groups.group[static_cast<std::size_t>(r)])];
      CHECK(f <= r);
      CHECK(std::equal(L.x.begin() + f * I, L.x.begin() + (f + 1) * I, L.x.begin() + r * I));
    }
    // The premise: an ebac quantizer's error is a function of the value, so the
    // reconstruction of identical rows is identical.
    const auto y = round_trip(L.x, ebac::extents{static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(I)}, 0.07);
    const em::row_groups ygroups = em::group_identical_rows(R, I, y.data());
    CHECK(ygroups.count() <= groups.count());
    for (std::int64_t r = 0; r < R; ++r)
      CHECK(ygroups.group[static_cast<std::size_t>(r)] ==
            ygroups.group[static_cast<std::size_t>(
                groups.first[static_cast<std::size_t>(groups.group[static_cast<std::size_t>(r)])])]);
    // d(dW) of the layer and of the merged layer (distinct rows, summed gradients).
    std::vector<double> dy(L.dy.begin(), L.dy.end());
    std::vector<double> w0(static_cast<std::size_t>(O * I)), w1(w0.size()), m0(w0.size()), m1(w0.size());
    REQUIRE(em::weight_gradient(L.g, L.x.data(), dy.data(), w0.data()) == ebac::status::ok);
    REQUIRE(em::weight_gradient(L.g, y.data(), dy.data(), w1.data()) == ebac::status::ok);
    em::conv2d_geometry gm = L.g;
    gm.batch = groups.count();
    const auto xm = em::first_rows(groups, I, L.x.data());
    const auto ym = em::first_rows(groups, I, y.data());
    const auto dym = em::summed_rows(groups, O, dy.data());
    REQUIRE(em::weight_gradient(gm, xm.data(), dym.data(), m0.data()) == ebac::status::ok);
    REQUIRE(em::weight_gradient(gm, ym.data(), dym.data(), m1.data()) == ebac::status::ok);
    double scale = 0;
    for (std::size_t k = 0; k < w0.size(); ++k) scale = std::max(scale, std::abs(w1[k] - w0[k]));
    REQUIRE(scale > 0);
    for (std::size_t k = 0; k < w0.size(); ++k) CHECK(std::abs((m1[k] - m0[k]) - (w1[k] - w0[k])) <= 1e-9 * scale);
    // merged_rows, the view the model's callers use, is the same layer.
    const em::merged_rows<float, double> view(L.g, L.x.data(), dy.data());
    CHECK(view.merged());
    CHECK(view.distinct_rows() == groups.count());
    CHECK(view.geometry().batch == groups.count());
    CHECK(std::equal(xm.begin(), xm.end(), view.input()));
    CHECK(std::equal(dym.begin(), dym.end(), view.output_gradient()));
    std::vector<float> store;
    CHECK(std::equal(ym.begin(), ym.end(), view.rows_of(y.data(), store)));
    // Nothing repeats: one group per row, and the merge is the identity (the view reads the caller's arrays).
    const auto white = normal(static_cast<std::size_t>(R * I), 307);
    const em::row_groups none = em::group_identical_rows(R, I, white.data());
    CHECK(none.all_distinct());
    CHECK(em::first_rows(none, I, white.data()) == white);
    const em::merged_rows<float, double> plain(L.g, white.data(), dy.data());
    CHECK_FALSE(plain.merged());
    CHECK(plain.input() == white.data());
    CHECK(plain.output_gradient() == dy.data());
    CHECK(plain.geometry().batch == R);
  }

  TEST_CASE("error_model: repeated rows with alike gradients: predicted on the merged rows, under-predicted without the merge") {
    // 40% of the rows are copies of 4 patterns (as the ViT's first LayerNorm and
    // qkv read): their errors add coherently. The measurement is the layer's own.
    // The plain model sees the repeats only as repeated values of a channel
    // (weighted by kappa, section 3.3 of docs/error-model.md) and falls short.
    const std::int64_t R = 400, I = 48, O = 32;
    const repeated_rows_layer L = make_repeated_rows_layer(R, I, O, 4, 40, 401);
    const double eb = 0.05;
    const outcome plain = run_layer(L.g, L.x, L.dy, eb);
    const em::row_groups groups = em::group_identical_rows(R, I, L.x.data());
    em::conv2d_geometry gm = L.g;
    gm.batch = groups.count();
    const auto xm = em::first_rows(groups, I, L.x.data());
    const auto dym_d = em::summed_rows(groups, O, L.dy.data());
    const std::vector<float> dym(dym_d.begin(), dym_d.end());
    const outcome merged = run_layer(gm, xm, dym, eb);
    INFO("measured " << plain.measured << " (merged layer: " << merged.measured << "), predicted " << plain.predicted
                     << " plain, " << merged.predicted << " merged");
    CHECK(merged.measured == doctest::Approx(plain.measured).epsilon(1e-5));  // the same change (up to dy's float rounding)
    const auto iv = em::sampling_interval(static_cast<double>(O));            // coherent rows: about O independent directions
    CHECK(merged.measured / merged.predicted >= iv.low);
    CHECK(merged.measured / merged.predicted <= iv.high);
    CHECK(plain.predicted / plain.measured < 0.8);  // the independence assumption misses most of the repeats
    CHECK(std::abs(std::log(merged.predicted / merged.measured)) < 0.5 * std::abs(std::log(plain.predicted / plain.measured)));
  }

}  // TEST_SUITE
