// ebac/cuda/statistics.cuh - the error model's cheap statistics on the device:
// per-channel moments of a (batch x channels x inner) tensor (dy per output
// channel, the saved input's non-zero fraction, a weight gradient's RMS),
// with the same policy (error_model::channel_moments) as the host helper.
//
// CUB's contract: the caller's stream, the result written to device memory
// (one channel_moments per channel), no allocation, no synchronization, so it
// is safe under graph capture. One block per channel; each thread adds a fixed
// set of elements in a fixed order and CUB's block reduction merges them, so
// the result is deterministic for a given block size (not bit-equal to the
// host's serial sum: double sums in another order).
//
// NEVER RUN ON A GPU so far (no device was lent to the sessions that wrote
// it); CI compiles it and tests/cuda/test_cuda_statistics.cu checks it
// against the host helper where a GPU exists.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/dtype.hpp>
#include <ebac/error_model/channel_moments.hpp>

#include <cub/block/block_reduce.cuh>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

template <class T, int Threads>
EBAC_KERNEL void __launch_bounds__(Threads) channel_moments_kernel(const T* x, std::int64_t batch, std::int64_t channels,
                                                                   std::int64_t inner, error_model::channel_moments* out) {
  using block_reduce = cub::BlockReduce<error_model::channel_moments, Threads>;
  __shared__ typename block_reduce::TempStorage tmp;
  const std::int64_t c = blockIdx.x;
  error_model::channel_moments m;
  for (std::int64_t n = 0; n < batch; ++n) {
    const T* p = x + (n * channels + c) * inner;
    for (std::int64_t i = threadIdx.x; i < inner; i += Threads) m.add(to_float(p[i]));
  }
  const error_model::channel_moments total = block_reduce(tmp).Reduce(m, error_model::merge_moments{});
  if (threadIdx.x == 0) out[c] = total;
}

}  // namespace kernels

/// out[c] = moments of channel c of x (batch x channels x inner, contiguous),
/// for c < channels; out must hold `channels` elements of device memory.
/// Returns cudaErrorInvalidValue for negative sizes or a channel count above
/// the grid limit (2^31 - 1), else the launch's error.
template <class T>
[[nodiscard]] cudaError_t channel_moments(const T* d_x, std::int64_t batch, std::int64_t channels, std::int64_t inner,
                                          error_model::channel_moments* d_out, cudaStream_t stream = nullptr) {
  if (batch < 0 || channels < 0 || inner < 0 || static_cast<std::uint64_t>(channels) > max_grid_blocks)
    return cudaErrorInvalidValue;
  if (channels == 0) return cudaSuccess;
  if (d_out == nullptr || (d_x == nullptr && batch > 0 && inner > 0)) return cudaErrorInvalidValue;
  constexpr int threads = kernels::statistics_threads;
  kernels::channel_moments_kernel<T, threads>
      <<<static_cast<unsigned>(channels), threads, 0, stream>>>(d_x, batch, channels, inner, d_out);
  return cudaGetLastError();
}

}  // namespace cuda
EBAC_NAMESPACE_END
