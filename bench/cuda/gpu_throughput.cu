// GPU throughput of the CUDA backend, timed with cudaEvents, against a
// device-to-device memcpy of the same bytes measured in the same run.
//
//   gpu_throughput [--corpus data/corpus/manifest.tsv] [--gib 1] [--eb 1e-3] [--reps 20]
//                  [--training data/training-corpus/manifest.tsv] [--ans-gib 1] [--only PREFIX]
//
// First the ANS section (--ans-gib 0 leaves it out): the training corpus's
// tensors tiled to about --ans-gib, compressed on the host under `max`
// (the device has no ANS encoder), decoded on the device; whole
// decompression and the ANS decode kernel alone, checked against the host
// decoder byte for byte (--gib 0: only this section). Then:
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
#include <chrono>
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

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
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
  U* as() const {
    return static_cast<U*>(p);
  }
};

/// Best and median of `reps` timed runs, in milliseconds.
struct timing {
  double best_ms = 0, median_ms = 0;
};

struct timer {
  cudaEvent_t a, b;
  timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  ~timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
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
  if (cst != 0 || size > cap)
    throw std::runtime_error("compress status " + std::to_string(cst) + ", size " + std::to_string(size));
  const ebac::stream_header h = ebac::cuda::read_header(d_stream, size);
  // Huffman: the decoder's codebook image is read, validated and uploaded
  // once, outside the timed loop (as a trainer would keep it with the stream).
  ebac::cuda::detail::uploaded_codebook book;
  const ebac::cuda::device_huffman_codebook* codebook = nullptr;
  if (h.encoder == ebac::encoder_id::huffman) {
    std::vector<std::byte> section(static_cast<std::size_t>(h.section_bytes[ebac::section_codebook]));
    CHECK_CUDA(
        cudaMemcpy(section.data(), d_stream + h.section_offset(ebac::section_codebook), section.size(), cudaMemcpyDeviceToHost));
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
              static_cast<double>(bytes) / static_cast<double>(size), gbs(c.best_ms), gbs(c.median_ms),
              100 * gbs(c.best_ms) / memcpy_gbs, gbs(d.best_ms), gbs(d.median_ms), 100 * gbs(d.best_ms) / memcpy_gbs, verdict);
}

/// --only PREFIX: the rows whose name starts with it (tools/gpu-check.sh
/// profiles the `fast` rows alone under Nsight Compute); empty: every row.
std::string only_rows;

/// run(), with an error (a corrupt header read back, a codebook the device
/// wrote wrong) printed as the row instead of ending the table.
template <class Pipe, class T, class... Args>
void row(const char* name, const char* dtype, const std::vector<T>& x, Args&&... args) {
  if (std::string(name).rfind(only_rows, 0) != 0) return;
  try {
    run<Pipe, T>(name, dtype, x, std::forward<Args>(args)...);
  } catch (const std::exception& ex) { std::printf("| | %s | %s | | | | | | ERROR: %s |\n", name, dtype, ex.what()); }
}

