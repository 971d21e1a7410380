// ebac/cuda/kernels/encode.cuh - chunk encoding and stream assembly kernels.
//
// Chunks are the same fixed element ranges as on the host, each encoded by
// the same encoder functor, so the payload bytes are identical. Two passes:
// sizes (then a device scan gives every chunk's offset), then writes. The
// kernels that cut the codes into chunks run once per stage set (each set
// has its own chunk size, format/chunking.hpp) and return at once unless
// their set was chosen (stage_gate, levels.cuh).
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/cuda/kernels/levels.cuh>
#include <ebac/cuda/kernels/lookback.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/huffman_image.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/apply_stages.hpp>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

__device__ __forceinline__ int block_width(const std::uint32_t* codes, std::size_t m) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < m; ++i) any |= codes[i];
  return ::ebac::detail::bit_width(any);
}

/// Pass 1 of block bit-packing: bytes of each chunk (one CUDA block a chunk).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void __launch_bounds__(bitpack_threads)
    bitpack_size_kernel(stage_gate gate, const std::uint32_t* codes, std::uint64_t n, std::uint32_t chunk,
                        std::uint64_t* chunk_bytes) {
  using reduce = cub::BlockReduce<std::uint64_t, bitpack_threads>;
  __shared__ typename reduce::TempStorage tmp;
  if (gate.closed()) return;  // block-uniform
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t first = c * chunk;
  const std::size_t m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
  const std::size_t nb = block_bitpack::blocks(m);
  std::uint64_t bytes = 0;
  for (std::size_t b = threadIdx.x; b < nb; b += bitpack_threads) {
    const std::size_t len = (m - b * 32 < 32) ? m - b * 32 : 32;
    bytes += 1 + 4 * static_cast<std::uint64_t>(block_width(codes + first + b * 32, len));
  }
  const std::uint64_t total = reduce(tmp).Sum(bytes);
  if (threadIdx.x == 0) chunk_bytes[c] = total;
}

/// Pass 2: writes each chunk at payload + chunk_offset[c]: width bytes, then
/// blocks packed by block_bitpack::pack_block (the host's functor).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void __launch_bounds__(bitpack_threads)
    bitpack_write_kernel(stage_gate gate, const std::uint32_t* codes, std::uint64_t n, std::uint32_t chunk,
                         const std::uint64_t* chunk_offset, std::byte* out, const std::uint64_t* payload_offset) {
  using scan = cub::BlockScan<std::uint64_t, bitpack_threads>;
  __shared__ typename scan::TempStorage tmp;
  if (gate.closed()) return;  // block-uniform
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t first = c * chunk;
  const std::size_t m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
  const std::size_t nb = block_bitpack::blocks(m);
  // Each thread owns a contiguous run of blocks so a single scan orders them.
  const std::size_t per = (nb + bitpack_threads - 1) / bitpack_threads;
  const std::size_t b0 = threadIdx.x * per, b1 = (b0 + per < nb) ? b0 + per : nb;
  std::uint64_t mine = 0;
  for (std::size_t b = b0; b < b1; ++b) {
    const std::size_t len = (m - b * 32 < 32) ? m - b * 32 : 32;
    mine += 4 * static_cast<std::uint64_t>(block_width(codes + first + b * 32, len));
  }
  std::uint64_t at;
  scan(tmp).ExclusiveSum(mine, at);
  std::byte* base = out + *payload_offset + chunk_offset[c];
  std::byte* payload = base + nb + at;
  for (std::size_t b = b0; b < b1; ++b) {
    const std::size_t len = (m - b * 32 < 32) ? m - b * 32 : 32;
    const int w = block_width(codes + first + b * 32, len);
    base[b] = static_cast<std::byte>(w);
    payload += block_bitpack::pack_block(codes + first + b * 32, len, w, payload);
  }
}


struct warp_segment {
  std::uint64_t first;     // the chunk's first element
  std::size_t m;           // its elements
  std::size_t begin, end;  // this lane's segment
  __device__ warp_segment(std::uint64_t c, std::uint64_t n, std::uint32_t chunk, unsigned lane)
      : first(c * chunk), m(static_cast<std::size_t>(detail::chunk_length(c, n, chunk))) {
    const std::size_t seg = (m + 31) / 32;
    begin = lane * seg < m ? lane * seg : m;
    end = begin + seg < m ? begin + seg : m;
  }
};

