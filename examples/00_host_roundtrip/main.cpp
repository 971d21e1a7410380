// The ebac C++ API in one page: compress an activation-like tensor on the
// host under a relative error bound, decompress it, and check the promise.
//
//   host_roundtrip [PIPELINE] [EB]      defaults: every named pipeline, 1e-2
#include <ebac/ebac.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const double eb = argc > 2 ? std::atof(argv[2]) : 1e-2;
  // A post-ReLU-like N x C x H x W tensor: smooth fields, about half zeros.
  const ebac::extents shape{8, 16, 28, 28};
  std::uint64_t n = 0;
  (void)shape.count(n);
  std::vector<float> act(n);
  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.f, 0.05f);
  for (std::uint64_t i = 0; i < n; ++i) {
    const double h = static_cast<double>((i / 28) % 28), w = static_cast<double>(i % 28), c = static_cast<double>((i / 784) % 16);
    const float v = static_cast<float>(std::sin(0.3 * h + c) * std::cos(0.2 * w - c)) + noise(rng);
    act[i] = v > 0 ? v : 0.f;
  }

  ebac::compress_options opt;
  opt.bound = {eb, ebac::bound_mode::relative};  // |x - y| <= eb * (max - min)
  opt.checksum = true;

  std::vector<std::string> names;
  if (argc > 1) names.push_back(argv[1]);
  else
    for (auto s : ebac::pipeline_names) names.emplace_back(s);

  int failures = 0;
  for (const auto& name : names) {
    ebac::pipeline_spec spec;
    if (!ebac::parse_pipeline(name, spec)) {
      std::fprintf(stderr, "unknown pipeline %s\n", name.c_str());
      return 2;
    }
    try {
      // Pick the concrete pipeline type at run time; compress returns the stream.
      const std::vector<std::byte> stream =
          ebac::with_pipeline(spec, shape, [&](auto p) { return ebac::host::compress(act.data(), shape, p, opt); });
      const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
      std::vector<float> back(n);
      ebac::host::decompress(stream.data(), stream.size(), back.data(), n);

      double max_err = 0;
      bool zeros_kept = true;
      for (std::uint64_t i = 0; i < n; ++i) {
        max_err = std::fmax(max_err, std::fabs(static_cast<double>(act[i]) - back[i]));
        zeros_kept &= (act[i] == 0.f) == (back[i] == 0.f);
      }
      // Zeros (and signs) are promised unless the stream names the linear
      // quantizer (a ...:linear:... triple, or max-bound's choice).
      const bool zeros_promised = h.quantizer != ebac::quantizer_id::linear;
      const bool ok = max_err <= h.eb_abs && (zeros_kept || !zeros_promised);
      failures += !ok;
      std::printf("%-10s ratio %6.2fx  eb_abs %.4g  max error %.4g  zeros kept: %s%s  %s\n", name.c_str(),
                  static_cast<double>(n * sizeof(float)) / static_cast<double>(stream.size()), h.eb_abs, max_err,
                  zeros_kept ? "yes" : "no", zeros_promised ? "" : " (not promised)", ok ? "ok" : "FAILED");
    } catch (const ebac::error& e) {  // ebac reports what was wrong
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
      ++failures;
    }
  }
  return failures ? 1 : 0;
}
