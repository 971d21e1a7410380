// ebac/cuda/kernels/huffman_codebook.cuh - the Huffman codebook built on the device.
//
// The host builds a stream's codebook with huffman_codebook::choose; these
// kernels run the very same steps (encoder/huffman.hpp: the two
// huffman_histogram_lengths of huffman_choose_lengths in two blocks at once,
// then huffman_prefer_runs and huffman_write_image in one), so a device compression needs
// no host round trip between counting tokens and encoding them, and picks
// the host's codebook. Only the two places where the host and the device
// differ live here: serial sections run in thread 0 between barriers,
// for_each and sum are split among all threads, and used symbols are placed
// by rank (huffman_used_rank, host-tested to give the host's std::sort
// order) by all threads at once.
//
// Not tuned: the two-queue construction, code assignment and serialization
// are serial (about 3 x 4128 dependent steps in one thread, on a workspace in
// global memory; the two histograms' run side by side), so expect 0.1 to a
// few ms a tensor whatever its size (never measured). If the GPU check shows
// it matters: the node arrays in shared memory.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/huffman_image.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// Runs the shared construction steps in one block (see above). `freq` is a
/// shared-memory copy of the histogram being ordered.
struct block_exec {
  std::uint64_t* freq;
  unsigned long long* acc;  // shared: sum()'s accumulator

  template <class F>
  __host__ __device__ void for_each(std::uint32_t n, F&& f) {
#if defined(__CUDA_ARCH__)
    for (std::uint32_t i = threadIdx.x; i < n; i += blockDim.x) f(i);
    __syncthreads();
#else
    (void)n;
    (void)f;
#endif
  }

  template <class F>
  __host__ __device__ std::uint64_t sum(std::uint32_t n, F&& f) {
#if defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) *acc = 0;
    __syncthreads();
    unsigned long long part = 0;
    for (std::uint32_t i = threadIdx.x; i < n; i += blockDim.x) part += f(i);
    if (part) atomicAdd(acc, part);
    __syncthreads();
    const std::uint64_t total = *acc;
    __syncthreads();  // acc is reset by the next sum
    return total;
#else
    (void)n;
    (void)f;
    return 0;
#endif
  }

  template <class F>
  __host__ __device__ void serial(F&& f) {
#if defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) f();
    __syncthreads();
#else
    f();  // not reached: the kernel is the only user
#endif
  }

  __host__ __device__ void sort_used(::ebac::detail::huffman_length_workspace& w, std::uint32_t n) {
#if defined(__CUDA_ARCH__)
    for (std::uint32_t s = threadIdx.x; s < n; s += blockDim.x) freq[s] = w.freq[s];
    if (threadIdx.x == 0) w.used = 0;
    __syncthreads();
    std::uint32_t mine = 0;
    for (std::uint32_t s = threadIdx.x; s < n; s += blockDim.x) {
      if (!freq[s]) continue;
      w.order[::ebac::detail::huffman_used_rank(freq, n, s)] = s;
      ++mine;
    }
    if (mine) atomicAdd(&w.used, mine);
    __syncthreads();
#else
    (void)w;
    (void)n;
#endif
  }
};

/// Step 1, two blocks at once: block b gives the code lengths of histogram
/// b (0: tokens with zero runs, hist[0, size); 1: without, hist[size,
/// 2 size)) into lengths + b x size, in its own workspace w[b].
template <int = 0>
EBAC_KERNEL void __launch_bounds__(codebook_threads)
    huffman_lengths_kernel(const unsigned long long* hist, ::ebac::detail::huffman_length_workspace* w, std::uint8_t* lengths) {
  constexpr std::uint32_t S = huffman_alphabet::size;
  __shared__ std::uint64_t freq[S];
  __shared__ unsigned long long sum;
  block_exec ex{freq, &sum};
  const std::uint32_t b = blockIdx.x;
  ::ebac::detail::huffman_histogram_lengths(ex, w[b], hist + b * S, lengths + b * S);
}

/// Step 2, one block: the alphabet that codes the payload smaller, its
/// codebook image at `image` (huffman_image_layout) and its serialized form
/// at out + *section_offset (the stream's codebook section, which starts
/// after a stage-parameter section whose size only the device knows).
template <int = 0>
EBAC_KERNEL void __launch_bounds__(codebook_threads)
    huffman_codebook_kernel(const unsigned long long* hist, const std::uint8_t* lengths, std::byte* image, std::byte* out,
                            const std::uint64_t* section_offset) {
  std::byte* const section = out + *section_offset;
  constexpr std::uint32_t S = huffman_alphabet::size;
  __shared__ unsigned long long sum;
  block_exec ex{nullptr, &sum};  // no sort_used in this step: no shared histogram copy
  const std::uint8_t* with_runs = lengths;
  const std::uint8_t* literals_only = lengths + S;
  const bool use_runs = ::ebac::detail::huffman_prefer_runs(ex, hist, hist + S, with_runs, literals_only);
  const std::size_t serialized = huffman_write_image(ex, use_runs ? with_runs : literals_only, use_runs, image);
  for (std::size_t i = threadIdx.x; i < serialized; i += codebook_threads)
    section[i] = image[huffman_image_layout::serialized + i];
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
