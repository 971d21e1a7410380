// ebac/cuda/config.cuh - what every CUDA header of ebac needs.
//
// The CUDA backend runs the same policy functors as the host backend; only
// loops and memory movement live under cuda/. These headers need nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "ebac/cuda/* headers need a CUDA compiler (nvcc); host code includes <ebac/ebac.hpp> instead"
#endif

#include <ebac/config.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

// Kernels get hidden visibility so that two extensions built against
// different ebac versions (or archs) can share a process, as CCCL does.
#if defined(__GNUC__)
#define EBAC_KERNEL __global__ __attribute__((visibility("hidden")))
#else
#define EBAC_KERNEL __global__
#endif

EBAC_NAMESPACE_BEGIN
namespace cuda {

/// Blocks a grid may have along x (2^31 - 1): kernels that launch a block
/// per chunk, per outlier tile or per channel refuse more instead of
/// launching a grid their block count cannot hold.
inline constexpr std::uint64_t max_grid_blocks = 0x7fffffffu;

/// Error codes written to the device status word (no exceptions on device).
enum device_status : int {
  device_ok = 0,
  device_bad_bound = 1,      // relative bound x range is not finite
  device_corrupt_chunk = 2,  // a chunk does not decode to its element count
  device_corrupt_table = 3,  // chunk sizes do not add up to the payload
  device_corrupt_outliers = 4,
  device_checksum = 5,
  device_corrupt_code = 6,  // a lossless quantizer's code it cannot have written (a level index or window offset out of range)
};

namespace detail {
/// Records the first error only.
__device__ __forceinline__ void set_status(int* status, int code) { atomicCAS(status, 0, code); }

__host__ __device__ constexpr std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

/// Elements of chunk c when n elements are cut into chunks of `chunk` (the
/// last one may be short).
__host__ __device__ constexpr std::uint64_t chunk_length(std::uint64_t c, std::uint64_t n, std::uint32_t chunk) {
  return n - c * chunk < chunk ? n - c * chunk : chunk;
}
}  // namespace detail

}  // namespace cuda
EBAC_NAMESPACE_END
