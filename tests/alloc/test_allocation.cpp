// Allocation behaviour of the host codec, observed through a replaced global
// operator new/delete (this binary only):
//  - an allocation that fails on an OpenMP worker thread, i.e. inside a
//    parallel region, reaches the caller as ebac::error(out_of_memory) from
//    compress and from decompress (it used to escape the region: SIGABRT);
//  - after compress and decompress return, no scratch stays allocated (the
//    per-thread buffers used to be thread_local, sized by the stream's chunk).
#include <ebac/ebac.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include <malloc.h>

// --- the replaced allocator ----------------------------------------------------

namespace {

std::atomic<std::int64_t> live_bytes{0};
std::atomic<int> fail_countdown{-1};  // >= 0: armed; the allocation that takes it below 0 fails
std::atomic<int> injected{0};
std::thread::id armed_on;  // the test's thread: only other threads fail

void* allocate(std::size_t n, std::size_t align, bool nothrow) {
  if (fail_countdown.load(std::memory_order_relaxed) >= 0 && std::this_thread::get_id() != armed_on &&
      fail_countdown.fetch_sub(1) == 0) {
    injected.fetch_add(1);
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) p = std::malloc(n ? n : 1);
  else if (::posix_memalign(&p, align, n ? n : 1) != 0) p = nullptr;
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  live_bytes.fetch_add(static_cast<std::int64_t>(::malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}

void release(void* p) noexcept {
  if (!p) return;
  live_bytes.fetch_sub(static_cast<std::int64_t>(::malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n, 0, false); }
void* operator new[](std::size_t n) { return allocate(n, 0, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0, true); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a), false); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a), false); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a), true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a), true);
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }

// --- tests -----------------------------------------------------------------------

namespace {

/// Arms the allocator: the k-th allocation made on a thread other than this
/// one (an OpenMP worker) throws std::bad_alloc.
struct fail_on_worker {
  explicit fail_on_worker(int k) {
    injected = 0;
    armed_on = std::this_thread::get_id();
    fail_countdown = k;
  }
  ~fail_on_worker() { fail_countdown = -1; }
};

std::vector<float> signal(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.001f * static_cast<float>(i)) * 3.0f + (i % 7 == 0 ? 0.5f : 0.0f);
  return x;
}

using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
using ratio_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;

/// Runs f until the injected failure happened inside it (a worker must take
/// at least one chunk; the first tries may find the team asleep) and returns
/// the status it threw, or ok when it did not throw.
template <class F>
ebac::status status_with_failure_on_worker(F&& f) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    ebac::status s = ebac::status::ok;
    {
      fail_on_worker arm(0);
      try {
        f();
      } catch (const ebac::error& e) { s = e.code(); }
    }
    if (injected.load() > 0) return s;
  }
  FAIL("no allocation happened on a worker thread in 20 attempts");
  return ebac::status::ok;
}

}  // namespace

#if EBAC_HAS_OPENMP()
TEST_SUITE("allocation") {
  TEST_CASE("an allocation failing inside a parallel region of compress gives out_of_memory") {
    const std::size_t n = std::size_t{1} << 22;  // 256 chunks of 16384
    const auto x = signal(n);
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    opt.threads = 2;
    SUBCASE("fused per-chunk path (fast)") {
      const ebac::extents e{n};
      CHECK(status_with_failure_on_worker([&] { (void)ebac::host::compress(x.data(), e, fast_t{}, opt); }) ==
            ebac::status::out_of_memory);
    }
    SUBCASE("whole-tensor path with a codebook (lorenzo 2-D + Huffman)") {
      const ebac::extents e{64, 256, 256};
      ratio_t p;
      p.predictor = ebac::lorenzo::along_last(2, 3, ebac::lorenzo::default_tile_2d);
      CHECK(status_with_failure_on_worker([&] { (void)ebac::host::compress(x.data(), e, p, opt); }) ==
            ebac::status::out_of_memory);
    }
    // Afterwards the same call succeeds: nothing was left half-done.
    const ebac::extents e{n};
    CHECK_NOTHROW((void)ebac::host::compress(x.data(), e, fast_t{}, opt));
  }

  TEST_CASE("an allocation failing inside a parallel region of decompress gives out_of_memory") {
    const std::size_t n = std::size_t{1} << 22;
    const auto x = signal(n);
    const ebac::extents e{n};
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    opt.threads = 1;
    const auto stream = ebac::host::compress(x.data(), e, fast_t{}, opt);
    std::vector<float> y(n);
    CHECK(status_with_failure_on_worker([&] { ebac::host::decompress(stream.data(), stream.size(), y.data(), n, 2); }) ==
          ebac::status::out_of_memory);
    CHECK(status_with_failure_on_worker([&] { (void)ebac::host::decompress<float>(stream.data(), stream.size(), 2); }) ==
          ebac::status::out_of_memory);
    CHECK_NOTHROW(ebac::host::decompress(stream.data(), stream.size(), y.data(), n, 2));
  }
}
#endif

TEST_SUITE("allocation") {
  TEST_CASE("compress and decompress keep no scratch once they return") {
    // Chunks of 2^20 elements: 8 MiB of compress scratch and 4 MiB of decode
    // scratch per thread, which used to stay allocated in every thread.
    const std::size_t n = std::size_t{1} << 23;
    const auto x = signal(n);
    const ebac::extents e{n};
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      opt.threads = threads;
      fast_t p;
      p.chunk_elements = 1u << 20;
      const std::int64_t before = live_bytes.load();
      {
        const auto stream = ebac::host::compress(x.data(), e, p, opt);
        const auto y = ebac::host::decompress<float>(stream.data(), stream.size(), threads);
        REQUIRE(y.size() == n);
      }
      const std::int64_t after = live_bytes.load();
      CHECK(after - before == 0);
    }
  }

  TEST_CASE("decompress refuses an output above max_output_bytes before allocating it") {
    const std::size_t n = 100000;
    const auto x = signal(n);
    const ebac::extents e{n};
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    const auto stream = ebac::host::compress(x.data(), e, fast_t{}, opt);
    const std::int64_t before = live_bytes.load();
    std::int64_t during = 0;
    try {
      (void)ebac::host::decompress<float>(stream.data(), stream.size(), 1, 4 * n - 1);
      FAIL("no exception");
    } catch (const ebac::error& err) {
      during = live_bytes.load();
      CHECK(err.code() == ebac::status::buffer_too_small);
    }
    CHECK(during - before < 4096);  // the message, not the 400 kB output
    std::vector<float> y(n);
    CHECK_THROWS_AS(ebac::host::decompress(stream.data(), stream.size(), y.data(), n, 1, 4 * n - 1), ebac::error);
    CHECK_NOTHROW(ebac::host::decompress(stream.data(), stream.size(), y.data(), n, 1, 4 * n));
    CHECK(ebac::host::decompress<float>(stream.data(), stream.size(), 1, 4 * n).size() == n);
  }
}
