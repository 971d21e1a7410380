// ebac/cuda/kernels/ans_decode.cuh - the ANS decoder with its tables in shared memory.
//
// context_ans chunks decode one thread a chunk: the rANS states, the byte
// stream and the contexts (left and upper neighbours) make a chunk one
// chain. On the first GPU run (docs/cuda.md) the plain one-thread-a-chunk
// kernel (serial_decode_kernel) spent its time in the cache: every lane of a
// warp looked up its own context's row of the global tables and wrote and
// read back its own chunk's codes, 32 cache lines for each access. Here:
//   - the tables the decoder reads (cumulative bounds and the first token of
//     each 64 slots: context_ans::decode_chunk_to) are copied to shared
//     memory once a block, so a lookup costs a bank access, not a line;
//   - the 32 chunks of a warp decode into one interleaved array, element i
//     of lane l's chunk at [i * 32 + l]: lanes decode their i-th elements
//     together, so each write and each read of an upper neighbour is one
//     line (warp_interleaved_codes);
//   - a tiled transpose (ans_untangle_kernel) puts the codes in tensor order
//     for the stages after decoding.
// The decoding itself is context_ans::decode_chunk_to, the host's code.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/decode.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/format/chunking.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// Where lane `lane` of warp-group `group` (chunks 32 group .. 32 group + 31)
/// keeps its chunk's codes: element i at base[i * 32].
struct warp_interleaved_codes {
  std::uint32_t* base;
  EBAC_HOST_DEVICE std::uint32_t& operator[](std::size_t i) const noexcept { return base[i * 32]; }
};

/// Elements of the interleaved array for `chunks` chunks of `chunk`
/// elements: whole warp-groups of 32 chunks, every chunk at full length.
inline std::uint64_t ans_interleaved_elements(std::uint64_t chunks, std::uint32_t chunk) noexcept {
  return (chunks + 31) / 32 * 32 * std::uint64_t{chunk};
}

/// Shared-memory bytes of a codebook's decoding tables: the cumulative
/// bounds (u16, tokens + 1 a context), then the first tokens (u8, 256 a context).
__host__ __device__ inline std::size_t ans_table_bytes(const context_ans& enc) noexcept {
  const std::size_t contexts = enc.contexts();
  return contexts * (context_ans::model::tokens + 1) * sizeof(std::uint16_t) + contexts * 256;
}

/// One thread a chunk, blockDim.x a multiple of 32; dynamic shared memory of
/// ans_table_bytes(enc). A chunk that does not decode is all zeros and sets
/// device_corrupt_chunk (as serial_decode_kernel does).
template <int = 0>
EBAC_KERNEL void ans_decode_kernel(context_ans enc, const std::byte* payload, std::uint64_t payload_bytes,
                                   const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t n,
                                   std::uint32_t chunk, std::uint64_t chunks, std::uint32_t* interleaved, int* status) {
  extern __shared__ std::uint16_t ans_tables[];
  const std::size_t contexts = enc.contexts();
  const std::size_t cum_count = contexts * (context_ans::model::tokens + 1);
  auto* first = reinterpret_cast<std::uint8_t*>(ans_tables + cum_count);
  for (std::size_t k = threadIdx.x; k < cum_count; k += blockDim.x) ans_tables[k] = enc.cumulative[k];
  for (std::size_t k = threadIdx.x; k < contexts * 256; k += blockDim.x) first[k] = enc.first_token[k];
  __syncthreads();
  enc.cumulative = ans_tables;
  enc.first_token = first;
  const std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (c >= chunks) return;
  const warp_interleaved_codes codes{interleaved + (c / 32) * 32 * std::uint64_t{chunk} + c % 32};
  const auto m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
  ::ebac::status s = ::ebac::status::corrupt_stream;
  if (chunk_in_bounds(chunk_bytes, chunk_offset, c, payload_bytes))
    s = enc.decode_chunk_to(payload + chunk_offset[c], static_cast<std::size_t>(chunk_bytes[c]), codes, m);
  if (s != ::ebac::status::ok) {
    detail::set_status(status, device_corrupt_chunk);
    for (std::size_t i = 0; i < m; ++i) codes[i] = 0;
  }
}

/// 32 x 32 tiles of the transpose below: 32 chunks (a warp-group) by 32
/// consecutive elements.
__host__ __device__ inline std::uint64_t ans_untangle_tiles(std::uint64_t chunks, std::uint32_t chunk) noexcept {
  return (chunks + 31) / 32 * ((std::uint64_t{chunk} + 31) / 32);
}

/// The interleaved codes in tensor order: field[c * chunk + i] = element i of
/// chunk c, for i below the chunk's length. A block moves 32 x 32 tiles (32
/// chunks of a group, 32 consecutive elements) through shared memory, so
/// that both the reads and the writes are whole lines; tile b is group
/// b / tiles_per_chunk, elements 32 (b % tiles_per_chunk) on; the blocks
/// loop over the tiles beyond the grid.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(ans_untangle_threads)
    ans_untangle_kernel(const std::uint32_t* interleaved, std::uint64_t n, std::uint32_t chunk, std::uint64_t chunks,
                        std::uint32_t* field) {
  __shared__ std::uint32_t tile[32][33];  // +1: the transposed reads fall in 32 banks
  const std::uint64_t tiles_per_chunk = (std::uint64_t{chunk} + 31) / 32;
  const std::uint64_t tiles = ans_untangle_tiles(chunks, chunk);
  for (std::uint64_t b = blockIdx.x; b < tiles; b += gridDim.x) {
    const std::uint64_t group = b / tiles_per_chunk, i0 = b % tiles_per_chunk * 32;
    const std::uint32_t* in = interleaved + group * 32 * std::uint64_t{chunk};
    const std::uint64_t read_chunk = group * 32 + threadIdx.x;  // the lane whose codes this thread reads
    const std::uint64_t read_length = read_chunk < chunks ? detail::chunk_length(read_chunk, n, chunk) : 0;
    for (unsigned r = threadIdx.y; r < 32; r += ans_untangle_rows)
      if (i0 + r < read_length) tile[r][threadIdx.x] = in[(i0 + r) * 32 + threadIdx.x];  // element i0 + r of that chunk
    __syncthreads();
    for (unsigned l = threadIdx.y; l < 32; l += ans_untangle_rows) {
      const std::uint64_t c = group * 32 + l;
      const std::uint64_t i = i0 + threadIdx.x;
      if (c < chunks && i < detail::chunk_length(c, n, chunk)) field[c * chunk + i] = tile[threadIdx.x][l];
    }
    __syncthreads();  // the tile is read before the next one is written
  }
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
