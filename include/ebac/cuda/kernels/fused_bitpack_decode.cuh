// ebac/cuda/kernels/fused_bitpack_decode.cuh - chunks straight to values.
//
// The staged decoder (device_codec.cuh) unpacks every chunk's codes into a
// uint32 field, then runs an unzigzag pass, one inverse pass per predictor
// axis and a reconstruct pass over it: about 6 full passes over 4-byte
// arrays. When a chunk decodes on its own - no prediction, or flat 1-D
// Lorenzo whose tile is a multiple of 32 and divides the chunk (the `fast`
// and `plain` pipelines' defaults) - this kernel does all of it in one: it
// reads the chunk's payload once and writes each value once.
//
// One CUDA block per chunk, one warp per block of 32 codes, in rounds of
// fused_warps blocks: lane v unpacks code v (block_bitpack::code_at, host-
// tested against unpack_block), a warp scan plus tiled_prefix_rounds (host-
// tested against the host's inverse pass) inverts Lorenzo, and the value is
// reconstructed by the quantizer the host uses. Sizes read from the stream
// are checked first, as in the staged decoder; a chunk that fails decodes as
// all-zero codes, so every element is still written. Outliers are restored
// afterwards by outlier_restore_kernel, as in the staged path. Streams of
// other encoders (Huffman, run-length) with such chunks are decoded into a
// code field by their kernel, then fused_values_kernel does the rest in one
// pass instead of three.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/decode.cuh>
#include <ebac/cuda/kernels/fused_bitpack.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/predictor/tiled_prefix.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cub/block/block_reduce.cuh>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// The second half of a fused decoder, shared by the kernels below: rounds
/// of fused_warps blocks of 32 codes; residual(first, b, lane) gives lane's
/// residual (0 past the chunk) of block b in the round starting at block
/// `first` - every thread calls it, so it may synchronize the block. Flat
/// Lorenzo (tile_blocks > 0) is inverted by a warp scan plus
/// tiled_prefix_rounds; the value is reconstructed (reconstruct_at: every
/// quantizer, S the storage type) and written. A lossless quantizer's codes
/// are checked (code_valid): one it cannot have written sets *status.
template <class Q, class S, class Residual>
__device__ void write_chunk_values(const fused_chunk& ck, std::uint64_t tile_blocks, const Q& q, S* out,
                                   std::uint32_t* warp_total, int* status, Residual&& residual) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const tiled_prefix_rounds rounds{tile_blocks ? tile_blocks : 1};
  std::uint32_t carry = 0;
  bool bad = false;
  for (std::uint64_t first = 0; first < ck.nb; first += fused_warps) {
    const std::uint64_t b = first + warp;
    std::uint32_t value = residual(first, b, lane);
    if (tile_blocks) {  // flat Lorenzo: inclusive scan in the warp, then the tile's earlier blocks
      for (unsigned o = 1; o < 32; o <<= 1) {
        const std::uint32_t up = __shfl_up_sync(0xffffffffu, value, o);
        if (lane >= o) value += up;
      }
      if (lane == 31) warp_total[warp] = value;
      __syncthreads();
      const unsigned count = static_cast<unsigned>(ck.nb - first < fused_warps ? ck.nb - first : fused_warps);
      if (b < ck.nb) value += rounds.before(first, warp_total, warp, carry);
      carry = rounds.before(first, warp_total, count, carry);
    }
    const std::uint64_t j = b * 32 + lane;
    if (j < ck.m) {
      const auto code = static_cast<std::int32_t>(value);
      if constexpr (is_lossless_quantizer<Q>) bad |= !code_valid<S>(q, code);
      out[ck.first + j] = reconstruct_at<S>(q, code, ck.first + j);
    }
    __syncthreads();  // warp_total (and the residual's shared state) is rewritten next round
  }
  if (bad) detail::set_status(status, device_corrupt_code);
}

