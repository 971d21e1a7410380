// tests/error_model/reference_gradient.cpp - the tests of include/ebac/error_model/reference_gradient.hpp.
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

/// Weight gradient by scattering every (n, o, oh, ow) product: a different
/// loop order from reference_gradient.hpp's gather, so a shared indexing
/// mistake cannot hide.
std::vector<double> scatter_gradient(const em::conv2d_geometry& g, const std::vector<float>& x, const std::vector<float>& dy) {
  std::vector<double> w(static_cast<std::size_t>(g.weight_count()), 0.0);
  const std::int64_t Ho = g.out_h(), Wo = g.out_w(), Cg = g.in_channels_per_group(), Og = g.out_channels_per_group();
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t o = 0; o < g.out_channels; ++o)
      for (std::int64_t oh = 0; oh < Ho; ++oh)
        for (std::int64_t ow = 0; ow < Wo; ++ow) {
          const double d = dy[static_cast<std::size_t>(((n * g.out_channels + o) * Ho + oh) * Wo + ow)];
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t kh = 0; kh < g.kernel_h; ++kh)
              for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
                const std::int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
                const std::int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                const std::int64_t ci = (o / Og) * Cg + c;
                w[static_cast<std::size_t>(((o * Cg + c) * g.kernel_h + kh) * g.kernel_w + kw)] +=
                    d * x[static_cast<std::size_t>(((n * g.in_channels + ci) * g.in_h + ih) * g.in_w + iw)];
              }
        }
  return w;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("error_model: reference weight gradient equals a scatter implementation (stride, padding, dilation, groups)") {
    for (const auto& g : {conv(2, 4, 9, 8, 6, 3, 2, 1, 2, 2), conv(3, 3, 7, 7, 3, 3, 1, 1, 1, 3), conv(2, 5, 6, 5, 4, 1, 2, 0),
                          conv(1, 2, 11, 10, 4, 5, 3, 2, 1, 1), em::conv2d_geometry::linear(7, 5, 3)}) {
      REQUIRE(g.validate() == ebac::status::ok);
      const auto x = normal(static_cast<std::size_t>(g.input_count()), 1);
      const auto dy = normal(static_cast<std::size_t>(g.output_count()), 2);
      std::vector<double> w(static_cast<std::size_t>(g.weight_count()));
      REQUIRE(em::weight_gradient(g, x.data(), dy.data(), w.data()) == ebac::status::ok);
      const auto ref = scatter_gradient(g, x, dy);
      for (std::size_t i = 0; i < w.size(); ++i) CHECK(w[i] == doctest::Approx(ref[i]).epsilon(1e-12));
    }
  }

}  // TEST_SUITE
