// ebac/cuda/dispatch/temp_layout.cuh - carving one temp allocation, and launch sizes.
//
// The device-scope calls (dispatch/compress.cuh, dispatch/decompress.cuh)
// follow CUB's two-call contract: the first call, with no temp pointer,
// runs the same carving as the second and reports the bytes it needs.
#pragma once

#include <ebac/config.hpp>
#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace detail {

/// Blocks of `threads` for n elements of an element-wise (grid-stride) kernel.
inline unsigned grid_for(std::uint64_t n, unsigned threads = kernels::elementwise_threads) {
  const std::uint64_t g = (n + threads - 1) / threads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > kernels::elementwise_max_blocks ? kernels::elementwise_max_blocks : g));
}

/// Carves one temp allocation into 256-byte aligned pieces (query and run
/// agree). The caller's pointer need not be aligned (a slice of a larger
/// workspace, say): the carver starts at the next aligned address, and the
/// size it asks for includes that slack.
struct temp_carver {
  static constexpr std::size_t alignment = 256;
  std::byte* base;  ///< d_temp rounded up to `alignment`; nullptr on a size query
  std::size_t used = 0;
  explicit temp_carver(void* d_temp)
      : base(d_temp ? reinterpret_cast<std::byte*>(align_up(reinterpret_cast<std::uintptr_t>(d_temp), alignment)) : nullptr) {}
  /// Bytes the caller must provide, whatever its pointer's alignment.
  [[nodiscard]] std::size_t required() const noexcept { return used + alignment - 1; }
  template <class U>
  U* take(std::size_t count) {
    used = align_up(used, alignment);
    U* p = base ? reinterpret_cast<U*>(base + used) : nullptr;
    used += count * sizeof(U);
    return p;
  }
};

/// A pointer to a member of a struct in device memory (nullptr on a size query).
template <class M, class U>
M* device_member(U* base, std::size_t offset) {
  return base ? reinterpret_cast<M*>(reinterpret_cast<std::byte*>(base) + offset) : nullptr;
}

}  // namespace detail
}  // namespace cuda
EBAC_NAMESPACE_END
