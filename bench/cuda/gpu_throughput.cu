// GPU throughput of the CUDA backend, timed with cudaEvents, against a
// device-to-device memcpy of the same bytes measured in the same run.
//
//   gpu_throughput [--corpus data/corpus/manifest.tsv] [--gib 1] [--eb 1e-3] [--reps 20]
//
// Prints a markdown table: input GB/s of compress and decompress per
// pipeline and dtype, each also as a fraction of the memcpy bandwidth, and
// the compression ratio. Compression includes every kernel of the stream
// (range, quantize, predict, encode, outliers, header); decompression every
// kernel down to the last output element; neither includes allocation.
// Huffman rows: compression includes the codebook built on the device,
// decompression not the codebook's upload (done once before timing).
#include <ebac/cuda/codec.cuh>
#include <ebac/ebac.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

struct timer {
  cudaEvent_t a, b;
  timer() { CHECK_CUDA(cudaEventCreate(&a)); CHECK_CUDA(cudaEventCreate(&b)); }
  ~timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
  template <class F>
  double best_ms(int reps, F&& f) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      CHECK_CUDA(cudaEventRecord(a));
      f();
      CHECK_CUDA(cudaEventRecord(b));
      CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      best = ms < best ? ms : best;
    }
    return best;
  }
};

/// A staged run's stream and values, which the other kernel paths of the
/// same pipeline must reproduce exactly (the status column says so).
template <class T>
struct baseline {
  std::vector<std::byte> stream;
  std::vector<T> values;
};

