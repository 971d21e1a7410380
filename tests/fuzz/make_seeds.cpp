// Writes a seed corpus for fuzz_decompress (and fuzz_inspect): valid streams
// from every named pipeline plus explicit predictor:quantizer:encoder
// triples, for each dtype, several shapes, data kinds (smooth, post-ReLU,
// noisy, with NaN/Inf outliers, constant, empty), bound modes and chunk
// sizes, so that both the fused per-chunk and the whole-tensor decode paths
// are reached. With a second directory, also inputs for fuzz_compress
// (compress_input.hpp): every dtype, predictor, quantizer and encoder, both
// bound modes, the same data kinds plus signed zeros and subnormals.
//
//   ebac_fuzz_make_seeds <stream directory> [<compress input directory>]
#include "compress_input.hpp"

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
#include <type_traits>
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
      case 0: x[i] = std::sin(0.07f * t) * 2.0f; break;                             // smooth
      case 1: x[i] = std::fmax(0.0f, std::sin(0.11f * t) + 0.3f * noise()); break;  // post-ReLU
      case 2: x[i] = 100.0f * noise(); break;                                       // noisy, large codes
      case 3: x[i] = 1.5f; break;                                                   // constant
      default: x[i] = 0.01f * t; break;                                             // ramp
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

/// Writes one seed stream to dir/name (':' in a pipeline name becomes '-').
/// Every seed must be a valid stream: host::inspect throws on one that is not.
void write_stream_seed(const std::filesystem::path& dir, std::string name, const std::vector<std::byte>& s) {
  (void)ebac::host::inspect(s.data(), s.size());
  for (char& c : name)
    if (c == ':') c = '-';
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
}

}  // namespace

/// fuzz_compress inputs: a 9-byte header (compress_input.hpp) and elements.
int write_compress_inputs(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  int written = 0;
  for (int k = 0; k < 60; ++k) {
    const int dt = k % 3, kind = (k / 3) % 6;
    const std::size_t n = static_cast<std::size_t>(37 + 53 * (k % 11));
    std::vector<float> x = make_data(kind % 5, n);
    if (kind == 5)  // signed zeros, subnormals, float16 edges
      for (std::size_t i = 0; i < n; ++i) {
        const float v[] = {0.0f, -0.0f, 1e-40f, -1e-45f, 65504.0f, -6.1e-5f, 3.0f, -2.0f};
        x[i] = v[i % 8];
      }
    std::vector<std::uint8_t> in(ebac_fuzz::compress_header_bytes);
    in[0] = static_cast<std::uint8_t>(dt);
    in[1] = static_cast<std::uint8_t>(k % 4);  // rank 1..4
    in[2] = static_cast<std::uint8_t>(k);
    in[3] = static_cast<std::uint8_t>(k / 2);
    in[4] = static_cast<std::uint8_t>(k / 3);
    in[5] = static_cast<std::uint8_t>((k % 2) | ((k % 2 ? 30 : 30 + k % 20) << 1));  // rel ~2^-10, abs 2^-10..2^9
    in[6] = static_cast<std::uint8_t>(17 * k);
    in[7] = static_cast<std::uint8_t>(k % 40);                        // every predictor x quantizer x encoder
    in[8] = static_cast<std::uint8_t>(k % 25 + 25 * ((k / 15) % 4));  // every chunk x tile; no choice, predictor, quantizer, both
    for (float f : x) {
      if (dt == 0) {
        const std::uint32_t b = ebac::raw_bits(f);
        for (int j = 0; j < 4; ++j) in.push_back(static_cast<std::uint8_t>(b >> (8 * j)));
      } else {
        const std::uint16_t b =
            dt == 1 ? ebac::raw_bits(ebac::from_float<ebac::float16>(f)) : ebac::raw_bits(ebac::from_float<ebac::bfloat16>(f));
        in.push_back(static_cast<std::uint8_t>(b));
        in.push_back(static_cast<std::uint8_t>(b >> 8));
      }
    }
    std::ofstream(dir / ("compress_" + std::to_string(k) + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size()));
    ++written;
  }
  // Integer and bool tensors (lossless): small alphabets (palette), pool
  // indices with and without a geometry, wide values (exact or stored).
  for (int k = 0; k < 36; ++k) {
    const int dt = 3 + k % 6, kind = (k / 6) % 3;
    const std::size_t n = static_cast<std::size_t>(40 + 61 * (k % 7));
    static constexpr ebac::dtype types[] = {ebac::dtype::b8,  ebac::dtype::u8,  ebac::dtype::i8,
                                            ebac::dtype::i16, ebac::dtype::i32, ebac::dtype::i64};
    const std::size_t size = ebac::size_of(types[dt - 3]);
    std::vector<std::uint8_t> in(ebac_fuzz::compress_header_bytes);
    in[0] = static_cast<std::uint8_t>(dt);
    in[1] = static_cast<std::uint8_t>(1 + k % 3);  // rank 2..4
    in[2] = static_cast<std::uint8_t>(1 + k % 3);
    in[3] = static_cast<std::uint8_t>(2 + k % 4);
    in[4] = static_cast<std::uint8_t>(k);
    in[5] = static_cast<std::uint8_t>(kind == 1 ? (1 | (k % 3) << 1 | (k % 3) << 3 | (k % 2) << 5) : 0);  // pooling
    in[6] = static_cast<std::uint8_t>(kind == 1 ? (3 + k % 13) | ((k % 3) << 4) : 0);
    in[7] = static_cast<std::uint8_t>(k % 30);
    in[8] = static_cast<std::uint8_t>(k % 25);
    std::uint32_t state = 777u + static_cast<std::uint32_t>(k);
    for (std::size_t i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;
      std::uint64_t v = 0;
      if (kind == 0) v = (state >> 20) % 10 == 0 ? 0 : 1 + (k % 3);  // a mask, a few levels
      else if (kind == 1) v = (i * 2 + (state >> 30)) % 64;          // indices near their windows
      else v = static_cast<std::uint64_t>(state) * 2654435761u;      // wide values
      for (std::size_t j = 0; j < size; ++j) in.push_back(static_cast<std::uint8_t>(v >> (8 * (j % 8))));
    }
    std::ofstream(dir / ("compress_int_" + std::to_string(k) + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size()));
    ++written;
  }
  return written;
}

