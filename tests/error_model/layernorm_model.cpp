// tests/error_model/layernorm_model.cpp - the tests of include/ebac/error_model/layernorm_model.hpp.
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
  TEST_CASE("error_model: layernorm's input-gradient change is exact and its gamma- and input-gradient errors match the model") {
    // Rows (batch x tokens) of D features with per-row offsets and spreads, as
    // a transformer's residual stream has, so 1/s varies from row to row.
    const std::int64_t R = 16 * 24, D = 96;
    auto x = normal(static_cast<std::size_t>(R * D), 51);
    const auto level = normal(static_cast<std::size_t>(R), 52, 3.0), spread = normal(static_cast<std::size_t>(R), 53);
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t d = 0; d < D; ++d) {
        auto& v = x[static_cast<std::size_t>(r * D + d)];
        v = static_cast<float>(level[r] + (0.5 + std::fabs(spread[r])) * v);
      }
    const auto dy = normal(static_cast<std::size_t>(R * D), 54);
    const auto gam = normal(static_cast<std::size_t>(D), 55);
    const std::vector<double> gd(gam.begin(), gam.end());  // the test's arithmetic in double throughout
    const double eps = 1e-5;
    // The test's own LayerNorm: forward with statistics recomputed from its
    // input, and backward in the textbook form with the given saved statistics.
    auto stats = [&](const std::vector<float>& in, std::vector<double>& mu, std::vector<double>& inv) {
      mu.assign(R, 0);
      inv.assign(R, 0);
      for (std::int64_t r = 0; r < R; ++r) {
        double s = 0, q = 0;
        for (std::int64_t d = 0; d < D; ++d) s += in[static_cast<std::size_t>(r * D + d)];
        mu[r] = s / D;
        for (std::int64_t d = 0; d < D; ++d) q += std::pow(in[static_cast<std::size_t>(r * D + d)] - mu[r], 2);
        inv[r] = 1 / std::sqrt(q / D + eps);
      }
    };
    std::vector<double> mu, inv;
    stats(x, mu, inv);
    auto backward = [&](const std::vector<float>& in, std::vector<double>& dg, std::vector<double>& dx) {
      dg.assign(D, 0);
      dx.assign(in.size(), 0);
      for (std::int64_t r = 0; r < R; ++r) {
        double sg = 0, sgx = 0;
        for (std::int64_t d = 0; d < D; ++d) {
          const auto j = static_cast<std::size_t>(r * D + d);
          const double xh = (in[j] - mu[r]) * inv[r];
          dg[d] += dy[j] * xh;
          sg += gd[d] * dy[j];
          sgx += gd[d] * dy[j] * xh;
        }
        for (std::int64_t d = 0; d < D; ++d) {
          const auto j = static_cast<std::size_t>(r * D + d);
          dx[j] = inv[r] * (gd[d] * dy[j] - sg / D - (in[j] - mu[r]) * inv[r] * sgx / D);
        }
      }
    };
    std::vector<double> dg0, dx0;
    backward(x, dg0, dx0);
    {  // the backward above is the derivative of sum(dy * LayerNorm(x)): central differences at a few entries
      auto loss = [&](const std::vector<double>& in, std::int64_t r) {
        double s = 0, q = 0, l = 0;
        for (std::int64_t d = 0; d < D; ++d) s += in[static_cast<std::size_t>(d)];
        for (std::int64_t d = 0; d < D; ++d) q += std::pow(in[static_cast<std::size_t>(d)] - s / D, 2);
        for (std::int64_t d = 0; d < D; ++d)
          l += dy[static_cast<std::size_t>(r * D + d)] * gd[d] * (in[static_cast<std::size_t>(d)] - s / D) /
               std::sqrt(q / D + eps);
        return l;
      };
      for (const std::int64_t j : {0L, 7L, 5 * D + 3, (R - 1) * D + D - 1}) {
        const std::int64_t r = j / D;
        std::vector<double> row(x.begin() + r * D, x.begin() + (r + 1) * D);
        const double h = 1e-4;
        row[static_cast<std::size_t>(j % D)] += h;
        const double up = loss(row, r);
        row[static_cast<std::size_t>(j % D)] -= 2 * h;
        const double down = loss(row, r);
        CHECK((up - down) / (2 * h) == doctest::Approx(dx0[static_cast<std::size_t>(j)]).epsilon(1e-5));
      }
    }
    // The library's statistics and reference backward agree with the test's.
    std::vector<double> lmu(R), linv(R), ldg, ldx;
    for (std::int64_t r = 0; r < R; ++r) em::layernorm_saved_statistics(D, x.data() + r * D, eps, lmu[r], linv[r]);
    for (std::int64_t r = 0; r < R; ++r) {
      CHECK(lmu[r] == doctest::Approx(mu[r]).epsilon(1e-12));
      CHECK(linv[r] == doctest::Approx(inv[r]).epsilon(1e-12));
    }
    REQUIRE(em::layernorm_backward(R, D, x.data(), lmu, linv, dy.data(), gam.data(), ldg, ldx) == ebac::status::ok);
    CHECK(em::rms_difference(ldx.data(), dx0.data(), dx0.size()) <= 1e-12 * em::rms(dx0.data(), dx0.size()));
    CHECK(em::rms_difference(ldg.data(), dg0.data(), dg0.size()) <= 1e-12 * em::rms(dg0.data(), dg0.size()));
    CHECK(em::layernorm_backward(0, D, x.data(), lmu, linv, dy.data(), gam.data(), ldg, ldx) == ebac::status::invalid_argument);

    const em::conv2d_geometry g = em::layernorm_gamma_geometry(R, D);
    REQUIRE(g.validate() == ebac::status::ok);
    const ebac::extents shape{static_cast<std::uint64_t>(R), static_cast<std::uint64_t>(D)};
    for (const double eb : {0.01, 0.1}) {
      CAPTURE(eb);
      const auto y = round_trip(x, shape, eb);
      std::vector<double> dg1, dx1;
      backward(y, dg1, dx1);
      // The exact change, row by row, from the functor.
      double worst = 0;
      std::vector<double> m1(R);
      for (std::int64_t r = 0; r < R; ++r) {
        double sgx = 0, sge = 0;
        for (std::int64_t d = 0; d < D; ++d) {
          const auto j = static_cast<std::size_t>(r * D + d);
          sgx += gd[d] * dy[j] * (x[j] - mu[r]) * inv[r];
          sge += gd[d] * dy[j] * (static_cast<double>(y[j]) - x[j]);
        }
        const em::layernorm_row_backward b{mu[r], inv[r], sgx / D, sge / D * inv[r]};
        for (std::int64_t d = 0; d < D; ++d) {
          const auto j = static_cast<std::size_t>(r * D + d);
          worst = std::max(worst, std::fabs(b.input_grad_change(x[j], static_cast<double>(y[j]) - x[j]) - (dx1[j] - dx0[j])));
        }
      }
      CHECK(worst <= 1e-9 * em::rms(dx0.data(), dx0.size()));
      // The expected errors from the trainer's statistics.
      const auto sdy = em::layernorm_scaled_output_gradient(R, D, dy.data(), inv);
      const em::flat_mask mask = em::find_flat_mask(g, x.data());
      const auto ds = em::collect_output_gradient_statistics(g, sdy.data(), mask);
      const auto es = em::collect_input_error_statistics(g, x.data(), y.data(), mask, eb);
      const auto p = em::weight_error_model{}(ds, es);
      REQUIRE(p.state == ebac::status::ok);
      double pg = 0, pg2 = 0, pa = 0, pb = 0, pb2 = 0;
      for (std::int64_t d = 0; d < D; ++d) {
        pg += p.group_sum_squares[d] / D;
        pg2 += p.group_sum_squares[d] * p.group_sum_squares[d];
      }
      for (std::int64_t r = 0; r < R; ++r) {
        em::layernorm_row_error e;
        e.inv_std = inv[r];
        e.features = D;
        double sgx = 0;
        for (std::int64_t d = 0; d < D; ++d) {
          const auto j = static_cast<std::size_t>(r * D + d);
          sgx += gd[d] * dy[j] * (y[j] - mu[r]) * inv[r];  // m1 as backward computes it, from the decompressed input
          e.sum_sq_gdy += std::pow(gd[d] * dy[j], 2);
          e.mean_sq_error += std::pow(static_cast<double>(y[j]) - x[j], 2) / D;
        }
        e.m1 = sgx / D;
        CHECK(e.input_grad_square() == doctest::Approx(e.input_grad_error_part() + e.input_grad_shift_part()));
        pa += e.input_grad_error_part() / R;
        pb += e.input_grad_shift_part() / R;
        pb2 += std::pow(e.input_grad_shift_part() / R, 2);
      }
      CHECK(em::layernorm_input_grad_mean_square(R, D, x.data(), y.data(), mu, inv, dy.data(), gam.data()) ==
            doctest::Approx(pa + pb).epsilon(1e-9));
      const double mg = em::rms_difference(dg1.data(), dg0.data(), dg0.size());
      const double mx = em::rms_difference(dx1.data(), dx0.data(), dx0.size());
      // Satterthwaite degrees of freedom, as for batchnorm: gamma has D
      // unequally weighted entries; dx one term per element plus one random
      // delta per row.
      const double dof_g = pg * D * pg * D / pg2;
      const double dof_x = (pa + pb) * (pa + pb) / (pa * pa / static_cast<double>(x.size()) + pb2);
      const auto ivg = em::sampling_interval(dof_g), ivx = em::sampling_interval(dof_x);
      INFO("gamma: predicted " << std::sqrt(pg) << " measured " << mg << " dof " << dof_g << "; dx: predicted "
                               << std::sqrt(pa + pb) << " measured " << mx << " dof " << dof_x);
      CHECK(mg / std::sqrt(pg) >= ivg.low);
      CHECK(mg / std::sqrt(pg) <= ivg.high);
      CHECK(mx / std::sqrt(pa + pb) >= ivx.low);
      CHECK(mx / std::sqrt(pa + pb) <= ivx.high);
    }
  }

}  // TEST_SUITE