/// Decodes bit-packed chunk blockIdx.x into out. tile_blocks = flat Lorenzo
/// tile / 32, or 0 for a stream without prediction.
template <class Q, class S>
EBAC_KERNEL void __launch_bounds__(fused_threads)
    fused_bitpack_decode_kernel(std::uint64_t tile_blocks, const std::byte* payload, std::uint64_t payload_bytes,
                                const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t n,
                                std::uint32_t chunk, Q q, S* out, int* status) {
  using reduce = cub::BlockReduce<std::uint64_t, fused_threads>;
  __shared__ typename reduce::TempStorage tmp;
  __shared__ std::uint32_t warp_bytes[fused_warps];
  __shared__ std::uint32_t warp_total[fused_warps];
  __shared__ int bad;
  const fused_chunk ck(blockIdx.x, n, chunk);

  // Validate the chunk's place and its width bytes before reading a word.
  // The same status codes as the staged decoder: a chunk outside the payload
  // is a bad table, one too short for its width bytes a bad chunk.
  const bool in_payload = chunk_in_bounds(chunk_bytes, chunk_offset, blockIdx.x, payload_bytes);
  const bool placed = in_payload && chunk_bytes[blockIdx.x] >= ck.nb;
  const std::byte* in = placed ? payload + chunk_offset[blockIdx.x] : nullptr;
  if (threadIdx.x == 0) bad = placed ? 0 : 1;
  __syncthreads();
  std::uint64_t mine = 0;
  if (placed) {
    for (std::uint64_t b = threadIdx.x; b < ck.nb; b += fused_threads) {
      const auto w = static_cast<unsigned>(in[b]);
      if (w > 32) atomicOr(&bad, 1);
      mine += 4 * static_cast<std::uint64_t>(w);
    }
  }
  const std::uint64_t words = reduce(tmp).Sum(mine);  // valid in thread 0
  if (threadIdx.x == 0 && placed && words != chunk_bytes[blockIdx.x] - ck.nb) bad = 1;
  __syncthreads();
  const bool corrupt = bad != 0;  // block-uniform from here on
  if (corrupt && threadIdx.x == 0) detail::set_status(status, in_payload ? device_corrupt_chunk : device_corrupt_table);

  std::uint64_t round_base = ck.nb;  // payload bytes before this round, from the chunk's start
  write_chunk_values(ck, tile_blocks, q, out, warp_total, status,
                     [&](std::uint64_t, std::uint64_t b, unsigned lane) -> std::uint32_t {
                       const int width = (!corrupt && b < ck.nb) ? static_cast<int>(in[b]) : 0;  // warp-uniform
                       const round_bytes rb =
                           share_round_bytes(warp_bytes, width);  // rewritten only after write_chunk_values' end-of-round barrier
                       const std::uint64_t at = round_base + rb.before;
                       round_base += rb.total;
                       const std::uint64_t j = b * 32 + lane;
                       if (width == 0 || j >= ck.m) return 0u;
                       return static_cast<std::uint32_t>(
                           ::ebac::detail::unzigzag(block_bitpack::code_at(in + at, width, static_cast<int>(lane))));
                     });
}

/// The values of chunk blockIdx.x from its decoded (still zigzagged) codes
/// in `field`: for encoders decoded by another kernel (Huffman, run-length)
/// of a stream whose chunks decode on their own. Replaces the staged
/// unzigzag, inverse and reconstruct passes with one read of the field.
template <class Q, class S>
EBAC_KERNEL void __launch_bounds__(fused_threads)
    fused_values_kernel(std::uint64_t tile_blocks, const std::uint32_t* field, std::uint64_t n, std::uint32_t chunk, Q q, S* out,
                        int* status) {
  __shared__ std::uint32_t warp_total[fused_warps];
  const fused_chunk ck(blockIdx.x, n, chunk);
  write_chunk_values(
      ck, tile_blocks, q, out, warp_total, status, [&](std::uint64_t, std::uint64_t b, unsigned lane) -> std::uint32_t {
        const std::uint64_t j = b * 32 + lane;
        return (b < ck.nb && j < ck.m) ? static_cast<std::uint32_t>(::ebac::detail::unzigzag(field[ck.first + j])) : 0u;
      });
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