/// Streams of integer and bool tensors: palette, exact, pool-window and
/// stored forms, so the decoders' integer paths have seeds too.
int write_integer_streams(const std::filesystem::path& dir) {
  int written = 0;
  const char* pipes[] = {"fast", "ratio", "plain", "lorenzo1:linear:rle", "none:linear:huffman", "lorenzo2:sign:ans"};
  for (int k = 0; k < 36; ++k) {
    ebac::pipeline_spec spec;
    (void)ebac::parse_pipeline(pipes[k % 6], spec);
    spec.chunk_elements = k % 2 ? 64 : ebac::default_chunk_elements;
    const ebac::extents shape{2, 3, 6, 6};  // as if 2x3 channels pooled 12x12 -> 6x6
    ebac::compress_options opt;
    opt.threads = 1;
    opt.checksum = k % 4 == 0;
    const int kind = (k / 5) % 3;
    if (kind == 1) {
      opt.pooling.dims = 2;
      for (int j = 0; j < 2; ++j) {
        opt.pooling.input[j] = 12;
        opt.pooling.kernel[j] = 2;
        opt.pooling.stride[j] = 2;
        opt.pooling.dilation[j] = 1;
      }
    }
    std::vector<std::int64_t> v(216);
    std::uint32_t state = 99u + static_cast<std::uint32_t>(k);
    for (std::size_t i = 0; i < v.size(); ++i) {
      state = state * 1664525u + 1013904223u;
      const std::size_t r = (i / 6) % 6, c = i % 6;
      if (kind == 0) v[i] = (state >> 20) % 10 == 0 ? 0 : 1;
      else if (kind == 1) v[i] = static_cast<std::int64_t>((2 * r + (state >> 31)) * 12 + 2 * c + ((state >> 30) & 1));
      else v[i] = static_cast<std::int64_t>(state) - (1 << 30);
    }
    auto emit = [&](auto tag, const char* tname) {
      using T = decltype(tag);
      std::vector<ebac::storage_t<T>> x(v.size());
      for (std::size_t i = 0; i < v.size(); ++i)
        x[i] = static_cast<ebac::storage_t<T>>(std::is_same_v<T, bool> ? (v[i] & 1) : v[i]);
      ebac::compress_options o = opt;
      if (std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t>)
        o.pooling = ebac::pool_geometry{};  // indices are int64 in PyTorch
      const auto s = ebac::with_pipeline(
          spec, shape, [&](auto p) { return ebac::host::compress(reinterpret_cast<const T*>(x.data()), shape, p, o); });
      write_stream_seed(dir, "int_" + std::string(tname) + "_k" + std::to_string(kind) + "_" + std::to_string(k) + ".ebac", s);
      ++written;
    };
    switch (k % 4) {
      case 0: emit(std::int64_t{}, "i64"); break;
      case 1: emit(bool{}, "bool"); break;
      case 2: emit(std::int32_t{}, "i32"); break;
      default: emit(std::uint8_t{}, "u8"); break;
    }
  }
  return written;
}

