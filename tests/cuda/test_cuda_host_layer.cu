// What the CUDA layers do before, or instead of, running on a device
// (CTest label cuda_host). Runs on any machine: CI runs it on its GPU-less
// runner, where every CUDA runtime call fails, and that is the point -
//  - bad arguments are refused with the host backend's message before any
//    CUDA call (a CUDA call would fail here and change the message);
//  - without a usable device, compress and decompress throw ebac::error
//    whose code is device_error and whose message names the CUDA failure;
//    nothing crashes or aborts.
// On a machine with a GPU this binary hides it (below), so every case
// means the same everywhere (the gpu suite covers the device).
#include <ebac/cuda/codec.cuh>
#include <ebac/ebac.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace {

// No usable device in this process: the CUDA runtime reads
// CUDA_VISIBLE_DEVICES when it initializes, at the first CUDA call, which
// comes after static initialization (every call is inside a test case).
const bool device_hidden = [] { return setenv("CUDA_VISIBLE_DEVICES", "", 1) == 0; }();

struct outcome {
  bool threw = false;
  ebac::status code = ebac::status::ok;
  std::string what;
};

template <class F>
outcome run(F&& f) {
  outcome o;
  try {
    f();
  } catch (const ebac::error& e) {
    o.threw = true;
    o.code = e.code();
    o.what = e.what();
  }
  return o;
}

bool device_usable() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
using ratio_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;

/// A non-null pointer that must never be dereferenced: every case below is
/// refused before anything reads the input.
const float* never_read() { return reinterpret_cast<const float*>(std::uintptr_t{0x1000}); }

template <class Pipeline, class T>
void refused_alike(const char* label, const ebac::extents& shape, const Pipeline& pipe, const ebac::compress_options& opt,
                   const T* host_in, const T* device_in) {
  INFO("case: ", label);
  const outcome host = run([&] { (void)ebac::host::compress(host_in, shape, pipe, opt); });
  const outcome dev = run([&] { (void)ebac::cuda::compress(device_in, shape, pipe, opt); });
  REQUIRE(host.threw);
  CHECK(host.code == ebac::status::invalid_argument);
  CHECK(dev.threw);
  CHECK(dev.code == ebac::status::invalid_argument);
  CHECK(dev.what == host.what);
  // The device-scope call refuses too, in a size query as in a run, and
  // without writing the size it was asked for.
  if (device_in != nullptr) {
    std::size_t temp = 12345;
    CHECK(ebac::cuda::compress(nullptr, temp, device_in, shape, pipe, opt, nullptr, 0, nullptr, nullptr) ==
          cudaErrorInvalidValue);
    CHECK(temp == 12345);
    int status = 0;
    std::uint64_t size = 0;
    std::byte out[1];
    CHECK(ebac::cuda::compress(out, temp, device_in, shape, pipe, opt, out, 1, &size, &status) == cudaErrorInvalidValue);
  }
}

}  // namespace

