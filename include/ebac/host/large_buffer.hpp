// ebac/host/large_buffer.hpp - uninitialized scratch of a tensor's size, on
// transparent huge pages where Linux has them.
//
// Compression keeps up to three bytes an element between its two passes
// (encode_stream.hpp: the kept tokens or codes) and some predictors a whole
// integer field: fresh memory that the call writes once, reads once and
// frees. With 4 KiB pages every page of it is a fault, paid again by every
// call where the allocator maps large blocks afresh (glibc above its mmap
// threshold, or with the threshold fixed, as peak-memory studies fix it).
// The kernel's page bookkeeping, not the zeroing, is most of that cost: a
// 4.9 M-element float tensor compressed with `balanced` took 5,330 faults
// and 33 ms, and 2,260 faults and 29 ms with these buffers. A buffer of 4
// MiB or more gets a mapping of its own whose whole 2 MiB pages are advised
// MADV_HUGEPAGE (one fault per 2 MiB), unmapped when the buffer goes, so
// that the advice never reaches memory an allocator hands out later.
// Elsewhere, or if the mapping fails, it is operator new[] as before.
#pragma once

#include <ebac/config.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#endif

EBAC_NAMESPACE_BEGIN
namespace host {

/// Whether Linux backs memory advised MADV_HUGEPAGE with transparent huge
/// pages ("always" or "madvise" in /sys/kernel/mm/transparent_hugepage/enabled),
/// read once per process.
inline bool huge_pages_available() noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool available = [] {
    std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == nullptr) return false;
    char line[128] = {};
    const bool read = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    return read && (std::strstr(line, "[always]") != nullptr || std::strstr(line, "[madvise]") != nullptr);
  }();
  return available;
#else
  return false;
#endif
}

/// The huge page size these mappings align to and advise (x86-64's and
/// arm64's default transparent huge page).
inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;
/// Smallest size that gets a mapping of its own: one whole huge page. (It
/// was two: a 12.8 MB float tensor's kept token symbols, 3.2 MB, then took
/// 784 faults of 4 KiB pages a compression; now one huge page and 300.)
inline constexpr std::size_t large_mapping_min_bytes = huge_page_bytes;

/// A private anonymous mapping of `bytes` (at least large_mapping_min_bytes)
/// that starts on a 2 MiB boundary and whose whole 2 MiB pages are advised
/// MADV_HUGEPAGE; or nullptr where huge pages are unavailable or the mapping
/// fails (the caller allocates otherwise). Aligned so that only its tail
/// (under 2 MiB) is left to 4 KiB pages: where the kernel happens to put a
/// mapping up to 2 MiB at each end fall outside every huge page (the
/// compression above took 2,780 faults with such mappings, 2,260 with
/// these). The tail is not rounded up to a huge page, which would be
/// resident whole once touched: no more memory than `bytes` in 4 KiB pages.
/// Release it with unmap_huge_pages(p, bytes).
inline void* map_huge_pages(std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < large_mapping_min_bytes || bytes > static_cast<std::size_t>(-1) / 2 || !huge_pages_available()) return nullptr;
  // One huge page more than needed, then the unaligned head and the rest of
  // the tail handed back: what is left starts on a 2 MiB boundary.
  static const auto small_page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));  // munmap's unit
  if (small_page == 0 || (small_page & (small_page - 1)) != 0 || small_page > huge_page_bytes) return nullptr;
  const std::size_t asked = bytes + huge_page_bytes;
  void* p = mmap(nullptr, asked, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (at + huge_page_bytes - 1) & ~std::uintptr_t{huge_page_bytes - 1};
  const std::uintptr_t end = (begin + bytes + small_page - 1) & ~(small_page - 1);
  if (begin > at) (void)munmap(p, begin - at);
  if (at + asked > end) (void)munmap(reinterpret_cast<void*>(end), at + asked - end);
  const std::size_t whole = bytes & ~(huge_page_bytes - 1);
  (void)madvise(reinterpret_cast<void*>(begin), whole, MADV_HUGEPAGE);  // advice only: ignore failure
  return reinterpret_cast<void*>(begin);
#else
  (void)bytes;
  return nullptr;
#endif
}

/// Releases what map_huge_pages(bytes) returned (p may be null).
inline void unmap_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  if (p != nullptr) (void)munmap(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

/// n uninitialized elements of a trivial type T, owned (move-only): a
/// mapping of its own on huge pages when it is large enough and Linux has
/// them (map_huge_pages), else new T[n]. Throws std::bad_alloc as new does.
template <class T>
class large_buffer {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "large_buffer holds uninitialized elements of a trivial type");

 public:
  large_buffer() noexcept = default;
  explicit large_buffer(std::size_t n) { reset(n); }
  large_buffer(large_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), mapped_(std::exchange(o.mapped_, false)) {}
  large_buffer& operator=(large_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      mapped_ = std::exchange(o.mapped_, false);
    }
    return *this;
  }
  large_buffer(const large_buffer&) = delete;
  large_buffer& operator=(const large_buffer&) = delete;
  ~large_buffer() { reset(); }

  /// Frees what it holds, then holds n uninitialized elements (n may be 0:
  /// then nothing is held).
  void reset(std::size_t n) {
    reset();
    if (n == 0) return;
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    const std::size_t bytes = n * sizeof(T);
    if (void* p = map_huge_pages(bytes)) {  // page-aligned: every T is aligned
      data_ = static_cast<T*>(p);
      bytes_ = bytes;
      mapped_ = true;
      return;
    }
    data_ = new T[n];
    bytes_ = bytes;
  }

  void reset() noexcept {
    if (data_ == nullptr) return;
    if (mapped_) unmap_huge_pages(data_, bytes_);
    else delete[] data_;
    data_ = nullptr;
    bytes_ = 0;
    mapped_ = false;
  }

  [[nodiscard]] T* get() const noexcept { return data_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  /// Whether it is a mapping of its own (for tests).
  [[nodiscard]] bool mapped() const noexcept { return mapped_; }

 private:
  T* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool mapped_ = false;
};

}  // namespace host
EBAC_NAMESPACE_END
