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
#include <vector>

namespace {

template <class T>
struct device_vector {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_vector(std::size_t count) : n(count) { REQUIRE(cudaMalloc(&p, (count ? count : 1) * sizeof(T)) == cudaSuccess); }
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
  if (n > 10) { x[3] = NAN; x[5] = INFINITY; x[9] = 1e-42f; }
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
    else ok = std::isfinite(yf) && ebac_test::exact_within(xf, yf, eb_abs) &&
              (!sign_kept || ((xf == 0.0f) == (yf == 0.0f) && (xf < 0.0f) == (yf < 0.0f)));
    if (!ok && bad++ == 0) first = i;
  }
  CHECK_MESSAGE(bad == 0, bad, " elements break the bound (eb_abs ", eb_abs, "); first at ", first, ": x=",
                ebac::to_float(x[first]), " y=", ebac::to_float(y[first]));
}

/// Device compress + decompress on each path; the stream and the
/// reconstruction must equal the host's (computed once), and the host's
/// reconstruction must keep the bound.
template <class Pipeline, class T>
void check_matches_host(const std::vector<T>& x, const ebac::extents& e, const Pipeline& pipe, ebac::compress_options opt,
                        std::initializer_list<ebac::cuda::kernel_path> paths) {
  opt.checksum = false;  // device streams carry none
  std::uint64_t count = 0;
  REQUIRE(e.count(count) == ebac::status::ok);
  REQUIRE(count == x.size());  // the shape must describe the data exactly
  const auto host_stream = ebac::host::compress(x.data(), e, pipe, opt);
  std::vector<T> host_back(x.size());
  ebac::host::decompress(host_stream.data(), host_stream.size(), host_back.data(), x.size());
  // The promise, not only the header's eb_abs: a constant tensor under a
  // relative bound has a quantizer bound above its promised 0 (quantizer_bound).
  check_bound(x, host_back,
              std::min(ebac::host::inspect(host_stream.data(), host_stream.size()).eb_abs, ebac_test::promised_bound(x, opt.bound)),
              std::is_same_v<typename Pipeline::quantizer_type, ebac::sign_preserving_quantizer>);

  device_vector<T> d_in(x);
  const ebac::cuda::allocator poison = poisoning_allocator();
  for (const auto path : paths) {
    CAPTURE(static_cast<int>(path));
    auto s = ebac::cuda::compress(d_in.p, e, pipe, opt, nullptr, poison, true, path);
    REQUIRE(s.bytes == host_stream.size());
    std::vector<std::byte> dev_stream(s.bytes);
    REQUIRE(cudaMemcpy(dev_stream.data(), s.data(), s.bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(dev_stream == host_stream);

    device_vector<T> d_out(x.size());
    REQUIRE(cudaMemset(d_out.p, 0xff, x.size() * sizeof(T)) == cudaSuccess);  // decoder must write every element
    ebac::cuda::decompress(s.data(), s.bytes, d_out.p, x.size(), nullptr, poison, path);
    const auto dev_back = d_out.to_host(x.size());
    CHECK(std::memcmp(dev_back.data(), host_back.data(), x.size() * sizeof(T)) == 0);
  }
}

template <class Pipeline, class T>
void check_matches_host(const std::vector<T>& x, const ebac::extents& e, const Pipeline& pipe, const ebac::compress_options& opt,
                        ebac::cuda::kernel_path path = ebac::cuda::kernel_path::staged) {
  check_matches_host(x, e, pipe, opt, {path});
}

/// Captures one device-scope compress and one decompress in CUDA graphs and
/// replays each twice, with new input and poisoned outputs before every
/// replay (so a replay must recompute everything: the range, for Huffman the
/// codebook, the sizes). Temp storage is passed at an address that is not
/// 256-byte aligned (a slice of a caller's workspace).
template <class Pipeline>
void check_graph_capture(const Pipeline& pipe, ebac::cuda::kernel_path path) {
  using E = typename Pipeline::encoder_type;
  CAPTURE(static_cast<int>(path));
  const std::size_t n = sized(std::size_t{1} << 20, std::size_t{1} << 16);
  const ebac::extents e{n};
  const std::vector<float> inputs[2] = {activations(n, 3), activations(n, 4)};
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::relative};
  opt.checksum = false;
  device_vector<float> d_in(n);
  std::size_t temp = 0;
  REQUIRE(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe, opt, nullptr, 0, nullptr, nullptr, nullptr, path) == cudaSuccess);
  const std::size_t cap = ebac::cuda::max_compressed_bytes<Pipeline, float>(e, pipe);
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
  for (int replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    const auto& x = inputs[replay];
    const auto host_stream = ebac::host::compress(x.data(), e, pipe, opt);
    REQUIRE(cudaMemcpy(d_in.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(d_out.p, 0xff, cap) == cudaSuccess);
    REQUIRE(cudaMemset(d_size.p, 0xff, sizeof(std::uint64_t)) == cudaSuccess);
    REQUIRE(cudaMemset(d_status.p, 0xff, sizeof(int)) == cudaSuccess);
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
    return ebac::cuda::decompress<float>(d_dtemp.p + 8, dtemp, h, d_out.p, last_stream.size(), d_back.p, n, d_status.p, s, codebook,
                                         path);
  });
  for (int replay = 0; replay < 2; ++replay) {
    CAPTURE(replay);
    REQUIRE(cudaMemset(d_back.p, 0xff, n * sizeof(float)) == cudaSuccess);
    REQUIRE(cudaMemset(d_status.p, 0xff, sizeof(int)) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(decompress_exec, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(d_status.to_host(1)[0] == 0);
    const auto back = d_back.to_host(n);
    CHECK(std::memcmp(back.data(), host_back.data(), n * sizeof(float)) == 0);
  }
  cudaGraphExecDestroy(decompress_exec);
  cudaStreamDestroy(s);
}

/// Overwrites one random byte in [first, first + span) of a (checksum-less)
/// host stream, `trials` times, and decodes each on the device: returns how
/// many the device decoder rejected. Every decode must leave no sticky CUDA
/// error (nothing read or written out of bounds).
int device_rejections(const std::vector<std::byte>& stream, std::size_t first, std::size_t span, std::size_t count,
                      int trials, std::uint32_t seed, ebac::cuda::kernel_path path = ebac::cuda::kernel_path::staged) {
  std::mt19937 rng(seed);
  device_vector<float> out(count);
  int rejected = 0;
  for (int trial = 0; trial < trials; ++trial) {
    auto bad = stream;
    bad[first + rng() % span] = static_cast<std::byte>(rng());
    device_vector<std::byte> d(bad);
    try {
      ebac::cuda::decompress(d.p, bad.size(), out.p, count, nullptr, ebac::cuda::default_allocator(), path);
    } catch (const ebac::error&) {
      ++rejected;
    }
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
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
using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;      // "fast"
using plain_t = ebac::pipeline<ebac::no_prediction, ebac::sign_preserving_quantizer, ebac::block_bitpack>;  // "plain"
using linear_plain_t = ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack>;
using ratio_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
using rle_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length>;

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
    for_each_shape({{1}, {31}, {33}, {16385}, {4, 32, 28, 28}, {3, 5, 7, 11}, {1000003}}, seed,
                   [&](const auto& x, const ebac::extents& e) {
      check_matches_host(x, e, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt, path);
      check_matches_host(x, e, ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack>{}, opt, path);
      ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> small_chunks;
      small_chunks.chunk_elements = 64;  // many chunks, a partial last block in each odd size
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
    for_each_shape({{1}, {31}, {33}, {4097}, {16385}, {4, 32, 28, 28}, {1000003}}, seed, [&](const auto& x, const ebac::extents& e) {
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
      fast_t not_local;  // tile 4096 > chunk 1024: prefix sums cross chunks (staged fallback)
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
    for_each_shape({{1}, {31}, {16385}, {4, 32, 28, 28}, {3, 5, 7, 11}, {200000}}, seed, [&](const auto& x, const ebac::extents& e) {
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

TEST_CASE("device Huffman: one device-scope call builds the codebook on the device; decoding needs one; corrupt codebooks are rejected") {
  using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
  const auto x = activations(50000, 13);
  const ebac::extents e{50000};
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::relative};
  opt.checksum = false;
  device_vector<float> d_in(x);
  std::size_t temp = 0;
  REQUIRE(ebac::cuda::compress(nullptr, temp, d_in.p, e, pipe_t{}, opt, nullptr, 0, nullptr, nullptr) == cudaSuccess);
  const std::size_t cap = ebac::cuda::max_compressed_bytes<pipe_t, float>(e, pipe_t{});
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
  CHECK(ebac::cuda::decompress<float>(d_dtemp.p, dtemp, h, d_out.p, stream.size(), out.p, x.size(), d_status.p) == cudaErrorInvalidValue);
  // A host stream whose codebook section is damaged: the host layer refuses it.
  REQUIRE(h.section_bytes[ebac::section_codebook] > 2);
  auto bad = stream;
  bad[h.section_offset(ebac::section_codebook)] = std::byte{7};  // flags must be 0 or 1
  device_vector<std::byte> d_bad(bad);
  CHECK_THROWS_AS(ebac::cuda::decompress(d_bad.p, bad.size(), out.p, x.size()), ebac::error);
  // Payload damage: the device decoder flags it.
  CHECK(device_rejections(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload], x.size(),
                          100, 6) > 0);
  // The same on the fused path (the warp decoder, then the one-pass values kernel).
  CHECK(device_rejections(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload], x.size(),
                          100, 7, ebac::cuda::kernel_path::fused) > 0);
}

TEST_CASE("device path handles f16 and bf16, relative and absolute bounds, every pipeline and path") {
  const std::size_t m = sized(100002, 10003);  // multiples of 7 (the 1 x 7 x m/7 shape), not of 32
  for (std::uint32_t seed : {7u, 8u}) {  // signed, then ReLU'd
    CAPTURE(seed);
    const auto xf = activations(m, seed);  // not a multiple of 32
    std::vector<ebac::float16> h(xf.size());
    std::vector<ebac::bfloat16> b(xf.size());
    for (std::size_t i = 0; i < xf.size(); ++i) {
      h[i] = ebac::from_float<ebac::float16>(xf[i]);
      b[i] = ebac::from_float<ebac::bfloat16>(xf[i]);
    }
    for (const ebac::error_bound bound : {ebac::error_bound{1e-2, ebac::bound_mode::absolute}, ebac::error_bound{1e-3, ebac::bound_mode::relative}}) {
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
  for (const ebac::error_bound bound : {ebac::error_bound{1e-3, ebac::bound_mode::relative}, ebac::error_bound{1e-3, ebac::bound_mode::absolute}}) {
    CAPTURE(static_cast<int>(bound.mode));
    ebac::compress_options opt;
    opt.bound = bound;
    for (const std::vector<float>* x : std::initializer_list<const std::vector<float>*>{&empty, &one, &constant, &nonfinite, &mixed}) {
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
  const auto stream = ebac::host::compress(x.data(), ebac::extents{20000},
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
  } catch (const ebac::error& err) {
    CHECK(err.code() == ebac::status::checksum_mismatch);
  }
}

TEST_CASE("device compress is capturable in a CUDA graph (staged, fused and single-pass kernels, Huffman with its device codebook)") {
  check_graph_capture(fast_t{}, staged);
  check_graph_capture(fast_t{}, fused);
  check_graph_capture(fast_t{}, single_pass);
  check_graph_capture(ratio_t{}, staged);
}

TEST_CASE("device decoder rejects corrupt streams without crashing") {
  const auto x = activations(50000, 9);
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::relative};
  opt.checksum = false;
  auto stream = ebac::host::compress(x.data(), ebac::extents{50000}, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
  const auto h = ebac::host::inspect(stream.data(), stream.size());
  CHECK(device_rejections(stream, h.header_bytes(), stream.size() - h.header_bytes(), x.size(), 200, 5) > 0);
  // The fused decoder checks the same sizes before reading a word.
  CHECK(device_rejections(stream, h.header_bytes(), stream.size() - h.header_bytes(), x.size(), 200, 5,
                          ebac::cuda::kernel_path::fused) > 0);
  CHECK(device_rejections(stream, h.section_offset(ebac::section_payload), h.section_bytes[ebac::section_payload], x.size(), 200, 8,
                          ebac::cuda::kernel_path::fused) > 0);
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
}