TEST_CASE("cuda layers: bad arguments are refused with the host backend's message, before any CUDA call") {
  const std::vector<float> x(64, 1.0f);
  ebac::compress_options ok;
  ok.bound = {1e-3, ebac::bound_mode::absolute};
  const ebac::extents e64{64};

  fast_t chunk33;
  chunk33.chunk_elements = 33;
  refused_alike("chunk of 33", e64, chunk33, ok, x.data(), never_read());
  fast_t chunk0;
  chunk0.chunk_elements = 0;
  refused_alike("chunk of 0", e64, chunk0, ok, x.data(), never_read());
  fast_t chunk_big;
  chunk_big.chunk_elements = (1u << 24) + 32;
  refused_alike("chunk above 2^24", e64, chunk_big, ok, x.data(), never_read());
  ratio_t huff33;
  huff33.chunk_elements = 40;
  refused_alike("Huffman, chunk of 40", e64, huff33, ok, x.data(), never_read());

  for (double b : {0.0, -1e-3, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    ebac::compress_options bad = ok;
    bad.bound.value = b;
    refused_alike("bad absolute bound", e64, fast_t{}, bad, x.data(), never_read());
  }
  ebac::compress_options rel_big = ok;
  rel_big.bound = {1e7, ebac::bound_mode::relative};
  refused_alike("relative bound above 1e6", e64, fast_t{}, rel_big, x.data(), never_read());

  refused_alike("rank 0", ebac::extents{}, fast_t{}, ok, x.data(), never_read());
  refused_alike("more than 2^48 elements", ebac::extents{std::uint64_t{1} << 25, std::uint64_t{1} << 24}, fast_t{}, ok, x.data(),
                never_read());
  fast_t lorenzo3;
  lorenzo3.predictor = ebac::lorenzo::along_last(3, 3, 16);
  refused_alike("3-D Lorenzo on a 1-D tensor", e64, lorenzo3, ok, x.data(), never_read());
  refused_alike("null input", e64, fast_t{}, ok, static_cast<const float*>(nullptr), static_cast<const float*>(nullptr));
}

TEST_CASE("cuda layers: every dtype's refusals (pooling geometries, max_levels) read as the host backend's") {
  ebac::compress_options ok;
  ok.bound = {1e-3, ebac::bound_mode::absolute};
  const ebac::extents e{4, 8, 8};
  // A 2x2/2 pool over 16x16 planes: valid for the 8x8 outputs.
  ebac::pool_geometry g;
  g.dims = 2;
  for (int j = 0; j < 2; ++j) {
    g.input[j] = 16;
    g.kernel[j] = 2;
    g.stride[j] = 2;
    g.dilation[j] = 1;
  }
  REQUIRE(g.validate(e) == ebac::status::ok);
  const std::vector<float> xf(256, 1.0f);
  const std::vector<std::int64_t> xi(256, 3);
  const std::vector<std::uint8_t> xb(256, 1);
  const auto* never_i64 = reinterpret_cast<const std::int64_t*>(std::uintptr_t{0x1000});
  const auto* never_bool = reinterpret_cast<const bool*>(std::uintptr_t{0x1000});
  const bool* host_bool = reinterpret_cast<const bool*>(xb.data());

  ebac::compress_options pooled_float = ok;
  pooled_float.pooling = g;
  refused_alike("a pooling geometry on a float tensor", e, fast_t{}, pooled_float, xf.data(), never_read());
  ebac::compress_options bad_pool = ok;
  bad_pool.pooling = g;
  bad_pool.pooling.kernel[1] = 0;
  refused_alike("a pooling kernel of 0", e, fast_t{}, bad_pool, xi.data(), never_i64);
  bad_pool.pooling = g;
  bad_pool.pooling.dims = 3;  // more spatial dims than the tensor has after its first
  refused_alike("a pooling geometry of 3 dims on a rank-3 tensor", e, fast_t{}, bad_pool, xi.data(), never_i64);
  bad_pool.pooling = g;
  bad_pool.pooling.kernel[0] = bad_pool.pooling.kernel[1] = 4096;  // 2^24 offsets in a window
  refused_alike("a pooling window of 2^24 offsets", e, fast_t{}, bad_pool, xi.data(), never_i64);
  ebac::compress_options many_levels = ok;
  many_levels.max_levels = 17;
  refused_alike("max_levels 17 (f32)", e, fast_t{}, many_levels, xf.data(), never_read());
  refused_alike("max_levels 17 (bool)", e, fast_t{}, many_levels, host_bool, never_bool);
  refused_alike("max_levels 17 (int64, Huffman)", e, ratio_t{}, many_levels, xi.data(), never_i64);
  // An integer tensor ignores the bound: a bad one is no reason to refuse.
  ebac::compress_options bad_bound = ok;
  bad_bound.bound.value = -1;
  CHECK(ebac::detail::compress_argument_error<std::int64_t>(e, fast_t{}, bad_bound) == nullptr);
  CHECK(ebac::detail::compress_argument_error<float>(e, fast_t{}, bad_bound) != nullptr);
  fast_t chunk33;
  chunk33.chunk_elements = 33;
  refused_alike("chunk of 33 (int64)", e, chunk33, ok, xi.data(), never_i64);
  refused_alike("null input (bool)", e, fast_t{}, ok, static_cast<const bool*>(nullptr), static_cast<const bool*>(nullptr));
}

TEST_CASE("cuda layers: the device output bound holds the coded stream, which the stream bound does not") {
  // cuda::output_capacity is the coded bound (the stream is assembled in
  // d_out before the stored form can replace it); the stream itself stays
  // within max_compressed_bytes. Both 0 for what compress refuses.
  const ebac::extents shapes[] = {{1}, {1000}, {64, 128, 56, 56}, {3, 5, 7}};
  for (const auto& e : shapes) {
    CHECK(ebac::cuda::output_capacity<fast_t, float>(e, fast_t{}) == ebac::max_coded_bytes<fast_t, float>(e, fast_t{}));
    CHECK(ebac::cuda::output_capacity<fast_t, float>(e, fast_t{}) > ebac::max_compressed_bytes<fast_t, float>(e, fast_t{}));
    CHECK(ebac::cuda::output_capacity<ratio_t, std::int64_t>(e, ratio_t{}) >
          ebac::max_compressed_bytes<ratio_t, std::int64_t>(e, ratio_t{}));
    CHECK(ebac::cuda::output_capacity<ratio_t, bool>(e, ratio_t{}) > ebac::max_compressed_bytes<ratio_t, bool>(e, ratio_t{}));
  }
  fast_t odd;
  odd.chunk_elements = 33;
  CHECK(ebac::cuda::output_capacity<fast_t, float>(ebac::extents{100}, odd) == 0);
  CHECK(ebac::cuda::output_capacity<fast_t, float>(ebac::extents{}, fast_t{}) == 0);
}

TEST_CASE("cuda layers: a tensor of more chunks than a grid holds is refused, not truncated") {
  // 2^31 chunks of 32 elements: the host takes it, the CUDA backend (one block
  // per chunk, at most 2^31 - 1 blocks) must say so rather than launch a
  // grid that a 32-bit block count would cut short.
  const ebac::extents e{std::uint64_t{1} << 31, 32};
  fast_t small_chunks;
  small_chunks.chunk_elements = 32;
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::absolute};
  CHECK(ebac::detail::compress_argument_error<float>(e, small_chunks, opt) == nullptr);
  const outcome c = run([&] { (void)ebac::cuda::compress(never_read(), e, small_chunks, opt); });
  CHECK(c.threw);
  CHECK(c.code == ebac::status::invalid_argument);
  CHECK(c.what.find("2^31 - 1 chunks") != std::string::npos);
  std::size_t temp = 1;
  CHECK(ebac::cuda::compress(nullptr, temp, never_read(), e, small_chunks, opt, nullptr, 0, nullptr, nullptr) ==
        cudaErrorInvalidValue);
  // One chunk fewer is within the limit: refused by nothing but the device.
  const ebac::extents fits{(std::uint64_t{1} << 31) - 1, 32};
  // (No device here; on a GPU the 2^36-element output buffer cannot be
  // allocated: either way it throws before anything reads the input.)
  const outcome f = run([&] { (void)ebac::cuda::compress(never_read(), fits, small_chunks, opt); });
  CHECK(f.threw);
  CHECK(f.code != ebac::status::invalid_argument);
}

