// ebac/cuda/device_codec.cuh - device-scope compress/decompress (the CUB contract).
//
//   size_t temp = 0;
//   ebac::cuda::compress(nullptr, temp, d_in, shape, pipe, opt, d_out, cap, d_size, stream); // query
//   ... allocate temp (e.g. from PyTorch's caching allocator) ...
//   ebac::cuda::compress(d_temp, temp, d_in, shape, pipe, opt, d_out, cap, d_size, stream);  // run
//
// No allocation, no synchronization, no host read of a device value: every
// call only enqueues work on `stream`, so it can be captured in a CUDA graph.
// The compressed size goes to device memory (*d_out_bytes); size `d_out` with
// max_compressed_bytes(). Device streams carry no checksum (the header says
// so); the bytes are otherwise identical to the host backend's stream for
// the same input and settings (compress_options::checksum = false).
//
// Decompression needs the stream's header on the host (the caller kept it
// from compression, or reads it: see cuda/codec.cuh); a corrupt payload is
// reported through *d_status (0 = ok, see device_status), never by touching
// memory out of bounds. Every output element is written.
//
// Huffman pipelines (the `ratio` family) build their codebook on the device
// in the same call: the token histograms are counted by a kernel, then one
// block runs the host's construction (kernels/huffman_codebook.cuh: the same
// code as huffman_codebook::choose, so the same codebook), and the chunks are
// encoded with it. Nothing goes back to the host, so these pipelines are
// capturable too. Decompression of a Huffman stream takes the codebook as a
// device image (device_huffman_codebook) packed on the host from the
// stream's codebook section after huffman_codebook::deserialize validated
// it; the convenience layer (cuda/codec.cuh) does that. The histogram and
// encode kernels run one warp per chunk (32 segments, host-tested to give
// the serial tokens and bytes); so does decoding (32 bit ranges whose lanes
// agree on where their first tokens start: encoder/huffman_lanes.hpp).
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/decode.cuh>
#include <ebac/cuda/kernels/encode.cuh>
#include <ebac/cuda/kernels/fused_bitpack.cuh>
#include <ebac/cuda/kernels/fused_bitpack_decode.cuh>
#include <ebac/cuda/kernels/huffman_codebook.cuh>
#include <ebac/cuda/kernels/predict.cuh>
#include <ebac/cuda/kernels/quantize.cuh>
#include <ebac/dtype.hpp>
#include <ebac/encoder/huffman_image.hpp>
#include <ebac/format/max_compressed_bytes.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/host/codec.hpp>
#include <ebac/pipeline.hpp>

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {

namespace detail {

inline unsigned grid_for(std::uint64_t n, unsigned threads = 256) {
  const std::uint64_t g = (n + threads - 1) / threads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535u * 8 ? 65535u * 8 : g));
}

/// Carves one temp allocation into 256-byte aligned pieces (query and run
/// agree). The caller's pointer need not be aligned (a slice of a larger
/// workspace, say): the carver starts at the next aligned address, and the
/// size it asks for includes that slack.
struct temp_carver {
  static constexpr std::size_t alignment = 256;
  std::byte* base;  ///< d_temp rounded up to `alignment`; nullptr on a size query
  std::size_t used = 0;
  explicit temp_carver(void* d_temp)
      : base(d_temp ? reinterpret_cast<std::byte*>(align_up(reinterpret_cast<std::uintptr_t>(d_temp), alignment)) : nullptr) {}
  /// Bytes the caller must provide, whatever its pointer's alignment.
  [[nodiscard]] std::size_t required() const noexcept { return used + alignment - 1; }
  template <class U>
  U* take(std::size_t count) {
    used = align_up(used, alignment);
    U* p = base ? reinterpret_cast<U*>(base + used) : nullptr;
    used += count * sizeof(U);
    return p;
  }
};

}  // namespace detail

