// ebac/cuda/kernels/decode.cuh - chunk decoding and outlier restore kernels.
//
// Every size read from the stream is checked on the device before use; a
// failure sets the status word and the kernel stops touching memory, so a
// corrupt stream never causes an out-of-bounds access.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/format/outlier_index.hpp>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// u32 chunk table -> u64 sizes.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void chunk_sizes_kernel(const std::byte* table, std::uint64_t chunks, std::uint64_t* chunk_bytes) {
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < chunks;
       c += std::uint64_t{gridDim.x} * blockDim.x)
    chunk_bytes[c] = ::ebac::detail::load_le<std::uint32_t>(table + 4 * c);
}

/// The sizes must add up to the payload section exactly.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void check_table_kernel(const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t chunks,
                                    std::uint64_t payload_bytes, int* status) {
  const std::uint64_t total = chunks ? chunk_offset[chunks - 1] + chunk_bytes[chunks - 1] : 0;
  if (total != payload_bytes) detail::set_status(status, device_corrupt_table);
}

__device__ __forceinline__ bool chunk_in_bounds(const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset,
                                                std::uint64_t c, std::uint64_t payload_bytes) {
  return chunk_offset[c] <= payload_bytes && chunk_bytes[c] <= payload_bytes - chunk_offset[c];
}

/// Block bit-packing decode, one CUDA block a chunk.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void __launch_bounds__(bitpack_threads)
    bitpack_decode_kernel(const std::byte* payload, std::uint64_t payload_bytes, const std::uint64_t* chunk_bytes,
                          const std::uint64_t* chunk_offset, std::uint64_t n, std::uint32_t chunk, std::uint32_t* field,
                          int* status) {
  using scan = cub::BlockScan<std::uint64_t, bitpack_threads>;
  __shared__ typename scan::TempStorage tmp;
  __shared__ int bad;
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t first = c * chunk;
  const std::size_t m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
  // A chunk that does not decode still gets all its codes (zeros), like the
  // Huffman and run-length decoders: every output element is written, from
  // defined values, whatever the stream holds. Each failure test below is the
  // same for every thread of the block.
  auto reject = [&](int code) {
    if (threadIdx.x == 0) detail::set_status(status, code);
    for (std::size_t i = threadIdx.x; i < m; i += blockDim.x) field[first + i] = 0;
  };
  if (!chunk_in_bounds(chunk_bytes, chunk_offset, c, payload_bytes)) return reject(device_corrupt_table);
  const std::byte* in = payload + chunk_offset[c];
  const std::uint64_t bytes = chunk_bytes[c];
  const std::size_t nb = block_bitpack::blocks(m);
  if (bytes < nb) return reject(device_corrupt_chunk);
  if (threadIdx.x == 0) bad = 0;
  __syncthreads();
  const std::size_t per = (nb + bitpack_threads - 1) / bitpack_threads;
  const std::size_t b0 = threadIdx.x * per < nb ? threadIdx.x * per : nb;
  const std::size_t b1 = (b0 + per < nb) ? b0 + per : nb;
  std::uint64_t mine = 0;
  for (std::size_t b = b0; b < b1; ++b) {
    const auto w = static_cast<unsigned>(in[b]);
    if (w > 32) atomicOr(&bad, 1);
    mine += 4 * static_cast<std::uint64_t>(w);
  }
  std::uint64_t at, total;
  scan(tmp).ExclusiveSum(mine, at, total);
  __syncthreads();
  if (bad || total != bytes - nb) return reject(device_corrupt_chunk);
  const std::byte* p = in + nb + at;
  for (std::size_t b = b0; b < b1; ++b) {
    const std::size_t len = (m - b * 32 < 32) ? m - b * 32 : 32;
    const int w = static_cast<int>(in[b]);
    block_bitpack::unpack_block(p, w, field + first + b * 32, len);
    p += 4 * static_cast<std::size_t>(w);
  }
}

