// ebac/cuda/kernels/lookback.cuh - the decoupled look-back on device memory.
//
// detail/lookback.hpp holds the protocol over caller-supplied accessors;
// every CUDA kernel that places its tile by look-back (single-pass
// bit-packing, the outlier index writer) reads and writes the words the same
// way: relaxed device-scope atomics on one 64-bit word per tile (status and
// value share the word, so no fence is needed). One thread per tile calls it.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/detail/lookback.hpp>

#include <cuda/atomic>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// Exclusive prefix of tile `tile` with own aggregate `aggregate`, over the
/// zero-initialized look-back words `words[0, tiles)`.
__device__ inline std::uint64_t device_lookback_exclusive(unsigned long long* words, std::uint64_t tile,
                                                          std::uint64_t aggregate) {
  using word_ref = ::cuda::atomic_ref<unsigned long long, ::cuda::thread_scope_device>;
  auto load = [&](std::uint64_t i) -> std::uint64_t { return word_ref(words[i]).load(::cuda::memory_order_relaxed); };
  auto store = [&](std::uint64_t i, std::uint64_t w) { word_ref(words[i]).store(w, ::cuda::memory_order_relaxed); };
  return ::ebac::detail::lookback_exclusive(tile, aggregate, load, store);
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