/// Token histograms for the Huffman codebook: hist[0, size) counts the
/// chunks' tokens with zero runs, hist[size, 2 size) without (the host's
/// tokenization, so the counts are the host's). Each block counts in shared
/// memory (a bin holds at most huffman_warps chunks x 2^24 tokens < 2^32)
/// and adds its non-zero bins to the global 64-bit histogram.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(huffman_threads)
    huffman_histogram_kernel(stage_gate gate, const std::uint32_t* codes, std::uint64_t n, std::uint32_t chunk,
                             std::uint64_t chunks, unsigned long long* hist) {
  constexpr std::uint32_t S = huffman_alphabet::size;
  __shared__ std::uint32_t local[2 * S];
  if (gate.closed()) return;  // block-uniform
  for (std::uint32_t i = threadIdx.x; i < 2 * S; i += huffman_threads) local[i] = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x & 31u;
  const std::uint64_t c = blockIdx.x * std::uint64_t{huffman_warps} + (threadIdx.x >> 5);
  if (c < chunks) {
    const warp_segment sg(c, n, chunk, lane);
    ::ebac::detail::huffman_tokenize_segment(codes + sg.first, sg.m, sg.begin, sg.end, true,
                                             [&](std::uint32_t sym, std::uint32_t, int) { atomicAdd(&local[sym], 1u); });
    ::ebac::detail::huffman_tokenize_segment(codes + sg.first, sg.m, sg.begin, sg.end, false,
                                             [&](std::uint32_t sym, std::uint32_t, int) { atomicAdd(&local[S + sym], 1u); });
  }
  __syncthreads();
  for (std::uint32_t i = threadIdx.x; i < 2 * S; i += huffman_threads)
    if (local[i]) atomicAdd(&hist[i], static_cast<unsigned long long>(local[i]));
}

/// Huffman encoding, one warp a chunk, into the chunk's worst-case slot
/// (4-byte aligned): the lanes count their segments' bits, a warp scan
/// places them, the words two segments share are zeroed, and each lane
/// writes its bits with detail::segment_bit_writer (shared words by
/// atomicOr) - the bytes the host's encode_chunk writes (host-tested).
template <int = 0>
EBAC_KERNEL void __launch_bounds__(huffman_threads)
    huffman_encode_kernel(stage_gate gate, const std::byte* image, const std::uint32_t* codes, std::uint64_t n,
                          std::uint32_t chunk, std::uint64_t chunks, std::byte* scratch, std::size_t slot,
                          std::uint64_t* chunk_bytes) {
  if (gate.closed()) return;
  const huffman enc = bind_huffman_image(image);
  const unsigned lane = threadIdx.x & 31u;
  const std::uint64_t c = blockIdx.x * std::uint64_t{huffman_warps} + (threadIdx.x >> 5);
  if (c >= chunks) return;  // warp-uniform
  const warp_segment sg(c, n, chunk, lane);
  const std::uint32_t* in = codes + sg.first;
  std::uint64_t bits = 0;
  ::ebac::detail::huffman_tokenize_segment(in, sg.m, sg.begin, sg.end, enc.use_runs, [&](std::uint32_t s, std::uint32_t, int k) {
    bits += enc.length[s] + static_cast<std::uint64_t>(k);
  });
  std::uint64_t offset = bits;  // inclusive warp scan, then exclusive
  for (unsigned o = 1; o < 32; o <<= 1) {
    const std::uint64_t up = __shfl_up_sync(0xffffffffu, offset, o);
    if (lane >= o) offset += up;
  }
  const std::uint64_t total = __shfl_sync(0xffffffffu, offset, 31);
  offset -= bits;
  auto* words = reinterpret_cast<std::uint32_t*>(scratch + c * slot);
  if (offset % 32) words[offset / 32] = 0;
  if (lane == 31 && total % 32) words[total / 32] = 0;
  __syncwarp();
  auto or_word = [words](std::uint64_t i, std::uint32_t v) { atomicOr(words + i, v); };
  ::ebac::detail::segment_bit_writer<decltype(or_word)> w(words, offset, or_word);
  ::ebac::detail::huffman_tokenize_segment(in, sg.m, sg.begin, sg.end, enc.use_runs,
                                           [&](std::uint32_t s, std::uint32_t x, int k) {
                                             w.put(enc.code_lsb[s], enc.length[s]);
                                             if (k) w.put(x, k);
                                           });
  w.finish();
  if (lane == 0) chunk_bytes[c] = (total + 7) / 8;
}