/// Streams of every named pipeline and a few triples, in f32, f16 and bf16,
/// of every data kind and shape, chunk sizes, tiles, checksums and bounds
/// varied: the count written, or -1 after naming what failed.
int write_pipeline_seeds(const std::filesystem::path& dir) {
  std::vector<std::string> pipelines(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
  for (const char* triple : {"lorenzo1:linear:rle", "lorenzo2:linear:bitpack", "lorenzo3:sign:huffman", "none:linear:huffman",
                             "lorenzo2:sign:ans", "none:sign:ans", "none:linear:striped"})
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
          return -1;
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
        opt.bound =
            index % 2 ? ebac::error_bound{1e-2, ebac::bound_mode::absolute} : ebac::error_bound{1e-3, ebac::bound_mode::relative};
        try {
          std::vector<std::byte> s;
          if (dt == 0) s = compress_as<float>(x, shape, spec, opt);
          else if (dt == 1) s = compress_as<ebac::float16>(x, shape, spec, opt);
          else s = compress_as<ebac::bfloat16>(x, shape, spec, opt);
          write_stream_seed(
              dir, name + "_" + dtype_names[dt] + "_k" + std::to_string(kind) + "_" + std::to_string(index) + ".ebac", s);
          ++written;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "make_seeds: %s/%s/kind %d: %s\n", name.c_str(), dtype_names[dt], kind, e.what());
          return -1;
        }
      }
    }
  }
  return written;
}

/// Context-ANS streams of 34 chunks of 32 codes: where AVX2 is compiled in
/// (ebac_fuzz_decompress_avx2), two groups of eight chunks decode side by
/// side (decode_context_ans_groups<2>), which the seeds above, of at most
/// nine full chunks, never reach.
/// Returns the count written, or -1 after naming what failed.
int write_group_seeds(const std::filesystem::path& dir) {
  int written = 0;
  for (const char* name : {"max-bound", "none:sign:ans"}) {
    for (int kind : {1, 2}) {
      ebac::pipeline_spec spec;
      (void)ebac::parse_pipeline(name, spec);
      spec.chunk_elements = 32;
      const ebac::extents shape{1100};
      ebac::compress_options opt;
      opt.threads = 1;
      opt.bound = ebac::error_bound{1e-3, ebac::bound_mode::relative};
      try {
        write_stream_seed(dir, std::string("groups_") + name + "_k" + std::to_string(kind) + ".ebac",
                          compress_as<float>(make_data(kind, 1100), shape, spec, opt));
        ++written;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "make_seeds: %s, 34 chunks: %s\n", name, e.what());
        return -1;
      }
    }
  }
  return written;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s STREAM_DIR [COMPRESS_INPUT_DIR]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);

  int written = write_pipeline_seeds(dir);
  if (written < 0) return 1;
  const int groups = write_group_seeds(dir);
  if (groups < 0) return 1;
  written += groups;
  try {
    written += write_integer_streams(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: integer streams: %s\n", e.what());
    return 1;
  }
  std::printf("make_seeds: wrote %d streams to %s\n", written, dir.string().c_str());
  if (argc == 3) {
    const int k = write_compress_inputs(argv[2]);
    std::printf("make_seeds: wrote %d compress inputs to %s\n", k, argv[2]);
  }
  return 0;
}