/// Which kernels run a bit-packing pipeline (`fast`, `plain`, any
/// `...:bitpack`). Compression: `staged` stores the quantized field and the
/// residual codes between kernels; `fused` computes each code where it is
/// needed (kernels/fused_bitpack.cuh) in two launches (size, write) with a
/// CUB scan between; `single_pass` does size and write in one launch, chunk
/// offsets by decoupled look-back (chunks of up to
/// kernels::single_pass_max_chunk elements; larger ones run `fused`). All
/// give the same stream, byte for byte. Decompression, when chunks decode on
/// their own (see fused_decode_tile_blocks): `fused` and `single_pass`
/// decode a bit-packed chunk straight to values in one kernel, and turn the
/// codes of other encoders into values in one pass instead of three
/// (kernels/fused_bitpack_decode.cuh); the same values as `staged`. Other
/// predictors always run staged. None of the fused kernels has been
/// measured yet (no GPU so far), so `staged` stays the default until the
/// GPU check has compared them.
enum class kernel_path : std::uint8_t { staged, fused, single_pass };

/// Whether the fused decoders take a (validated) stream: chunks that decode
/// on their own as the host backend defines it (host::detail::chunk_local:
/// no prediction, or flat 1-D Lorenzo whose tile divides the chunk), and for
/// Lorenzo a tile of whole 32-code blocks. tile_blocks = tile / 32, or 0
/// without prediction.
inline bool fused_decode_tile_blocks(const stream_header& h, std::uint64_t& tile_blocks) noexcept {
  tile_blocks = 0;
  if (h.chunk_elements == 0) return false;
  if (h.predictor == predictor_id::none) return ::ebac::host::detail::chunk_local(no_prediction{}, h.chunk_elements);
  const lorenzo& l = h.lorenzo_params;
  if (h.predictor != predictor_id::lorenzo || l.validate(h.shape) != status::ok ||
      !::ebac::host::detail::chunk_local(l, h.chunk_elements) || l.tile[0] % 32 != 0)
    return false;
  tile_blocks = l.tile[0] / 32;
  return true;
}

/// A Huffman codebook in device memory for decompression: the image of
/// pack_huffman_image() copied to `image` (huffman_image_layout::bytes,
/// 8-byte aligned).
struct device_huffman_codebook {
  const std::byte* image = nullptr;
};

/// Chunks a tensor may have on the CUDA backend: the chunk kernels launch one
/// block per chunk (with the default chunk of 16384 elements the limit is
/// 2^45 elements; only tiny chunks reach it).
inline constexpr std::uint64_t max_chunks = max_grid_blocks;

/// Bytes a stream of this shape and pipeline can take at most (the format's
/// bound, format/max_compressed_bytes.hpp; host-tested against every stream
/// the property tests make). Size d_out with it.
using ::ebac::max_compressed_bytes;