/// Any encoder without a codebook (run_length), one thread a chunk, into a
/// worst-case-sized slot per chunk.
template <class E>
EBAC_KERNEL void serial_encode_kernel(stage_gate gate, E enc, const std::uint32_t* codes, std::uint64_t n, std::uint32_t chunk,
                                      std::uint64_t chunks, std::byte* scratch, std::size_t slot, std::uint64_t* chunk_bytes) {
  static_assert(!E::needs_codebook, "Huffman chunks are encoded by huffman_encode_kernel");
  if (gate.closed()) return;
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < chunks;
       c += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t first = c * chunk;
    const std::size_t m = static_cast<std::size_t>(detail::chunk_length(c, n, chunk));
    chunk_bytes[c] = enc.encode_chunk(codes + first, m, scratch + c * slot);
  }
}

/// Copies each chunk's slot to its place in the payload (one block a chunk).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void copy_chunks_kernel(stage_gate gate, const std::byte* scratch, std::size_t slot, const std::uint64_t* chunk_bytes,
                                    const std::uint64_t* chunk_offset, std::byte* out, const std::uint64_t* payload_offset) {
  if (gate.closed()) return;
  const std::uint64_t c = blockIdx.x;
  const std::byte* src = scratch + c * slot;
  std::byte* dst = out + *payload_offset + chunk_offset[c];
  for (std::uint64_t i = threadIdx.x; i < chunk_bytes[c]; i += blockDim.x) dst[i] = src[i];
}

/// Tiles for up to n outliers (the count is known only on the device), and
/// the blocks that loop over them (tuning/block_sizes.cuh).
inline std::uint64_t outlier_write_tiles(std::uint64_t n) { return (n + outlier_write_tile - 1) / outlier_write_tile; }
inline unsigned outlier_write_blocks(std::uint64_t n) {
  const std::uint64_t t = outlier_write_tiles(n);
  return static_cast<unsigned>(t < 1 ? 1 : (t > outlier_write_max_blocks ? outlier_write_max_blocks : t));
}

/// The outlier index section (format/outlier_index.hpp): varint gaps of the
/// selected indices, written at out + *index_offset. Blocks take tiles in
/// order from a counter (words[0]); within a tile a block scan of the
/// varints' sizes places them, and a decoupled look-back over the tiles
/// (detail/lookback.hpp, words[1 + t]) places the tile. All words are zero
/// on entry. The last tile writes the section's size to *index_bytes.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(outlier_write_threads)
    outlier_index_kernel(const std::uint64_t* index, const std::uint64_t* count, std::byte* out,
                         const std::uint64_t* index_offset, std::uint64_t* index_bytes, unsigned long long* words) {
  using scan = cub::BlockScan<std::uint64_t, outlier_write_threads>;
  __shared__ typename scan::TempStorage tmp;
  __shared__ unsigned long long tile_shared, before_shared;
  const std::uint64_t k = *count;
  if (k == 0) {  // the common case; uniform across the grid
    if (blockIdx.x == 0 && threadIdx.x == 0) *index_bytes = 0;
    return;
  }
  const std::uint64_t tiles = (k + outlier_write_tile - 1) / outlier_write_tile;
  std::byte* section = out + *index_offset;
  unsigned long long* tile_words = words + 1;
  for (;;) {
    if (threadIdx.x == 0) tile_shared = atomicAdd(words, 1ull);
    __syncthreads();
    const std::uint64_t t = tile_shared;
    if (t >= tiles) return;  // block-uniform
    const std::uint64_t j0 = t * outlier_write_tile + std::uint64_t{threadIdx.x} * outlier_write_per_thread;
    std::uint64_t mine = 0;
    for (unsigned i = 0; i < outlier_write_per_thread; ++i)
      if (j0 + i < k) mine += ::ebac::detail::varint_size(outlier_gap(index, j0 + i));
    std::uint64_t at, total;
    scan(tmp).ExclusiveSum(mine, at, total);
    if (threadIdx.x == 0) {
      before_shared = device_lookback_exclusive(tile_words, t, total);
      if (t == tiles - 1) *index_bytes = before_shared + total;
    }
    __syncthreads();
    std::byte* p = section + before_shared + at;
    for (unsigned i = 0; i < outlier_write_per_thread; ++i)
      if (j0 + i < k) p += ::ebac::detail::put_varint(p, outlier_gap(index, j0 + i));
    __syncthreads();  // the shared words and the scan storage are reused by the next tile
  }
}