template <class Pipe, class T>
void run(const char* name, const char* dtype, const std::vector<T>& x, const ebac::extents& e, double eb, int reps,
         double memcpy_gbs, const char* data_label, ebac::cuda::kernel_path path = ebac::cuda::kernel_path::staged,
         baseline<T>* keep = nullptr, const baseline<T>* compare = nullptr) {
  ebac::compress_options opt;
  opt.bound = {eb, ebac::bound_mode::relative};
  opt.checksum = false;
  const Pipe pipe{};
  const std::size_t bytes = x.size() * sizeof(T);
  T* d_in;
  T* d_out;
  CHECK_CUDA(cudaMalloc(&d_in, bytes));
  CHECK_CUDA(cudaMalloc(&d_out, bytes));
  CHECK_CUDA(cudaMemcpy(d_in, x.data(), bytes, cudaMemcpyHostToDevice));
  std::size_t ctemp = 0, dtemp = 0;
  CHECK_CUDA(ebac::cuda::compress(nullptr, ctemp, d_in, e, pipe, opt, nullptr, 0, nullptr, nullptr, nullptr, path));
  const std::size_t cap = ebac::cuda::max_compressed_bytes<Pipe, T>(e, pipe);
  void* d_ctemp;
  std::byte* d_stream;
  std::uint64_t* d_size;
  int* d_status;
  CHECK_CUDA(cudaMalloc(&d_ctemp, ctemp));
  CHECK_CUDA(cudaMalloc(&d_stream, cap));
  CHECK_CUDA(cudaMalloc(&d_size, sizeof(std::uint64_t)));
  CHECK_CUDA(cudaMalloc(&d_status, sizeof(int)));
  timer t;
  const double c_ms = t.best_ms(reps, [&] {
    CHECK_CUDA(ebac::cuda::compress(d_ctemp, ctemp, d_in, e, pipe, opt, d_stream, cap, d_size, d_status, nullptr, path));
  });
  std::uint64_t size = 0;
  CHECK_CUDA(cudaMemcpy(&size, d_size, sizeof size, cudaMemcpyDeviceToHost));
  const ebac::stream_header h = ebac::cuda::read_header(d_stream, size);
  // Huffman: the decoder's codebook image is read, validated and uploaded
  // once, outside the timed loop (as a trainer would keep it with the stream).
  ebac::cuda::detail::uploaded_codebook book;
  const ebac::cuda::device_huffman_codebook* codebook = nullptr;
  if (h.encoder == ebac::encoder_id::huffman) {
    std::vector<std::byte> section(static_cast<std::size_t>(h.section_bytes[ebac::section_codebook]));
    CHECK_CUDA(cudaMemcpy(section.data(), d_stream + h.section_offset(ebac::section_codebook), section.size(), cudaMemcpyDeviceToHost));
    ebac::huffman_codebook cb;
    if (ebac::huffman_codebook::deserialize(section.data(), section.size(), cb) != ebac::status::ok) {
      std::fprintf(stderr, "%s: the device wrote an invalid codebook\n", name);
      std::exit(1);
    }
    book = ebac::cuda::detail::upload_codebook(cb, nullptr, ebac::cuda::default_allocator());
    codebook = &book.view;
  }
  CHECK_CUDA(ebac::cuda::decompress<T>(nullptr, dtemp, h, d_stream, size, d_out, x.size(), nullptr, nullptr, codebook, path));
  void* d_dtemp;
  CHECK_CUDA(cudaMalloc(&d_dtemp, dtemp));
  const double d_ms = t.best_ms(reps, [&] {
    CHECK_CUDA(ebac::cuda::decompress<T>(d_dtemp, dtemp, h, d_stream, size, d_out, x.size(), d_status, nullptr, codebook, path));
  });
  int st = 0;
  CHECK_CUDA(cudaMemcpy(&st, d_status, sizeof st, cudaMemcpyDeviceToHost));
  const char* verdict = st == 0 ? "ok" : "DECODE ERROR";
  if (keep || compare) {  // outside the timing: the other paths must give the staged stream and values
    baseline<T> mine{std::vector<std::byte>(size), std::vector<T>(x.size())};
    CHECK_CUDA(cudaMemcpy(mine.stream.data(), d_stream, size, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(mine.values.data(), d_out, bytes, cudaMemcpyDeviceToHost));
    if (compare && st == 0) {
      if (mine.stream != compare->stream) verdict = "STREAM DIFFERS FROM STAGED";
      else if (std::memcmp(mine.values.data(), compare->values.data(), bytes) != 0) verdict = "VALUES DIFFER FROM STAGED";
      else verdict = "ok, = staged";
    }
    if (keep) *keep = std::move(mine);
  }
  const double cg = bytes / c_ms / 1e6, dg = bytes / d_ms / 1e6;
  std::printf("| %s | %s | %s | %.2f | %.1f | %.1f%% | %.1f | %.1f%% | %s |\n", data_label, name, dtype,
              static_cast<double>(bytes) / size, cg, 100 * cg / memcpy_gbs, dg, 100 * dg / memcpy_gbs, verdict);
  cudaFree(d_in); cudaFree(d_out); cudaFree(d_ctemp); cudaFree(d_stream); cudaFree(d_size); cudaFree(d_status); cudaFree(d_dtemp);
}

template <class T>
void all_pipelines(const char* dtype, const std::vector<T>& x, const ebac::extents& e, double eb, int reps, double mc, const char* label) {
  using namespace ebac;
  using ebac::cuda::kernel_path;
  using fast_t = pipeline<lorenzo, sign_preserving_quantizer, block_bitpack>;
  using plain_t = pipeline<no_prediction, sign_preserving_quantizer, block_bitpack>;
  using ratio_flat_t = pipeline<lorenzo, sign_preserving_quantizer, huffman>;
  // The fused kernels: compression computes codes from the input where needed
  // (kernels/fused_bitpack.cuh; single_pass: one launch, offsets by decoupled
  // look-back); decompression goes from payload (or decoded codes) to values
  // in one kernel (kernels/fused_bitpack_decode.cuh). Each must reproduce the
  // staged stream and values, checked after timing.
  baseline<T> ref;
  run<fast_t, T>("fast", dtype, x, e, eb, reps, mc, label, kernel_path::staged, &ref);
  run<fast_t, T>("fast (fused)", dtype, x, e, eb, reps, mc, label, kernel_path::fused, nullptr, &ref);
  run<fast_t, T>("fast (single pass)", dtype, x, e, eb, reps, mc, label, kernel_path::single_pass, nullptr, &ref);
  run<plain_t, T>("plain", dtype, x, e, eb, reps, mc, label, kernel_path::staged, &ref);
  run<plain_t, T>("plain (fused)", dtype, x, e, eb, reps, mc, label, kernel_path::fused, nullptr, &ref);
  run<plain_t, T>("plain (single pass)", dtype, x, e, eb, reps, mc, label, kernel_path::single_pass, nullptr, &ref);
  run<pipeline<lorenzo, sign_preserving_quantizer, run_length>, T>("rle", dtype, x, e, eb, reps, mc, label);
  // Codebook built on the device inside compress (kernels/huffman_codebook.cuh);
  // fewer repetitions: the Huffman kernels are not tuned yet.
  const int hr = reps < 5 ? reps : 5;
  run<ratio_flat_t, T>("ratio-flat", dtype, x, e, eb, hr, mc, label, kernel_path::staged, &ref);
  run<ratio_flat_t, T>("ratio-flat (fused)", dtype, x, e, eb, hr, mc, label, kernel_path::fused, nullptr, &ref);
}

double memcpy_gbs(std::size_t bytes, int reps) {
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  timer t;
  const double ms = t.best_ms(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  cudaFree(a);
  cudaFree(b);
  return bytes / ms / 1e6;  // bytes copied (read + written once each) per second
}

}  // namespace

int main(int argc, char** argv) {
  std::string manifest = "data/corpus/manifest.tsv";
  double gib = 1.0, eb = 1e-3;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--corpus") manifest = argv[i + 1];
    else if (k == "--gib") gib = std::atof(argv[i + 1]);
    else if (k == "--eb") eb = std::atof(argv[i + 1]);
    else if (k == "--reps") reps = std::atoi(argv[i + 1]);
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::size_t n = static_cast<std::size_t>(gib * (1u << 30) / sizeof(float));
  const double mc = memcpy_gbs(n * sizeof(float), reps);
  std::printf("device: %s; D2D memcpy of %.2f GiB: %.1f GB/s (bytes copied per second)\n\n", prop.name, gib, mc);
  std::printf("| data | pipeline | dtype | ratio | compress GB/s | of memcpy | decompress GB/s | of memcpy | status |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");

  // Activation-like synthetic tensor: half zeros, smooth positive ramps.
  std::vector<float> big(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>((i * 2654435761u >> 7) % 4096) / 1024.0f - 2.0f + 0.001f * static_cast<float>(i % 97);
    big[i] = v > 0 ? v : 0.0f;
  }
  const ebac::extents e_big{n};
  all_pipelines<float>("f32", big, e_big, eb, reps, mc, "synthetic activation-like");
  std::vector<ebac::bfloat16> big16(n);
  for (std::size_t i = 0; i < n; ++i) big16[i] = ebac::from_float<ebac::bfloat16>(big[i]);
  all_pipelines<ebac::bfloat16>("bf16", big16, e_big, eb, reps, mc, "synthetic activation-like");

  // Bundled corpus: all f32 activations concatenated (flat).
  std::ifstream mf(manifest);
  std::string line;
  std::vector<float> corpus;
  const std::string dir = manifest.substr(0, manifest.find_last_of('/') + 1);
  std::getline(mf, line);
  while (std::getline(mf, line)) {
    std::stringstream ss(line);
    std::string file, dtype, dims, model, module, kind, role;
    std::getline(ss, file, '\t'); std::getline(ss, dtype, '\t'); std::getline(ss, dims, '\t');
    std::getline(ss, model, '\t'); std::getline(ss, module, '\t'); std::getline(ss, kind, '\t'); std::getline(ss, role, '\t');
    if (dtype != "f32" || role != "activation") continue;
    std::ifstream f(dir + file, std::ios::binary | std::ios::ate);
    const auto sz = static_cast<std::size_t>(f.tellg());
    f.seekg(0);
    const std::size_t old = corpus.size();
    corpus.resize(old + sz / 4);
    f.read(reinterpret_cast<char*>(corpus.data() + old), static_cast<std::streamsize>(sz));
  }
  if (!corpus.empty()) all_pipelines<float>("f32", corpus, ebac::extents{corpus.size()}, eb, reps, mc, "bundled corpus (concatenated)");
  std::printf("\nrelative bound %g; best of %d runs each (Huffman: of %d). Huffman compression includes the histogram and the\n"
              "codebook built on the device; its decompression excludes the codebook upload (done once, before timing).\n"
              "status \"ok, = staged\": that kernel path wrote the staged path's stream and decoded its values, byte for byte.\n",
              eb, reps, reps < 5 ? reps : 5);
  return 0;
}