template <class T>
void all_pipelines(const char* dtype, const std::vector<T>& x, const ebac::extents& e, double eb, int reps, double mc,
                   const char* label) {
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

/// The f32 activations a corpus manifest lists (file, dtype, dims, model,
/// module, kind, role; the bundled corpus's and the training corpus's
/// format), each with its shape and values.
struct activation_tensor {
  std::string file, kind;
  ebac::extents shape{};
  std::vector<float> values;
};

std::vector<activation_tensor> read_activations(const std::string& manifest) {
  std::vector<activation_tensor> out;
  std::ifstream mf(manifest);
  if (!mf) return out;
  const std::string dir = manifest.substr(0, manifest.find_last_of('/') + 1);
  std::string line;
  std::getline(mf, line);
  while (std::getline(mf, line)) {
    std::stringstream ss(line);
    std::string file, dtype, dims, model, module, kind, role;
    std::getline(ss, file, '\t');
    std::getline(ss, dtype, '\t');
    std::getline(ss, dims, '\t');
    std::getline(ss, model, '\t');
    std::getline(ss, module, '\t');
    std::getline(ss, kind, '\t');
    std::getline(ss, role, '\t');
    if (dtype != "f32" || role != "activation") continue;
    activation_tensor t{file, kind, {}, {}};
    std::stringstream ds(dims);
    std::string d;
    std::vector<std::uint64_t> ext;
    while (std::getline(ds, d, ',')) ext.push_back(std::stoull(d));
    if (ext.empty() || ext.size() > static_cast<std::size_t>(ebac::max_rank)) {
      std::fprintf(stderr, "gpu_throughput: %s: dims %s\n", file.c_str(), dims.c_str());
      continue;
    }
    t.shape.rank = static_cast<int>(ext.size());
    for (std::size_t k = 0; k < ext.size(); ++k) t.shape.dims[k] = ext[k];
    std::ifstream f(dir + file, std::ios::binary | std::ios::ate);
    std::uint64_t count = 0;
    (void)t.shape.count(count);
    if (!f || static_cast<std::uint64_t>(f.tellg()) != 4 * count) {
      std::fprintf(stderr, "gpu_throughput: cannot read %s%s as %s (listed in %s)\n", dir.c_str(), file.c_str(), dims.c_str(),
                   manifest.c_str());
      continue;
    }
    t.values.resize(count);
    f.seekg(0);
    f.read(reinterpret_cast<char*>(t.values.data()), static_cast<std::streamsize>(4 * count));
    out.push_back(std::move(t));
  }
  return out;
}

/// One ANS row: the tensor compressed on the host under `max` (its
/// predictor chosen per tensor) in chunks of `chunk`, then decoded on the
/// device on both paths. Times the whole decompress (every kernel, codebook
/// uploaded once before) and the ANS decode kernels alone (chunk table read
/// before), and checks each path's values against the host decoder's, byte
/// for byte.
void ans_row(const activation_tensor& t, const std::vector<float>& x, const ebac::extents& e, double eb, std::uint32_t chunk,
             int reps) {
  using ebac::cuda::kernels::ans_decode_threads;
  ebac::pipeline_spec spec;
  (void)ebac::parse_pipeline("max", spec);
  spec.chunk_elements = chunk;
  ebac::compress_options opt;
  opt.bound = {eb, ebac::bound_mode::relative};
  opt.checksum = false;
  opt.threads = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto stream = ebac::with_pipeline(spec, e, [&](auto p) { return ebac::host::compress(x.data(), e, p, opt); });
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<float> host_back(x.size());
  ebac::host::decompress(stream.data(), stream.size(), host_back.data(), x.size(), 0);
  const auto t2 = std::chrono::steady_clock::now();
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  const std::size_t bytes = x.size() * sizeof(float);
  auto gbs = [&](double ms) { return static_cast<double>(bytes) / ms / 1e6; };
  const double host_c_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double host_d_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::string dims;
  for (int k = 0; k < e.rank; ++k) dims += (k ? "x" : "") + std::to_string(e.dims[k]);
  const char* shape = dims.c_str();
  const char* pred = h.predictor == ebac::predictor_id::none ? "none" : h.lorenzo_params.dims >= 2 ? "lorenzo2" : "lorenzo";
  if (h.is_stored() || h.encoder != ebac::encoder_id::context_ans) {
    std::printf("| %s (%s) | %s | %g | %u | | | | | | not an ANS stream (stored) |\n", t.file.c_str(), t.kind.c_str(), shape, eb,
                chunk);
    return;
  }
  device_memory stream_mem(stream.size()), out_mem(bytes), status_mem(sizeof(int));
  std::byte* d_stream = stream_mem.as<std::byte>();
  float* d_out = out_mem.as<float>();
  int* d_status = status_mem.as<int>();
  CHECK_CUDA(cudaMemcpy(d_stream, stream.data(), stream.size(), cudaMemcpyHostToDevice));
  const ebac::cuda::detail::uploaded_codebook book =
      ebac::cuda::detail::read_codebook(h, d_stream, nullptr, ebac::cuda::default_allocator());
  using ebac::cuda::kernel_path;
  timer tm;
  // Whole decompression on both ANS paths.
  timing whole[2];
  const char* verdict = "ok, = host";
  std::vector<float> back(x.size());
  for (int k = 0; k < 2; ++k) {
    const kernel_path path = k == 0 ? kernel_path::staged : kernel_path::fused;
    std::size_t dtemp = 0;
    CHECK_CUDA(ebac::cuda::decompress<float>(nullptr, dtemp, h, d_stream, stream.size(), d_out, x.size(), nullptr, nullptr,
                                             &book.view, path));
    device_memory dtemp_mem(dtemp);
    whole[k] = tm.time(reps, [&] {
      CHECK_CUDA(ebac::cuda::decompress<float>(dtemp_mem.p, dtemp, h, d_stream, stream.size(), d_out, x.size(), d_status, nullptr,
                                               &book.view, path));
    });
    // Checked after timing, from one more run into poisoned memory.
    CHECK_CUDA(cudaMemset(d_out, 0xff, bytes));
    CHECK_CUDA(cudaMemset(d_status, 0xff, sizeof(int)));
    CHECK_CUDA(ebac::cuda::decompress<float>(dtemp_mem.p, dtemp, h, d_stream, stream.size(), d_out, x.size(), d_status, nullptr,
                                             &book.view, path));
    int st = 0;
    CHECK_CUDA(cudaMemcpy(&st, d_status, sizeof st, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(back.data(), d_out, bytes, cudaMemcpyDeviceToHost));
    if (st != 0) verdict = k == 0 ? "DECODE ERROR (staged)" : "DECODE ERROR (fused)";
    else if (std::memcmp(back.data(), host_back.data(), bytes) != 0)
      verdict = k == 0 ? "VALUES DIFFER FROM HOST (staged)" : "VALUES DIFFER FROM HOST (fused)";
  }
  // The decode kernels alone, on the chunk table the decompressor would read.
  const std::uint64_t n = x.size(), chunks = (n + chunk - 1) / chunk;
  std::vector<std::uint64_t> sizes(chunks), offsets(chunks);
  std::uint64_t at = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    std::uint32_t b = 0;
    std::memcpy(&b, stream.data() + h.section_offset(ebac::section_chunk_table) + 4 * c, 4);
    sizes[c] = b;
    offsets[c] = at;
    at += b;
  }
  device_memory sizes_mem(chunks * 8), offsets_mem(chunks * 8), field_mem(n * 4),
      interleaved_mem(ebac::cuda::kernels::ans_interleaved_elements(chunks, chunk) * 4);
  CHECK_CUDA(cudaMemcpy(sizes_mem.p, sizes.data(), chunks * 8, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(offsets_mem.p, offsets.data(), chunks * 8, cudaMemcpyHostToDevice));
  const std::byte* payload = d_stream + h.section_offset(ebac::section_payload);
  const std::uint64_t payload_bytes = h.section_bytes[ebac::section_payload];
  const unsigned blocks = static_cast<unsigned>((chunks + ans_decode_threads - 1) / ans_decode_threads);
  const timing plain = tm.time(reps, [&] {
    ebac::cuda::kernels::serial_decode_kernel<ebac::context_ans><<<blocks, ans_decode_threads>>>(
        book.view.ans, payload, payload_bytes, sizes_mem.as<std::uint64_t>(), offsets_mem.as<std::uint64_t>(), n, chunk, chunks,
        field_mem.as<std::uint32_t>(), d_status);
    CHECK_CUDA(cudaGetLastError());
  });
  const timing shared = tm.time(reps, [&] {
    CHECK_CUDA(ebac::cuda::detail::launch_ans_shared(
        book.view.ans, payload, payload_bytes, sizes_mem.as<std::uint64_t>(), offsets_mem.as<std::uint64_t>(), n, chunk, chunks,
        interleaved_mem.as<std::uint32_t>(), field_mem.as<std::uint32_t>(), d_status, nullptr));
  });
  std::printf("| %s (%s) | %s | %g | %u | %s | %.2f | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %s |\n", t.file.c_str(),
              t.kind.c_str(), shape, eb, chunk, pred, static_cast<double>(bytes) / static_cast<double>(stream.size()),
              gbs(whole[0].best_ms), gbs(whole[1].best_ms), gbs(plain.best_ms), gbs(shared.best_ms), gbs(host_c_ms),
              gbs(host_d_ms), verdict);
}

/// The ANS section: each training-corpus tensor tiled along its first axis
/// to about `gib`, at three bounds in `max`'s chunks, and at 1e-2 in two
/// smaller chunk sizes (more chunks, more threads).
void ans_section(const std::string& manifest, double gib, int reps) {
  const auto tensors = read_activations(manifest);
  if (tensors.empty()) {
    std::printf("ANS section: no training corpus at %s\n\n", manifest.c_str());
    return;
  }
  std::printf("ANS (`max`) streams compressed on the host, decoded on the device (GB/s of decoded f32 per second)\n\n");
  std::printf(
      "| tensor (kind) | shape | rel | chunk | predictor | ratio | decompress GB/s, staged / fused | ANS kernels GB/s, plain / "
      "shared tables + transpose | host compress / decompress GB/s, all cores | status |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& t : tensors) {
    const std::uint64_t per = t.values.size() * sizeof(float);
    const std::uint64_t copies =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(gib * (1ull << 30) / static_cast<double>(per) + 0.5));
    std::vector<float> x(t.values.size() * copies);
    for (std::uint64_t c = 0; c < copies; ++c)
      std::copy(t.values.begin(), t.values.end(), x.begin() + static_cast<std::ptrdiff_t>(c * t.values.size()));
    ebac::extents e = t.shape;
    e.dims[0] *= copies;
    for (double eb : {1e-1, 1e-2, 1e-3}) {
      for (std::uint32_t chunk : {1u << 16, 1u << 14, 1u << 12}) {
        if (chunk != (1u << 16) && eb != 1e-2) continue;
        try {
          ans_row(t, x, e, eb, chunk, reps);
        } catch (const std::exception& ex) {
          std::printf("| %s | | %g | %u | | | | | | ERROR: %s |\n", t.file.c_str(), eb, chunk, ex.what());
        }
      }
    }
  }
  std::printf(
      "\nTensors tiled along the first axis to about %.2f GiB; GB/s of decoded f32, best of %d runs after a warm-up. "
      "\"decompress\": every\n"
      "kernel (chunk table, ANS decode, unzigzag, inverse prediction, reconstruction, outliers), codebook uploaded once before; "
      "staged:\n"
      "one thread a chunk over the tables in global memory; fused: the tables in shared memory, codes warp-interleaved, then "
      "transposed.\n"
      "\"ANS kernels\": those decode kernels alone (plain: %u threads a block; shared: with its transpose). Host columns: one "
      "run each,\n"
      "all cores (OpenMP), wall clock. Status: one more device run of each path into poisoned memory, compared with the host "
      "decoder byte for byte.\n\n",
      gib, reps, ebac::cuda::kernels::ans_decode_threads);
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
  std::string manifest = "data/corpus/manifest.tsv", training = "data/training-corpus/manifest.tsv";
  double gib = 1.0, eb = 1e-3, ans_gib = 1.0;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--corpus") manifest = argv[i + 1];
    else if (k == "--gib") gib = std::atof(argv[i + 1]);
    else if (k == "--eb") eb = std::atof(argv[i + 1]);
    else if (k == "--reps") reps = std::atoi(argv[i + 1]);
    else if (k == "--training") training = argv[i + 1];
    else if (k == "--ans-gib") ans_gib = std::atof(argv[i + 1]);
    else if (k == "--only") only_rows = argv[i + 1];
    else {
      std::fprintf(stderr, "gpu_throughput: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "gpu_throughput: option %s needs a value\n", argv[argc - 1]);
    return 2;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n\n", prop.name);
  if (ans_gib > 0) ans_section(training, ans_gib, reps);
  if (gib <= 0) return 0;  // --gib 0: the ANS section only
  const std::size_t n = static_cast<std::size_t>(gib * (1u << 30) / sizeof(float));
  const double mc = memcpy_gbs(n * sizeof(float), reps);
  std::printf("D2D memcpy of %.2f GiB: %.1f GB/s (bytes copied per second; DRAM moves twice that)\n\n", gib, mc);
  std::printf(
      "| data | pipeline | dtype | ratio | compress GB/s best (median) | best of memcpy | decompress GB/s best (median) | best "
      "of memcpy | status |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");

  // Bundled corpus: all f32 activations concatenated (flat).
  std::vector<float> corpus;
  for (const auto& t : read_activations(manifest)) corpus.insert(corpus.end(), t.values.begin(), t.values.end());
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
  if (!corpus.empty())
    all_pipelines<float>("f32", corpus, ebac::extents{corpus.size()}, eb, reps, mc, "bundled corpus (concatenated)");
  std::printf(
      "\nrelative bound %g; best and median of %d runs each after a warm-up (Huffman: of %d). Every row is then\n"
      "run once more into poisoned memory and checked: device status, every element within the bound. Huffman compression "
      "includes the histogram and the\n"
      "codebook built on the device; its decompression excludes the codebook upload (done once, before timing).\n"
      "status \"ok, = staged\": that kernel path wrote the staged path's stream and decoded its values, byte for byte.\n",
      eb, reps, reps < 5 ? reps : 5);
  return 0;
}
