// Writes a seed corpus for fuzz_decompress: valid streams from every named
// pipeline plus explicit predictor:quantizer:encoder triples, for each dtype,
// several shapes, data kinds (smooth, post-ReLU, noisy, with NaN/Inf
// outliers, constant, empty), bound modes and chunk sizes, so that both the
// fused per-chunk and the whole-tensor decode paths are reached.
//
//   ebac_fuzz_make_seeds <output directory>
#include <ebac/ebac.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::vector<float> make_data(int kind, std::size_t n) {
  std::vector<float> x(n);
  std::uint32_t state = 12345u + static_cast<std::uint32_t>(kind);
  auto noise = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const float t = static_cast<float>(i);
    switch (kind) {
      case 0: x[i] = std::sin(0.07f * t) * 2.0f; break;                       // smooth
      case 1: x[i] = std::fmax(0.0f, std::sin(0.11f * t) + 0.3f * noise()); break;  // post-ReLU
      case 2: x[i] = 100.0f * noise(); break;                                 // noisy, large codes
      case 3: x[i] = 1.5f; break;                                             // constant
      default: x[i] = 0.01f * t; break;                                       // ramp
    }
  }
  if (kind == 2 && n > 8) {  // outliers stored losslessly
    x[1] = std::numeric_limits<float>::quiet_NaN();
    x[n / 2] = std::numeric_limits<float>::infinity();
    x[n - 1] = -std::numeric_limits<float>::infinity();
    x[3] = 3.0e38f;
  }
  return x;
}

template <class T>
std::vector<std::byte> compress_as(const std::vector<float>& x, const ebac::extents& shape, const ebac::pipeline_spec& spec,
                                   const ebac::compress_options& opt) {
  std::vector<T> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = ebac::from_float<T>(x[i]);
  return ebac::with_pipeline(spec, shape, [&](auto p) { return ebac::host::compress(v.data(), shape, p, opt); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);

  std::vector<std::string> pipelines(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
  for (const char* triple : {"lorenzo1:linear:rle", "lorenzo2:linear:bitpack", "lorenzo3:sign:huffman", "none:linear:huffman"})
    pipelines.emplace_back(triple);
  const ebac::extents shapes[] = {{300}, {6, 50}, {3, 4, 25}, {2, 3, 5, 10}, {0}};
  const std::uint32_t chunks[] = {32, 64, 128, ebac::default_chunk_elements};
  constexpr const char* dtype_names[] = {"f32", "f16", "bf16"};

  int written = 0, index = 0;
  for (const auto& name : pipelines) {
    for (int dt = 0; dt < 3; ++dt) {
      for (int kind = 0; kind < 5; ++kind, ++index) {
        ebac::pipeline_spec spec;
        if (!ebac::parse_pipeline(name, spec)) {
          std::fprintf(stderr, "make_seeds: pipeline '%s' does not parse\n", name.c_str());
          return 1;
        }
        spec.chunk_elements = chunks[index % 4];
        // A flat tile that divides the chunk takes the fused decode path.
        if (spec.predictor == ebac::predictor_id::lorenzo && spec.lorenzo_auto_dims == 0 && index % 3 == 0)
          spec.lorenzo_params.tile[0] = 32;
        const ebac::extents& shape = shapes[(index / 5 + kind) % 5];  // every kind meets every shape
        std::uint64_t n = 0;
        (void)shape.count(n);
        const std::vector<float> x = make_data(kind, static_cast<std::size_t>(n));
        ebac::compress_options opt;
        opt.threads = 1;
        opt.checksum = index % 6 == 0;  // mostly off: mutations must reach the decoders
        opt.bound = index % 2 ? ebac::error_bound{1e-2, ebac::bound_mode::absolute} : ebac::error_bound{1e-3, ebac::bound_mode::relative};
        try {
          std::vector<std::byte> s;
          if (dt == 0) s = compress_as<float>(x, shape, spec, opt);
          else if (dt == 1) s = compress_as<ebac::float16>(x, shape, spec, opt);
          else s = compress_as<ebac::bfloat16>(x, shape, spec, opt);
          (void)ebac::host::inspect(s.data(), s.size());  // every seed must be valid
          std::string file = name + "_" + dtype_names[dt] + "_k" + std::to_string(kind) + "_" + std::to_string(index) + ".ebac";
          for (char& c : file)
            if (c == ':') c = '-';
          std::ofstream(dir / file, std::ios::binary).write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
          ++written;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "make_seeds: %s/%s/kind %d: %s\n", name.c_str(), dtype_names[dt], kind, e.what());
          return 1;
        }
      }
    }
  }
  std::printf("make_seeds: wrote %d streams to %s\n", written, dir.string().c_str());
  return 0;
}
