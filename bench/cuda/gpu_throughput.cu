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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
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

/// cudaMalloc'd bytes, freed on every path out (a row that throws must not
/// leak a GiB into the next one).
struct device_memory {
  void* p = nullptr;
  explicit device_memory(std::size_t bytes) { CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1)); }
  ~device_memory() { cudaFree(p); }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  template <class U>
  U* as() const { return static_cast<U*>(p); }
};

/// Best and median of `reps` timed runs, in milliseconds.
struct timing {
  double best_ms = 0, median_ms = 0;
};

struct timer {
  cudaEvent_t a, b;
  timer() { CHECK_CUDA(cudaEventCreate(&a)); CHECK_CUDA(cudaEventCreate(&b)); }
  ~timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
  template <class F>
  timing time(int reps, F&& f) {
    f();  // warm-up: first-launch costs (module load, pool growth) stay out of the figures
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<double> ms_all;
    for (int r = 0; r < reps; ++r) {
      CHECK_CUDA(cudaEventRecord(a));
      f();
      CHECK_CUDA(cudaEventRecord(b));
      CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      ms_all.push_back(ms);
    }
    std::sort(ms_all.begin(), ms_all.end());
    return {ms_all.front(), ms_all[ms_all.size() / 2]};
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
  device_memory in_mem(bytes), out_mem(bytes);
  T* d_in = in_mem.as<T>();
  T* d_out = out_mem.as<T>();
  CHECK_CUDA(cudaMemcpy(d_in, x.data(), bytes, cudaMemcpyHostToDevice));
  std::size_t ctemp = 0, dtemp = 0;
  CHECK_CUDA(ebac::cuda::compress(nullptr, ctemp, d_in, e, pipe, opt, nullptr, 0, nullptr, nullptr, nullptr, path));
  const std::size_t cap = ebac::cuda::output_capacity<Pipe, T>(e, pipe);
  device_memory ctemp_mem(ctemp), stream_mem(cap), size_mem(sizeof(std::uint64_t)), status_mem(sizeof(int));
  void* d_ctemp = ctemp_mem.p;
  std::byte* d_stream = stream_mem.as<std::byte>();
  std::uint64_t* d_size = size_mem.as<std::uint64_t>();
  int* d_status = status_mem.as<int>();
  timer t;
  const timing c = t.time(reps, [&] {
    CHECK_CUDA(ebac::cuda::compress(d_ctemp, ctemp, d_in, e, pipe, opt, d_stream, cap, d_size, d_status, nullptr, path));
  });
  // One more run, untimed, into poisoned memory: what is checked below must
  // come from this run, not from bytes an earlier row left behind.
  CHECK_CUDA(cudaMemset(d_stream, 0xff, cap));
  CHECK_CUDA(cudaMemset(d_size, 0xff, sizeof(std::uint64_t)));
  CHECK_CUDA(cudaMemset(d_status, 0xff, sizeof(int)));
  CHECK_CUDA(ebac::cuda::compress(d_ctemp, ctemp, d_in, e, pipe, opt, d_stream, cap, d_size, d_status, nullptr, path));
  std::uint64_t size = 0;
  int cst = 0;
  CHECK_CUDA(cudaMemcpy(&size, d_size, sizeof size, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&cst, d_status, sizeof cst, cudaMemcpyDeviceToHost));
  if (cst != 0 || size > cap) throw std::runtime_error("compress status " + std::to_string(cst) + ", size " + std::to_string(size));
  const ebac::stream_header h = ebac::cuda::read_header(d_stream, size);
  // Huffman: the decoder's codebook image is read, validated and uploaded
  // once, outside the timed loop (as a trainer would keep it with the stream).
  ebac::cuda::detail::uploaded_codebook book;
  const ebac::cuda::device_huffman_codebook* codebook = nullptr;
  if (h.encoder == ebac::encoder_id::huffman) {
    std::vector<std::byte> section(static_cast<std::size_t>(h.section_bytes[ebac::section_codebook]));
    CHECK_CUDA(cudaMemcpy(section.data(), d_stream + h.section_offset(ebac::section_codebook), section.size(), cudaMemcpyDeviceToHost));
    ebac::huffman_codebook cb;
    if (ebac::huffman_codebook::deserialize(section.data(), section.size(), cb) != ebac::status::ok)
      throw std::runtime_error("the device wrote an invalid codebook");
    book = ebac::cuda::detail::upload_codebook(cb, nullptr, ebac::cuda::default_allocator());
    codebook = &book.view;
  }
  CHECK_CUDA(ebac::cuda::decompress<T>(nullptr, dtemp, h, d_stream, size, d_out, x.size(), nullptr, nullptr, codebook, path));
  device_memory dtemp_mem(dtemp);
  void* d_dtemp = dtemp_mem.p;
  const timing d = t.time(reps, [&] {
    CHECK_CUDA(ebac::cuda::decompress<T>(d_dtemp, dtemp, h, d_stream, size, d_out, x.size(), d_status, nullptr, codebook, path));
  });
  CHECK_CUDA(cudaMemset(d_out, 0xff, bytes));
  CHECK_CUDA(cudaMemset(d_status, 0xff, sizeof(int)));
  CHECK_CUDA(ebac::cuda::decompress<T>(d_dtemp, dtemp, h, d_stream, size, d_out, x.size(), d_status, nullptr, codebook, path));
  int st = 0;
  CHECK_CUDA(cudaMemcpy(&st, d_status, sizeof st, cudaMemcpyDeviceToHost));
  const char* verdict = st == 0 ? "ok" : "DECODE ERROR";
  baseline<T> mine{std::vector<std::byte>(size), std::vector<T>(x.size())};
  CHECK_CUDA(cudaMemcpy(mine.stream.data(), d_stream, size, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(mine.values.data(), d_out, bytes, cudaMemcpyDeviceToHost));
  if (st == 0) {  // the bound, on every element (non-finite values restored bit for bit)
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double xv = ebac::to_float(x[i]), yv = ebac::to_float(mine.values[i]);
      const bool ok = std::isfinite(xv) ? std::isfinite(yv) && std::fabs(xv - yv) <= h.eb_abs
                                        : ebac::raw_bits(x[i]) == ebac::raw_bits(mine.values[i]);
      if (!ok) {
        verdict = "BOUND VIOLATED";
        break;
      }
    }
  }
  if (compare && st == 0 && std::strcmp(verdict, "ok") == 0) {  // the other paths must give the staged stream and values
    if (mine.stream != compare->stream) verdict = "STREAM DIFFERS FROM STAGED";
    else if (std::memcmp(mine.values.data(), compare->values.data(), bytes) != 0) verdict = "VALUES DIFFER FROM STAGED";
    else verdict = "ok, = staged";
  }
  if (keep) *keep = std::move(mine);
  auto gbs = [&](double ms) { return static_cast<double>(bytes) / ms / 1e6; };
  std::printf("| %s | %s | %s | %.2f | %.1f (%.1f) | %.1f%% | %.1f (%.1f) | %.1f%% | %s |\n", data_label, name, dtype,
              static_cast<double>(bytes) / static_cast<double>(size), gbs(c.best_ms), gbs(c.median_ms), 100 * gbs(c.best_ms) / memcpy_gbs,
              gbs(d.best_ms), gbs(d.median_ms), 100 * gbs(d.best_ms) / memcpy_gbs, verdict);
}

/// run(), with an error (a corrupt header read back, a codebook the device
/// wrote wrong) printed as the row instead of ending the table.
template <class Pipe, class T, class... Args>
void row(const char* name, const char* dtype, const std::vector<T>& x, Args&&... args) {
  try {
    run<Pipe, T>(name, dtype, x, std::forward<Args>(args)...);
  } catch (const std::exception& ex) {
    std::printf("| | %s | %s | | | | | | ERROR: %s |\n", name, dtype, ex.what());
  }
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
  row<fast_t, T>("fast", dtype, x, e, eb, reps, mc, label, kernel_path::staged, &ref);
  row<fast_t, T>("fast (fused)", dtype, x, e, eb, reps, mc, label, kernel_path::fused, nullptr, &ref);
  row<fast_t, T>("fast (single pass)", dtype, x, e, eb, reps, mc, label, kernel_path::single_pass, nullptr, &ref);
  row<plain_t, T>("plain", dtype, x, e, eb, reps, mc, label, kernel_path::staged, &ref);
  row<plain_t, T>("plain (fused)", dtype, x, e, eb, reps, mc, label, kernel_path::fused, nullptr, &ref);
  row<plain_t, T>("plain (single pass)", dtype, x, e, eb, reps, mc, label, kernel_path::single_pass, nullptr, &ref);
  row<pipeline<lorenzo, sign_preserving_quantizer, run_length>, T>("rle", dtype, x, e, eb, reps, mc, label);
  // Codebook built on the device inside compress (kernels/huffman_codebook.cuh);
  // fewer repetitions: the Huffman kernels are not tuned yet.
  const int hr = reps < 5 ? reps : 5;
  row<ratio_flat_t, T>("ratio-flat", dtype, x, e, eb, hr, mc, label, kernel_path::staged, &ref);
  row<ratio_flat_t, T>("ratio-flat (fused)", dtype, x, e, eb, hr, mc, label, kernel_path::fused, nullptr, &ref);
}

double memcpy_gbs(std::size_t bytes, int reps) {
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  timer t;
  const timing m = t.time(reps, [&] { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  cudaFree(a);
  cudaFree(b);
  return static_cast<double>(bytes) / m.best_ms / 1e6;  // bytes copied per second (each read once and written once)
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a file: a run stopped by its time limit keeps
  // the rows it finished.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
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
  std::printf("device: %s; D2D memcpy of %.2f GiB: %.1f GB/s (bytes copied per second; DRAM moves twice that)\n\n", prop.name,
              gib, mc);
  std::printf("| data | pipeline | dtype | ratio | compress GB/s best (median) | best of memcpy | decompress GB/s best (median) | best of memcpy | status |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");

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
    if (!f) {
      std::fprintf(stderr, "gpu_throughput: cannot read %s%s (listed in %s)\n", dir.c_str(), file.c_str(), manifest.c_str());
      continue;
    }
    const auto sz = static_cast<std::size_t>(f.tellg());
    f.seekg(0);
    const std::size_t old = corpus.size();
    corpus.resize(old + sz / 4);
    f.read(reinterpret_cast<char*>(corpus.data() + old), static_cast<std::streamsize>(sz));
  }
  // The large tensor: the corpus's activations tiled to the requested size
  // (real activation statistics: ReLU zeros, smooth feature maps), or, with
  // no corpus, a synthetic stand-in: hashed values in [-2, 2) ReLU'd (half
  // zeros, but no spatial smoothness, so prediction gains little there).
  std::vector<float> big(n);
  const char* big_label = "bundled corpus tiled to the size above";
  if (!corpus.empty()) {
    for (std::size_t i = 0; i < n; ++i) big[i] = corpus[i % corpus.size()];
  } else {
    big_label = "synthetic (no corpus found)";
    for (std::size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>((i * 2654435761u >> 7) % 4096) / 1024.0f - 2.0f + 0.001f * static_cast<float>(i % 97);
      big[i] = v > 0 ? v : 0.0f;
    }
  }
  const ebac::extents e_big{n};
  all_pipelines<float>("f32", big, e_big, eb, reps, mc, big_label);
  std::vector<ebac::bfloat16> big16(n);
  for (std::size_t i = 0; i < n; ++i) big16[i] = ebac::from_float<ebac::bfloat16>(big[i]);
  all_pipelines<ebac::bfloat16>("bf16", big16, e_big, eb, reps, mc, big_label);
  big16 = {};
  big = {};
  if (!corpus.empty()) all_pipelines<float>("f32", corpus, ebac::extents{corpus.size()}, eb, reps, mc, "bundled corpus (concatenated)");
  std::printf("\nrelative bound %g; best and median of %d runs each after a warm-up (Huffman: of %d). Every row is then\n"
              "run once more into poisoned memory and checked: device status, every element within the bound. Huffman compression includes the histogram and the\n"
              "codebook built on the device; its decompression excludes the codebook upload (done once, before timing).\n"
              "status \"ok, = staged\": that kernel path wrote the staged path's stream and decoded its values, byte for byte.\n",
              eb, reps, reps < 5 ? reps : 5);
  return 0;
}
