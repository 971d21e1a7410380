// bench_host - Google Benchmark suite for ebac's host backend.
//
// Benchmarks every named pipeline x dtype (f32, f16, bf16) x relative bound
// (1e-2, 1e-3, 1e-4) x kind (post_relu, other) on the bundled corpus,
// compression and decompression separately, on one thread:
//
//   compress/<pipeline>/<dtype>/rel:<bound>/<kind>
//   decompress/<pipeline>/<dtype>/rel:<bound>/<kind>
//
// One iteration (de)compresses every tensor of that kind, each with its own
// shape, so shape-aware predictors see real tensors. Counters: bytes_per_second
// (input bytes in the benchmarked dtype) and ratio (total input bytes / total
// stream bytes). f16 and bf16 inputs are the corpus's f32 activations
// converted with ebac::from_float; the bound is absolute per tensor,
// eb = rel x (max - min) of that tensor in that dtype (as studies/compare.py
// does), so the range pass is not part of the timing.
//
//   ebac_bench_host [--corpus=DIR] [--benchmark_filter=compress/fast/f32]
//
// learn/<encoder>/<n> times what a codebook encoder (Huffman, ANS) pays per
// tensor to learn its codebook, on synthetic codes.
//
// encode/<encoder>/<codes> and decode/<encoder>/<codes> time an entropy
// coder alone (Huffman, striped Huffman) on the codes of a training-size
// tensor (2^21 codes, chunks of 2^14): encode gathers the statistics, learns
// the codebook and codes every chunk; decode decodes every chunk. <codes>:
// tokens that are a run of 1-16 zeros with probability 0.75 (sparse: about
// 96% zeros, the other codes 1 + geometric of mean 2) or 0.1 (wide: about
// 49% zeros, the other codes 1 + geometric of mean 49). Counters:
// codes_per_second, bits_per_code. encode-tokens/striped/<codes> times the
// striped coder's encode as the stream encoder runs it: each chunk's tokens
// formed once, counted and kept, then coded (encode/striped/<codes> forms
// them twice, as encode_chunk does).
//
// DIR defaults to the corpus this was built with (EBAC_CORPUS_DIR) or the
// EBAC_CORPUS environment variable. Without a corpus it falls back to
// synthetic tensors and says so. Host only: the CUDA backend's throughput
// (cudaEvent timing) is bench/cuda/gpu_throughput.cu.
#include <ebac/ebac.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef EBAC_CORPUS_DIR
#define EBAC_CORPUS_DIR "data/corpus"
#endif