/// Compresses d_in into d_out (capacity >= max_compressed_bytes()); the
/// stream's size goes to *d_out_bytes, a bound that is not finite on this
/// tensor to *d_status. `path` picks the kernels of a bit-packing pipeline
/// (see kernel_path). With d_temp == nullptr only sets temp_bytes, which
/// depends on `path`: query with the path you run.
template <class Pipeline, element T>
[[nodiscard]] cudaError_t compress(void* d_temp, std::size_t& temp_bytes, const T* d_in, const extents& shape,
                                   const Pipeline& pipe, const compress_options& opt, std::byte* d_out,
                                   std::size_t out_capacity, std::uint64_t* d_out_bytes, int* d_status,
                                   cudaStream_t stream = nullptr, kernel_path path = kernel_path::staged) {
  using P = typename Pipeline::predictor_type;
  using Q = typename Pipeline::quantizer_type;
  using E = typename Pipeline::encoder_type;
  constexpr bool bitpack = std::is_same_v<E, block_bitpack>;
  if (::ebac::detail::compress_argument_error(shape, pipe, opt)) return cudaErrorInvalidValue;  // the host's rules
  std::uint64_t n = 0;
  (void)shape.count(n);
  const std::uint32_t C = pipe.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  if (chunks > max_chunks) return cudaErrorInvalidValue;
  const bool fused = bitpack && path != kernel_path::staged;
  const bool single_pass = fused && path == kernel_path::single_pass && C <= kernels::single_pass_max_chunk;

  // Temp layout. The field/code arrays are reused for the outlier indices
  // (n x u64, the same bytes) once encoding no longer needs them (stream
  // order makes that safe); the fused kernels use them for the indices only.
  detail::temp_carver t(d_temp);
  auto* field = t.take<std::uint32_t>(2 * n + 2);  // q, then codes; later u64 outlier indices
  std::uint32_t* codes = field ? field + n : nullptr;
  auto* flags = t.take<std::uint8_t>(n + 1);
  auto* chunk_bytes = t.take<std::uint64_t>(chunks + 1);
  auto* chunk_offset = t.take<std::uint64_t>(chunks + 1);
  auto* keys = t.take<std::int32_t>(2);
  auto* quant = t.take<Q>(1);
  auto* eb_abs = t.take<double>(1);
  auto* layout = t.take<std::uint64_t>(4);
  auto* outlier_count = t.take<std::uint64_t>(1);
  auto* index_bytes = t.take<std::uint64_t>(1);
  // The outlier index writer's tile counter and look-back words (zeroed together).
  auto* outlier_words = t.take<unsigned long long>(kernels::outlier_write_tiles(n) + 1);
  // single_pass: one look-back word per chunk, then the chunk counter (zeroed together).
  unsigned long long* tile_words = single_pass ? t.take<unsigned long long>(chunks + 1) : nullptr;
  const std::size_t slot = E{}.max_chunk_bytes(C);
  std::byte* scratch = nullptr;
  if constexpr (!bitpack) scratch = t.take<std::byte>(chunks * slot);
  // Huffman: histograms, the construction's workspace and the codebook image.
  unsigned long long* hist = nullptr;
  ::ebac::detail::huffman_length_workspace* workspace = nullptr;
  std::uint8_t* lengths = nullptr;
  std::byte* image = nullptr;
  if constexpr (E::needs_codebook) {
    hist = t.take<unsigned long long>(2 * std::size_t{huffman_alphabet::size});
    workspace = t.take<::ebac::detail::huffman_length_workspace>(2);  // one per histogram: built side by side
    lengths = t.take<std::uint8_t>(2 * std::size_t{huffman_alphabet::size});
    image = t.take<std::byte>(huffman_image_layout::bytes);
  }
  std::size_t scan_bytes = 0, select_bytes = 0;
  cudaError_t e = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream);
  if (e != cudaSuccess) return e;
  auto* outlier_index = reinterpret_cast<std::uint64_t*>(field);
  e = cub::DeviceSelect::Flagged(nullptr, select_bytes, thrust::counting_iterator<std::uint64_t>(0), flags, outlier_index,
                                 outlier_count, static_cast<std::int64_t>(n), stream);
  if (e != cudaSuccess) return e;
  void* cub_temp = t.take<std::byte>(scan_bytes > select_bytes ? scan_bytes : select_bytes);
  const std::size_t cub_bytes = scan_bytes > select_bytes ? scan_bytes : select_bytes;
  if (d_temp == nullptr) {
    temp_bytes = t.required();
    return cudaSuccess;
  }
  if (temp_bytes < t.required() || !d_status || (n > 0 && !d_in)) return cudaErrorInvalidValue;
  if (out_capacity < max_compressed_bytes<Pipeline, T>(shape, pipe) || !d_out || !d_out_bytes) return cudaErrorInvalidValue;

  const unsigned g = detail::grid_for(n);
  const unsigned huffman_grid = kernels::huffman_blocks(chunks);
  if ((e = cudaMemsetAsync(d_status, 0, sizeof(int), stream)) != cudaSuccess) return e;
  kernels::range_init_kernel<0><<<1, 1, 0, stream>>>(keys);
  if (opt.bound.mode == bound_mode::relative && n > 0) kernels::range_kernel<T><<<g, 256, 0, stream>>>(d_in, n, keys);
  kernels::make_quantizer_kernel<Q, T><<<1, 1, 0, stream>>>(opt.bound, keys, quant, eb_abs, d_status);
  if (n > 0 && !fused) {
    kernels::quantize_kernel<Q, T><<<g, 256, 0, stream>>>(d_in, n, quant, field, flags);
    kernels::residual_kernel<P><<<g, 256, 0, stream>>>(pipe.predictor, shape, field, codes, n);
  }

  stream_header h;  // the codebook section's size is filled in on the device
  h.type = dtype_of<T>::value;
  h.mode = opt.bound.mode;
  h.flags = 0;
  h.shape = shape;
  h.predictor = P::id;
  if constexpr (std::is_same_v<P, lorenzo>) h.lorenzo_params = pipe.predictor;
  h.quantizer = Q::id;
  h.encoder = E::id;
  h.eb_requested = opt.bound.value;
  h.chunk_elements = C;
  h.section_bytes[section_chunk_table] = 4 * chunks;

  if constexpr (E::needs_codebook) {  // histograms -> codebook image + the stream's codebook section
    constexpr std::size_t hist_bytes = 2 * std::size_t{huffman_alphabet::size} * sizeof(unsigned long long);
    if ((e = cudaMemsetAsync(hist, 0, hist_bytes, stream)) != cudaSuccess) return e;
    if (chunks > 0)
      kernels::huffman_histogram_kernel<0><<<huffman_grid, kernels::huffman_threads, 0, stream>>>(codes, n, C, chunks, hist);
    kernels::huffman_lengths_kernel<0><<<2, kernels::codebook_threads, 0, stream>>>(hist, workspace, lengths);
    kernels::huffman_codebook_kernel<0><<<1, kernels::codebook_threads, 0, stream>>>(hist, lengths, image,
                                                                                    d_out + h.section_offset(section_codebook));
  }

  if (chunks > 0) {
    if constexpr (bitpack) {
      if (single_pass) {  // size and write in one launch; chunk_bytes / chunk_offset come out of the look-back
        if ((e = cudaMemsetAsync(tile_words, 0, (chunks + 1) * sizeof(unsigned long long), stream)) != cudaSuccess) return e;
        kernels::fused_bitpack_single_pass_kernel<P, Q, T><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
            pipe.predictor, shape, d_in, n, C, quant, flags, tile_words + chunks, tile_words, chunk_bytes, chunk_offset, d_out,
            h.section_offset(section_payload));
      } else if (fused) {
        kernels::fused_bitpack_size_kernel<P, Q, T><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
            pipe.predictor, shape, d_in, n, C, quant, flags, chunk_bytes);
      } else {
        kernels::bitpack_size_kernel<0><<<static_cast<unsigned>(chunks), kernels::bitpack_threads, 0, stream>>>(codes, n, C, chunk_bytes);
      }
    } else if constexpr (E::needs_codebook) {
      kernels::huffman_encode_kernel<0><<<huffman_grid, kernels::huffman_threads, 0, stream>>>(image, codes, n, C, chunks, scratch,
                                                                                                  slot, chunk_bytes);
    } else {
      kernels::serial_encode_kernel<E><<<detail::grid_for(chunks, 64), 64, 0, stream>>>(E{}, codes, n, C, chunks, scratch, slot, chunk_bytes);
    }
    std::size_t cb = cub_bytes;
    if (!single_pass &&
        (e = cub::DeviceScan::ExclusiveSum(cub_temp, cb, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream)) != cudaSuccess)
      return e;
  }
  kernels::payload_layout_kernel<0><<<1, 1, 0, stream>>>(h, image, chunk_bytes, chunk_offset, chunks, layout);
  // The writers below take their offsets from `layout`: if any launch so far
  // failed, stop before they would read it uninitialized.
  if ((e = cudaPeekAtLastError()) != cudaSuccess) return e;
  if (chunks > 0) {
    if constexpr (bitpack) {
      if (single_pass) {
        // already written
      } else if (fused) {
        kernels::fused_bitpack_write_kernel<P, Q, T><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
            pipe.predictor, shape, d_in, n, C, quant, chunk_offset, d_out, layout);
      } else {
        kernels::bitpack_write_kernel<0><<<static_cast<unsigned>(chunks), kernels::bitpack_threads, 0, stream>>>(codes, n, C, chunk_offset, d_out, layout);
      }
    } else {
      kernels::copy_chunks_kernel<0><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(scratch, slot, chunk_bytes, chunk_offset, d_out, layout);
    }
    kernels::chunk_table_kernel<0><<<detail::grid_for(chunks), 256, 0, stream>>>(chunk_bytes, chunks, d_out, layout);
  }
  // Codes are encoded: their memory now holds the outlier indices.
  if (n > 0) {
    std::size_t sb = cub_bytes;
    if ((e = cub::DeviceSelect::Flagged(cub_temp, sb, thrust::counting_iterator<std::uint64_t>(0), flags, outlier_index,
                                        outlier_count, static_cast<std::int64_t>(n), stream)) != cudaSuccess)
      return e;
  } else if ((e = cudaMemsetAsync(outlier_count, 0, sizeof(std::uint64_t), stream)) != cudaSuccess) {
    return e;
  }
  if ((e = cudaMemsetAsync(outlier_words, 0, (kernels::outlier_write_tiles(n) + 1) * sizeof(unsigned long long), stream)) != cudaSuccess)
    return e;
  kernels::outlier_index_kernel<0><<<kernels::outlier_write_blocks(n), kernels::outlier_write_threads, 0, stream>>>(
      outlier_index, outlier_count, d_out, layout + 2, index_bytes, outlier_words);
  kernels::outlier_values_kernel<T><<<kernels::outlier_write_blocks(n), 256, 0, stream>>>(d_in, outlier_index, outlier_count, d_out,
                                                                                           layout + 2, index_bytes);
  kernels::header_kernel<T><<<1, 1, 0, stream>>>(h, image, eb_abs, layout, outlier_count, index_bytes, d_out, d_out_bytes);
  return cudaGetLastError();
}

