// ebac/cuda/dispatch/decompress.cuh - the device decompressor's temp layout and launches.
//
// decompress_stages carves the temp allocation (dispatch/temp_layout.cuh)
// and enqueues the kernels for the stages the stream's header names
// (format/stream_stages.hpp, as the host decoder gets them). The contract
// and the public entry point are in cuda/device_codec.cuh.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/device_codec_types.cuh>
#include <ebac/cuda/dispatch/temp_layout.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/cuda/kernels/ans_decode.cuh>
#include <ebac/cuda/kernels/decode.cuh>
#include <ebac/cuda/kernels/fused_bitpack_decode.cuh>
#include <ebac/cuda/kernels/predict.cuh>
#include <ebac/cuda/kernels/quantize.cuh>
#include <ebac/compress_options.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/huffman_image.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/max_compressed_bytes.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stream_stages.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/format/apply_stages.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/pool_window.hpp>

#include <cub/device/device_scan.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace detail {

/// The ANS decoder with shared-memory tables, then the transpose to tensor
/// order (kernels/ans_decode.cuh), sized for this device.
inline cudaError_t launch_ans_shared(const context_ans& enc, const std::byte* payload, std::uint64_t payload_bytes,
                                     const std::uint64_t* chunk_bytes, const std::uint64_t* chunk_offset, std::uint64_t n,
                                     std::uint32_t C, std::uint64_t chunks, std::uint32_t* interleaved, std::uint32_t* field,
                                     int* d_status, cudaStream_t stream) {
  int device = 0, multiprocessors = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  const std::size_t table_bytes = kernels::ans_table_bytes(enc);
  // Above 48 KB a kernel must be allowed more dynamic shared memory first.
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernels::ans_decode_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(table_bytes));
  if (e != cudaSuccess) return e;
  const unsigned threads = kernels::ans_decode_block(chunks, multiprocessors);
  kernels::ans_decode_kernel<0><<<static_cast<unsigned>((chunks + threads - 1) / threads), threads, table_bytes, stream>>>(
      enc, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, interleaved, d_status);
  kernels::ans_untangle_kernel<0>
      <<<grid_for(kernels::ans_untangle_tiles(chunks, C), 1), dim3(32, kernels::ans_untangle_rows), 0, stream>>>(
          interleaved, n, C, chunks, field);
  return cudaGetLastError();
}

