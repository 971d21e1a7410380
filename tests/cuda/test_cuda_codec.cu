// GPU tests of the CUDA backend (CTest label gpu). They need a GPU to run;
// CI only compiles them. Each checks the device result against the host
// backend, byte for byte.
#include <ebac/cuda/codec.cuh>
#include <ebac/ebac.hpp>

#include "../host/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

template <class T>
struct device_vector {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_vector(std::size_t count) : n(count) {
    REQUIRE(cudaMalloc(&p, (count ? count : 1) * sizeof(T)) == cudaSuccess);
  }
  device_vector(const std::vector<T>& h) : device_vector(h.size()) {
    REQUIRE(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~device_vector() { cudaFree(p); }
  std::vector<T> to_host(std::size_t count) const {
    std::vector<T> h(count);
    REQUIRE(cudaMemcpy(h.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

/// Activation-like data: ReLU'd normals (even seeds) or signed normals (odd
/// seeds), with a NaN, an Inf and a denormal the codec must keep exactly. No
/// finite far outlier: under a relative bound one would set the range alone
/// and leave nearly every code 0 or 1 (with_far_outlier() adds one on purpose).
std::vector<float> activations(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = seed % 2 ? nd(rng) : std::max(0.0f, nd(rng));
  if (n > 10) {
    x[3] = NAN;
    x[5] = INFINITY;
    x[9] = 1e-42f;
  }
  return x;
}

std::vector<float> with_far_outlier(std::vector<float> x) {
  if (x.size() > 7) x[7] = -1e30f;
  return x;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && *v != '0';
}

/// EBAC_GPU_TEST_QUICK=1 (the sanitizer runs): shapes above 100,000
/// elements are left out and the fixed sizes shrink (sized()), so the
/// instrumented suite ends in its time limit.
bool quick() { return env_flag("EBAC_GPU_TEST_QUICK"); }
std::size_t sized(std::size_t full, std::size_t quick_size) { return quick() ? quick_size : full; }

/// Every allocation the host layer makes comes pre-filled with 0xA5 bytes,
/// so a kernel that skips a byte of the stream or an element of the output
/// cannot pass on what an earlier run left in reused pool memory.
/// EBAC_GPU_TEST_NO_POISON=1 (the initcheck run) leaves memory as allocated,
/// so that compute-sanitizer sees a read of a byte no kernel wrote.
ebac::cuda::allocator poisoning_allocator() {
  if (env_flag("EBAC_GPU_TEST_NO_POISON")) return ebac::cuda::default_allocator();
  ebac::cuda::allocator a;
  a.allocate = [](std::size_t bytes, cudaStream_t s, void*) -> void* {
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes ? bytes : 1, s) != cudaSuccess) return nullptr;
    if (cudaMemsetAsync(p, 0xA5, bytes ? bytes : 1, s) != cudaSuccess) {
      (void)cudaFreeAsync(p, s);
      return nullptr;
    }
    return p;
  };
  a.deallocate = [](void* p, cudaStream_t s, void*) { (void)cudaFreeAsync(p, s); };
  return a;
}

/// The bound, checked on the host's reconstruction (the device's equals it
/// bit for bit): finite values within eb_abs (decided exactly), non-finite
/// ones restored bit for bit, zero and sign kept by the sign-preserving
/// quantizer.
template <class T>
void check_bound(const std::vector<T>& x, const std::vector<T>& y, double eb_abs, bool sign_kept) {
  std::uint64_t bad = 0, first = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float xf = ebac::to_float(x[i]), yf = ebac::to_float(y[i]);
    bool ok;
    if (!std::isfinite(xf)) ok = ebac::raw_bits(x[i]) == ebac::raw_bits(y[i]);
    else
      ok = std::isfinite(yf) && ebac_test::exact_within(xf, yf, eb_abs) &&
           (!sign_kept || ((xf == 0.0f) == (yf == 0.0f) && (xf < 0.0f) == (yf < 0.0f)));
    if (!ok && bad++ == 0) first = i;
  }
  CHECK_MESSAGE(bad == 0, bad, " elements break the bound (eb_abs ", eb_abs, "); first at ", first,
                ": x=", ebac::to_float(x[first]), " y=", ebac::to_float(y[first]));
}

/// Device compress + decompress on each path; the stream and the
/// reconstruction must equal the host's (computed once). Floats: the host's
/// reconstruction must keep the bound; integers and bool: it must be exact.
/// `x` holds `count` elements of T (a bool tensor is passed as its bytes).
/// Returns the host stream's header, so a case can check which stages it
/// reached.
template <class T, class Pipeline>
ebac::stream_header check_matches_host_ptr(const T* x, std::size_t count, const ebac::extents& e, const Pipeline& pipe,
                                           ebac::compress_options opt, std::initializer_list<ebac::cuda::kernel_path> paths) {
  using S = ebac::storage_t<T>;
  opt.checksum = false;  // device streams carry none
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  REQUIRE(n == count);  // the shape must describe the data exactly
  const auto host_stream = ebac::host::compress(x, e, pipe, opt);
  const auto h = ebac::host::inspect(host_stream.data(), host_stream.size());
  std::vector<S> host_back(count);
  ebac::host::decompress(host_stream.data(), host_stream.size(), reinterpret_cast<T*>(host_back.data()), count);
  const S* xs = reinterpret_cast<const S*>(x);
  if constexpr (ebac::floating_element<T>) {
    // The promise, not only the header's eb_abs: a constant tensor under a
    // relative bound has a quantizer bound above its promised 0 (quantizer_bound);
    // a lossless stream (levels, stored) has eb_abs 0 and must be exact.
    const std::vector<T> xv(xs, xs + count);
    check_bound(xv, host_back, h.lossless() ? 0.0 : std::min(h.eb_abs, ebac_test::promised_bound(xv, opt.bound)),
                !h.lossless() && std::is_same_v<typename Pipeline::quantizer_type, ebac::sign_preserving_quantizer>);
  } else {
    CHECK(std::memcmp(host_back.data(), xs, count * sizeof(S)) == 0);  // lossless
  }

  device_vector<S> d_in(std::vector<S>(xs, xs + count));
  const T* d_x = reinterpret_cast<const T*>(d_in.p);
  const ebac::cuda::allocator poison = poisoning_allocator();
  for (const auto path : paths) {
    CAPTURE(static_cast<int>(path));
    auto s = ebac::cuda::compress(d_x, e, pipe, opt, nullptr, poison, true, path);
    REQUIRE(s.bytes == host_stream.size());
    std::vector<std::byte> dev_stream(s.bytes);
    REQUIRE(cudaMemcpy(dev_stream.data(), s.data(), s.bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(dev_stream == host_stream);

    device_vector<S> d_out(count);
    REQUIRE(cudaMemset(d_out.p, 0xff, count * sizeof(S)) == cudaSuccess);  // decoder must write every element
    ebac::cuda::decompress(s.data(), s.bytes, reinterpret_cast<T*>(d_out.p), count, nullptr, poison, path);
    const auto dev_back = d_out.to_host(count);
    CHECK(std::memcmp(dev_back.data(), host_back.data(), count * sizeof(S)) == 0);
  }
  return h;
}

template <class Pipeline, class T>
ebac::stream_header check_matches_host(const std::vector<T>& x, const ebac::extents& e, const Pipeline& pipe,
                                       const ebac::compress_options& opt, std::initializer_list<ebac::cuda::kernel_path> paths) {
  return check_matches_host_ptr(x.data(), x.size(), e, pipe, opt, paths);
}

template <class Pipeline, class T>
ebac::stream_header check_matches_host(const std::vector<T>& x, const ebac::extents& e, const Pipeline& pipe,
                                       const ebac::compress_options& opt,
                                       ebac::cuda::kernel_path path = ebac::cuda::kernel_path::staged) {
  return check_matches_host(x, e, pipe, opt, {path});
}

/// Captures one device-scope compress and one decompress in CUDA graphs and
/// replays them, with new input and poisoned outputs before every replay
/// (so a replay must recompute everything: the range, the stages, for
/// Huffman the codebook, the sizes). The compress graph's four inputs take
/// all three ways through it, chosen on the device at each replay:
/// activations (the pipeline's quantizer), a dropout mask (palette
/// indices) and NaNs with random payloads (every element an outlier: the
/// stored form). Temp storage is passed at an address that is not 256-byte
/// aligned (a slice of a caller's workspace).
template <class Pipeline>
void check_graph_capture(const Pipeline& pipe, ebac::cuda::kernel_path path) {
  using E = typename Pipeline::encoder_type;
  CAPTURE(static_cast<int>(path));
  const std::size_t n = sized(std::size_t{1} << 20, std::size_t{1} << 16);
  const ebac::extents e{n};
  std::vector<float> mask(n), nans(n);
  std::mt19937 rng(12);
  for (auto& v : mask) v = rng() % 10 == 0 ? 0.0f : 1.0f / 0.9f;
  for (auto& v : nans) {
    const std::uint32_t b = 0x7f800001u | (rng() & 0x807fffffu);  // a NaN with a random sign and payload
    std::memcpy(&v, &b, sizeof v);
  }
  const std::vector<float> inputs[4] = {activations(n, 3), mask, nans, activations(n, 4)};
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::relative};
  opt.checksum = false;
  device_vector<float> d_in(n);
  std::size_t temp = 0;
  REQUIRE(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe, opt, nullptr, 0, nullptr, nullptr, nullptr, path) == cudaSuccess);
  const std::size_t cap = ebac::cuda::output_capacity<Pipeline, float>(e, pipe);
  device_vector<std::byte> d_temp(temp + 8), d_out(cap);
  device_vector<std::uint64_t> d_size(1);
  device_vector<int> d_status(1);
  cudaStream_t s;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  auto capture = [&](auto&& enqueue) {
    cudaGraph_t graph;
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    const cudaError_t queued = enqueue();
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);  // always end it, so a failure does not leak into later tests
    REQUIRE(queued == cudaSuccess);
    REQUIRE(ended == cudaSuccess);
    cudaGraphExec_t exec;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    cudaGraphDestroy(graph);
    return exec;
  };
  cudaGraphExec_t compress_exec = capture([&] {
    return ebac::cuda::compress(d_temp.p + 8, temp, d_in.p, e, pipe, opt, d_out.p, cap, d_size.p, d_status.p, s, path);
  });
  std::vector<std::byte> last_stream;
  for (int replay = 0; replay < 4; ++replay) {
    CAPTURE(replay);
    const auto& x = inputs[replay];
    const auto host_stream = ebac::host::compress(x.data(), e, pipe, opt);
    const auto hh = ebac::host::inspect(host_stream.data(), host_stream.size());
    CHECK(hh.is_stored() == (replay == 2));
    CHECK((!hh.is_stored() && hh.quantizer == ebac::quantizer_id::levels) == (replay == 1));
    REQUIRE(cudaMemcpy(d_in.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(d_out.p, 0xff, cap) == cudaSuccess);
    REQUIRE(cudaMemset(d_size.p, 0xff, sizeof(std::uint64_t)) == cudaSuccess);
    REQUIRE(cudaMemset(d_status.p, 0xff, sizeof(int)) == cudaSuccess);
    // s does not wait for the legacy stream's copy and memsets (it is
    // non-blocking, and they may still be running when the calls return).
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaGraphLaunch(compress_exec, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(d_status.to_host(1)[0] == 0);
    const auto size = d_size.to_host(1)[0];
    REQUIRE(size == host_stream.size());
    CHECK(d_out.to_host(size) == host_stream);
    last_stream = host_stream;
  }
  cudaGraphExecDestroy(compress_exec);

  // Decompression of the last stream (still in d_out), captured too.
  const auto h = ebac::host::inspect(last_stream.data(), last_stream.size());
  std::vector<float> host_back(n);
  ebac::host::decompress(last_stream.data(), last_stream.size(), host_back.data(), n);
  ebac::cuda::detail::uploaded_codebook book;
  const ebac::cuda::device_huffman_codebook* codebook = nullptr;
  if constexpr (E::needs_codebook) {
    ebac::huffman_codebook cb;
    REQUIRE(ebac::huffman_codebook::deserialize(last_stream.data() + h.section_offset(ebac::section_codebook),
                                                h.section_bytes[ebac::section_codebook], cb) == ebac::status::ok);
    book = ebac::cuda::detail::upload_codebook(cb, s, ebac::cuda::default_allocator());
    codebook = &book.view;
  }
  std::size_t dtemp = 0;
  REQUIRE(ebac::cuda::decompress<float>(nullptr, dtemp, h, d_out.p, last_stream.size(), nullptr, n, nullptr, s, codebook, path) ==
          cudaSuccess);
  device_vector<std::byte> d_dtemp(dtemp + 8);
  device_vector<float> d_back(n);
  cudaGraphExec_t decompress_exec = capture([&] {
    return ebac::cuda::decompress<float>(d_dtemp.p + 8, dtemp, h, d_out.p, last_stream.size(), d_back.p, n, d_status.p, s,
                                         codebook, path);
  });
  for (int replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    REQUIRE(cudaMemset(d_back.p, 0xff, n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemset(d_status.p, 0xff, sizeof(int)) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // as above
    REQUIRE(cudaGraphLaunch(decompress_exec, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(d_status.to_host(1)[0] == 0);
    const auto back = d_back.to_host(n);
    CHECK(std::memcmp(back.data(), host_back.data(), n * sizeof(float)) == 0);
  }
  cudaGraphExecDestroy(decompress_exec);
  // The codebook's memory goes back on s (cudaFreeAsync): before s goes.
  book = ebac::cuda::detail::uploaded_codebook{};
  cudaStreamDestroy(s);
}

/// Overwrites one random byte in [first, first + span) of a (checksum-less)
/// host stream, `trials` times, and decodes each on the host and on the
/// device (into poisoned memory). The device must do what the host decoder
/// does with the same bytes, every time: reject them (with a stream error,
/// not a device failure), or decode them to the same bits. Every decode must
/// leave no sticky CUDA error (nothing read or written out of bounds).
/// Returns how many were rejected.
int device_agrees_on_damage(const std::vector<std::byte>& stream, std::size_t first, std::size_t span, std::size_t count,
                            int trials, std::uint32_t seed, ebac::cuda::kernel_path path = ebac::cuda::kernel_path::staged) {
  std::mt19937 rng(seed);
  device_vector<float> out(count);
  std::vector<float> host_out(count);
  int rejected = 0, other_code = 0;
  for (int trial = 0; trial < trials; ++trial) {
    CAPTURE(trial);
    auto bad = stream;
    const std::size_t pos = first + rng() % span;
    CAPTURE(pos);
    bad[pos] = static_cast<std::byte>(rng());
    bool host_ok = true, dev_ok = true;
    ebac::status host_code = ebac::status::ok, dev_code = ebac::status::ok;
    std::string dev_what;
    try {
      ebac::host::decompress(bad.data(), bad.size(), host_out.data(), count, 1);
    } catch (const ebac::error& e) {
      host_ok = false;
      host_code = e.code();
    }
    device_vector<std::byte> d(bad);
    REQUIRE(cudaMemset(out.p, 0xff, count * sizeof(float)) == cudaSuccess);
    try {
      ebac::cuda::decompress(d.p, bad.size(), out.p, count, nullptr, ebac::cuda::default_allocator(), path);
    } catch (const ebac::error& e) {
      dev_ok = false;
      dev_code = e.code();
      dev_what = e.what();
    }
    REQUIRE(cudaGetLastError() == cudaSuccess);
    CHECK_MESSAGE(dev_ok == host_ok, "the device ", dev_ok ? "decoded" : "rejected", " a damaged stream that the host ",
                  host_ok ? "decoded" : "rejected", dev_ok ? "" : ": ", dev_what);
    if (dev_ok && host_ok) {
      const auto back = out.to_host(count);
      CHECK_MESSAGE(std::memcmp(back.data(), host_out.data(), count * sizeof(float)) == 0,
                    "the device decoded a damaged stream to other values than the host");
    }
    if (!dev_ok) {
      ++rejected;
      CHECK_MESSAGE(dev_code != ebac::status::device_error, "a damaged stream failed the device: ", dev_what);
      other_code += !host_ok && dev_code != host_code;
    }
  }
  if (other_code > 0) MESSAGE(other_code, " of ", rejected, " rejections with another status than the host's");
  return rejected;
}

/// Calls f(x, e) with activations for every shape, a fresh seed each.
template <class F>
void for_each_shape(std::initializer_list<ebac::extents> shapes, std::uint32_t& seed, F&& f) {
  for (const auto& e : shapes) {
    std::uint64_t n = 0;
    REQUIRE(e.count(n) == ebac::status::ok);
    if (quick() && n > 100000) continue;
    CAPTURE(n);
    CAPTURE(seed);
    f(activations(n, seed++), e);
  }
}

/// Bit-packing with 2-D and 3-D Lorenzo over the last axes (rank >= 3 only).
template <class T>
void check_lorenzo_along_last(const std::vector<T>& x, const ebac::extents& e, const ebac::compress_options& opt,
                              ebac::cuda::kernel_path path) {
  if (e.rank < 3) return;
  ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> p;
  p.predictor = ebac::lorenzo::along_last(2, e.rank, 64);
  check_matches_host(x, e, p, opt, path);
  p.predictor = ebac::lorenzo::along_last(3, e.rank, 16);
  check_matches_host(x, e, p, opt, path);
}

// The kernel paths and the pipelines the cases below run.
constexpr auto staged = ebac::cuda::kernel_path::staged;
constexpr auto fused = ebac::cuda::kernel_path::fused;
constexpr auto single_pass = ebac::cuda::kernel_path::single_pass;
using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;         // "fast"
using plain_t = ebac::pipeline<ebac::no_prediction, ebac::sign_preserving_quantizer, ebac::block_bitpack>;  // "plain"
using linear_plain_t = ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack>;
using ratio_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
using rle_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length>;

/// Calls f(pipeline, paths) for the named pipelines' stage combinations and
/// every kernel path each one has (the fused decoders take every encoder).
template <class F>
void for_each_pipeline(F&& f) {
  f(fast_t{}, std::initializer_list<ebac::cuda::kernel_path>{staged, fused, single_pass});
  f(plain_t{}, std::initializer_list<ebac::cuda::kernel_path>{staged, fused, single_pass});
  fast_t small_chunks;
  small_chunks.chunk_elements = 64;  // many chunks: many level sets to merge (the main stages' are tiles of 4096)
  f(small_chunks, std::initializer_list<ebac::cuda::kernel_path>{staged, single_pass});
  f(ratio_t{}, std::initializer_list<ebac::cuda::kernel_path>{staged, fused});
  f(rle_t{}, std::initializer_list<ebac::cuda::kernel_path>{staged, fused});
}

/// for_each_pipeline, and on a tensor of rank >= 2 Lorenzo along its last
/// axes too: the main stages then cut chunks of whole rows or planes
/// (format/chunking.hpp), while a palette's chunks keep the pipeline's size,
/// so the device launches two cuts and must write the chosen one's.
template <class F>
void for_each_pipeline(const ebac::extents& e, F&& f) {
  for_each_pipeline(f);
  if (e.rank < 2) return;
  fast_t rows;
  rows.predictor = ebac::lorenzo::along_last(1, e.rank, 64);
  f(rows, std::initializer_list<ebac::cuda::kernel_path>{staged, fused, single_pass});
  fast_t planes;
  planes.predictor = ebac::lorenzo::along_last(2, e.rank, 64);
  f(planes, std::initializer_list<ebac::cuda::kernel_path>{staged, fused, single_pass});
  ratio_t ratio_planes;
  ratio_planes.predictor = ebac::lorenzo::along_last(2, e.rank, 64);
  f(ratio_planes, std::initializer_list<ebac::cuda::kernel_path>{staged, fused});
}

/// Which stages a host stream reached, counted over a test's cases (each
/// case must reach the stages it was built for).
struct stage_tally {
  int levels = 0, exact = 0, pool = 0, stored = 0, float_q = 0;
  void add(const ebac::stream_header& h) {
    if (h.is_stored()) ++stored;
    else if (h.quantizer == ebac::quantizer_id::levels) ++levels;
    else if (h.quantizer == ebac::quantizer_id::exact) ++exact;
    else if (h.quantizer == ebac::quantizer_id::pool_window) ++pool;
    else ++float_q;
  }
};

/// Integer test data: a smooth ramp (exact, small Lorenzo residuals), random
/// values over a wide range (exact, above 2^22 where the type allows:
/// outliers), labels of 11 classes (a palette), random bits (stored).
template <class I>
std::vector<std::pair<const char*, std::vector<I>>> integer_cases(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<const char*, std::vector<I>>> v;
  std::vector<I> ramp(n), wide(n), labels(n), bits(n);
  for (std::size_t i = 0; i < n; ++i) {
    ramp[i] = static_cast<I>((i / 3) % 100);
    const std::uint64_t r = rng();
    if constexpr (sizeof(I) >= 4)
      wide[i] = static_cast<I>(static_cast<std::int64_t>(r % 20000000) - 10000000);  // |v| up to 10^7 > 2^22
    else wide[i] = static_cast<I>(static_cast<std::int64_t>(r % 60) - (std::is_signed_v<I> ? 30 : 0));
    labels[i] = static_cast<I>(rng() % 11);
    bits[i] = static_cast<I>(rng());
  }
  v.emplace_back("ramp", std::move(ramp));
  v.emplace_back("wide", std::move(wide));
  v.emplace_back("labels", std::move(labels));
  v.emplace_back("random bits", std::move(bits));
  return v;
}

template <class I>
void check_integer_dtype(std::uint32_t& seed) {
  stage_tally tally;
  for (const ebac::extents e :
       {ebac::extents{1}, ebac::extents{31}, ebac::extents{16385}, ebac::extents{3, 5, 7, 11}, ebac::extents{8, 3000}}) {
    std::uint64_t n = 0;
    REQUIRE(e.count(n) == ebac::status::ok);
    for (const auto& [name, x] : integer_cases<I>(n, seed++)) {
      CAPTURE(name);
      CAPTURE(n);
      for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        tally.add(check_matches_host(x, e, pipe, ebac::compress_options{}, paths));
      });
      ebac::compress_options no_levels;
      no_levels.max_levels = 0;  // labels as exact integers too
      tally.add(check_matches_host(x, e, fast_t{}, no_levels, {staged, fused, single_pass}));
    }
  }
  CHECK(tally.levels > 0);
  CHECK(tally.exact > 0);
  CHECK(tally.stored > 0);
}

/// Few-level float tensors: dropout masks, one-hot rows, ternary values.
std::vector<std::pair<const char*, std::vector<float>>> level_cases(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::size_t n = rows * cols;
  std::vector<float> mask(n), onehot(n, 0.0f), ternary(n);
  for (auto& v : mask) v = rng() % 10 == 0 ? 0.0f : 1.0f / 0.9f;
  for (std::size_t r = 0; r < rows; ++r) onehot[r * cols + rng() % cols] = 1.0f;
  for (auto& v : ternary) {
    const unsigned k = rng() % 10;
    v = k < 3 ? -0.7f : (k < 7 ? 0.0f : 0.7f);
  }
  return {{"dropout mask", mask}, {"one-hot", onehot}, {"ternary", ternary}};
}

/// Max-pool indices of a PyTorch MaxPool (flat over each input plane) for
/// an output of `planes` x out[0..d): each picks a random position of its
/// window inside the input (never the padding).
std::vector<std::int64_t> pool_indices(const ebac::pool_geometry& g, std::uint64_t planes, const std::uint64_t* out,
                                       std::uint32_t seed) {
  std::mt19937 rng(seed);
  const int d = static_cast<int>(g.dims);
  std::uint64_t per_plane = 1;
  for (int j = 0; j < d; ++j) per_plane *= out[j];
  std::vector<std::int64_t> idx(planes * per_plane);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::uint64_t rest = i % per_plane, flat = 0, stride = 1;
    for (int j = d - 1; j >= 0; --j) {
      const std::uint64_t o = rest % out[j];
      rest /= out[j];
      std::int64_t pos = -1;
      while (pos < 0 || pos >= static_cast<std::int64_t>(g.input[j]))  // a tap inside the input
        pos = static_cast<std::int64_t>(o * g.stride[j]) - static_cast<std::int64_t>(g.padding[j]) +
              static_cast<std::int64_t>((rng() % g.kernel[j]) * g.dilation[j]);
      flat += static_cast<std::uint64_t>(pos) * stride;
      stride *= g.input[j];
    }
    idx[i] = static_cast<std::int64_t>(flat);
  }
  return idx;
}

ebac::pool_geometry pool_of(int d, std::uint64_t input, std::uint64_t kernel, std::uint64_t stride, std::uint64_t padding,
                            std::uint64_t dilation) {
  ebac::pool_geometry g;
  g.dims = static_cast<std::uint32_t>(d);
  for (int j = 0; j < d; ++j) {
    g.input[j] = input;
    g.kernel[j] = kernel;
    g.stride[j] = stride;
    g.padding[j] = padding;
    g.dilation[j] = dilation;
  }
  return g;
}

/// PyTorch's output size of a pooled dimension (floor mode).
std::uint64_t pooled_size(std::uint64_t input, std::uint64_t kernel, std::uint64_t stride, std::uint64_t padding,
                          std::uint64_t dilation) {
  return (input + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

/// Overwrites with ones the packed words of the first block of chunk 0 of a
/// bit-packed stream that is at least min_width bits wide (every code of
/// the block becomes 2^w - 1); sizes stay as they were.
std::vector<std::byte> ones_in_a_block(std::vector<std::byte> stream, unsigned min_width) {
  const auto h = ebac::host::inspect(stream.data(), stream.size());
  REQUIRE(h.encoder == ebac::encoder_id::block_bitpack);
  const std::uint64_t n = ebac::element_count(h);
  const std::uint64_t m = std::min<std::uint64_t>(n, h.chunk_elements);
  const std::uint64_t nb = (m + 31) / 32;
  std::byte* payload = stream.data() + h.section_offset(ebac::section_payload);
  std::uint64_t at = nb;  // packed words start after the chunk's width bytes
  for (std::uint64_t b = 0; b < nb; ++b) {
    const auto w = static_cast<unsigned>(payload[b]);
    if (w >= min_width && w > 0) {
      for (unsigned k = 0; k < 4 * w; ++k) payload[at + k] = std::byte{0xff};
      return stream;
    }
    at += 4 * w;
  }
  FAIL("no block of chunk 0 is ", min_width, " bits wide");
  return stream;
}

/// A stream with a code its quantizer cannot have written: the host and the
/// device decoders (every path) reject it as corrupt.
template <class T>
void check_code_rejected(const std::vector<std::byte>& bad, std::size_t n) {
  using S = ebac::storage_t<T>;
  std::vector<S> out(n);
  try {
    ebac::host::decompress(bad.data(), bad.size(), reinterpret_cast<T*>(out.data()), n);
    FAIL("the host decoder accepted a code its quantizer cannot have written");
  } catch (const ebac::error& err) { CHECK(err.code() == ebac::status::corrupt_stream); }
  device_vector<std::byte> d(bad);
  device_vector<S> d_out(n);
  for (const auto path : {staged, fused, single_pass}) {
    CAPTURE(static_cast<int>(path));
    try {
      ebac::cuda::decompress(d.p, bad.size(), reinterpret_cast<T*>(d_out.p), n, nullptr, ebac::cuda::default_allocator(), path);
      FAIL("the device decoder accepted a code its quantizer cannot have written");
    } catch (const ebac::error& err) {
      CHECK(err.code() == ebac::status::corrupt_stream);
      CHECK(std::string(err.what()).find("cannot have written") != std::string::npos);
    }
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
}

/// The status of the ebac::error f() throws (ok when it throws none).
template <class F>
ebac::status status_of(F&& f) {
  try {
    f();
  } catch (const ebac::error& err) { return err.code(); }
  return ebac::status::ok;
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("device fast/plain/rle pipelines equal the host byte for byte") {
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::relative};
    std::uint32_t seed = 1;
    for_each_shape({{1}, {31}, {16385}, {4, 32, 28, 28}, {3, 5, 7, 11}}, seed, [&](const auto& x, const ebac::extents& e) {
      check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
      check_matches_host(x, e, ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack>{}, opt);
      check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length>{}, opt);
      check_lorenzo_along_last(x, e, opt, ebac::cuda::kernel_path::staged);
    });
  }

  TEST_CASE("fused and single-pass bit-packing kernels give the staged (and host) stream byte for byte") {
    for (const auto path : {fused, single_pass}) {
      CAPTURE(static_cast<int>(path));
      std::uint32_t seed = 101;
      for (double rel : {1e-1, 1e-3, 1e-6}) {  // narrow .. wide codes (1e-6: 20+ bit widths on the signed seeds)
        CAPTURE(rel);
        ebac::compress_options opt;
        opt.bound = {rel, ebac::bound_mode::relative};
        for_each_shape(
            {{1}, {31}, {33}, {16385}, {4, 32, 28, 28}, {3, 5, 7, 11}, {1000003}}, seed,
            [&](const auto& x, const ebac::extents& e) {
              check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt,
                                 path);
              check_matches_host(x, e, ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack>{}, opt,
                                 path);
              ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> small_chunks;
              small_chunks.predictor = ebac::lorenzo::flat(32);  // a tile that divides the chunk (format/chunking.hpp keeps it)
              small_chunks.chunk_elements = 64;                  // many chunks, a partial last block in each odd size
              check_matches_host(x, e, small_chunks, opt, path);
              check_lorenzo_along_last(x, e, opt, path);
            });
      }
      // Chunks above single_pass_max_chunk run the two-launch fused kernels.
      ebac::compress_options opt;
      opt.bound = {1e-3, ebac::bound_mode::relative};
      ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> big_chunks;
      big_chunks.chunk_elements = 2 * ebac::cuda::kernels::single_pass_max_chunk;
      const std::size_t big = sized(300001, 140001);  // still more than one 2^17-element chunk
      check_matches_host(activations(big, 5), ebac::extents{big}, big_chunks, opt, path);
      // Other encoders run staged whatever the path says.
      check_matches_host(activations(5000, 3), ebac::extents{5000},
                         ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length>{}, opt, path);
    }
  }

  TEST_CASE("fused decoders: chunk-local streams (any encoder) decode to the host's values; others fall back to staged") {
    std::uint32_t seed = 301;
    for (double rel : {1e-1, 1e-3, 1e-6}) {
      CAPTURE(rel);
      ebac::compress_options opt;
      opt.bound = {rel, ebac::bound_mode::relative};
      for_each_shape(
          {{1}, {31}, {33}, {4097}, {16385}, {4, 32, 28, 28}, {1000003}}, seed, [&](const auto& x, const ebac::extents& e) {
            // Tiles of 1, 2 and 8 blocks; many tiles per chunk and one; tile 48 is not whole blocks (staged fallback).
            for (std::uint32_t tile : {32u, 64u, 256u, 4096u, 48u}) {
              for (std::uint32_t chunk : {256u, 4096u, 16384u}) {
                if (chunk % tile != 0 && tile != 48) continue;
                CAPTURE(tile);
                CAPTURE(chunk);
                fast_t p;
                p.predictor = ebac::lorenzo::flat(tile);
                p.chunk_elements = chunk;
                check_matches_host(x, e, p, opt, fused);
              }
            }
            // A writer rounds chunks to whole tiles (format/chunking.hpp): tile 4096
            // over chunks of 1024 gives chunks of 4096, decoded fused.
            fast_t rounded;
            rounded.chunk_elements = 1024;
            check_matches_host(x, e, rounded, opt, fused);
            // Unless lcm(32, tile) passes 2^24: an odd tile of 2^24 - 1 keeps the
            // chunks of 1024 and prefix sums cross them (staged fallback).
            fast_t not_local;
            not_local.predictor = ebac::lorenzo::flat((1u << 24) - 1);
            not_local.chunk_elements = 1024;
            check_matches_host(x, e, not_local, opt, fused);
            linear_plain_t plain;
            check_matches_host(x, e, plain, opt, fused);
            plain.chunk_elements = 32;  // one block a chunk
            check_matches_host(x, e, plain, opt, fused);
            // Other encoders: their decoder fills the code field, one fused pass makes the values.
            check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>{}, opt, fused);
            check_matches_host(x, e, ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::huffman>{}, opt, fused);
            ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length> rle;
            rle.predictor = ebac::lorenzo::flat(64);
            rle.chunk_elements = 256;
            check_matches_host(x, e, rle, opt, fused);
          });
    }
  }

  TEST_CASE("device Huffman pipelines (the ratio family) equal the host byte for byte") {
    ebac::compress_options opt;
    std::uint32_t seed = 41;
    for (double rel : {1e-1, 1e-3, 1e-5}) {  // zero runs dominate .. escapes appear
      CAPTURE(rel);
      opt.bound = {rel, ebac::bound_mode::relative};
      for_each_shape(
          {{1}, {31}, {16385}, {4, 32, 28, 28}, {3, 5, 7, 11}, {200000}}, seed, [&](const auto& x, const ebac::extents& e) {
            check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>{}, opt);
            check_matches_host(x, e, ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::huffman>{}, opt);
            if (e.rank >= 3) {
              ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman> p2;
              p2.predictor = ebac::lorenzo::along_last(2, e.rank, 64);
              check_matches_host(x, e, p2, opt);
            }
          });
    }
  }

  TEST_CASE(
      "device Huffman: one device-scope call builds the codebook on the device; decoding needs one; corrupt codebooks are "
      "rejected") {
    using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
    const auto x = activations(50000, 13);
    const ebac::extents e{50000};
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::relative};
    opt.checksum = false;
    device_vector<float> d_in(x);
    std::size_t temp = 0;
    REQUIRE(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe_t{}, opt, nullptr, 0, nullptr, nullptr) == cudaSuccess);
    const std::size_t cap = ebac::cuda::output_capacity<pipe_t, float>(e, pipe_t{});
    device_vector<std::byte> d_temp(temp), d_out(cap);
    device_vector<std::uint64_t> d_size(1);
    device_vector<int> d_status(1);
    // No host step between histogram and encoding: the stream is the host's.
    REQUIRE(ebac::cuda::compress(d_temp.p, temp, d_in.p, e, pipe_t{}, opt, d_out.p, cap, d_size.p, d_status.p) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const auto stream = ebac::host::compress(x.data(), e, pipe_t{}, opt);
    REQUIRE(d_size.to_host(1)[0] == stream.size());
    CHECK(d_out.to_host(stream.size()) == stream);
    CHECK(d_status.to_host(1)[0] == 0);
    // The device-scope decoder refuses a Huffman stream without a codebook image.
    const auto h = ebac::host::inspect(stream.data(), stream.size());
    std::size_t dtemp = 0;
    device_vector<float> out(x.size());
    REQUIRE(ebac::cuda::decompress<float>(nullptr, dtemp, h, d_out.p, stream.size(), out.p, x.size(), nullptr) == cudaSuccess);
    device_vector<std::byte> d_dtemp(dtemp);
    CHECK(ebac::cuda::decompress<float>(d_dtemp.p, dtemp, h, d_out.p, stream.size(), out.p, x.size(), d_status.p) ==
          cudaErrorInvalidValue);
    // A host stream whose codebook section is damaged: the host layer refuses it.
    REQUIRE(h.section_bytes[ebac::section_codebook] > 2);
    auto bad = stream;
    bad[h.section_offset(ebac::section_codebook)] = std::byte{7};  // flags must be 0 or 1
    device_vector<std::byte> d_bad(bad);
    CHECK_THROWS_AS(ebac::cuda::decompress(d_bad.p, bad.size(), out.p, x.size()), ebac::error);
    // Payload damage: the device decoder does what the host decoder does (and some is rejected).
    CHECK(device_agrees_on_damage(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload],
                                  x.size(), 100, 6) > 0);
    // The same on the fused path (the warp decoder, then the one-pass values kernel).
    CHECK(device_agrees_on_damage(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload],
                                  x.size(), 100, 7, ebac::cuda::kernel_path::fused) > 0);
  }

