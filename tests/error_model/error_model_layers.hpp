// tests/error_model/error_model_layers.hpp - synthetic layers compressed with the
// real codec, shared by the tests of the error-model headers.
//
// The gradient-error model (error_model/): its pieces against brute force,
// and its predictions against weight-gradient errors measured with the real
// compressor on synthetic data whose statistics are known. Tolerances come
// from the chi-square distribution of a measured RMS (error_model/sampling.hpp)
// at two-sided 99.9%, with the degrees of freedom stated per test.
#pragma once

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

namespace {

inline std::vector<float> normal(std::size_t n, std::uint32_t seed, double sd = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

/// x compressed with the real pipeline at an absolute bound (one thread) and decompressed.
inline std::vector<float> round_trip(const std::vector<float>& x, const ebac::extents& shape, double eb,
                                     const char* pipeline = "fast") {
  ebac::pipeline_spec spec;
  REQUIRE(ebac::parse_pipeline(pipeline, spec));
  ebac::compress_options opt;
  opt.bound = {eb, ebac::bound_mode::absolute};
  opt.threads = 1;
  const auto stream = ebac::with_pipeline(spec, shape, [&](auto p) { return ebac::host::compress(x.data(), shape, p, opt); });
  return ebac::host::decompress<float>(stream.data(), stream.size(), 1);
}

struct outcome {
  double predicted, measured, iid, coherent_share;
  std::vector<float> y;
};

/// Compresses x with the real "fast" pipeline at an absolute bound, then
/// predicts (model) and measures (reference gradients) the weight-gradient error.
inline outcome run_layer(const em::conv2d_geometry& g, const std::vector<float>& x, const std::vector<float>& dy, double eb,
                         const char* pipeline = "fast") {
  const ebac::extents shape{static_cast<std::uint64_t>(g.batch), static_cast<std::uint64_t>(g.in_channels),
                            static_cast<std::uint64_t>(g.in_h), static_cast<std::uint64_t>(g.in_w)};
  outcome r;
  r.y = round_trip(x, shape, eb, pipeline);
  const em::flat_mask mask = em::find_flat_mask(g, x.data());
  std::vector<double> w0(static_cast<std::size_t>(g.weight_count())), w1(w0.size());
  REQUIRE(em::weight_gradient(g, x.data(), dy.data(), w0.data()) == ebac::status::ok);
  auto ds = em::collect_output_gradient_statistics(g, dy.data(), mask);
  REQUIRE(em::weight_gradient(g, r.y.data(), dy.data(), w1.data()) == ebac::status::ok);
  ds.weight_grad_rms = em::rms(w1.data(), w1.size());  // the trainer's gradient RMS: computed with the reconstruction
  const auto es = em::collect_input_error_statistics(g, x.data(), r.y.data(), mask, eb);
  const auto p = em::weight_error_model{}(ds, es);
  REQUIRE(p.state == ebac::status::ok);
  r.measured = em::rms_difference(w1.data(), w0.data(), w0.size());
  r.predicted = p.sigma;
  r.iid = p.iid_sigma;
  r.coherent_share = p.coherent_share;
  return r;
}

inline em::conv2d_geometry conv(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t o, std::int64_t k,
                                std::int64_t stride = 1, std::int64_t pad = 0, std::int64_t dil = 1, std::int64_t groups = 1) {
  em::conv2d_geometry g;
  g.batch = n;
  g.in_channels = c;
  g.in_h = h;
  g.in_w = w;
  g.out_channels = o;
  g.kernel_h = g.kernel_w = k;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.dilation_h = g.dilation_w = dil;
  g.groups = groups;
  return g;
}

}  // namespace
