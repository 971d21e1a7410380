// ebac/cuda/kernels/fused_bitpack.cuh - bit-packing pipelines straight from the input.
//
// The staged path (device_codec.cuh) writes the quantized field and the
// residual codes to memory and reads them back for sizing and for packing:
// about 30 bytes of traffic per 4-byte input. These two kernels compute every
// code where it is needed (detail::element_code: quantize the element and the
// predecessors its predictor reads, residual, zigzag - host-tested equal to
// the staged codes; every quantizer, through quantize_at: the float ones,
// exact integers, palette indices and the positional max-pool offsets)
// and never store a field: the input is read twice (size,
// then write), plus the outlier flags. Between them a CUB scan turns chunk
// sizes into 64-bit offsets, as in the staged path, so the stream is the
// same byte for byte.
//
// One CUDA block per chunk, one warp per block of 32 codes: the lanes hold
// one code each, the width is a warp OR-reduction, and lane l < width writes
// packed word l (block_bitpack::packed_word, host-tested against pack_block).
//
// The single-pass kernel at the end does both in one launch: it sizes its
// chunk (widths and in-chunk offsets kept in shared memory), gets the
// chunk's payload offset by decoupled look-back (detail/lookback.hpp,
// host-tested with racing threads) instead of a CUB scan between two
// launches, and writes the chunk while its input is still in L2.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/cuda/kernels/levels.cuh>
#include <ebac/cuda/kernels/lookback.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/element_code.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/extents.hpp>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

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
      : first(c * chunk), m(detail::chunk_length(c, n, chunk)), nb((m + 31) / 32) {}
  /// This lane's code in block b (0 past the chunk's end: pack_block's zero
  /// padding); `outlier` is set only for an element inside the chunk.
  template <class P, class Q, class S>
  __device__ std::uint32_t lane_code(const P& pred, const extents& shape, const Q& q, const S* in, std::uint64_t b, unsigned lane,
                                     bool& outlier) const {
    const std::uint64_t j = b * 32 + lane;
    outlier = false;
    return j < m ? ::ebac::detail::element_code(pred, shape, q, in, first + j, outlier) : 0u;
  }
};

/// A round of one 32-code block per warp: each warp publishes its block's
/// packed bytes (4 x width), and every thread learns the bytes of the warps
/// before its own and the round's total. All threads call it (it
/// synchronizes the block); `warp_bytes` (shared, fused_warps entries) must
/// not be rewritten before the caller's end-of-round barrier.
struct round_bytes {
  std::uint64_t before, total;
};
__device__ __forceinline__ round_bytes share_round_bytes(std::uint32_t* warp_bytes, int width) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) warp_bytes[warp] = 4u * static_cast<std::uint32_t>(width);
  __syncthreads();
  round_bytes r{0, 0};
  for (unsigned k = 0; k < fused_warps; ++k) {
    r.before += k < warp ? warp_bytes[k] : 0u;
    r.total += warp_bytes[k];
  }
  return r;
}

/// Pass 1: each chunk's payload bytes (width bytes + packed words) and every
/// element's outlier flag. S is the element's storage type; every kernel
/// here runs only when its stage set was chosen (levels.cuh).
template <class P, class Q, class S>
EBAC_KERNEL void __launch_bounds__(fused_threads)
    fused_bitpack_size_kernel(stage_gate gate, P pred, extents shape, const S* in, std::uint64_t n, std::uint32_t chunk,
                              const Q* qp, std::uint8_t* flags, std::uint64_t* chunk_bytes) {
  using reduce = cub::BlockReduce<std::uint64_t, fused_threads>;
  __shared__ typename reduce::TempStorage tmp;
  if (gate.closed()) return;  // block-uniform
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
template <class P, class Q, class S>
EBAC_KERNEL void __launch_bounds__(fused_threads)
    fused_bitpack_write_kernel(stage_gate gate, P pred, extents shape, const S* in, std::uint64_t n, std::uint32_t chunk,
                               const Q* qp, const std::uint64_t* chunk_offset, std::byte* out,
                               const std::uint64_t* payload_offset) {
  __shared__ std::uint32_t codes[fused_warps][32];
  __shared__ std::uint32_t warp_bytes[fused_warps];
  if (gate.closed()) return;  // block-uniform
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
    const round_bytes rb = share_round_bytes(warp_bytes, width);
    if (b < nb) {
      if (lane == 0) base[b] = static_cast<std::byte>(width);
      if (static_cast<int>(lane) < width)
        ::ebac::detail::store_le<std::uint32_t>(base + round_base + rb.before + 4 * lane,
                                                block_bitpack::packed_word(codes[warp], width, static_cast<int>(lane)));
    }
    round_base += rb.total;
    __syncthreads();  // codes and warp_bytes are rewritten next round
  }
}