  /// A host stream of x under `spec` (the named pipeline or a triple).
  template <class T>
  std::vector<std::byte> host_stream(const std::vector<T>& x, const ebac::extents& e, const char* spec, std::uint32_t chunk,
                                     double eb, bool checksum = true) {
    ebac::pipeline_spec s;
    REQUIRE(ebac::parse_pipeline(spec, s));
    if (chunk) s.chunk_elements = chunk;
    ebac::compress_options opt;
    opt.bound = {eb, ebac::bound_mode::relative};
    opt.checksum = checksum;
    return ebac::with_pipeline(s, e, [&](auto p) { return ebac::host::compress(x.data(), e, p, opt); });
  }

  /// Decodes a host stream on the host and on the device, on the staged path
  /// (ANS: one thread a chunk over global tables) and the fused one (ANS:
  /// shared-memory tables, warp-interleaved codes, transpose); the values
  /// must be the same bytes. Returns the stream's header.
  template <class T>
  ebac::stream_header device_decodes_as_host(const std::vector<std::byte>& stream, std::size_t count) {
    const auto h = ebac::host::inspect(stream.data(), stream.size());
    std::vector<T> host_back(count);
    ebac::host::decompress(stream.data(), stream.size(), host_back.data(), count);
    device_vector<std::byte> d_stream(stream);
    device_vector<T> d_back(count);
    for (auto path : {ebac::cuda::kernel_path::staged, ebac::cuda::kernel_path::fused}) {
      CAPTURE(static_cast<int>(path));
      REQUIRE(cudaMemset(d_back.p, 0xff, count * sizeof(T)) == cudaSuccess);
      ebac::cuda::decompress(d_stream.p, stream.size(), d_back.p, count, nullptr, poisoning_allocator(), path);
      const auto back = d_back.to_host(count);
      CHECK(std::memcmp(back.data(), host_back.data(), count * sizeof(T)) == 0);
    }
    return h;
  }

