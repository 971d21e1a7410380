// tests/error_model/batchnorm_model.cpp - the tests of include/ebac/error_model/batchnorm_model.hpp.
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
  TEST_CASE("error_model: batchnorm gamma- and input-gradient errors match the propagation functor") {
    // Training-mode BN backward in double with the saved (exact) mean and 1/s,
    // fed the original and the decompressed input.
    const std::int64_t N = 8, C = 48, H = 10, W = 10, M = N * H * W;
    em::conv2d_geometry g = conv(N, C, H, W, C, 1, 1, 0, 1, C);  // BN's gamma gradient is a depthwise 1x1 conv's
    const auto x = normal(static_cast<std::size_t>(g.input_count()), 41, 2.0);
    const auto dy = normal(static_cast<std::size_t>(g.output_count()), 42);
    const auto gam = normal(static_cast<std::size_t>(C), 43);
    std::vector<double> mean(C), inv(C);
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0, q = 0;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < H * W; ++i) s += x[static_cast<std::size_t>((n * C + c) * H * W + i)];
      mean[c] = s / M;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < H * W; ++i) q += std::pow(x[static_cast<std::size_t>((n * C + c) * H * W + i)] - mean[c], 2);
      inv[c] = 1 / std::sqrt(q / M + 1e-5);
    }
    auto backward = [&](const std::vector<float>& in, std::vector<double>& dg, std::vector<double>& dx) {
      dg.assign(C, 0);
      dx.assign(in.size(), 0);
      for (std::int64_t c = 0; c < C; ++c) {
        double sdy = 0, sdyx = 0;
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t i = 0; i < H * W; ++i) {
            const auto j = static_cast<std::size_t>((n * C + c) * H * W + i);
            sdy += dy[j];
            sdyx += dy[j] * (in[j] - mean[c]) * inv[c];
          }
        dg[c] = sdyx;
        for (std::int64_t n = 0; n < N; ++n)
          for (std::int64_t i = 0; i < H * W; ++i) {
            const auto j = static_cast<std::size_t>((n * C + c) * H * W + i);
            dx[j] = gam[c] * inv[c] * (dy[j] - sdy / M - (in[j] - mean[c]) * inv[c] * sdyx / M);
          }
      }
    };
    const outcome r = run_layer(g, x, dy, 0.05);
    std::vector<double> dg0, dx0, dg1, dx1;
    backward(x, dg0, dx0);
    backward(r.y, dg1, dx1);
    const em::flat_mask mask = em::find_flat_mask(g, x.data());
    const auto ds = em::collect_output_gradient_statistics(g, dy.data(), mask);
    const auto es = em::collect_input_error_statistics(g, x.data(), r.y.data(), mask, 0.05);
    const auto p = em::weight_error_model{}(ds, es);
    double pg = 0, px = 0, pa = 0, pb = 0, pb2 = 0, pg2 = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const em::batchnorm_channel_error b{gam[c], inv[c], static_cast<double>(M), dg1[c] / M, es.sum_squares[c] / M};
      const double gsq = b.gamma_grad_square(p.group_sum_squares[c]);
      pg += gsq / C;
      pg2 += gsq * gsq;
      px += b.input_grad_square(p.group_sum_squares[c]) / C;
      CHECK(b.input_grad_square(p.group_sum_squares[c]) ==
            doctest::Approx(b.input_grad_error_part(p.group_sum_squares[c]) + b.input_grad_shift_part(p.group_sum_squares[c])));
      pa += b.input_grad_error_part(p.group_sum_squares[c]);
      pb += b.input_grad_shift_part(p.group_sum_squares[c]);
      pb2 += std::pow(b.input_grad_shift_part(p.group_sum_squares[c]), 2);
    }
    const double mg = em::rms_difference(dg1.data(), dg0.data(), dg0.size());
    const double mx = em::rms_difference(dx1.data(), dx0.data(), dx0.size());
    // gamma: one entry per channel, weighted unequally by 1/s^2 (Satterthwaite:
    // dof = (sum w)^2 / sum w^2). dx: the e_j part has one term per element,
    // the xhat_j delta part one random delta per channel; combined by
    // Satterthwaite as well.
    const double dof_g = pg * C * pg * C / pg2;
    const double dof_x = (pa + pb) * (pa + pb) / (pa * pa / static_cast<double>(x.size()) + pb2);
    const auto ivg = em::sampling_interval(dof_g), ivx = em::sampling_interval(dof_x);
    INFO("gamma: predicted " << std::sqrt(pg) << " measured " << mg << " dof " << dof_g << "; dx: predicted " << std::sqrt(px)
                             << " measured " << mx << " dof " << dof_x);
    CHECK(mg / std::sqrt(pg) >= ivg.low);
    CHECK(mg / std::sqrt(pg) <= ivg.high);
    CHECK(mx / std::sqrt(px) >= ivx.low);
    CHECK(mx / std::sqrt(px) <= ivx.high);
  }

}  // TEST_SUITE