/// Huffman decoding, one warp a chunk: the lanes decode 32 bit ranges of
/// the chunk's stream, agree on where each range's first token starts, and
/// place their codes by a prefix sum (encoder/huffman_lanes.hpp: the rules,
/// host-tested to accept and decode exactly what the serial decoder does).
/// On failure the chunk's codes are zeroed so every output element is
/// still written.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(huffman_threads)
    huffman_decode_kernel(const std::byte* image, const std::byte* payload, std::uint64_t payload_bytes,
                          const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t n,
                          std::uint32_t chunk, std::uint64_t chunks, std::uint32_t* field, int* status) {
  using L = huffman_lanes;
  constexpr unsigned all = 0xffffffffu;
  const huffman enc = bind_huffman_image(image);
  const unsigned lane = threadIdx.x & 31u;
  const std::uint64_t c = blockIdx.x * std::uint64_t{huffman_warps} + (threadIdx.x >> 5);
  if (c >= chunks) return;  // warp-uniform
  const std::uint64_t m = detail::chunk_length(c, n, chunk);
  std::uint32_t* out = field + c * chunk;
  bool ok = chunk_in_bounds(chunk_bytes, chunk_offset, c, payload_bytes);  // warp-uniform
  if (ok) {
    const std::byte* in = payload + chunk_offset[c];
    const auto bytes = static_cast<std::size_t>(chunk_bytes[c]);
    const L lanes(bytes);
    // Rounds until every lane starts where the lane before it stopped.
    std::uint64_t start = lanes.first_guess(lane);
    huffman_range res = lanes.count_from(enc, in, bytes, start, lane, m);
    for (unsigned round = 0; round <= L::count; ++round) {
      std::uint64_t next = __shfl_up_sync(all, L::next_start(res), 1);
      if (lane == 0) next = start;
      const bool moved = next != start;
      if (!__any_sync(all, moved)) break;
      if (moved) {
        start = next;
        res = lanes.count_from(enc, in, bytes, start, lane, m);
      }
    }
    std::uint64_t expected = __shfl_up_sync(all, L::next_start(res), 1);
    bool lane_ok = lane == 0 ? start == 0 : start == expected;  // converged (always, by the rounds' bound)
    // Where each lane's codes go, and which lane holds the chunk's last code.
    std::uint64_t first = res.elements;
    for (unsigned o = 1; o < 32; o <<= 1) {
      const std::uint64_t up = __shfl_up_sync(all, first, o);
      if (lane >= o) first += up;
    }
    first -= res.elements;
    const unsigned holders = __ballot_sync(all, L::holds_last(first, res.elements, m));
    const unsigned last = holders ? static_cast<unsigned>(__ffs(static_cast<int>(holders)) - 1) : L::count;
    if (last == L::count || (lane < last && res.corrupt)) {
      lane_ok = false;
    } else if (lane_ok && lane <= last) {
      const std::uint64_t wanted = lane == last ? m - first : res.elements;
      const huffman_range r = enc.decode_range(in, bytes, start, lanes.range_end(lane), lane == last ? wanted : L::unlimited,
                                               [&](std::uint64_t k, std::uint32_t code) { out[first + k] = code; });
      lane_ok = lane == last ? L::last_lane_ok(r, wanted, bytes) : (!r.corrupt && r.elements == wanted);
    }
    ok = __all_sync(all, lane_ok);
  }
  if (!ok) {
    if (lane == 0) detail::set_status(status, device_corrupt_chunk);
    for (std::uint64_t i = lane; i < m; i += 32) out[i] = 0;
  }
}

/// Any encoder without a codebook (run_length), and the ANS encoder bound
/// to tables in device memory, one thread a chunk. On failure the chunk's
/// codes are zeroed so every output element is still written.
template <class E>
EBAC_KERNEL void serial_decode_kernel(E enc, const std::byte* payload, std::uint64_t payload_bytes,
                                      const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t n,
                                      std::uint32_t chunk, std::uint64_t chunks, std::uint32_t* field, int* status) {
  static_assert(!E::needs_codebook || std::is_same_v<E, context_ans>, "Huffman chunks are decoded by huffman_decode_kernel");
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < chunks;
       c += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t first = c * chunk;
    const std::size_t m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
    ::ebac::status s = ::ebac::status::corrupt_stream;
    if (chunk_in_bounds(chunk_bytes, chunk_offset, c, payload_bytes))
      s = enc.decode_chunk(payload + chunk_offset[c], static_cast<std::size_t>(chunk_bytes[c]), field + first, m);
    if (s != ::ebac::status::ok) {
      detail::set_status(status, device_corrupt_chunk);
      for (std::size_t i = 0; i < m; ++i) field[first + i] = 0;
    }
  }
}