/// Decompresses a stream whose (validated, host-side) header is `h`.
/// *d_status receives 0 or a device_status code. `path` as for compress();
/// the fused decoder needs no field in temp storage, so the temp size
/// depends on it (query with the same path).
template <element T>
[[nodiscard]] cudaError_t decompress(void* d_temp, std::size_t& temp_bytes, const stream_header& h, const std::byte* d_in,
                                     std::size_t in_bytes, T* d_out, std::uint64_t count, int* d_status,
                                     cudaStream_t stream = nullptr, const device_huffman_codebook* codebook = nullptr,
                                     kernel_path path = kernel_path::staged) {
  const std::uint64_t n = element_count(h);
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = C ? (n + C - 1) / C : 0;
  if (chunks > max_chunks) return cudaErrorInvalidValue;
  std::uint64_t tile_blocks = 0;
  const bool fused = path != kernel_path::staged && fused_decode_tile_blocks(h, tile_blocks);
  detail::temp_carver t(d_temp);
  const bool no_field = fused && h.encoder == encoder_id::block_bitpack;  // payload -> values directly
  auto* field = t.take<std::uint32_t>(no_field ? 0 : n + 1);
  auto* chunk_bytes = t.take<std::uint64_t>(chunks + 1);
  auto* chunk_offset = t.take<std::uint64_t>(chunks + 1);
  // Outliers: one summary per tile of the index section, and the scan of them.
  using outlier_summary = outlier_index_reader::summary;
  const std::uint64_t outlier_count = h.outlier_count;
  const outlier_index_reader outliers{d_in ? d_in + h.section_offset(section_outlier_index) : nullptr,
                                      h.section_bytes[section_outlier_index], n};
  const std::uint64_t outlier_tiles = kernels::outlier_tiles(outliers.bytes, outlier_count);
  if (outlier_tiles > max_grid_blocks) return cudaErrorInvalidValue;  // an index section of 8 TiB
  auto* tile_sum = t.take<outlier_summary>(outlier_tiles + 1);
  auto* tile_before = t.take<outlier_summary>(outlier_tiles + 1);
  std::size_t scan_bytes = 0, outlier_scan_bytes = 0;
  cudaError_t e = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream);
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::ExclusiveScan(nullptr, outlier_scan_bytes, tile_sum, tile_before, outliers.op(), outlier_summary{},
                                     static_cast<std::int64_t>(outlier_tiles), stream);
  if (e != cudaSuccess) return e;
  const std::size_t cub_bytes = scan_bytes > outlier_scan_bytes ? scan_bytes : outlier_scan_bytes;
  void* cub_temp = t.take<std::byte>(cub_bytes);
  if (d_temp == nullptr) {
    temp_bytes = t.required();
    return cudaSuccess;
  }
  if (temp_bytes < t.required()) return cudaErrorInvalidValue;
  if (::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, d_out) ||
      in_bytes != h.section_offset(section_count) + (h.has_checksum() ? 8 : 0) || !d_status || (n > 0 && !d_in) ||
      (h.encoder == encoder_id::huffman && (codebook == nullptr || codebook->image == nullptr)))
    return cudaErrorInvalidValue;

  if ((e = cudaMemsetAsync(d_status, 0, sizeof(int), stream)) != cudaSuccess) return e;
  if (h.has_checksum()) kernels::checksum_kernel<0><<<1, 1, 0, stream>>>(d_in, in_bytes, d_status);
  const std::byte* payload = d_in + h.section_offset(section_payload);
  const std::uint64_t payload_bytes = h.section_bytes[section_payload];
  if (chunks > 0) {
    kernels::chunk_sizes_kernel<0><<<detail::grid_for(chunks), 256, 0, stream>>>(d_in + h.section_offset(section_chunk_table), chunks, chunk_bytes);
    std::size_t sb = cub_bytes;
    if ((e = cub::DeviceScan::ExclusiveSum(cub_temp, sb, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream)) != cudaSuccess) return e;
    kernels::check_table_kernel<0><<<1, 1, 0, stream>>>(chunk_bytes, chunk_offset, chunks, payload_bytes, d_status);
  }
  ::ebac::host::detail::with_stream_pipeline(h, [&](auto pipe) {
    using Pipe = decltype(pipe);
    using Q = typename Pipe::quantizer_type;
    using E = typename Pipe::encoder_type;
    if constexpr (std::is_same_v<E, block_bitpack>) {
      if (fused) {  // one kernel from payload to values
        if (chunks > 0)
          kernels::fused_bitpack_decode_kernel<Q, T><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
              tile_blocks, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, Q::make(h.eb_abs), d_out, d_status);
        return;
      }
    }
    {
      if (chunks > 0) {
        if constexpr (std::is_same_v<E, block_bitpack>) {
          kernels::bitpack_decode_kernel<0><<<static_cast<unsigned>(chunks), kernels::bitpack_threads, 0, stream>>>(
              payload, payload_bytes, chunk_bytes, chunk_offset, n, C, field, d_status);
        } else if constexpr (E::needs_codebook) {
          kernels::huffman_decode_kernel<0>
              <<<kernels::huffman_blocks(chunks), kernels::huffman_threads, 0, stream>>>(
                  codebook->image, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, field, d_status);
        } else {
          kernels::serial_decode_kernel<E><<<detail::grid_for(chunks, 64), 64, 0, stream>>>(
              E{}, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, field, d_status);
        }
      }
      if (n > 0 && fused) {  // codes -> values in one pass
        kernels::fused_values_kernel<Q, T><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
            tile_blocks, field, n, C, Q::make(h.eb_abs), d_out);
      } else if (n > 0) {
        kernels::unzigzag_kernel<0><<<detail::grid_for(n), 256, 0, stream>>>(field, n);
        for (int k = pipe.predictor.passes() - 1; k >= 0; --k) {
          const axis_pass p = pipe.predictor.pass(h.shape, k);
          kernels::inverse_pass_kernel<0><<<detail::grid_for(p.outer * ((p.extent + p.tile - 1) / p.tile) * p.inner), 256, 0, stream>>>(field, p);
        }
        kernels::reconstruct_kernel<Q, T><<<detail::grid_for(n), 256, 0, stream>>>(field, n, Q::make(h.eb_abs), d_out);
      }
    }
  });
  // Outliers last (they overwrite what reconstruction wrote at their
  // indices), in parallel over the index section (format/outlier_index.hpp).
  if (outlier_tiles > 0) {
    kernels::outlier_summary_kernel<0><<<static_cast<unsigned>(outlier_tiles), kernels::outlier_threads, 0, stream>>>(outliers, tile_sum);
    std::size_t ob = cub_bytes;
    if ((e = cub::DeviceScan::ExclusiveScan(cub_temp, ob, tile_sum, tile_before, outliers.op(), outlier_summary{},
                                            static_cast<std::int64_t>(outlier_tiles), stream)) != cudaSuccess)
      return e;
    kernels::outlier_place_kernel<T><<<static_cast<unsigned>(outlier_tiles), kernels::outlier_threads, 0, stream>>>(
        outliers, tile_before, tile_sum, outlier_tiles, outlier_count, d_in + h.section_offset(section_outlier_value), d_out, d_status);
  }
  return cudaGetLastError();
}

}  // namespace cuda
EBAC_NAMESPACE_END