template <element T>
cudaError_t decompress_stages(void* d_temp, std::size_t& temp_bytes, const stream_header& h, const std::byte* d_in,
                              std::size_t in_bytes, T* d_out, std::uint64_t count, int* d_status, cudaStream_t stream,
                              const device_codebook* codebook, kernel_path path) {
  using S = storage_t<T>;
  S* const out = reinterpret_cast<S*>(d_out);  // a bool is written as its byte
  const std::uint64_t n = element_count(h);
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = C ? (n + C - 1) / C : 0;
  if (chunks > max_chunks) return cudaErrorInvalidValue;
  // Stage ids this decoder runs (a validated header has them; a caller's own may not).
  const auto encoder = static_cast<std::uint8_t>(h.encoder);
  if (!h.is_stored() && (!quantizer_fits_dtype(h.quantizer, h.type) || !encoder_registered(encoder)))
    return cudaErrorInvalidValue;
  if (!h.is_stored() && !has_device_decoder_for(h.encoder)) return cudaErrorNotSupported;
  auto refused = [&] {
    return ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, d_out) ||
           in_bytes != h.section_offset(section_count) + (h.has_checksum() ? 8 : 0) || !d_status || (n > 0 && !d_in);
  };

  if (h.is_stored()) {  // the payload is the raw elements
    temp_carver t(d_temp);
    if (d_temp == nullptr) {
      temp_bytes = t.required();
      return cudaSuccess;
    }
    if (temp_bytes < t.required() || refused()) return cudaErrorInvalidValue;
    cudaError_t e = cudaMemsetAsync(d_status, 0, sizeof(int), stream);
    if (e != cudaSuccess) return e;
    if (h.has_checksum()) kernels::checksum_kernel<0><<<1, 1, 0, stream>>>(d_in, in_bytes, d_status);
    if (n > 0)
      kernels::stored_values_kernel<S>
          <<<grid_for(n), kernels::elementwise_threads, 0, stream>>>(d_in + h.section_offset(section_payload), n, out);
    return cudaGetLastError();
  }

  std::uint64_t tile_blocks = 0;
  const bool fused = path != kernel_path::staged && fused_decode_tile_blocks(h, tile_blocks);
  temp_carver t(d_temp);
  const bool no_field = fused && h.encoder == encoder_id::block_bitpack;  // payload -> values directly
  auto* field = t.take<std::uint32_t>(no_field ? 0 : n + 1);
  auto* chunk_bytes = t.take<std::uint64_t>(chunks + 1);
  auto* chunk_offset = t.take<std::uint64_t>(chunks + 1);
  // ANS off the staged path: the warp-interleaved codes (kernels/ans_decode.cuh).
  const bool ans_shared = !h.is_stored() && h.encoder == encoder_id::context_ans && path != kernel_path::staged;
  auto* interleaved = t.take<std::uint32_t>(ans_shared ? kernels::ans_interleaved_elements(chunks, C) : 0);
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
  cudaError_t e =
      cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream);
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
  const bool no_codebook =
      (h.encoder == encoder_id::huffman && (codebook == nullptr || codebook->image == nullptr)) ||
      (h.encoder == encoder_id::context_ans && (codebook == nullptr || codebook->ans.cumulative == nullptr ||
                                                codebook->ans.freq == nullptr || codebook->ans.first_token == nullptr));
  if (temp_bytes < t.required() || refused() || no_codebook) return cudaErrorInvalidValue;

  if ((e = cudaMemsetAsync(d_status, 0, sizeof(int), stream)) != cudaSuccess) return e;
  if (h.has_checksum()) kernels::checksum_kernel<0><<<1, 1, 0, stream>>>(d_in, in_bytes, d_status);
  const std::byte* payload = d_in + h.section_offset(section_payload);
  const std::uint64_t payload_bytes = h.section_bytes[section_payload];
  if (chunks > 0) {
    kernels::chunk_sizes_kernel<0><<<grid_for(chunks), kernels::elementwise_threads, 0, stream>>>(
        d_in + h.section_offset(section_chunk_table), chunks, chunk_bytes);
    std::size_t sb = cub_bytes;
    if ((e = cub::DeviceScan::ExclusiveSum(cub_temp, sb, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream)) !=
        cudaSuccess)
      return e;
    kernels::check_table_kernel<0><<<1, 1, 0, stream>>>(chunk_bytes, chunk_offset, chunks, payload_bytes, d_status);
  }
  ::ebac::detail::with_stream_stages<T>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
    using Q = std::remove_cvref_t<decltype(q)>;
    using E = typename decltype(enc_tag)::type;
    if constexpr (std::is_same_v<E, block_bitpack>) {
      if (fused) {  // one kernel from payload to values
        if (chunks > 0)
          kernels::fused_bitpack_decode_kernel<Q, S><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
              tile_blocks, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, q, out, d_status);
        return;
      }
    }
    if (chunks > 0) {
      if constexpr (std::is_same_v<E, block_bitpack>) {
        kernels::bitpack_decode_kernel<0><<<static_cast<unsigned>(chunks), kernels::bitpack_threads, 0, stream>>>(
            payload, payload_bytes, chunk_bytes, chunk_offset, n, C, field, d_status);
      } else if constexpr (!has_device_decoder<E>) {
        // refused above (has_device_decoder_for)
      } else if constexpr (std::is_same_v<E, context_ans>) {
        if (!ans_shared) {  // one thread a chunk over the uploaded tables (the host's decode_chunk)
          kernels::serial_decode_kernel<E>
              <<<grid_for(chunks, kernels::ans_decode_threads), kernels::ans_decode_threads, 0, stream>>>(
                  codebook->ans, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, field, d_status);
        } else if ((e = launch_ans_shared(codebook->ans, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks,
                                          interleaved, field, d_status, stream)) != cudaSuccess) {
          return;
        }
      } else if constexpr (E::needs_codebook) {
        kernels::huffman_decode_kernel<0><<<kernels::huffman_blocks(chunks), kernels::huffman_threads, 0, stream>>>(
            codebook->image, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, field, d_status);
      } else {
        kernels::serial_decode_kernel<E>
            <<<grid_for(chunks, kernels::serial_coder_threads), kernels::serial_coder_threads, 0, stream>>>(
                E{}, payload, payload_bytes, chunk_bytes, chunk_offset, n, C, chunks, field, d_status);
      }
    }
    if (n > 0 && fused) {  // codes -> values in one pass
      kernels::fused_values_kernel<Q, S>
          <<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(tile_blocks, field, n, C, q, out, d_status);
    } else if (n > 0) {
      kernels::unzigzag_kernel<0><<<grid_for(n), kernels::elementwise_threads, 0, stream>>>(field, n);
      for (int k = pred.passes() - 1; k >= 0; --k) {
        const axis_pass p = pred.pass(h.shape, k);
        kernels::inverse_pass_kernel<std::remove_cvref_t<decltype(pred)>>
            <<<grid_for(p.outer * ((p.extent + p.tile - 1) / p.tile) * p.inner), kernels::elementwise_threads, 0, stream>>>(field,
                                                                                                                            p);
      }
      kernels::reconstruct_kernel<Q, S><<<grid_for(n), kernels::elementwise_threads, 0, stream>>>(field, n, q, out, d_status);
    }
  });
  if (e != cudaSuccess) return e;
  // Outliers last (they overwrite what reconstruction wrote at their
  // indices), in parallel over the index section (format/outlier_index.hpp).
  if (outlier_tiles > 0) {
    kernels::outlier_summary_kernel<0>
        <<<static_cast<unsigned>(outlier_tiles), kernels::outlier_threads, 0, stream>>>(outliers, tile_sum);
    std::size_t ob = cub_bytes;
    if ((e = cub::DeviceScan::ExclusiveScan(cub_temp, ob, tile_sum, tile_before, outliers.op(), outlier_summary{},
                                            static_cast<std::int64_t>(outlier_tiles), stream)) != cudaSuccess)
      return e;
    kernels::outlier_place_kernel<S><<<static_cast<unsigned>(outlier_tiles), kernels::outlier_threads, 0, stream>>>(
        outliers, tile_before, tile_sum, outlier_tiles, outlier_count, d_in + h.section_offset(section_outlier_value), out,
        d_status);
  }
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace cuda
EBAC_NAMESPACE_END