/// Tiles the restore launches for an index section of `bytes` bytes: at
/// least one when outliers are claimed, so that a missing section is caught.
inline std::uint64_t outlier_tiles(std::uint64_t bytes, std::uint64_t count) {
  const std::uint64_t t = (bytes + outlier_tile_bytes - 1) / outlier_tile_bytes;
  return t == 0 && count > 0 ? 1 : t;
}

/// Outlier restore, step 1: what each tile holds (varints starting there,
/// their step sum). Step 2 is a CUB exclusive scan of these.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(outlier_threads)
    outlier_summary_kernel(outlier_index_reader r, outlier_index_reader::summary* tile_sum) {
  using reduce = cub::BlockReduce<outlier_index_reader::summary, outlier_threads>;
  __shared__ typename reduce::TempStorage tmp;
  const std::uint64_t begin = blockIdx.x * outlier_tile_bytes + threadIdx.x * outlier_segment_bytes;
  const outlier_index_reader::summary total = reduce(tmp).Reduce(r.summarize(begin, begin + outlier_segment_bytes), r.op());
  if (threadIdx.x == 0) tile_sum[blockIdx.x] = total;
}

/// Outlier restore, step 3: each thread places the varints that start in its
/// segment (outlier j's raw bits to its index); the last tile checks the
/// section's total (exactly `count` varints, the last index below n). Every
/// check the serial reader makes is made, and nothing is written out of
/// bounds whatever the section holds.
template <class T>
EBAC_KERNEL void __launch_bounds__(outlier_threads)
    outlier_place_kernel(outlier_index_reader r, const outlier_index_reader::summary* tile_before,
                         const outlier_index_reader::summary* tile_sum, std::uint64_t tiles, std::uint64_t count,
                         const std::byte* values, T* out, int* status) {
  using summary = outlier_index_reader::summary;
  using scan = cub::BlockScan<summary, outlier_threads>;
  __shared__ typename scan::TempStorage tmp;
  const std::uint64_t begin = blockIdx.x * outlier_tile_bytes + threadIdx.x * outlier_segment_bytes;
  summary before;
  scan(tmp).ExclusiveScan(r.summarize(begin, begin + outlier_segment_bytes), before, summary{}, r.op());
  before = r.op()(tile_before[blockIdx.x], before);
  const bool placed = r.place(begin, begin + outlier_segment_bytes, before, count, [&](std::uint64_t j, std::uint64_t index) {
    out[index] = from_raw_bits<T>(::ebac::detail::load_le<typename bits_of<T>::type>(values + j * sizeof(T)));
  });
  if (!placed) detail::set_status(status, device_corrupt_outliers);
  if (blockIdx.x == tiles - 1 && threadIdx.x == 0 && !r.complete(r.op()(tile_before[blockIdx.x], tile_sum[blockIdx.x]), count))
    detail::set_status(status, device_corrupt_outliers);
}

/// A stored stream's elements: out[i] from the raw bytes at payload + i x
/// sizeof(S) (S the storage type; the header reader checked the section's
/// size against the element count).
template <class S>
EBAC_KERNEL void stored_values_kernel(const std::byte* payload, std::uint64_t n, S* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(payload + i * sizeof(S)));
}

/// Verifies the stream checksum (one thread: correct, not fast; device
/// streams are written without one).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void checksum_kernel(const std::byte* in, std::uint64_t bytes, int* status) {
  if (::ebac::detail::checksum64(in, bytes - 8) != ::ebac::detail::load_le<std::uint64_t>(in + bytes - 8))
    detail::set_status(status, device_checksum);
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