  TEST_CASE(
      "ANS streams from the host decode on the device to the host's values, byte for byte; device compression refuses ANS") {
    using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::context_ans>;
    {
      const auto x = activations(20000, 17);
      const ebac::extents e{20000};
      ebac::compress_options opt;
      opt.bound = {1e-2, ebac::bound_mode::relative};
      device_vector<float> d_in(x);
      CHECK(status_of([&] { (void)ebac::cuda::compress(d_in.p, e, pipe_t{}, opt); }) == ebac::status::unsupported);
      std::size_t temp = 0;
      CHECK(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe_t{}, opt, nullptr, 0, nullptr, nullptr) == cudaErrorNotSupported);
      // Flat Lorenzo, signed values with a NaN, an Inf and a denormal, two chunks.
      const auto stream = host_stream(x, e, "lorenzo:sign:ans", 0, 1e-2);
      REQUIRE(device_decodes_as_host<float>(stream, x.size()).encoder == ebac::encoder_id::context_ans);
      // The device-scope entry refuses an ANS stream without its tables.
      const auto h = ebac::host::inspect(stream.data(), stream.size());
      device_vector<std::byte> d_stream(stream);
      device_vector<float> out(x.size());
      std::size_t dtemp = 0;
      REQUIRE(ebac::cuda::decompress<float>(nullptr, dtemp, h, d_stream.p, stream.size(), out.p, x.size(), nullptr) ==
              cudaSuccess);
      device_vector<std::byte> d_temp(dtemp);
      device_vector<int> d_status(1);
      CHECK(ebac::cuda::decompress<float>(d_temp.p, dtemp, h, d_stream.p, stream.size(), out.p, x.size(), d_status.p, nullptr,
                                          nullptr) == cudaErrorInvalidValue);
      const ebac::cuda::device_codebook empty{};
      CHECK(ebac::cuda::decompress<float>(d_temp.p, dtemp, h, d_stream.p, stream.size(), out.p, x.size(), d_status.p, nullptr,
                                          &empty) == cudaErrorInvalidValue);
    }
    // Feature maps under `max` (the predictor chosen per tensor: none, flat
    // or 2-D Lorenzo) at loose to tight bounds, chunks of 2^16 with a partial
    // last one, and 2-D Lorenzo in small chunks (up neighbours cut at chunk
    // starts); the context sets differ with the tensor's size and bound.
    const ebac::extents maps{6, 8, 28, 28};  // 37632 elements
    const auto x = ebac_test::post_relu_maps(maps, 5);
    std::vector<ebac::predictor_id> chosen;
    for (double eb : {1e-1, 1e-2, 1e-3, 1e-4}) {
      CAPTURE(eb);
      chosen.push_back(device_decodes_as_host<float>(host_stream(x, maps, "max", 0, eb), x.size()).predictor);
      (void)device_decodes_as_host<float>(host_stream(x, maps, "lorenzo2:sign:ans", 4096, eb, false), x.size());
      // max-bound: the quantizer chosen too (linear where it codes smaller).
      (void)device_decodes_as_host<float>(host_stream(x, maps, "max-bound", 0, eb), x.size());
    }
    CHECK(std::find(chosen.begin(), chosen.end(), ebac::predictor_id::none) != chosen.end());  // the sparse map at a loose bound
    const ebac::extents big{sized(65, 5), 16, 32, 32};  // 1M elements: 16.25 chunks of 2^16, the richest context set
    const auto y = ebac_test::post_relu_maps(big, 6);
    (void)device_decodes_as_host<float>(host_stream(y, big, "max", 0, 1e-2), y.size());
    std::vector<ebac::bfloat16> yb(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) yb[i] = ebac::from_float<ebac::bfloat16>(y[i]);
    (void)device_decodes_as_host<ebac::bfloat16>(host_stream(yb, big, "max", 0, 1e-3), yb.size());
    // Damage to the payload and to the codebook: the device does what the host does.
    const auto stream = host_stream(x, maps, "lorenzo2:sign:ans", 4096, 1e-2, false);
    const auto h = ebac::host::inspect(stream.data(), stream.size());
    for (auto path : {ebac::cuda::kernel_path::staged, ebac::cuda::kernel_path::fused}) {
      CAPTURE(static_cast<int>(path));
      CHECK(device_agrees_on_damage(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload],
                                    x.size(), 100, 11, path) > 0);
      CHECK(device_agrees_on_damage(stream, h.section_offset(ebac::section_codebook), h.section_bytes[ebac::section_codebook],
                                    x.size(), 60, 12, path) > 0);
    }
    // The device-scope decompress of an ANS stream is capturable on the fused
    // path too (it sizes its launch and shared memory before enqueuing).
    {
      const auto fused = ebac::cuda::kernel_path::fused;
      std::vector<float> host_back(x.size());
      ebac::host::decompress(stream.data(), stream.size(), host_back.data(), x.size());
      device_vector<std::byte> d_stream(stream);
      const auto book = ebac::cuda::detail::read_codebook(h, d_stream.p, nullptr, ebac::cuda::default_allocator());
      std::size_t temp = 0;
      REQUIRE(ebac::cuda::decompress<float>(nullptr, temp, h, d_stream.p, stream.size(), nullptr, x.size(), nullptr, nullptr,
                                            &book.view, fused) == cudaSuccess);
      device_vector<std::byte> d_temp(temp);
      device_vector<float> d_back(x.size());
      device_vector<int> d_status(1);
      cudaStream_t s;
      REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
      cudaGraph_t graph;
      REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
      const cudaError_t queued = ebac::cuda::decompress<float>(d_temp.p, temp, h, d_stream.p, stream.size(), d_back.p, x.size(),
                                                               d_status.p, s, &book.view, fused);
      const cudaError_t ended = cudaStreamEndCapture(s, &graph);
      REQUIRE(queued == cudaSuccess);
      REQUIRE(ended == cudaSuccess);
      cudaGraphExec_t exec;
      REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
      cudaGraphDestroy(graph);
      REQUIRE(cudaMemset(d_back.p, 0xff, x.size() * sizeof(float)) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // s does not wait for the legacy stream
      REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
      REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
      CHECK(d_status.to_host(1)[0] == 0);
      const auto back = d_back.to_host(x.size());
      CHECK(std::memcmp(back.data(), host_back.data(), x.size() * sizeof(float)) == 0);
      cudaGraphExecDestroy(exec);
      cudaStreamDestroy(s);
    }
    // A 1-D tensor (one row: no upper neighbours) in chunks of 31 tiles of the
    // transpose, more chunks than one warp-group, the last group partly
    // filled and the last chunk short.
    const auto z = activations(sized(300007, 70001), 21);
    (void)device_decodes_as_host<float>(host_stream(z, ebac::extents{z.size()}, "lorenzo:sign:ans", 992, 1e-3), z.size());
  }

  TEST_CASE(
      "a pipeline that chooses its predictor or quantizer per tensor is host only: both CUDA entries refuse it (unsupported)") {
    using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
    const auto x = activations(20000, 17);
    const ebac::extents e{20000};
    ebac::compress_options opt;
    opt.bound = {1e-2, ebac::bound_mode::relative};
    device_vector<float> d_in(x);
    pipe_t choosing{};
    choosing.choose_predictor = true;
    CHECK(status_of([&] { (void)ebac::cuda::compress(d_in.p, e, choosing, opt); }) == ebac::status::unsupported);
    std::size_t temp = 0;
    CHECK(ebac::cuda::compress(nullptr, temp, d_in.p, e, choosing, opt, nullptr, 0, nullptr, nullptr) == cudaErrorNotSupported);
    pipe_t choosing_quantizer{};
    choosing_quantizer.choose_quantizer = true;
    CHECK(status_of([&] { (void)ebac::cuda::compress(d_in.p, e, choosing_quantizer, opt); }) == ebac::status::unsupported);
    CHECK(ebac::cuda::compress(nullptr, temp, d_in.p, e, choosing_quantizer, opt, nullptr, 0, nullptr, nullptr) ==
          cudaErrorNotSupported);
    // The same pipeline without the choice is coded on the device.
    CHECK(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe_t{}, opt, nullptr, 0, nullptr, nullptr) == cudaSuccess);
  }

  TEST_CASE("device path handles f16 and bf16, relative and absolute bounds, every pipeline and path") {
    const std::size_t m = sized(100002, 10003);  // multiples of 7 (the 1 x 7 x m/7 shape), not of 32
    for (std::uint32_t seed : {7u, 8u}) {        // signed, then ReLU'd
      CAPTURE(seed);
      const auto xf = activations(m, seed);  // not a multiple of 32
      std::vector<ebac::float16> h(xf.size());
      std::vector<ebac::bfloat16> b(xf.size());
      for (std::size_t i = 0; i < xf.size(); ++i) {
        h[i] = ebac::from_float<ebac::float16>(xf[i]);
        b[i] = ebac::from_float<ebac::bfloat16>(xf[i]);
      }
      for (const ebac::error_bound bound :
           {ebac::error_bound{1e-2, ebac::bound_mode::absolute}, ebac::error_bound{1e-3, ebac::bound_mode::relative}}) {
        CAPTURE(bound.value);
        ebac::compress_options opt;
        opt.bound = bound;
        for (const ebac::extents e : {ebac::extents{m}, ebac::extents{1, 7, m / 7}}) {
          check_matches_host(h, e, fast_t{}, opt, {staged, fused, single_pass});
          check_matches_host(b, e, fast_t{}, opt, {staged, fused, single_pass});
        }
        check_matches_host(h, ebac::extents{m}, plain_t{}, opt, {staged, fused, single_pass});
        check_matches_host(b, ebac::extents{m}, plain_t{}, opt, {staged, fused, single_pass});
        check_matches_host(h, ebac::extents{m}, ratio_t{}, opt, {staged, fused});
        check_matches_host(b, ebac::extents{m}, ratio_t{}, opt, {staged, fused});
        check_matches_host(h, ebac::extents{m}, rle_t{}, opt, {staged, fused});
      }
    }
  }

  TEST_CASE("a finite far outlier and wide codes (absolute 1e-6) on every path") {
    const std::size_t n = quick() ? 40001 : 400001;
    for (std::uint32_t seed : {21u, 22u}) {
      CAPTURE(seed);
      ebac::compress_options rel;
      rel.bound = {1e-3, ebac::bound_mode::relative};
      const auto far = with_far_outlier(activations(n, seed));  // the range is ~1e30: codes 0 and 1
      check_matches_host(far, ebac::extents{n}, fast_t{}, rel, {staged, fused, single_pass});
      check_matches_host(far, ebac::extents{n}, ratio_t{}, rel, {staged, fused});
      ebac::compress_options wide;
      wide.bound = {1e-6, ebac::bound_mode::absolute};  // codes of ~21 bits, escapes in Huffman
      const auto x = activations(n, seed);
      check_matches_host(x, ebac::extents{n}, fast_t{}, wide, {staged, fused, single_pass});
      check_matches_host(x, ebac::extents{n}, linear_plain_t{}, wide, {staged, fused, single_pass});
      check_matches_host(x, ebac::extents{n}, ratio_t{}, wide, {staged, fused});
    }
  }

  TEST_CASE("edge tensors: empty, one element, constant, all non-finite, on every path") {
    const std::vector<float> empty, one{0.5f}, constant(5000, 3.25f), nonfinite(5000, NAN);
    std::vector<float> mixed(5000);
    for (std::size_t i = 0; i < mixed.size(); ++i) mixed[i] = i % 3 == 0 ? NAN : (i % 3 == 1 ? INFINITY : -INFINITY);
    for (const ebac::error_bound bound :
         {ebac::error_bound{1e-3, ebac::bound_mode::relative}, ebac::error_bound{1e-3, ebac::bound_mode::absolute}}) {
      CAPTURE(static_cast<int>(bound.mode));
      ebac::compress_options opt;
      opt.bound = bound;
      for (const std::vector<float>* x :
           std::initializer_list<const std::vector<float>*>{&empty, &one, &constant, &nonfinite, &mixed}) {
        CAPTURE(x->size());
        const ebac::extents e{x->size()};
        check_matches_host(*x, e, fast_t{}, opt, {staged, fused, single_pass});
        check_matches_host(*x, e, ratio_t{}, opt, {staged, fused});
        check_matches_host(*x, e, rle_t{}, opt, {staged});
      }
    }
  }

  TEST_CASE("device decoder verifies a host stream's checksum") {
    const auto x = activations(20000, 31);
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::relative};
    opt.checksum = true;
    const auto stream =
        ebac::host::compress(x.data(), ebac::extents{20000},
                             ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
    std::vector<float> host_back(x.size());
    ebac::host::decompress(stream.data(), stream.size(), host_back.data(), x.size());
    device_vector<float> out(x.size());
    {
      device_vector<std::byte> d(stream);
      ebac::cuda::decompress(d.p, stream.size(), out.p, x.size());
      const auto back = out.to_host(x.size());
      CHECK(std::memcmp(back.data(), host_back.data(), x.size() * sizeof(float)) == 0);
    }
    auto bad = stream;
    bad[bad.size() / 2] ^= std::byte{0x10};
    device_vector<std::byte> d(bad);
    try {
      ebac::cuda::decompress(d.p, bad.size(), out.p, x.size());
      FAIL("a damaged checksummed stream was accepted");
    } catch (const ebac::error& err) { CHECK(err.code() == ebac::status::checksum_mismatch); }
  }

  // One case a path, so that a failure names it.
  TEST_CASE("device compress is capturable in a CUDA graph: staged kernels") { check_graph_capture(fast_t{}, staged); }
  TEST_CASE("device compress is capturable in a CUDA graph: fused kernels") { check_graph_capture(fast_t{}, fused); }
  TEST_CASE("device compress is capturable in a CUDA graph: single-pass kernels") { check_graph_capture(fast_t{}, single_pass); }
  TEST_CASE("device compress is capturable in a CUDA graph: Huffman with its device codebook") {
    check_graph_capture(ratio_t{}, staged);
  }

  TEST_CASE("device decoder: a damaged stream is rejected where the host rejects it, else decodes to the host's values") {
    const auto x = activations(50000, 9);
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::relative};
    opt.checksum = false;
    auto stream =
        ebac::host::compress(x.data(), ebac::extents{50000},
                             ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
    const auto h = ebac::host::inspect(stream.data(), stream.size());
    CHECK(device_agrees_on_damage(stream, h.header_bytes(), stream.size() - h.header_bytes(), x.size(), 200, 5) > 0);
    // The fused decoder checks the same sizes before reading a word.
    CHECK(device_agrees_on_damage(stream, h.header_bytes(), stream.size() - h.header_bytes(), x.size(), 200, 5,
                                  ebac::cuda::kernel_path::fused) > 0);
    CHECK(device_agrees_on_damage(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload],
                                  x.size(), 200, 8, ebac::cuda::kernel_path::fused) > 0);
  }

  TEST_CASE("large tensor round trip on the device (> 2^31 bytes of input where memory allows)") {
    std::size_t free_b = 0, total_b = 0;
    REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
    const std::size_t n = (std::size_t{1} << 31) / sizeof(float) + 12345;  // just over 2^31 bytes
    if (free_b < 8 * n * sizeof(float)) {
      MESSAGE("skipped: needs ~" << 8 * n * sizeof(float) / (1 << 30) << " GiB of free device memory");
      return;
    }
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    check_matches_host(x, ebac::extents{n}, fast_t{}, opt, {staged, fused, single_pass});
  }

  TEST_CASE("format 2: integer and bool tensors equal the host byte for byte (every dtype, pipeline and path)") {
    std::uint32_t seed = 501;
    check_integer_dtype<std::uint8_t>(seed);
    check_integer_dtype<std::int8_t>(seed);
    check_integer_dtype<std::int16_t>(seed);
    check_integer_dtype<std::int32_t>(seed);
    check_integer_dtype<std::int64_t>(seed);
    // bool, held as its bytes: a mask (a palette), and with level coding off
    // its values as exact codes.
    std::mt19937 rng(seed);
    for (const ebac::extents e : {ebac::extents{1}, ebac::extents{16385}, ebac::extents{4, 32, 28, 28}}) {
      std::uint64_t n = 0;
      REQUIRE(e.count(n) == ebac::status::ok);
      if (quick() && n > 100000) continue;
      std::vector<std::uint8_t> mask(n);
      for (auto& b : mask) b = rng() % 4 == 0 ? 0 : 1;
      const bool* x = reinterpret_cast<const bool*>(mask.data());
      for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        const auto h = check_matches_host_ptr(x, n, e, pipe, ebac::compress_options{}, paths);
        if (n > 1) CHECK(h.quantizer == ebac::quantizer_id::levels);
        else CHECK(h.is_stored());  // one byte: any coded stream is larger
      });
      ebac::compress_options no_levels;
      no_levels.max_levels = 0;
      const auto h = check_matches_host_ptr(x, n, e, fast_t{}, no_levels, {staged, fused, single_pass});
      CHECK((h.is_stored() || h.quantizer == ebac::quantizer_id::exact));
    }
  }

  TEST_CASE(
      "format 2: level tensors (dropout masks, one-hot rows, ternary) in f32, f16 and bf16 equal the host on every pipeline and "
      "path") {
    std::uint32_t seed = 601;
    const std::pair<std::size_t, std::size_t> shapes[] = {{sized(512, 64), 98}, {2048, 10}, {1, 33}};
    for (const auto& [rows, cols] : shapes) {
      for (const auto& [name, xf] : level_cases(rows, cols, seed++)) {
        CAPTURE(name);
        CAPTURE(rows);
        const ebac::extents e{rows, cols};
        for (const ebac::error_bound bound :
             {ebac::error_bound{1e-3, ebac::bound_mode::relative}, ebac::error_bound{1e-2, ebac::bound_mode::absolute},
              ebac::error_bound{0.6, ebac::bound_mode::absolute}}) {
          CAPTURE(bound.value);
          ebac::compress_options opt;
          opt.bound = bound;
          for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
            const auto h = check_matches_host(xf, e, pipe, opt, paths);
            if (bound.value < 0.5) CHECK(h.quantizer == ebac::quantizer_id::levels);
            check_matches_host(ebac_test::convert<ebac::float16>(xf), e, pipe, opt, paths);
            check_matches_host(ebac_test::convert<ebac::bfloat16>(xf), e, pipe, opt, paths);
          });
        }
      }
    }
  }

  TEST_CASE(
      "format 2: max-pool indices with their geometry (window offsets), and under a wrong geometry, on every pipeline and path") {
    struct pool_case {
      int dims;
      std::uint64_t input, kernel, stride, padding, dilation, planes;
    };
    const pool_case cases[] = {{2, 16, 2, 2, 0, 1, 12},
                               {2, 15, 3, 2, 1, 1, 6},
                               {1, 100, 3, 1, 1, 2, 8},
                               {3, 8, 2, 2, 0, 1, 4},
                               {2, 28, 3, 3, 1, 1, sized(256, 16)}};
    std::uint32_t seed = 701;
    for (const auto& c : cases) {
      CAPTURE(c.dims);
      CAPTURE(c.kernel);
      const ebac::pool_geometry g = pool_of(c.dims, c.input, c.kernel, c.stride, c.padding, c.dilation);
      std::uint64_t out[3] = {};
      ebac::extents e;
      e.rank = c.dims + 1;
      e.dims[0] = c.planes;
      for (int j = 0; j < c.dims; ++j) e.dims[1 + j] = out[j] = pooled_size(c.input, c.kernel, c.stride, c.padding, c.dilation);
      REQUIRE(g.validate(e) == ebac::status::ok);
      const auto idx = pool_indices(g, c.planes, out, seed++);
      std::vector<std::int32_t> idx32(idx.begin(), idx.end());
      ebac::compress_options opt;
      opt.pooling = g;
      for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        const auto h = check_matches_host(idx, e, pipe, opt, paths);
        CHECK(h.quantizer == ebac::quantizer_id::pool_window);
        CHECK(h.outlier_count == 0);
        check_matches_host(idx32, e, pipe, opt, paths);
      });
      // A wrong geometry: indices outside their windows are outliers, still exact.
      ebac::compress_options wrong = opt;
      wrong.pooling.stride[0] = c.stride + 1;  // windows further apart: many indices fall outside theirs
      if (wrong.pooling.validate(e) == ebac::status::ok) {
        const auto h = check_matches_host(idx, e, fast_t{}, wrong, {staged, fused, single_pass});
        CHECK((h.is_stored() || h.outlier_count > 0));
      }
    }
  }

  TEST_CASE(
      "format 2: stored streams (random 16-bit floats at a tiny bound, NaN payloads), and coded ones with store_when_larger "
      "off") {
    std::mt19937 rng(801);
    const std::size_t n = sized(100002, 10003);  // multiples of 7 (the 1 x 7 x n/7 shape)
    std::vector<ebac::float16> h16(n);
    std::vector<ebac::bfloat16> b16(n);
    std::vector<float> nans(n);
    for (std::size_t i = 0; i < n; ++i) {
      h16[i].bits = static_cast<std::uint16_t>(rng());
      b16[i].bits = static_cast<std::uint16_t>(rng());
      const std::uint32_t b = 0x7f800001u | (rng() & 0x807fffffu);
      std::memcpy(&nans[i], &b, sizeof b);
    }
    ebac::compress_options tiny;
    tiny.bound = {1e-7, ebac::bound_mode::absolute};
    for (const ebac::extents e : {ebac::extents{n}, ebac::extents{1, 7, n / 7}}) {
      for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        CHECK(check_matches_host(h16, e, pipe, tiny, paths).is_stored());
        CHECK(check_matches_host(b16, e, pipe, tiny, paths).is_stored());
        CHECK(check_matches_host(nans, e, pipe, tiny, paths).is_stored());
      });
      ebac::compress_options coded = tiny;
      coded.store_when_larger = false;  // the coded stream, larger than raw: d_out has room for it (output_capacity)
      for_each_pipeline(e, [&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        const auto h = check_matches_host(h16, e, pipe, coded, paths);
        CHECK_FALSE(h.is_stored());
        CHECK(h.section_offset(ebac::section_count) > h.header_bytes() + n * 2);
      });
    }
    // The device-scope call: d_out of output_capacity, the stream it leaves
    // within max_compressed_bytes (no checksum), and a smaller d_out refused.
    using pipe_t = fast_t;
    const ebac::extents e{n};
    device_vector<ebac::float16> d_in(h16);
    std::size_t temp = 0;
    REQUIRE(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe_t{}, tiny, nullptr, 0, nullptr, nullptr) == cudaSuccess);
    const std::size_t cap = ebac::cuda::output_capacity<pipe_t, ebac::float16>(e, pipe_t{});
    const std::size_t stream_cap = ebac::max_compressed_bytes<pipe_t, ebac::float16>(e, pipe_t{});
    REQUIRE(cap > stream_cap);
    device_vector<std::byte> d_temp(temp), d_out(cap);
    device_vector<std::uint64_t> d_size(1);
    device_vector<int> d_status(1);
    CHECK(ebac::cuda::compress(d_temp.p, temp, d_in.p, e, pipe_t{}, tiny, d_out.p, stream_cap, d_size.p, d_status.p) ==
          cudaErrorInvalidValue);
    REQUIRE(ebac::cuda::compress(d_temp.p, temp, d_in.p, e, pipe_t{}, tiny, d_out.p, cap, d_size.p, d_status.p) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_status.to_host(1)[0] == 0);
    const auto size = d_size.to_host(1)[0];
    CHECK(size <= stream_cap - 8);
    ebac::compress_options tiny_nock = tiny;
    tiny_nock.checksum = false;
    CHECK(d_out.to_host(size) == ebac::host::compress(h16.data(), e, pipe_t{}, tiny_nock));
  }

  TEST_CASE(
      "format 2: the top level of 16-bit tensors (saturated ReLU6 maps, masks with level coding off) on every pipeline and "
      "path") {
    std::mt19937 rng(901);
    std::normal_distribution<float> nd(3.0f, 4.0f);
    const std::size_t n = sized(8 * 8 * 28 * 28, 4 * 28 * 28);
    std::vector<float> relu6(n);
    for (auto& v : relu6) v = std::min(6.0f, std::max(0.0f, nd(rng)));
    std::vector<float> mask(n);
    for (auto& v : mask) v = rng() % 10 == 0 ? 0.0f : 1.0f / 0.9f;
    for (const ebac::error_bound bound :
         {ebac::error_bound{1e-2, ebac::bound_mode::relative}, ebac::error_bound{1e-3, ebac::bound_mode::relative},
          ebac::error_bound{1e-2, ebac::bound_mode::absolute}}) {
      CAPTURE(bound.value);
      ebac::compress_options opt;
      opt.bound = bound;
      // Coded even where that is larger than the raw elements (random ReLU6
      // values under run-length coding would be stored, with no top level).
      opt.store_when_larger = false;
      ebac::compress_options no_levels = opt;
      no_levels.max_levels = 0;
      for_each_pipeline([&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
        const auto hh = check_matches_host(ebac_test::convert<ebac::float16>(relu6), ebac::extents{n}, pipe, opt, paths);
        CHECK(hh.top == 6.0f);
        const auto hb = check_matches_host(ebac_test::convert<ebac::bfloat16>(relu6), ebac::extents{n}, pipe, opt, paths);
        CHECK(hb.top == 6.0f);
        const auto hm = check_matches_host(ebac_test::convert<ebac::float16>(mask), ebac::extents{n}, pipe, no_levels, paths);
        CHECK(hm.top == ebac::to_float(ebac::from_float<ebac::float16>(1.0f / 0.9f)));
        const auto hf = check_matches_host(relu6, ebac::extents{n}, pipe, opt, paths);  // float32: no top level
        CHECK(hf.top == 0.0f);
      });
    }
  }

  TEST_CASE(
      "format 2: a code the quantizer cannot have written (level index, integer out of its type, window offset) is rejected") {
    std::mt19937 rng(1001);
    const std::size_t n = 5000;
    ebac::compress_options opt;
    opt.bound = {1e-2, ebac::bound_mode::absolute};  // float tensors need one (the integer ones ignore it)
    opt.checksum = false;
    // Palette indices of a ternary tensor: every code in 0..2, width 2; ones make 3.
    std::vector<float> ternary(n);
    for (auto& v : ternary) v = static_cast<float>(static_cast<int>(rng() % 3) - 1) * 0.7f;
    const auto levels = ebac::host::compress(ternary.data(), ebac::extents{n}, plain_t{}, opt);
    REQUIRE(ebac::host::inspect(levels.data(), levels.size()).quantizer == ebac::quantizer_id::levels);
    check_code_rejected<float>(ones_in_a_block(levels, 2), n);  // 2 bits: 3 is past the palette
    // Exact uint8 under flat Lorenzo: ones make negative values.
    std::vector<std::uint8_t> ramp(n);
    for (std::size_t i = 0; i < n; ++i) ramp[i] = static_cast<std::uint8_t>((i / 3) % 100);
    const auto exact = ebac::host::compress(ramp.data(), ebac::extents{n}, fast_t{}, opt);
    REQUIRE(ebac::host::inspect(exact.data(), exact.size()).quantizer == ebac::quantizer_id::exact);
    check_code_rejected<std::uint8_t>(ones_in_a_block(exact, 1), n);
    // Offsets in 3x3 windows (0..8, width 4); ones make 15.
    const ebac::pool_geometry g = pool_of(2, 15, 3, 2, 1, 1);
    const std::uint64_t o = pooled_size(15, 3, 2, 1, 1);
    const std::uint64_t out[2] = {o, o};
    const ebac::extents e{16, o, o};
    const auto idx = pool_indices(g, 16, out, 1002);
    ebac::compress_options pool_opt = opt;
    pool_opt.pooling = g;
    const auto pooled = ebac::host::compress(idx.data(), e, plain_t{}, pool_opt);
    REQUIRE(ebac::host::inspect(pooled.data(), pooled.size()).quantizer == ebac::quantizer_id::pool_window);
    check_code_rejected<std::int64_t>(ones_in_a_block(pooled, 4), idx.size());  // 4 bits: 15 is past 9 offsets
  }

  /// One small input through every kind of kernel, once: the case the
  /// sanitizer runs of tools/gpu-check.sh use (racecheck tracks every
  /// shared-memory access, and the cases above, over many shapes and bounds,
  /// do not end in its time box). Each check here is one of theirs, on one
  /// input: bit-packing on all three paths (many chunks, and chunks of 64),
  /// Huffman and run-length staged and fused, a palette (format 2's level
  /// search and stage choice), Lorenzo along the last axes (two cuts), a far
  /// outlier, and an ANS stream decoded on both paths.
  TEST_CASE("sanitizer tour: every kernel family once, on small tensors") {
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::relative};
    const std::size_t n = 20000;  // 5 chunks of 4096; 313 of 64
    const auto x = activations(n, 901);
    const ebac::extents flat{n};
    for_each_pipeline([&](const auto& pipe, std::initializer_list<ebac::cuda::kernel_path> paths) {
      check_matches_host(x, flat, pipe, opt, paths);
    });
    const auto mask = level_cases(64, 98, 902).front().second;
    CHECK(check_matches_host(mask, ebac::extents{64, 98}, fast_t{}, opt, {staged, fused, single_pass}).quantizer ==
          ebac::quantizer_id::levels);
    const ebac::extents fmap{4, 5, 31, 32};
    const auto y = activations(4 * 5 * 31 * 32, 903);
    fast_t planes;
    planes.predictor = ebac::lorenzo::along_last(2, fmap.rank, 64);
    check_matches_host(y, fmap, planes, opt, {staged, fused, single_pass});
    check_matches_host(with_far_outlier(x), flat, fast_t{}, opt, {staged, fused, single_pass});
    CHECK(device_decodes_as_host<float>(host_stream(x, flat, "lorenzo:sign:ans", 0, 1e-2), n).encoder ==
          ebac::encoder_id::context_ans);
  }

}  // TEST_SUITE("gpu")
