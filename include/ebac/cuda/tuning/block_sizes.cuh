// ebac/cuda/tuning/block_sizes.cuh - every block size and per-thread share the CUDA kernels use.
//
// One place to tune: the kernels (cuda/kernels/) and the dispatch
// (cuda/device_codec.cuh) read these, and no launch writes a literal. None
// of them changes a stream's bytes (the host tests check the per-block
// pieces against the host for the sizes below); they change speed and
// shared-memory use only. Values are the first guesses of a backend that
// has not yet been profiled on a GPU.
#pragma once

#include <ebac/config.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// Element-wise kernels (quantize, residual, reconstruct, stored values,
/// range, unzigzag, inverse passes, chunk tables): threads a block.
inline constexpr unsigned elementwise_threads = 256;
/// Grid limit of the element-wise kernels (grid-stride loops beyond it).
inline constexpr std::uint64_t elementwise_max_blocks = 65535u * 8;

/// Serial encoders and decoders (run-length): one thread a chunk.
inline constexpr unsigned serial_coder_threads = 64;
/// ANS decoding, one thread a chunk (kernels/ans_decode.cuh). A stream of
/// `max` has chunks of 2^16 elements, so a 1 GiB f32 tensor has only 4096
/// chunks: blocks are made as large as still gives every multiprocessor two
/// (ans_decode_block), from one warp (few chunks) to ans_decode_max_threads.
/// Each block holds its own copy of the tables (up to 55 KB), which is what
/// bounds the blocks a multiprocessor runs.
inline constexpr unsigned ans_decode_threads = 32;  // the plain kernel (kernel_path::staged)
inline constexpr unsigned ans_decode_max_threads = 256;
[[nodiscard]] inline unsigned ans_decode_block(std::uint64_t chunks, int multiprocessors) noexcept {
  unsigned t = ans_decode_max_threads;
  const std::uint64_t want = 2 * static_cast<std::uint64_t>(multiprocessors > 0 ? multiprocessors : 1);
  while (t > 32 && (chunks + t - 1) / t < want) t /= 2;
  return t;
}
/// The transpose after it: 32 x ans_untangle_rows threads move a 32 x 32 tile.
inline constexpr unsigned ans_untangle_rows = 8;
inline constexpr unsigned ans_untangle_threads = 32 * ans_untangle_rows;

/// Block bit-packing, staged kernels: one block a chunk.
inline constexpr int bitpack_threads = 256;

/// Fused bit-packing kernels (quantize + predict + pack in one pass).
inline constexpr int fused_threads = 256;
inline constexpr int fused_warps = fused_threads / 32;
/// Largest chunk the single-pass kernel takes: a chunk's block widths and
/// in-chunk offsets live in shared memory (5 bytes a block of 32 codes).
inline constexpr std::uint32_t single_pass_max_chunk = 1u << 16;

/// Huffman kernels run one warp per chunk: lane l tokenizes the l-th of 32
/// equal segments of the chunk (huffman_tokenize_segment: a zero run belongs
/// to the segment where it starts), so the lanes' tokens in order are the
/// chunk's (host-tested).
inline constexpr int huffman_warps = 4;
inline constexpr int huffman_threads = 32 * huffman_warps;
/// Blocks of huffman_threads for one warp a chunk.
inline unsigned huffman_blocks(std::uint64_t chunks) {
  return static_cast<unsigned>((chunks + huffman_warps - 1) / huffman_warps);
}
/// The block that builds the codebook from the histograms.
inline constexpr int codebook_threads = 1024;

/// Threads of a level-set block: one level_set each in shared memory
/// (272 bytes: 17 KB a block).
inline constexpr int level_threads = 64;
/// Threads of the block that merges the chunks' sets.
inline constexpr int level_merge_threads = 256;

/// Outlier index section writer: tiles of 1024 outliers (4 a thread).
inline constexpr unsigned outlier_write_threads = 256;
inline constexpr unsigned outlier_write_per_thread = 4;
inline constexpr std::uint64_t outlier_write_tile = std::uint64_t{outlier_write_threads} * outlier_write_per_thread;
/// Blocks the writer loops with at most (a tensor without outliers costs a
/// handful of blocks that exit at once).
inline constexpr std::uint64_t outlier_write_max_blocks = 1024;

/// Outlier restore (format/outlier_index.hpp): each thread takes a segment
/// of the index section's bytes, each block a tile of them.
inline constexpr unsigned outlier_threads = 256;
inline constexpr std::uint64_t outlier_segment_bytes = 16;
inline constexpr std::uint64_t outlier_tile_bytes = outlier_threads * outlier_segment_bytes;

/// Per-channel statistics (cuda/statistics.cuh).
inline constexpr int statistics_threads = 256;

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