/// Size and write in one launch. Chunks are taken in the order of an atomic
/// counter (*tile_counter, zeroed with tile_words before the launch), so a
/// chunk's predecessors have all started when it looks back. Writes each
/// chunk at the payload section's start + its offset, and its size and
/// offset to chunk_bytes / chunk_offset for the chunk table and the layout.
/// The payload section starts `table_bytes` (the chunk table) after
/// *params_end, the end of the stage-parameter section (known on the device
/// only: a palette's size; bit-packing has no codebook).
template <class P, class Q, class S>
EBAC_KERNEL void __launch_bounds__(fused_threads)
    fused_bitpack_single_pass_kernel(stage_gate gate, P pred, extents shape, const S* in, std::uint64_t n, std::uint32_t chunk,
                                     const Q* qp, std::uint8_t* flags, unsigned long long* tile_counter,
                                     unsigned long long* tile_words, std::uint64_t* chunk_bytes, std::uint64_t* chunk_offset,
                                     std::byte* out, const std::uint64_t* params_end, std::uint64_t table_bytes) {
  constexpr std::uint32_t max_blocks = single_pass_max_chunk / 32;
  using scan = cub::BlockScan<std::uint32_t, fused_threads>;
  __shared__ typename scan::TempStorage scan_tmp;
  __shared__ std::uint8_t width[max_blocks];
  __shared__ std::uint32_t offset[max_blocks];  // packed bytes before block b, after the chunk's width bytes
  __shared__ std::uint32_t codes[fused_warps][32];
  __shared__ unsigned long long tile_shared, base_shared;
  if (gate.closed()) return;  // block-uniform; the other set's launch takes the tiles
  if (threadIdx.x == 0) tile_shared = atomicAdd(tile_counter, 1ull);
  __syncthreads();
  const std::uint64_t tile = tile_shared;
  const Q q = *qp;
  const fused_chunk ck(tile, n, chunk);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;

  // Read the chunk: every block's width, every element's outlier flag.
  for (std::uint64_t b = warp; b < ck.nb; b += fused_warps) {  // warp-uniform
    bool outlier;
    const std::uint32_t code = ck.lane_code(pred, shape, q, in, b, lane, outlier);
    const std::uint64_t j = b * 32 + lane;
    if (j < ck.m) flags[ck.first + j] = outlier;
    const std::uint32_t any = warp_or(code);
    if (lane == 0) width[b] = static_cast<std::uint8_t>(::ebac::detail::bit_width(any));
  }
  __syncthreads();
  // In-chunk offsets: each thread owns a contiguous run of blocks, one block scan orders them.
  const std::uint32_t nb = static_cast<std::uint32_t>(ck.nb);
  const std::uint32_t per = (nb + fused_threads - 1) / fused_threads;
  const std::uint32_t b0 = threadIdx.x * per < nb ? threadIdx.x * per : nb;
  const std::uint32_t b1 = b0 + per < nb ? b0 + per : nb;
  std::uint32_t mine = 0;
  for (std::uint32_t b = b0; b < b1; ++b) mine += 4u * width[b];
  std::uint32_t at = 0, packed = 0;
  scan(scan_tmp).ExclusiveSum(mine, at, packed);
  for (std::uint32_t b = b0; b < b1; ++b) {
    offset[b] = at;
    at += 4u * width[b];
  }
  // The chunk's place in the payload: decoupled look-back over the chunks before it.
  if (threadIdx.x == 0) {
    const std::uint64_t bytes = ck.nb + packed;
    const std::uint64_t before = device_lookback_exclusive(tile_words, tile, bytes);
    chunk_bytes[tile] = bytes;
    chunk_offset[tile] = before;
    base_shared = *params_end + table_bytes + before;
  }
  __syncthreads();  // offsets and the base are ready
  std::byte* base = out + base_shared;
  // Write the chunk: the codes again (the input was just read: L2), packed a word a lane.
  for (std::uint64_t b = warp; b < ck.nb; b += fused_warps) {  // warp-uniform
    bool outlier;
    codes[warp][lane] = ck.lane_code(pred, shape, q, in, b, lane, outlier);
    __syncwarp();
    const int w = width[b];
    if (lane == 0) base[b] = static_cast<std::byte>(w);
    if (static_cast<int>(lane) < w)
      ::ebac::detail::store_le<std::uint32_t>(base + ck.nb + offset[b] + 4 * lane,
                                              block_bitpack::packed_word(codes[warp], w, static_cast<int>(lane)));
    __syncwarp();  // codes[warp] is rewritten next block
  }
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
