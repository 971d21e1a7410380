// tests/element_code.cpp - the tests of include/ebac/element_code.hpp.
//
// The CUDA backend computes each Lorenzo residual directly (the predictor's
// residual()); the host backend runs one pass per axis. They must agree bit
// for bit.
#include "host/test_support.hpp"

#include <ebac/ebac.hpp>
#include <ebac/element_code.hpp>
#include <ebac/predictor/tiled_prefix.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <doctest/doctest.h>
#include <limits>
#include <random>
#include <vector>

namespace {

/// The fused kernels' per-element code equals the staged path's: quantize
/// every element into a field, then the predictor's residual(), then zigzag.
template <class T, class Q, class P>
void check_element_code(const P& pred, const ebac::extents& e, double eb, std::uint32_t seed) {
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<T> in(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    float v = std::max(0.f, nd(rng)) * 3.f;  // post-ReLU-like, many exact zeros
    if (rng() % 97 == 0) v = -v - 1.f;       // a few negatives
    if (rng() % 211 == 0) v = std::numeric_limits<float>::quiet_NaN();
    if (rng() % 223 == 0) v = std::numeric_limits<float>::infinity();
    if (rng() % 229 == 0) v = 3e38f;  // outside the code range
    in[i] = ebac::from_float<T>(v);
  }
  const Q q = Q::make(eb);
  std::vector<std::uint32_t> field(n);
  std::vector<bool> outlier(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const ebac::quantized r = ebac::quantize_element(q, in[i]);
    field[i] = static_cast<std::uint32_t>(r.code);
    outlier[i] = r.outlier;
  }
  int outliers = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    bool o = false;
    const std::uint32_t fused = ebac::detail::element_code(pred, e, q, in.data(), i, o);
    const std::uint32_t staged =
        ebac::detail::zigzag(static_cast<std::int32_t>(pred.residual(e, i, [&](std::uint64_t j) { return field[j]; })));
    REQUIRE(fused == staged);
    REQUIRE(o == outlier[i]);
    outliers += o;
  }
  if (n > 1000) CHECK(outliers > 0);  // the outlier paths ran
}

/// The same for a lossless quantizer over storage-type data: the staged
/// field is quantize_at(q, in[i], i) (positional for pool_window).
template <class P, class Q, class S>
void check_lossless_element_code(const P& pred, const ebac::extents& e, const Q& q, const std::vector<S>& in,
                                 bool expect_outliers) {
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  REQUIRE(in.size() == n);
  std::vector<std::uint32_t> field(n);
  std::vector<bool> outlier(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const ebac::quantized r = ebac::quantize_at(q, in[i], i);
    field[i] = static_cast<std::uint32_t>(r.code);
    outlier[i] = r.outlier;
  }
  int outliers = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    bool o = false;
    const std::uint32_t fused = ebac::detail::element_code(pred, e, q, in.data(), i, o);
    const std::uint32_t staged =
        ebac::detail::zigzag(static_cast<std::int32_t>(pred.residual(e, i, [&](std::uint64_t j) { return field[j]; })));
    REQUIRE(fused == staged);
    REQUIRE(o == outlier[i]);
    outliers += o;
  }
  CHECK((outliers > 0) == expect_outliers);
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("fused per-element codes (CUDA fused kernels) equal quantize-then-residual codes") {
    const ebac::extents shapes[] = {{37}, {5000}, {4, 5, 6}, {2, 3, 17, 19}};
    std::uint32_t seed = 7;
    for (const auto& e : shapes) {
      CAPTURE(e.rank);
      for (double eb : {1e-3, 0.25}) {
        check_element_code<float, ebac::sign_preserving_quantizer>(ebac::lorenzo::flat(), e, eb, seed++);
        check_element_code<float, ebac::linear_quantizer>(ebac::lorenzo::flat(4096), e, eb, seed++);
        check_element_code<float, ebac::sign_preserving_quantizer>(ebac::no_prediction{}, e, eb, seed++);
        check_element_code<ebac::float16, ebac::sign_preserving_quantizer>(ebac::lorenzo::flat(), e, eb, seed++);
        check_element_code<ebac::bfloat16, ebac::linear_quantizer>(ebac::lorenzo::flat(), e, eb, seed++);
        for (int d = 2; d <= 3 && d <= e.rank; ++d)
          check_element_code<float, ebac::sign_preserving_quantizer>(ebac::lorenzo::along_last(d, e.rank, 64), e, eb, seed++);
      }
    }
  }

  TEST_CASE("fused per-element codes for the lossless quantizers (levels, exact, pool_window) equal the staged codes") {
    std::mt19937 rng(11);
    const ebac::extents e{3, 8, 12};
    const std::uint64_t n = 3 * 8 * 12;
    // Palette indices of a few-level int8 tensor (the writer runs them without
    // prediction; any predictor composes, so Lorenzo is checked too).
    std::vector<std::int8_t> few(n);
    for (auto& v : few) v = static_cast<std::int8_t>(static_cast<int>(rng() % 5) * 3 - 6);
    const ebac::level_quantizer lq{ebac::host::detail::find_levels(few.data(), n, 32, ebac::max_levels, 1)};
    REQUIRE(lq.palette.count == 5);
    check_lossless_element_code(ebac::no_prediction{}, e, lq, few, false);
    check_lossless_element_code(ebac::lorenzo::flat(32), e, lq, few, false);
    // Exact integers under Lorenzo; values of 2^22 and more are outliers.
    std::vector<std::int32_t> ints(n);
    for (auto& v : ints)
      v = rng() % 13 == 0 ? static_cast<std::int32_t>(rng() | 0x400000u) : static_cast<std::int32_t>(rng() % 200) - 100;
    check_lossless_element_code(ebac::lorenzo::flat(), e, ebac::exact_quantizer{}, ints, true);
    check_lossless_element_code(ebac::lorenzo::along_last(2, e.rank, 4), e, ebac::exact_quantizer{}, ints, true);
    // Max-pool indices (3x3 windows, stride 2, padding 1 over 16 x 24 planes:
    // 8 x 12 outputs), some outside their window (outliers).
    ebac::pool_geometry g;
    g.dims = 2;
    const std::uint64_t in_size[2] = {16, 24};
    for (int j = 0; j < 2; ++j) {
      g.input[j] = in_size[j];
      g.kernel[j] = 3;
      g.stride[j] = 2;
      g.padding[j] = 1;
      g.dilation[j] = 1;
    }
    REQUIRE(g.validate(e) == ebac::status::ok);
    const auto pq = ebac::pool_window_quantizer::make(g, e);
    std::vector<std::int64_t> idx(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t ow = i % 12, oh = (i / 12) % 8;
      const std::int64_t h =
          std::clamp<std::int64_t>(static_cast<std::int64_t>(2 * oh) - 1 + static_cast<std::int64_t>(rng() % 3), 0, 15);
      const std::int64_t w =
          std::clamp<std::int64_t>(static_cast<std::int64_t>(2 * ow) - 1 + static_cast<std::int64_t>(rng() % 3), 0, 23);
      idx[i] = rng() % 17 == 0 ? static_cast<std::int64_t>(rng() % 384) : h * 24 + w;
    }
    idx[5] = 383;  // far from output 5's window
    check_lossless_element_code(ebac::no_prediction{}, e, pq, idx, true);
    check_lossless_element_code(ebac::lorenzo::flat(), e, pq, idx, true);
  }

}  // TEST_SUITE
