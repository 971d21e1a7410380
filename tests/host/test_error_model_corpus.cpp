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
#include "test_support.hpp"

#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/error_model/sampling.hpp>
#include <ebac/error_model/weight_error_model.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace em = ebac::error_model;

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
