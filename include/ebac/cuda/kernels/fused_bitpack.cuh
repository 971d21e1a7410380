// ebac/cuda/kernels/fused_bitpack.cuh - bit-packing pipelines straight from the input.
//
// The staged path (device_codec.cuh) writes the quantized field and the
// residual codes to memory and reads them back for sizing and for packing:
// about 30 bytes of traffic per 4-byte input. These two kernels compute every
// code where it is needed (detail::element_code: quantize the element and the
// predecessors its predictor reads, residual, zigzag - host-tested equal to
// the staged codes) and never store a field: the input is read twice (size,
// then write), plus the outlier flags. Between them a CUB scan turns chunk
// sizes into 64-bit offsets, as in the staged path, so the stream is the
// same byte for byte.
//
// One CUDA block per chunk, one warp per block of 32 codes: the lanes hold
// one code each, the width is a warp OR-reduction, and lane l < width writes
// packed word l (block_bitpack::packed_word, host-tested against pack_block).
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/element_code.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/extents.hpp>

#include <cub/block/block_reduce.cuh>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

inline constexpr int fused_threads = 256;
inline constexpr int fused_warps = fused_threads / 32;

/// OR of v over the warp (every lane gets it).
__device__ __forceinline__ std::uint32_t warp_or(std::uint32_t v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_or_sync(0xffffffffu, v);
#else
  for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#endif
}

/// Chunk c's elements [first, first + m) and its nb blocks of 32.
struct fused_chunk {
  std::uint64_t first, m, nb;
  __device__ fused_chunk(std::uint64_t c, std::uint64_t n, std::uint32_t chunk)
      : first(c * chunk), m(n - c * chunk < chunk ? n - c * chunk : chunk), nb((m + 31) / 32) {}
  /// This lane's code in block b (0 past the chunk's end: pack_block's zero
  /// padding); `outlier` is set only for an element inside the chunk.
  template <class P, class Q, class T>
  __device__ std::uint32_t lane_code(const P& pred, const extents& shape, const Q& q, const T* in, std::uint64_t b,
                                     unsigned lane, bool& outlier) const {
    const std::uint64_t j = b * 32 + lane;
    outlier = false;
    return j < m ? ::ebac::detail::element_code(pred, shape, q, in, first + j, outlier) : 0u;
  }
};

/// Pass 1: each chunk's payload bytes (width bytes + packed words) and every
/// element's outlier flag.
template <class P, class Q, class T>
EBAC_KERNEL void __launch_bounds__(fused_threads)
fused_bitpack_size_kernel(P pred, extents shape, const T* in, std::uint64_t n, std::uint32_t chunk, const Q* qp,
                          std::uint8_t* flags, std::uint64_t* chunk_bytes) {
  using reduce = cub::BlockReduce<std::uint64_t, fused_threads>;
  __shared__ typename reduce::TempStorage tmp;
  const Q q = *qp;
  const fused_chunk ck(blockIdx.x, n, chunk);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  std::uint64_t bytes = 0;
  for (std::uint64_t b = warp; b < ck.nb; b += fused_warps) {  // warp-uniform: every lane runs the reduction
    bool outlier;
    const std::uint32_t code = ck.lane_code(pred, shape, q, in, b, lane, outlier);
    const std::uint64_t j = b * 32 + lane;
    if (j < ck.m) flags[ck.first + j] = outlier;
    const std::uint32_t any = warp_or(code);
    if (lane == 0) bytes += 1 + 4 * static_cast<std::uint64_t>(::ebac::detail::bit_width(any));
  }
  const std::uint64_t total = reduce(tmp).Sum(bytes);
  if (threadIdx.x == 0) chunk_bytes[blockIdx.x] = total;
}

/// Pass 2: writes chunk c at payload + chunk_offset[c]: its width bytes, then
/// the packed blocks in order. Blocks go in rounds of one per warp; a round's
/// payload offsets are a prefix sum over the warps' sizes.
template <class P, class Q, class T>
EBAC_KERNEL void __launch_bounds__(fused_threads)
fused_bitpack_write_kernel(P pred, extents shape, const T* in, std::uint64_t n, std::uint32_t chunk, const Q* qp,
                           const std::uint64_t* chunk_offset, std::byte* out, const std::uint64_t* payload_offset) {
  __shared__ std::uint32_t codes[fused_warps][32];
  __shared__ std::uint32_t warp_bytes[fused_warps];
  const Q q = *qp;
  const fused_chunk ck(blockIdx.x, n, chunk);
  const std::uint64_t nb = ck.nb;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  std::byte* base = out + *payload_offset + chunk_offset[blockIdx.x];
  std::uint64_t round_base = nb;  // payload bytes before this round, from the chunk's start
  for (std::uint64_t r = 0; r * fused_warps < nb; ++r) {
    const std::uint64_t b = r * fused_warps + warp;
    int width = 0;
    if (b < nb) {  // warp-uniform
      bool outlier;
      const std::uint32_t code = ck.lane_code(pred, shape, q, in, b, lane, outlier);
      width = ::ebac::detail::bit_width(warp_or(code));
      codes[warp][lane] = code;
    }
    if (lane == 0) warp_bytes[warp] = 4u * static_cast<std::uint32_t>(width);
    __syncthreads();
    std::uint64_t before = 0, round = 0;
    for (unsigned k = 0; k < fused_warps; ++k) {
      before += k < warp ? warp_bytes[k] : 0u;
      round += warp_bytes[k];
    }
    if (b < nb) {
      if (lane == 0) base[b] = static_cast<std::byte>(width);
      if (static_cast<int>(lane) < width)
        ::ebac::detail::store_le<std::uint32_t>(base + round_base + before + 4 * lane,
                                                block_bitpack::packed_word(codes[warp], width, static_cast<int>(lane)));
    }
    round_base += round;
    __syncthreads();  // codes and warp_bytes are rewritten next round
  }
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
