// tests/error_model/weight_error_model.cpp - the tests of include/ebac/error_model/weight_error_model.hpp.
//
// The gradient-error model (error_model/): its pieces against brute force,
// and its predictions against weight-gradient errors measured with the real
// compressor on synthetic data whose statistics are known. Tolerances come
// from the chi-square distribution of a measured RMS (error_model/sampling.hpp)
// at two-sided 99.9%, with the degrees of freedom stated per test.
//
// The gradient-error model against weight-gradient errors measured on real
// (activation, output-gradient) pairs: the bundled corpus (data/corpus,
// written by studies/make_corpus.py --grad-output; layers.tsv lists each
// conv/linear layer with its saved input, dL/dy and hyper-parameters).
//
// Tolerance, per (layer, bound): the band 0.8 <= predicted/measured
// <= 1.25, widened by the sampling interval of a measured sigma (two-sided
// 99.9% chi-square, error_model/sampling.hpp) at the prediction's effective
// degrees of freedom - the measured error of a layer whose error is one
// coherent sum per output channel scatters far more than that of a layer
// with thousands of independent entries, and the test says by how much
// instead of picking a number.
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
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace em = ebac::error_model;

TEST_SUITE("host") {
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

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) v.push_back(item);
  return v;
}

std::vector<std::int64_t> ints(const std::string& s) {
  std::vector<std::int64_t> v;
  for (const auto& p : split(s, ',')) v.push_back(std::stoll(p));
  return v;
}

bool read_f32(const std::string& path, std::size_t n, std::vector<float>& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out.resize(n);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * 4));
  return static_cast<std::size_t>(f.gcount()) == n * 4 && f.peek() == EOF;
}

struct corpus_layer {
  std::string module;
  em::conv2d_geometry g;
  std::vector<float> x, dy;
};

std::vector<corpus_layer> load_layers() {
  std::vector<corpus_layer> out;
  const std::string dir = EBAC_CORPUS_DIR;
  std::ifstream f(dir + "/layers.tsv");
  if (!f) return out;
  std::string line;
  std::vector<std::string> cols;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    auto v = split(line, '\t');
    if (cols.empty()) {
      cols = v;
      continue;
    }
    std::map<std::string, std::string> r;
    for (std::size_t i = 0; i < cols.size() && i < v.size(); ++i) r[cols[i]] = v[i];
    if (r["in_file"] == "-" || r["grad_file"] == "-") continue;
    corpus_layer L;
    L.module = r["module"];
    const auto in = ints(r["input_shape"]), w = ints(r["weight_shape"]);
    if (r["type"] == "Linear") {
      L.g = em::conv2d_geometry::linear(in[0], w[1], w[0]);
    } else if (r["type"] == "Conv2d") {
      const auto st = ints(r["stride"]), pd = ints(r["padding"]), dl = ints(r["dilation"]);
      L.g.batch = in[0];
      L.g.in_channels = in[1];
      L.g.in_h = in[2];
      L.g.in_w = in[3];
      L.g.out_channels = w[0];
      L.g.kernel_h = w[2];
      L.g.kernel_w = w[3];
      L.g.stride_h = st[0];
      L.g.stride_w = st[1];
      L.g.pad_h = pd[0];
      L.g.pad_w = pd[1];
      L.g.dilation_h = dl[0];
      L.g.dilation_w = dl[1];
      L.g.groups = std::stoll(r["groups"]);
    } else {
      continue;
    }
    REQUIRE(L.g.validate() == ebac::status::ok);
    REQUIRE(read_f32(dir + "/" + r["in_file"], static_cast<std::size_t>(L.g.input_count()), L.x));
    REQUIRE(read_f32(dir + "/" + r["grad_file"], static_cast<std::size_t>(L.g.output_count()), L.dy));
    out.push_back(std::move(L));
  }
  return out;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("error_model corpus: predicted vs measured weight-gradient error on real layers") {
    const auto layers = load_layers();
    if (layers.empty()) {
      MESSAGE("no " EBAC_CORPUS_DIR "/layers.tsv: skipped (run studies/make_corpus.py --grad-output)");
      return;
    }
    ebac::pipeline_spec spec;
    REQUIRE(ebac::parse_pipeline("fast", spec));
    int pairs = 0, in_band = 0;
    for (const auto& L : layers) {
      const auto& g = L.g;
      const em::flat_mask mask = em::find_flat_mask(g, L.x.data());
      std::vector<double> w0(static_cast<std::size_t>(g.weight_count())), w1(w0.size());
      REQUIRE(em::weight_gradient(g, L.x.data(), L.dy.data(), w0.data()) == ebac::status::ok);
      auto ds = em::collect_output_gradient_statistics(g, L.dy.data(), mask);
      ebac::extents shape{static_cast<std::uint64_t>(g.batch), static_cast<std::uint64_t>(g.in_channels),
                          static_cast<std::uint64_t>(g.in_h), static_cast<std::uint64_t>(g.in_w)};
      if (g.in_h == 1 && g.in_w == 1)
        shape = ebac::extents{static_cast<std::uint64_t>(g.batch), static_cast<std::uint64_t>(g.in_channels)};
      for (double rel : {1e-3, 1e-2, 1e-1}) {
        ebac::compress_options opt;
        opt.bound = {rel, ebac::bound_mode::relative};
        opt.threads = 1;
        const auto stream =
            ebac::with_pipeline(spec, shape, [&](auto p) { return ebac::host::compress(L.x.data(), shape, p, opt); });
        const double eb = ebac::host::inspect(stream.data(), stream.size()).eb_abs;
        const auto y = ebac::host::decompress<float>(stream.data(), stream.size(), 1);
        REQUIRE(em::weight_gradient(g, y.data(), L.dy.data(), w1.data()) == ebac::status::ok);
        ds.weight_grad_rms = em::rms(w1.data(), w1.size());  // the gradient the trainer has: with the reconstruction
        const auto p = em::weight_error_model{}(ds, em::collect_input_error_statistics(g, L.x.data(), y.data(), mask, eb));
        REQUIRE(p.state == ebac::status::ok);
        const double measured = em::rms_difference(w1.data(), w0.data(), w0.size());
        const double ratio = p.sigma / measured;
        const auto iv = em::sampling_interval(p.effective_dof);
        // predicted/measured = (predicted/true) / (measured/true): the band on
        // the first factor, the sampling interval on the second.
        INFO(L.module << " rel " << rel << ": predicted " << p.sigma << " measured " << measured << " ratio " << ratio << " dof "
                      << p.effective_dof << " allowed [" << 0.8 / iv.high << ", " << 1.25 / iv.low << "]");
        CHECK(ratio >= 0.8 / iv.high);
        CHECK(ratio <= 1.25 / iv.low);
        ++pairs;
        in_band += (ratio >= 0.8 && ratio <= 1.25);
      }
    }
    MESSAGE(in_band << " of " << pairs << " (layer, bound) pairs inside 0.8..1.25");
  }

}  // TEST_SUITE