/// The outlier value section, right after the index section: outlier j's
/// raw bits (its index is index[j]). S is the element's storage type.
template <class S>
EBAC_KERNEL void outlier_values_kernel(const S* in, const std::uint64_t* index, const std::uint64_t* count, std::byte* out,
                                       const std::uint64_t* index_offset, const std::uint64_t* index_bytes) {
  const std::uint64_t k = *count;
  std::byte* v = out + *index_offset + *index_bytes;
  for (std::uint64_t j = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; j < k; j += std::uint64_t{gridDim.x} * blockDim.x)
    ::ebac::detail::store_le(v + j * sizeof(S), raw_bits(in[index[j]]));
}

/// Bytes of the codebook section: the serialized size the device wrote into
/// the image, 0 without a codebook.
__device__ __forceinline__ std::uint64_t codebook_section_bytes(const std::byte* image) {
  return image ? ::ebac::detail::load_le<std::uint64_t>(image + huffman_image_layout::serialized_size) : 0;
}

/// After the chunk scan: where the sections go. layout[0] = payload offset,
/// [1] = payload bytes, [2] = outlier index offset, [3] = chunk table offset;
/// [4] = the stage-parameter section's bytes, [5] = the codebook
/// section's offset, [6] = the chosen set's chunks and [7] its chunk size
/// were written by choose_stages_kernel. `h` is the host's header with
/// empty parameter, codebook and chunk-table sections; their sizes, known
/// only on the device, come from layout[4], the codebook image and
/// layout[6]. Offsets come as arguments, not host-to-device copies of host
/// variables, so a captured graph replays them correctly.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void payload_layout_kernel(stream_header h, const std::byte* codebook_image, const std::uint64_t* chunk_bytes,
                                       const std::uint64_t* chunk_offset, std::uint64_t* layout) {
  const std::uint64_t chunks = layout[6];
  h.section_bytes[section_params] = layout[4];
  h.section_bytes[section_codebook] = codebook_section_bytes(codebook_image);
  h.section_bytes[section_chunk_table] = 4 * chunks;
  layout[0] = h.section_offset(section_payload);
  layout[1] = chunks ? chunk_offset[chunks - 1] + chunk_bytes[chunks - 1] : 0;
  layout[2] = layout[0] + layout[1];
  layout[3] = h.section_offset(section_chunk_table);
}

/// The chunk table (u32 byte size per chunk) at out + layout[3], for the
/// chosen set's layout[6] chunks.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void chunk_table_kernel(const std::uint64_t* chunk_bytes, std::byte* out, const std::uint64_t* layout) {
  std::byte* table = out + layout[3];
  const std::uint64_t chunks = layout[6];
  for (std::uint64_t c = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; c < chunks;
       c += std::uint64_t{gridDim.x} * blockDim.x)
    ::ebac::detail::store_le<std::uint32_t>(table + 4 * c, static_cast<std::uint32_t>(chunk_bytes[c]));
}

/// Fills in the device-side sizes, writes the header of the chosen stages
/// (apply_stages: their chunk size and chunk table too) and their
/// parameter section, and reports the stream's size. When the
/// coded stream is larger than the raw elements plus a header and
/// store_when_larger holds, writes the stored form's header instead and
/// sets *stored, so that stored_payload_kernel writes the raw elements
/// over the coded sections (the host's write_stored; device streams carry
/// no checksum). S is the element's storage type.
template <class S, class MainQ>
EBAC_KERNEL void header_kernel(stream_header h, const chosen_stages<MainQ>* stages, const std::byte* codebook_image,
                               const std::uint64_t* layout, const std::uint64_t* outlier_count, const std::uint64_t* index_bytes,
                               std::uint64_t n, bool store_when_larger, std::byte* out, std::uint64_t* out_bytes,
                               std::uint32_t* stored) {
  apply_stages(h, *stages);
  h.outlier_count = *outlier_count;
  h.set_sections(codebook_section_bytes(codebook_image), layout[1], *index_bytes);
  const std::uint64_t coded = h.section_offset(section_count);
  const std::uint64_t raw = h.header_bytes() + n * sizeof(S);
  const bool store = store_when_larger && coded > raw;
  *stored = store ? 1u : 0u;
  if (store) {
    stored_header(h, n, false).write(out);
    *out_bytes = raw;
  } else {
    h.write(out);
    h.write_params(out + h.header_bytes());
    *out_bytes = coded;
  }
}

/// The stored form's payload: element i's raw bytes at payload + i x
/// sizeof(S), when header_kernel chose the stored form (else returns at once).
template <class S>
EBAC_KERNEL void stored_payload_kernel(const S* in, std::uint64_t n, std::byte* payload, const std::uint32_t* stored) {
  if (*stored == 0) return;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    ::ebac::detail::store_le(payload + i * sizeof(S), raw_bits(in[i]));
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