namespace {

namespace fs = std::filesystem;

/// Tensors smaller than this (BN statistics, losses) are left out, as in
/// studies/compare.py: headers dominate them and no trainer compresses them.
constexpr std::uint64_t min_elements = 4096;
constexpr double rel_bounds[] = {1e-2, 1e-3, 1e-4};
const char* const kinds[] = {"post_relu", "other"};

struct tensor {
  std::string name, kind;
  ebac::extents shape;
  std::vector<float> f32;
  std::vector<ebac::float16> f16;
  std::vector<ebac::bfloat16> bf16;
};

template <class T>
const std::vector<T>& data_of(const tensor& t) {
  if constexpr (std::is_same_v<T, float>) return t.f32;
  else if constexpr (std::is_same_v<T, ebac::float16>) return t.f16;
  else return t.bf16;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string c;
  while (std::getline(ss, c, sep)) v.push_back(c);
  return v;
}

void add_half_copies(tensor& t) {
  t.f16.resize(t.f32.size());
  t.bf16.resize(t.f32.size());
  for (std::size_t i = 0; i < t.f32.size(); ++i) {
    t.f16[i] = ebac::from_float<ebac::float16>(t.f32[i]);
    t.bf16[i] = ebac::from_float<ebac::bfloat16>(t.f32[i]);
  }
}

/// The corpus's float32 activations of at least min_elements elements.
std::vector<tensor> load_corpus(const fs::path& dir) {
  std::vector<tensor> out;
  std::ifstream m(dir / "manifest.tsv");
  if (!m) return out;
  std::string line;
  std::vector<std::string> cols;
  while (std::getline(m, line)) {
    if (line.empty()) continue;
    const auto v = split(line, '\t');
    if (cols.empty()) {
      cols = v;
      continue;
    }
    auto col = [&](const char* name) -> std::string {
      for (std::size_t k = 0; k < cols.size(); ++k)
        if (cols[k] == name) return k < v.size() ? v[k] : std::string();
      return {};
    };
    if (col("role") != "activation" || col("dtype") != "f32" || col("file") == "-") continue;
    tensor t;
    t.name = col("file");
    t.kind = col("kind") == "post_relu" ? "post_relu" : "other";
    for (const auto& d : split(col("dims"), ',')) {
      if (t.shape.rank == ebac::max_rank) break;
      t.shape.dims[t.shape.rank++] = std::stoull(d);
    }
    std::uint64_t n = 0;
    if (t.shape.count(n) != ebac::status::ok || n < min_elements) continue;
    std::ifstream f(dir / t.name, std::ios::binary);
    t.f32.resize(n);
    f.read(reinterpret_cast<char*>(t.f32.data()), static_cast<std::streamsize>(n * sizeof(float)));
    if (!f || static_cast<std::uint64_t>(f.gcount()) != n * sizeof(float)) {
      std::fprintf(stderr, "bench_host: %s is shorter than its dims; skipped\n", t.name.c_str());
      continue;
    }
    add_half_copies(t);
    out.push_back(std::move(t));
  }
  return out;
}

/// Smooth NCHW fields with noise: one post-ReLU, one not (no corpus at hand).
std::vector<tensor> synthetic() {
  std::vector<tensor> out;
  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (const char* kind : kinds) {
    tensor t;
    t.name = std::string("synthetic_") + kind;
    t.kind = kind;
    t.shape = ebac::extents{16, 32, 28, 28};
    t.f32.resize(16 * 32 * 28 * 28);
    std::size_t i = 0;
    for (int n = 0; n < 16; ++n)
      for (int c = 0; c < 32; ++c)
        for (int h = 0; h < 28; ++h)
          for (int w = 0; w < 28; ++w, ++i) {
            const float v = std::sin(0.3f * h + 0.1f * c) * std::cos(0.25f * w + 0.2f * n) + noise(rng);
            t.f32[i] = std::strcmp(kind, "post_relu") == 0 ? std::max(v, 0.0f) : v;
          }
    add_half_copies(t);
    out.push_back(std::move(t));
  }
  return out;
}

template <class T>
double absolute_bound(const tensor& t, double rel) {
  ebac::value_range r;
  for (const T& x : data_of<T>(t)) r.add(ebac::to_float(x));
  const double span = r.span();
  return rel * (span > 0 ? span : 1.0);
}

template <class T>
std::vector<std::byte> compress_one(const tensor& t, const ebac::pipeline_spec& spec, double eb) {
  ebac::compress_options opt;
  opt.bound = {eb, ebac::bound_mode::absolute};
  opt.threads = 1;
  return ebac::with_pipeline(spec, t.shape,
                             [&](auto pipe) { return ebac::host::compress(data_of<T>(t).data(), t.shape, pipe, opt); });
}

struct group {
  std::vector<const tensor*> tensors;
  std::vector<double> bounds;  // absolute, one per tensor
  std::uint64_t bytes_in = 0;
};

template <class T>
void register_for(const std::vector<tensor>& corpus, const char* dtype_name) {
  for (std::string_view pname : ebac::pipeline_names) {
    ebac::pipeline_spec spec;
    ebac::parse_pipeline(pname, spec);
    for (double rel : rel_bounds) {
      for (const char* kind : kinds) {
        group g;
        for (const auto& t : corpus)
          if (t.kind == kind) {
            g.tensors.push_back(&t);
            g.bounds.push_back(absolute_bound<T>(t, rel));
            g.bytes_in += data_of<T>(t).size() * sizeof(T);
          }
        if (g.tensors.empty()) continue;
        char suffix[96];
        std::snprintf(suffix, sizeof suffix, "/%.*s/%s/rel:%g/%s", static_cast<int>(pname.size()), pname.data(), dtype_name, rel,
                      kind);

        benchmark::RegisterBenchmark(("compress" + std::string(suffix)).c_str(),
                                     [g, spec](benchmark::State& state) {
                                       std::uint64_t bytes_out = 0;
                                       for (auto _ : state) {
                                         bytes_out = 0;
                                         for (std::size_t i = 0; i < g.tensors.size(); ++i) {
                                           const auto s = compress_one<T>(*g.tensors[i], spec, g.bounds[i]);
                                           bytes_out += s.size();
                                           benchmark::DoNotOptimize(s.data());
                                         }
                                       }
                                       state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.bytes_in));
                                       state.counters["ratio"] = static_cast<double>(g.bytes_in) / static_cast<double>(bytes_out);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);

        benchmark::RegisterBenchmark(("decompress" + std::string(suffix)).c_str(),
                                     [g, spec](benchmark::State& state) {
                                       std::vector<std::vector<std::byte>> streams;
                                       std::vector<std::vector<T>> outs;
                                       std::uint64_t bytes_out = 0;
                                       for (std::size_t i = 0; i < g.tensors.size(); ++i) {
                                         streams.push_back(compress_one<T>(*g.tensors[i], spec, g.bounds[i]));
                                         outs.emplace_back(data_of<T>(*g.tensors[i]).size());
                                         bytes_out += streams.back().size();
                                       }
                                       for (auto _ : state) {
                                         for (std::size_t i = 0; i < streams.size(); ++i) {
                                           ebac::host::decompress(streams[i].data(), streams[i].size(), outs[i].data(),
                                                                  outs[i].size(), 1);
                                           benchmark::DoNotOptimize(outs[i].data());
                                         }
                                       }
                                       state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * g.bytes_in));
                                       state.counters["ratio"] = static_cast<double>(g.bytes_in) / static_cast<double>(bytes_out);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

/// The fixed cost of a codebook encoder: learning the codebook from the
/// statistics of n codes (half zeros, most of the rest small, a few wide;
/// rows of 32), whatever the tensor's size; Huffman and context ANS.
///
///   learn/<encoder>/<n>
template <class E>
void register_learn(const char* name) {
  for (std::size_t n : {std::size_t{512}, std::size_t{1} << 14, std::size_t{1} << 20}) {
    benchmark::RegisterBenchmark(("learn/" + std::string(name) + "/" + std::to_string(n)).c_str(), [n](benchmark::State& state) {
      std::mt19937 rng(static_cast<std::uint32_t>(n));
      std::uniform_real_distribution<double> u(0, 1);
      std::vector<std::uint32_t> codes(n);
      for (auto& c : codes) {
        const double p = u(rng);
        c = p < 0.5 ? 0u : (p < 0.9 ? static_cast<std::uint32_t>(rng() % 8) : static_cast<std::uint32_t>(rng() % 3000));
      }
      typename E::statistics stats = ebac::host::detail::make_statistics<E>(ebac::extents{n / 32, 32});
      stats.add(codes.data(), codes.size());
      for (auto _ : state) {
        auto cb = E::learn(stats);
        benchmark::DoNotOptimize(cb);
      }
    })->Unit(benchmark::kMicrosecond);
  }
}

/// Synthetic codes of a training-size tensor (see the header comment).
std::vector<std::uint32_t> coder_codes(bool sparse) {
  std::mt19937 rng(sparse ? 7u : 8u);
  std::uniform_real_distribution<double> u(0, 1);
  std::geometric_distribution<std::uint32_t> small(1.0 / 3), wide(1.0 / 50);
  std::vector<std::uint32_t> codes(std::size_t{1} << 21);
  for (std::size_t i = 0; i < codes.size();) {
    if (u(rng) < (sparse ? 0.75 : 0.1)) {  // a run of zeros, 1 to 16 long
      const std::size_t run = std::min<std::size_t>(codes.size() - i, 1 + rng() % 16);
      for (std::size_t k = 0; k < run; ++k) codes[i++] = 0;
    } else {
      codes[i++] = 1 + (sparse ? small(rng) : wide(rng));
    }
  }
  return codes;
}

/// The chunk size of the coder cases (the named pipelines' default).
constexpr std::size_t coder_chunk = std::size_t{1} << 14;

template <class E>
void register_coder(const char* name) {
  for (bool sparse : {true, false}) {
    const std::string suffix = std::string(name) + (sparse ? "/sparse" : "/wide");
    benchmark::RegisterBenchmark(("encode/" + suffix).c_str(), [sparse](benchmark::State& state) {
      constexpr std::size_t C = coder_chunk;
      const std::vector<std::uint32_t> codes = coder_codes(sparse);
      const std::size_t chunks = (codes.size() + C - 1) / C;
      std::vector<std::byte> out(E{}.max_chunk_bytes(C) * chunks);
      std::size_t bytes = 0;
      for (auto _ : state) {
        typename E::statistics stats;
        for (std::size_t c = 0; c < chunks; ++c) stats.add(codes.data() + c * C, std::min(C, codes.size() - c * C));
        const auto cb = E::learn(stats);
        const E enc = E::bind(cb);
        bytes = 0;
        for (std::size_t c = 0; c < chunks; ++c)
          bytes += enc.encode_chunk(codes.data() + c * C, std::min(C, codes.size() - c * C), out.data() + bytes);
        benchmark::DoNotOptimize(out.data());
      }
      state.counters["codes_per_second"] =
          benchmark::Counter(static_cast<double>(codes.size()), benchmark::Counter::kIsIterationInvariantRate);
      state.counters["bits_per_code"] = 8.0 * static_cast<double>(bytes) / static_cast<double>(codes.size());
    })->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + suffix).c_str(), [sparse](benchmark::State& state) {
      constexpr std::size_t C = coder_chunk;
      const std::vector<std::uint32_t> codes = coder_codes(sparse);
      const std::size_t chunks = (codes.size() + C - 1) / C;
      typename E::statistics stats;
      for (std::size_t c = 0; c < chunks; ++c) stats.add(codes.data() + c * C, std::min(C, codes.size() - c * C));
      const auto cb = E::learn(stats);
      const E enc = E::bind(cb);
      std::vector<std::byte> buf(enc.max_chunk_bytes(C));
      std::vector<std::vector<std::byte>> coded(chunks);
      for (std::size_t c = 0; c < chunks; ++c)
        coded[c].assign(buf.data(),
                        buf.data() + enc.encode_chunk(codes.data() + c * C, std::min(C, codes.size() - c * C), buf.data()));
      std::vector<std::uint32_t> back(C);
      for (auto _ : state) {
        for (std::size_t c = 0; c < chunks; ++c) {
          const std::size_t m = std::min(C, codes.size() - c * C);
          if (enc.decode_chunk(coded[c].data(), coded[c].size(), back.data(), m) != ebac::status::ok ||
              std::memcmp(back.data(), codes.data() + c * C, m * sizeof(std::uint32_t)) != 0) {
            state.SkipWithError("a chunk did not decode to its codes");
            return;
          }
        }
        benchmark::DoNotOptimize(back.data());
      }
      state.counters["codes_per_second"] =
          benchmark::Counter(static_cast<double>(codes.size()), benchmark::Counter::kIsIterationInvariantRate);
    })->Unit(benchmark::kMillisecond);
  }
}

/// The encode case for a token encoder (concepts.hpp) along the path the
/// stream encoder takes (host/encode_stream.hpp): each chunk's tokens are
/// formed once, counted and kept, then the codebook is learned and the kept
/// tokens are coded.
///
///   encode-tokens/<encoder>/<codes>
template <class E>
void register_token_coder(const char* name) {
  for (bool sparse : {true, false}) {
    const std::string suffix = std::string(name) + (sparse ? "/sparse" : "/wide");
    benchmark::RegisterBenchmark(("encode-tokens/" + suffix).c_str(), [sparse](benchmark::State& state) {
      constexpr std::size_t C = coder_chunk;
      const std::vector<std::uint32_t> codes = coder_codes(sparse);
      const std::size_t chunks = (codes.size() + C - 1) / C;
      std::vector<std::uint8_t> symbol(codes.size());
      std::vector<std::uint16_t> extra(codes.size());
      std::vector<std::size_t> tokens(chunks);
      std::vector<std::byte> out(E{}.max_chunk_bytes(C) * chunks);
      std::uint32_t any = 0;
      for (std::uint32_t c : codes) any |= c;
      if (!E::keeps(C, any)) {
        state.SkipWithError("the synthetic codes do not fit kept tokens");
        return;
      }
      std::size_t bytes = 0;
      for (auto _ : state) {
        typename E::statistics stats;
        for (std::size_t c = 0; c < chunks; ++c) {
          const std::size_t m = std::min(C, codes.size() - c * C);
          tokens[c] = E::tokenize(codes.data() + c * C, m, symbol.data() + c * C, extra.data() + c * C);
          stats.add_symbols(symbol.data() + c * C, tokens[c]);
        }
        const auto cb = E::learn(stats);
        const E enc = E::bind(cb);
        bytes = 0;
        for (std::size_t c = 0; c < chunks; ++c)
          bytes += enc.encode_tokens(symbol.data() + c * C, extra.data() + c * C, tokens[c], std::min(C, codes.size() - c * C),
                                     out.data() + bytes);
        benchmark::DoNotOptimize(out.data());
      }
      state.counters["codes_per_second"] =
          benchmark::Counter(static_cast<double>(codes.size()), benchmark::Counter::kIsIterationInvariantRate);
      state.counters["bits_per_code"] = 8.0 * static_cast<double>(bytes) / static_cast<double>(codes.size());
    })->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::getenv("EBAC_CORPUS") ? std::getenv("EBAC_CORPUS") : EBAC_CORPUS_DIR;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {  // take --corpus=DIR out before Google Benchmark sees it
    if (std::strncmp(argv[i], "--corpus=", 9) == 0) dir = argv[i] + 9;
    else argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  std::vector<tensor> corpus = load_corpus(dir);
  std::uint64_t bytes = 0;
  for (const auto& t : corpus) bytes += t.f32.size() * sizeof(float);
  if (corpus.empty()) {
    std::fprintf(stderr, "bench_host: no corpus at %s (studies/make_corpus.py builds one); using synthetic tensors\n",
                 dir.c_str());
    corpus = synthetic();
    benchmark::AddCustomContext("corpus", "synthetic (no corpus found at " + dir + ")");
  } else {
    benchmark::AddCustomContext(
        "corpus", dir + ": " + std::to_string(corpus.size()) + " f32 activations, " + std::to_string(bytes) + " bytes");
  }
  register_for<float>(corpus, "f32");
  register_for<ebac::float16>(corpus, "f16");
  register_for<ebac::bfloat16>(corpus, "bf16");
  register_learn<ebac::huffman>("huffman");
  register_learn<ebac::context_ans>("ans");
  register_learn<ebac::striped_huffman>("striped");
  register_coder<ebac::huffman>("huffman");
  register_coder<ebac::striped_huffman>("striped");
  register_token_coder<ebac::striped_huffman>("striped");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
