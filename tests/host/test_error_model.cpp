// The gradient-error model (error_model/): its pieces against brute force,
// and its predictions against weight-gradient errors measured with the real
// compressor on synthetic data whose statistics are known. Tolerances come
// from the chi-square distribution of a measured RMS (error_model/sampling.hpp)
// at two-sided 99.9%, with the degrees of freedom stated per test.
#include "test_support.hpp"

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
#include <ebac/error_model/layernorm_model.hpp>
#include <ebac/error_model/layer_geometry.hpp>
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

std::vector<float> normal(std::size_t n, std::uint32_t seed, double sd = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

/// x compressed with the real pipeline at an absolute bound (one thread) and decompressed.
std::vector<float> round_trip(const std::vector<float>& x, const ebac::extents& shape, double eb, const char* pipeline = "fast") {
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
outcome run_layer(const em::conv2d_geometry& g, const std::vector<float>& x, const std::vector<float>& dy, double eb,
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

em::conv2d_geometry conv(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t o, std::int64_t k,
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

TEST_SUITE("host") {
  TEST_CASE("error_model: geometry follows PyTorch's output-size rule and rejects impossible layers") {
    const auto g = conv(2, 4, 9, 7, 6, 3, 2, 1, 2, 2);
    CHECK(g.validate() == ebac::status::ok);
    CHECK(g.out_h() == (9 + 2 - 2 * 2 - 1) / 2 + 1);
    CHECK(g.out_w() == (7 + 2 - 2 * 2 - 1) / 2 + 1);
    CHECK(g.weight_count() == 6 * 2 * 9);
    CHECK(conv(1, 3, 8, 8, 4, 3, 1, 0, 1, 2).validate() == ebac::status::invalid_argument);  // 3 % 2
    CHECK(conv(1, 2, 2, 2, 2, 5).validate() == ebac::status::invalid_argument);              // kernel larger than input
    CHECK(conv(1, 2, 2, 2, 2, 3, 1, -1).validate() == ebac::status::invalid_argument);
    static_assert(em::conv2d_geometry::linear(16, 128, 10).weight_count() == 1280);
    // Taps reading the zero padding do not count: a 3x3 "same" conv on 7x7
    // has (19/7)^2 valid taps per output position on average.
    CHECK(conv(1, 1, 7, 7, 1, 3, 1, 1).effective_taps() == doctest::Approx(19.0 * 19.0 / 49.0));
    CHECK(conv(1, 1, 7, 7, 1, 1).effective_taps() == 1.0);
  }

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

  TEST_CASE("error_model: the energy pyramid is an orthonormal split of the field's energy") {
    // Sum over cells of mean + deviation energy = sum of squares, for any grid
    // (odd sizes give partial edge blocks and parents with 1 or 2 children).
    for (auto [n, c, h, w] :
         {std::array<std::int64_t, 4>{3, 2, 7, 5}, {1, 1, 1, 1}, {4, 3, 16, 16}, {2, 1, 1, 9}, {5, 2, 13, 1}}) {
      const auto f = normal(static_cast<std::size_t>(n * c * h * w), 7);
      const auto p = em::build_energy_pyramid(
          n, c, h, w, [&](auto i, auto j, auto a, auto b) { return f[static_cast<std::size_t>(((i * c + j) * h + a) * w + b)]; });
      double sq = 0;
      for (float v : f) sq += static_cast<double>(v) * v;
      CHECK(p.total_energy() == doctest::Approx(sq).epsilon(1e-9));
      for (const auto& l : p.levels) {
        for (double v : l.mean_energy) CHECK(v >= 0);
        for (double v : l.dev_energy) CHECK(v >= 0);
      }
    }
  }

  TEST_CASE("error_model: on a 1x1 grid the pyramid pairing is the batch mean/deviation split of a linear layer") {
    // For a linear layer sum_{o,c} E_oc^2 with E = dy^T e: the batch-mean part
    // is (sum_o S_o^2)(sum_c m_c^2) N-scaled, the deviations pair per sample.
    const std::int64_t N = 6, O = 3, C = 4;
    const auto dy = normal(static_cast<std::size_t>(N * O), 3), e = normal(static_cast<std::size_t>(N * C), 4);
    const auto pd =
        em::build_energy_pyramid(N, O, 1, 1, [&](auto n, auto o, auto, auto) { return dy[static_cast<std::size_t>(n * O + o)]; });
    const auto pe =
        em::build_energy_pyramid(N, C, 1, 1, [&](auto n, auto c, auto, auto) { return e[static_cast<std::size_t>(n * C + c)]; });
    double mean_d = 0, mean_e = 0, dev = 0, dev_dd = 0;
    std::vector<double> md(O, 0), me(C, 0);
    for (std::int64_t n = 0; n < N; ++n) {
      for (std::int64_t o = 0; o < O; ++o) md[o] += static_cast<double>(dy[n * O + o]) / N;
      for (std::int64_t c = 0; c < C; ++c) me[c] += static_cast<double>(e[n * C + c]) / N;
    }
    for (double v : md) mean_d += N * v * v;
    for (double v : me) mean_e += N * v * v;
    for (std::int64_t n = 0; n < N; ++n) {
      double a = 0, b = 0;
      for (std::int64_t o = 0; o < O; ++o) a += (dy[n * O + o] - md[o]) * (dy[n * O + o] - md[o]);
      for (std::int64_t c = 0; c < C; ++c) b += (e[n * C + c] - me[c]) * (e[n * C + c] - me[c]);
      dev += a * b / ((N - 1.0) / N);
      dev_dd += a * a / ((N - 1.0) / N);
    }
    CHECK(em::pyramid_inner(pd, pe) == doctest::Approx(mean_d * mean_e + dev).epsilon(1e-9));
    CHECK(em::pyramid_inner(pe, pd) == doctest::Approx(mean_d * mean_e + dev).epsilon(1e-9));
    // A field paired with itself: its mean energy squared plus each sample's
    // deviation energy squared, over the same (N-1)/N share.
    CHECK(em::pyramid_inner(pd, pd) == doctest::Approx(mean_d * mean_d + dev_dd).epsilon(1e-9));
    // One sample: no deviation part (a batch of one has no spread).
    const auto p1 =
        em::build_energy_pyramid(1, O, 1, 1, [&](auto, auto o, auto, auto) { return dy[static_cast<std::size_t>(o)]; });
    double sq1 = 0;
    for (std::int64_t o = 0; o < O; ++o) sq1 += static_cast<double>(dy[o]) * dy[o];
    CHECK(em::pyramid_inner(p1, p1) == doctest::Approx(sq1 * sq1).epsilon(1e-9));
    const auto other = em::build_energy_pyramid(N, C, 2, 1, [](auto, auto, auto, auto) { return 1.0; });
    CHECK(em::pyramid_inner(pd, other) < 0);  // different grids are refused
  }

  TEST_CASE("error_model: closed-form squared errors match the quantizers, zeros are exact, small values are biased") {
    const double eb = 0.01;
    const auto sq = ebac::sign_preserving_quantizer::make(eb);
    const auto lq = ebac::linear_quantizer::make(eb);
    std::vector<float> x, ys, yl;
    for (int i = 0; i <= 400; ++i) x.push_back(static_cast<float>(i * 0.5 * eb / 100));  // [0, 2eb]
    ys.resize(x.size());
    yl.resize(x.size());
    em::reconstruct_like_decoder(sq, x.data(), x.size(), ys.data());
    em::reconstruct_like_decoder(lq, x.data(), x.size(), yl.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double es = static_cast<double>(ys[i]) - x[i], el = static_cast<double>(yl[i]) - x[i];
      if (x[i] == 0) {
        CHECK(es == 0);
        CHECK(el == 0);
        continue;
      }
      if (x[i] <= 2 * eb * (1 - 1e-6))
        CHECK(es * es == doctest::Approx(em::sign_preserving_square_error{eb}(x[i])).epsilon(1e-5));
      if (x[i] < eb * (1 - 1e-6)) CHECK(el * el == doctest::Approx(em::linear_square_error{eb}(x[i])).epsilon(1e-5));
    }
    // Away from zero the error is uniform: mean e^2 = eb^2 / 3 within the
    // chi-square-like sampling interval of a mean of n bounded terms (sd of
    // e^2 for a uniform e is eb^2 * sqrt(4/45), so 4 sd of the mean is tiny).
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(3 * eb, 500 * eb);
    const std::size_t n = 200000;
    std::vector<float> big(n), back(n);
    for (auto& v : big) v = static_cast<float>(u(rng));
    em::reconstruct_like_decoder(sq, big.data(), n, back.data());
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m += (static_cast<double>(back[i]) - big[i]) * (static_cast<double>(back[i]) - big[i]);
    m /= static_cast<double>(n);
    CHECK(std::fabs(m / (eb * eb / 3) - 1) < 4 * std::sqrt(4.0 / 45.0) * 3 / std::sqrt(static_cast<double>(n)));
    static_assert(em::sign_preserving_square_error{1}(0) == 0);
    static_assert(em::sign_preserving_square_error{1}(0.5) == 0.25);
    static_assert(em::linear_square_error{1}(0.5) == 0.25);
  }

  TEST_CASE("error_model: the flat mask finds a repeated background and ignores zeros") {
    const auto g = conv(2, 3, 6, 6, 1, 1);
    std::vector<float> x(static_cast<std::size_t>(g.input_count()));
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> u(1, 2);
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t i = 0; i < 36; ++i) {
          float v = u(rng);
          if (i < 18 && c < 2) v = c == 0 ? -0.8f : 0.25f;  // background in channels 0 and 1
          if (c == 2 && i % 2 == 0) v = 0;                  // channel 2: many zeros, no repeats
          x[static_cast<std::size_t>((n * 3 + c) * 36 + i)] = v;
        }
    const auto m = em::find_flat_mask(g, x.data());
    CHECK(m.dominant_channels == 2);
    CHECK(m.flat_positions == 2 * 18);
    CHECK(m.at(1, 0, 5));
    CHECK_FALSE(m.at(1, 5, 5));
    const auto none = em::find_flat_mask(g, x.data(), 0.9);
    CHECK(none.flat_positions == 0);
  }

  TEST_CASE("error_model: prediction matches measured error on white data (linear and conv incl. stride/dilation/groups)") {
    // x continuous (no repeated values) and dy white: the model's assumptions
    // hold, and the entries of the error are close to independent, so
    // measured/predicted must lie in the 99.9% chi-square interval with
    // dof = number of weights.
    struct layer_case {
      em::conv2d_geometry g;
      double eb;
    };
    const layer_case cases[] = {
        {em::conv2d_geometry::linear(16, 96, 40), 0.02}, {conv(4, 8, 12, 12, 16, 3, 1, 1), 0.05},
        {conv(4, 8, 13, 11, 16, 3, 2, 1, 2), 0.01},      {conv(4, 16, 10, 10, 16, 3, 1, 1, 1, 16), 0.03},  // depthwise
        {conv(4, 12, 9, 9, 24, 1, 2, 0, 1, 3), 0.02},
    };
    std::uint32_t seed = 11;
    for (const auto& lc : cases) {
      const auto& g = lc.g;
      auto x = normal(static_cast<std::size_t>(g.input_count()), seed++);
      for (auto& v : x) v = std::max(v, 0.0f);  // post-ReLU: half exact zeros
      const auto dy = normal(static_cast<std::size_t>(g.output_count()), seed++);
      const outcome r = run_layer(g, x, dy, lc.eb);
      const auto iv = em::sampling_interval(static_cast<double>(g.weight_count()));
      INFO("weights " << g.weight_count() << " predicted " << r.predicted << " measured " << r.measured);
      CHECK(r.measured / r.predicted >= iv.low);
      CHECK(r.measured / r.predicted <= iv.high);
    }
  }

  TEST_CASE("error_model: a repeated background with coherent output gradients is predicted, the i.i.d. model misses it") {
    // Half of every image is one value (an image background), and the output
    // gradient has a per-(sample, channel) constant part: the background's
    // single error adds up coherently. The entries are then correlated across
    // input channels and taps; the independent directions are the output
    // channels and samples, so dof = O (64).
    const auto g = conv(4, 2, 16, 16, 64, 3, 1, 1);
    auto x = normal(static_cast<std::size_t>(g.input_count()), 21);
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t h = 0; h < 16; ++h)
          for (std::int64_t w = 0; w < 8; ++w) x[static_cast<std::size_t>(((n * 2 + c) * 16 + h) * 16 + w)] = -0.8101983f;
    auto dy = normal(static_cast<std::size_t>(g.output_count()), 22, 0.3);
    const auto offs = normal(static_cast<std::size_t>(4 * 64), 23);
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t o = 0; o < 64; ++o)
        for (std::int64_t i = 0; i < 256; ++i)
          dy[static_cast<std::size_t>((n * 64 + o) * 256 + i)] += offs[static_cast<std::size_t>(n * 64 + o)];
    const double eb = 0.0173;  // puts the background value mid-way between bin centre and edge
    const outcome r = run_layer(g, x, dy, eb);
    const auto iv = em::sampling_interval(64);
    INFO("predicted " << r.predicted << " measured " << r.measured << " iid " << r.iid << " coherent share " << r.coherent_share);
    CHECK(r.coherent_share > 0.5);
    CHECK(r.measured / r.predicted >= iv.low);
    CHECK(r.measured / r.predicted <= iv.high);
    CHECK(r.iid / r.measured < iv.low);  // the i.i.d. model is outside the interval
  }

  TEST_CASE(
      "error_model: coarse bound on two-signed inputs with a coherent gradient: only the first-bin error's line carries kappa") {
    // x ~ N(0, 1) (a LayerNorm output: two-signed, dense) and dy = x W^T + noise,
    // so the weight gradient sum_r dy_r x_r^T is far more coherent than noise
    // (kappa >> 1). At eb = 0.5 most elements are in the first bin, error
    // 0.5 sign(x) - x: its part along x adds up like the gradient, its sign
    // part like noise. Counting the whole first-bin error with kappa
    // over-predicted 2.29x (eb 0.5) and 1.87x (eb 0.25) here; with the line
    // split 1.30x and 1.26x. What is left: kappa is the coherence of all of x,
    // and the line lives on the first-bin elements only, whose sum against dy
    // is less coherent (docs/error-model.md 3.3). Never below: the safe side.
    const auto g = em::conv2d_geometry::linear(512, 64, 64);
    const auto x = normal(static_cast<std::size_t>(g.input_count()), 41);
    const auto w = normal(static_cast<std::size_t>(64 * 64), 42, 0.125);
    auto dy = normal(static_cast<std::size_t>(g.output_count()), 43, 0.5);
    for (std::int64_t r = 0; r < 512; ++r)
      for (std::int64_t o = 0; o < 64; ++o)
        for (std::int64_t c = 0; c < 64; ++c)
          dy[static_cast<std::size_t>(r * 64 + o)] +=
              w[static_cast<std::size_t>(o * 64 + c)] * x[static_cast<std::size_t>(r * 64 + c)];
    for (const double eb : {0.5, 0.25}) {
      const outcome r = run_layer(g, x, dy, eb);
      INFO("eb " << eb << " predicted " << r.predicted << " measured " << r.measured);
      CHECK(r.predicted / r.measured >= 1.0);
      CHECK(r.predicted / r.measured <= 1.4);
    }
  }

  TEST_CASE("error_model: the inverse map lands the measured error on the target") {
    const auto g = conv(4, 8, 12, 12, 16, 3, 1, 1);
    auto x = normal(static_cast<std::size_t>(g.input_count()), 31);
    for (auto& v : x) v = std::max(v, 0.0f);
    const auto dy = normal(static_cast<std::size_t>(g.output_count()), 32);
    const em::flat_mask mask = em::find_flat_mask(g, x.data());
    const auto ds = em::collect_output_gradient_statistics(g, dy.data(), mask);
    std::vector<float> y(x.size());
    auto sigma_of = [&](double eb) {
      em::reconstruct_like_decoder(ebac::sign_preserving_quantizer::make(eb), x.data(), x.size(), y.data());
      return em::weight_error_model{}(ds, em::collect_input_error_statistics(g, x.data(), y.data(), mask, eb)).sigma;
    };
    for (double target : {1e-3, 1e-2, 1e-1}) {
      const auto sol = em::bound_solver{}(target, 1e-3, sigma_of);
      REQUIRE(sol.state == ebac::status::ok);
      CHECK(sol.converged);
      const outcome r = run_layer(g, x, dy, sol.eb);
      const auto iv = em::sampling_interval(static_cast<double>(g.weight_count()));
      INFO("target " << target << " eb " << sol.eb << " measured " << r.measured);
      // Solver tolerance (2%) widens the sampling interval.
      CHECK(r.measured / target >= iv.low * 0.98);
      CHECK(r.measured / target <= iv.high * 1.02);
    }
  }

  TEST_CASE("error_model: inverse solver handles saw-tooth maps, zero sensitivity and bad input") {
    const em::bound_solver s;
    auto saw = [](double eb) { return 3 * eb * (1 + 0.05 * std::sin(eb * 4000)); };
    const auto a = s(0.03, 1e-4, saw);
    CHECK(a.state == ebac::status::ok);
    CHECK(std::fabs(a.predicted_sigma / 0.03 - 1) < 0.06);
    em::bound_solver capped;
    capped.eb_max = 0.5;
    const auto z = capped(0.1, 1e-3, [](double) { return 0.0; });
    CHECK(z.converged);
    CHECK(z.eb == 0.5);
    CHECK(s(-1, 1e-3, saw).state == ebac::status::invalid_argument);
    CHECK(s(0.1, 0, saw).state == ebac::status::invalid_argument);
  }

  TEST_CASE("error_model: the i.i.d. closed form is constexpr and inverts itself") {
    constexpr em::iid_weight_error m{9, 1000, 32, 0.5, 32 * 32 * 9};
    static_assert(m.slope() > 0);
    static_assert(m.inverse(m(0.01)) > 0.0099999 && m.inverse(m(0.01)) < 0.0100001);
    constexpr auto iv = em::sampling_interval(1000);
    static_assert(iv.low < 1 && iv.high > 1 && iv.high - iv.low < 0.25);
    CHECK(em::constexpr_sqrt(2.0) == doctest::Approx(std::sqrt(2.0)).epsilon(1e-15));
    CHECK(em::constexpr_sqrt(1e300) == doctest::Approx(1e150).epsilon(1e-14));
    CHECK(em::constexpr_pow_unit(8.0, 1.0 / 3.0) == doctest::Approx(2.0).epsilon(1e-9));
  }

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

TEST_SUITE("host") {
  TEST_CASE("error_model: level data (8-bit-like inputs) gets the documented conservative margin, other data none") {
    const auto g = conv(4, 1, 12, 12, 8, 3, 1, 1);
    auto cont = normal(static_cast<std::size_t>(g.input_count()), 31);
    std::vector<float> levels(cont.size());
    for (std::size_t i = 0; i < cont.size(); ++i)
      levels[i] = std::round(cont[i] * 8.0f) / 8.0f + 0.0625f;  // ~50 levels, no zeros
    const auto dy = normal(static_cast<std::size_t>(g.output_count()), 32);
    for (const auto* x : {&cont, &levels}) {
      const em::flat_mask mask = em::find_flat_mask(g, x->data());
      std::vector<double> w0(static_cast<std::size_t>(g.weight_count()));
      REQUIRE(em::weight_gradient(g, x->data(), dy.data(), w0.data()) == ebac::status::ok);
      auto ds = em::collect_output_gradient_statistics(g, dy.data(), mask);
      ds.weight_grad_rms = em::rms(w0.data(), w0.size());
      const outcome r = run_layer(g, *x, dy, 0.01);
      const auto es = em::collect_input_error_statistics(g, x->data(), r.y.data(), mask, 0.01);
      em::weight_error_model plain;
      plain.level_data_margin = 1;
      const auto p = em::weight_error_model{}(ds, es), q = plain(ds, es);
      REQUIRE(p.state == ebac::status::ok);
      if (x == &levels) {
        CHECK(p.repeated_share >= 0.9);  // a few tail values occur once
        CHECK(p.margin == 1.1);
        CHECK(p.sigma == doctest::Approx(1.1 * q.sigma));
      } else {
        CHECK(p.repeated_share < 0.1);
        CHECK(p.margin == 1.0);
        CHECK(p.sigma == q.sigma);
      }
    }
  }

}  // TEST_SUITE

TEST_SUITE("host") {
  TEST_CASE("error_model: channel moments (the statistics both backends collect) add up, skip non-finite values, merge") {
    const std::int64_t N = 3, C = 4, HW = 5;
    std::vector<float> x(static_cast<std::size_t>(N * C * HW));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0) ? 0.0f : static_cast<float>(i) * 0.25f - 7.0f;
    x[6] = NAN;
    x[22] = -INFINITY;
    const auto m = em::collect_channel_moments(x.data(), N, C, HW);
    REQUIRE(m.size() == 4);
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0, q = 0;
      std::uint64_t cnt = 0, nz = 0, bad = 0;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t i = 0; i < HW; ++i) {
          const float v = x[static_cast<std::size_t>((n * C + c) * HW + i)];
          if (!std::isfinite(v)) {
            ++bad;
            continue;
          }
          s += v;
          q += static_cast<double>(v) * v;
          ++cnt;
          nz += v != 0;
        }
      const auto& mc = m[static_cast<std::size_t>(c)];
      CHECK(mc.sum == s);
      CHECK(mc.sum_squares == q);
      CHECK(mc.count == cnt);
      CHECK(mc.nonzero == nz);
      CHECK(mc.non_finite == bad);
    }
    const auto t = em::total_moments(m);
    CHECK(t.count + t.non_finite == x.size());
    CHECK(t.non_finite == 2);
    // Splitting a channel anywhere and merging gives the same counts and sums
    // (exactly here: the values are multiples of 1/4 and small).
    const auto whole = em::collect_channel_moments(x.data(), 1, 1, static_cast<std::int64_t>(x.size()))[0];
    for (std::int64_t cut : {0, 1, 17, 59, 60}) {
      auto a = em::collect_channel_moments(x.data(), 1, 1, cut)[0];
      const auto b = em::collect_channel_moments(x.data() + cut, 1, 1, static_cast<std::int64_t>(x.size()) - cut)[0];
      a = em::merge_moments{}(a, b);
      CHECK(a.sum == whole.sum);
      CHECK(a.sum_squares == whole.sum_squares);
      CHECK(a.count == whole.count);
      CHECK(a.nonzero == whole.nonzero);
    }
    // RMS and mean over the finite values, summed here from x (exact: small
    // multiples of 1/4).
    double sq = 0, sum = 0;
    std::uint64_t finite = 0;
    for (float v : x)
      if (std::isfinite(v)) {
        sq += static_cast<double>(v) * v;
        sum += v;
        ++finite;
      }
    REQUIRE(finite == x.size() - 2);
    CHECK(whole.rms() == doctest::Approx(std::sqrt(sq / static_cast<double>(finite))).epsilon(1e-15));
    CHECK(whole.mean() == doctest::Approx(sum / static_cast<double>(finite)).epsilon(1e-15));
    CHECK(em::channel_moments{}.rms() == 0.0);  // nothing counted: 0, not NaN
    const ebac::float16 h[3] = {ebac::from_float<ebac::float16>(1.5f), ebac::from_float<ebac::float16>(0.0f),
                                ebac::from_float<ebac::float16>(-2.0f)};
    const auto hm = em::collect_channel_moments(h, 1, 1, 3)[0];
    CHECK(hm.sum == -0.5);
    CHECK(hm.nonzero == 2);
  }

}  // TEST_SUITE

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

TEST_SUITE("host") {
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