TEST_CASE("cuda layers: without a usable device, compress and decompress throw ebac::error naming the CUDA failure") {
  REQUIRE(device_hidden);
  REQUIRE_MESSAGE(!device_usable(),
                  "CUDA_VISIBLE_DEVICES=\"\" did not hide the device: the CUDA runtime started before it was set");
  const ebac::extents e{4, 1000};
  for (int path = 0; path < 3; ++path) {
    CAPTURE(path);
    ebac::compress_options opt;
    opt.bound = {1e-2, ebac::bound_mode::relative};
    const outcome c = run([&] {
      (void)ebac::cuda::compress(never_read(), e, fast_t{}, opt, nullptr, ebac::cuda::default_allocator(), true,
                                 static_cast<ebac::cuda::kernel_path>(path));
    });
    CHECK(c.threw);
    CHECK(c.code == ebac::status::device_error);
    CHECK(c.what.find("cuda") != std::string::npos);  // CUDA's own error name
    CHECK(c.what.find("device error: ") == 0);
    // The root cause, not only CUB's symptom ("invalid device ordinal"):
    // added by the host layer (no driver, as on CI), or CUDA's own error
    // when that already names it (a device hidden by CUDA_VISIBLE_DEVICES).
    CHECK((c.what.find("no usable CUDA device") != std::string::npos ||
           c.what.find("no CUDA device is visible") != std::string::npos ||
           c.what.find("cudaErrorNoDevice") != std::string::npos));
    MESSAGE("compress: ", c.what);
  }
  const outcome h = run([&] {
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    (void)ebac::cuda::compress(never_read(), e, ratio_t{}, opt);
  });
  CHECK(h.threw);
  CHECK(h.code == ebac::status::device_error);

  std::vector<float> out(4000);
  const outcome d = run([&] {
    ebac::cuda::decompress(reinterpret_cast<const std::byte*>(never_read()), 4096,
                           reinterpret_cast<float*>(std::uintptr_t{0x2000}), out.size());
  });
  CHECK(d.threw);
  CHECK(d.code == ebac::status::device_error);
  CHECK(d.what.find("reading the stream header") != std::string::npos);
  MESSAGE("decompress: ", d.what);
}
