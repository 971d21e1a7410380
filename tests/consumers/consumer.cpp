// A downstream program: what a user who only has ebac::ebac can write. Shared
// by the find_package and add_subdirectory consumer builds. Exits non-zero
// when a round trip breaks the bound.
#include <ebac/ebac.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = std::sin(0.05f * static_cast<float>(i)) * 3.0f;
    x[i] = v > 0 ? v : 0.0f;  // post-ReLU-like: half zeros
  }
  const ebac::extents shape{10, 100};
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::absolute};

  int failures = 0;
  for (const auto name : ebac::pipeline_names) {
    ebac::pipeline_spec spec;
    if (!ebac::parse_pipeline(name, spec)) {
      std::fprintf(stderr, "pipeline '%.*s' does not parse\n", static_cast<int>(name.size()), name.data());
      return 1;
    }
    const auto stream = ebac::with_pipeline(spec, shape, [&](auto p) { return ebac::host::compress(x.data(), shape, p, opt); });
    const auto y = ebac::host::decompress<float>(stream.data(), stream.size());
    if (y.size() != x.size()) {
      std::fprintf(stderr, "%.*s: %zu elements back, expected %zu\n", static_cast<int>(name.size()), name.data(), y.size(),
                   x.size());
      return 1;
    }
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!(std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])) <= opt.bound.value)) {
        std::fprintf(stderr, "%.*s: |x - y| > eb at %zu (x=%g, y=%g)\n", static_cast<int>(name.size()), name.data(), i, x[i],
                     y[i]);
        ++failures;
        break;
      }
    std::printf("%.*s: %zu -> %zu bytes\n", static_cast<int>(name.size()), name.data(), x.size() * sizeof(float), stream.size());
  }
  return failures == 0 ? 0 : 1;
}
