// ebac/cuda/dispatch/compress.cuh - the device compressor's temp layout and launches.
//
// compress_stages carves the temp allocation (dispatch/temp_layout.cuh) and
// enqueues the kernels (cuda/kernels/) for the stage sets a tensor can get;
// the stages themselves (predictor, quantizer, encoder) and the header are
// the backend-neutral policies the host runs too. The contract and the
// public entry point are in cuda/device_codec.cuh.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/device_codec_types.cuh>
#include <ebac/cuda/dispatch/temp_layout.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/cuda/kernels/encode.cuh>
#include <ebac/cuda/kernels/fused_bitpack.cuh>
#include <ebac/cuda/kernels/huffman_codebook.cuh>
#include <ebac/cuda/kernels/levels.cuh>
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
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace detail {

/// How one stage set cuts the tensor: chunks of its predictor's size
/// (format/chunking.hpp, the size apply_stages writes to the header), and
/// for encoders that code a chunk into a worst-case slot first, the slot.
struct stage_cut {
  std::uint32_t chunk = 0;   ///< elements a chunk
  std::uint64_t chunks = 0;  ///< chunks of the tensor
  std::size_t slot = 0;      ///< worst-case bytes of one coded chunk
};

template <class E, class P>
stage_cut cut_of(const P& pred, const extents& shape, std::uint32_t requested, std::uint64_t n) {
  stage_cut k;
  k.chunk = stream_chunk_elements(pred, shape, requested);
  k.chunks = (n + k.chunk - 1) / k.chunk;
  k.slot = E{}.max_chunk_bytes(k.chunk);
  return k;
}

/// compress() once the main stage set is known on the host: MainP/MainQ are
/// the pipeline's predictor and quantizer for float tensors; for integer
/// tensors exact_quantizer under the pipeline's predictor, or
/// pool_window_quantizer without prediction when opt.pooling is set.
/// `main_q` is used as given for integer tensors (floats make theirs on
/// the device from the bound).
template <class Pipeline, element T, class MainP, class MainQ>
cudaError_t compress_stages(void* d_temp, std::size_t& temp_bytes, const T* d_in, const extents& shape, const Pipeline& pipe,
                            const compress_options& opt, const MainP& main_pred, const MainQ& main_q, std::byte* d_out,
                            std::size_t out_capacity, std::uint64_t* d_out_bytes, int* d_status, cudaStream_t stream,
                            kernel_path path) {
  using E = typename Pipeline::encoder_type;
  using S = storage_t<T>;
  using stages_t = chosen_stages<MainQ>;
  constexpr bool bitpack = std::is_same_v<E, block_bitpack>;
  std::uint64_t n = 0;
  (void)shape.count(n);
  // The level search cuts at the pipeline's size (as find_levels does: the
  // palette does not depend on the cut); the stage sets cut at their
  // predictor's (the host's compress_to: stream_chunk_elements).
  const std::uint32_t C = pipe.chunk_elements;
  const std::uint64_t search_chunks = (n + C - 1) / C;
  const bool find_levels = opt.max_levels > 0 && n > 0;
  const stage_cut level_cut = cut_of<E>(no_prediction{}, shape, C, n);
  const stage_cut main_cut = cut_of<E>(main_pred, shape, C, n);
  // Chunk arrays hold either set's chunks.
  const std::uint64_t chunks = find_levels && level_cut.chunks > main_cut.chunks ? level_cut.chunks : main_cut.chunks;
  if (chunks > max_chunks) return cudaErrorInvalidValue;
  const bool fused = bitpack && path != kernel_path::staged;
  auto single_pass = [&](const stage_cut& k) {
    return fused && path == kernel_path::single_pass && k.chunk <= kernels::single_pass_max_chunk;
  };
  // Whether a set that may be chosen sizes its chunks in one launch and
  // places them with a scan (every set but a single-pass one).
  const bool any_scan = !single_pass(main_cut) || (find_levels && !single_pass(level_cut));
  const bool any_single_pass = single_pass(main_cut) || (find_levels && single_pass(level_cut));
  const bool scan_range = floating_element<T> && n > 0 && (opt.bound.mode == bound_mode::relative || sizeof(T) == 2);
  const S* in = reinterpret_cast<const S*>(d_in);  // a bool is read as its byte (dtype.hpp)

  // Temp layout. The first region holds the chunks' level sets while the
  // palette is searched, then the quantized field and the codes, then (once
  // encoding no longer needs them) the outlier indices (n x u64, the same
  // bytes): stream order makes each reuse safe. The fused kernels use it for
  // the indices only.
  temp_carver t(d_temp);
  const std::size_t field_bytes = (2 * n + 2) * sizeof(std::uint32_t);
  const std::size_t sets_bytes = find_levels ? search_chunks * sizeof(level_set) : 0;
  std::byte* region = t.take<std::byte>(field_bytes > sets_bytes ? field_bytes : sets_bytes);
  auto* field = reinterpret_cast<std::uint32_t*>(region);
  std::uint32_t* codes = field ? field + n : nullptr;
  auto* sets = reinterpret_cast<level_set*>(region);
  auto* flags = t.take<std::uint8_t>(n + 1);
  auto* chunk_bytes = t.take<std::uint64_t>(chunks + 1);
  auto* chunk_offset = t.take<std::uint64_t>(chunks + 1);
  auto* keys = t.take<std::int32_t>(2);
  // The chosen stages; the slot fits either integer stage set, so the size
  // query does not depend on the pooling geometry.
  constexpr std::size_t stages_slot = sizeof(stages_t) > sizeof(chosen_stages<pool_window_quantizer>)
                                          ? sizeof(stages_t)
                                          : sizeof(chosen_stages<pool_window_quantizer>);
  auto* stages = reinterpret_cast<stages_t*>(t.take<std::byte>(stages_slot));
  auto* layout = t.take<std::uint64_t>(kernels::layout_words);
  auto* outlier_count = t.take<std::uint64_t>(1);
  auto* index_bytes = t.take<std::uint64_t>(1);
  auto* words = t.take<std::uint32_t>(2);  // [0]: a chunk has too many levels; [1]: the stored form was chosen
  // The outlier index writer's tile counter and look-back words (zeroed together).
  auto* outlier_words = t.take<unsigned long long>(kernels::outlier_write_tiles(n) + 1);
  // single_pass: one look-back word per chunk, then the chunk counter (zeroed together).
  unsigned long long* tile_words = any_single_pass ? t.take<unsigned long long>(chunks + 1) : nullptr;
  std::byte* scratch = nullptr;
  if constexpr (!bitpack) {
    const std::size_t a = find_levels ? level_cut.chunks * level_cut.slot : 0, b = main_cut.chunks * main_cut.slot;
    scratch = t.take<std::byte>(a > b ? a : b);
  }
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
  cudaError_t e =
      cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream);
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
  if (out_capacity < output_capacity<Pipeline, T>(shape, pipe) || !d_out || !d_out_bytes) return cudaErrorInvalidValue;

  // The main stage set's header with the pipeline's chunk size;
  // choose_stages_kernel and header_kernel turn it into the chosen set's
  // (apply_stages: stages, parameters, chunk size and chunk table).
  stream_header h = begin_stream_header<T>(shape, pipe, opt, false);  // device streams carry no checksum
  ::ebac::detail::set_stream_stages<E>(h, main_pred, main_q);
  if constexpr (std::is_same_v<MainQ, pool_window_quantizer>) h.pool = opt.pooling;

  // Every launch that depends on the stages runs once per stage set the
  // tensor can get, gated by the device's choice (kernels/levels.cuh), with
  // that set's cut.
  const auto* chosen_levels = device_member<const std::uint32_t>(stages, offsetof(stages_t, levels));
  const auto* level_q = device_member<const level_quantizer>(stages, offsetof(stages_t, lq));
  const auto* main_qp = device_member<const MainQ>(stages, offsetof(stages_t, q));
  auto for_each_stage_set = [&](auto&& launch) {
    if (find_levels) launch(no_prediction{}, level_q, kernels::stage_gate{chosen_levels, 1u}, level_cut);
    launch(main_pred, main_qp, kernels::stage_gate{find_levels ? chosen_levels : nullptr, 0u}, main_cut);
  };
  // The same for launches that do not depend on the quantizer (they read the codes).
  auto for_each_cut = [&](auto&& launch) {
    for_each_stage_set([&](const auto&, const auto*, kernels::stage_gate gate, const stage_cut& k) {
      if (k.chunks > 0) launch(gate, k);
    });
  };

  const unsigned g = grid_for(n);
  if ((e = cudaMemsetAsync(d_status, 0, sizeof(int), stream)) != cudaSuccess) return e;
  if ((e = cudaMemsetAsync(words, 0, 2 * sizeof(std::uint32_t), stream)) != cudaSuccess) return e;
  // Entries past the chosen set's chunks stay 0: the scan over all of them
  // gives the chosen set's offsets first.
  if ((e = cudaMemsetAsync(chunk_bytes, 0, (chunks + 1) * sizeof(std::uint64_t), stream)) != cudaSuccess) return e;
  if (find_levels) {
    kernels::level_sets_kernel<S>
        <<<static_cast<unsigned>(search_chunks), kernels::level_threads, 0, stream>>>(in, n, C, opt.max_levels, sets, words);
    kernels::level_merge_kernel<0><<<1, kernels::level_merge_threads, 0, stream>>>(sets, search_chunks, words);
  }
  kernels::range_init_kernel<0><<<1, 1, 0, stream>>>(keys);
  if constexpr (floating_element<T>) {
    if (scan_range) kernels::range_kernel<T><<<g, kernels::elementwise_threads, 0, stream>>>(d_in, n, keys);
  }
  kernels::choose_stages_kernel<T, MainQ>
      <<<1, 1, 0, stream>>>(opt.bound, keys, find_levels ? sets : nullptr, main_q, h, stages, layout, d_status);
  if (n > 0 && !fused) {
    for_each_stage_set([&](const auto& pred, const auto* qp, kernels::stage_gate gate, const stage_cut&) {
      using Pv = std::remove_cvref_t<decltype(pred)>;
      using Qv = std::remove_cvref_t<decltype(*qp)>;
      kernels::quantize_kernel<Qv, S><<<g, kernels::elementwise_threads, 0, stream>>>(gate, in, n, qp, field, flags);
      kernels::residual_kernel<Pv><<<g, kernels::elementwise_threads, 0, stream>>>(gate, pred, shape, field, codes, n);
    });
  }

  if constexpr (E::needs_codebook) {  // histograms -> codebook image + the stream's codebook section
    constexpr std::size_t hist_bytes = 2 * std::size_t{huffman_alphabet::size} * sizeof(unsigned long long);
    if ((e = cudaMemsetAsync(hist, 0, hist_bytes, stream)) != cudaSuccess) return e;
    for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
      kernels::huffman_histogram_kernel<0>
          <<<kernels::huffman_blocks(k.chunks), kernels::huffman_threads, 0, stream>>>(gate, codes, n, k.chunk, k.chunks, hist);
    });
    kernels::huffman_lengths_kernel<0><<<2, kernels::codebook_threads, 0, stream>>>(hist, workspace, lengths);
    kernels::huffman_codebook_kernel<0><<<1, kernels::codebook_threads, 0, stream>>>(hist, lengths, image, d_out, layout + 5);
  }

  if (chunks > 0) {
    if constexpr (bitpack) {
      if (any_single_pass &&
          (e = cudaMemsetAsync(tile_words, 0, (chunks + 1) * sizeof(unsigned long long), stream)) != cudaSuccess)
        return e;
      for_each_stage_set([&](const auto& pred, const auto* qp, kernels::stage_gate gate, const stage_cut& k) {
        using Pv = std::remove_cvref_t<decltype(pred)>;
        using Qv = std::remove_cvref_t<decltype(*qp)>;
        if (k.chunks == 0) return;
        const auto blocks = static_cast<unsigned>(k.chunks);
        if (single_pass(k)) {  // size and write in one launch; chunk_bytes / chunk_offset come out of the look-back
          kernels::fused_bitpack_single_pass_kernel<Pv, Qv, S><<<blocks, kernels::fused_threads, 0, stream>>>(
              gate, pred, shape, in, n, k.chunk, qp, flags, tile_words + chunks, tile_words, chunk_bytes, chunk_offset, d_out,
              layout + 5, 4 * k.chunks);
        } else if (fused) {
          kernels::fused_bitpack_size_kernel<Pv, Qv, S>
              <<<blocks, kernels::fused_threads, 0, stream>>>(gate, pred, shape, in, n, k.chunk, qp, flags, chunk_bytes);
        } else {
          kernels::bitpack_size_kernel<0><<<blocks, kernels::bitpack_threads, 0, stream>>>(gate, codes, n, k.chunk, chunk_bytes);
        }
      });
    } else if constexpr (E::needs_codebook) {
      for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
        kernels::huffman_encode_kernel<0><<<kernels::huffman_blocks(k.chunks), kernels::huffman_threads, 0, stream>>>(
            gate, image, codes, n, k.chunk, k.chunks, scratch, k.slot, chunk_bytes);
      });
    } else {
      for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
        kernels::serial_encode_kernel<E>
            <<<grid_for(k.chunks, kernels::serial_coder_threads), kernels::serial_coder_threads, 0, stream>>>(
                gate, E{}, codes, n, k.chunk, k.chunks, scratch, k.slot, chunk_bytes);
      });
    }
    // A single-pass set wrote its offsets; the scan gives the same ones, so
    // it runs whenever the set that may be chosen needs it.
    std::size_t cb = cub_bytes;
    if (any_scan && (e = cub::DeviceScan::ExclusiveSum(cub_temp, cb, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks),
                                                       stream)) != cudaSuccess)
      return e;
  }
  kernels::payload_layout_kernel<0><<<1, 1, 0, stream>>>(h, image, chunk_bytes, chunk_offset, layout);
  // The writers below take their offsets from `layout`: if any launch so far
  // failed, stop before they would read it uninitialized.
  if ((e = cudaPeekAtLastError()) != cudaSuccess) return e;
  if (chunks > 0) {
    if constexpr (bitpack) {
      for_each_stage_set([&](const auto& pred, const auto* qp, kernels::stage_gate gate, const stage_cut& k) {
        using Pv = std::remove_cvref_t<decltype(pred)>;
        using Qv = std::remove_cvref_t<decltype(*qp)>;
        if (k.chunks == 0 || single_pass(k)) return;  // a single-pass set is written already
        const auto blocks = static_cast<unsigned>(k.chunks);
        if (fused) {
          kernels::fused_bitpack_write_kernel<Pv, Qv, S>
              <<<blocks, kernels::fused_threads, 0, stream>>>(gate, pred, shape, in, n, k.chunk, qp, chunk_offset, d_out, layout);
        } else {
          kernels::bitpack_write_kernel<0>
              <<<blocks, kernels::bitpack_threads, 0, stream>>>(gate, codes, n, k.chunk, chunk_offset, d_out, layout);
        }
      });
    } else {
      for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
        kernels::copy_chunks_kernel<0><<<static_cast<unsigned>(k.chunks), kernels::elementwise_threads, 0, stream>>>(
            gate, scratch, k.slot, chunk_bytes, chunk_offset, d_out, layout);
      });
    }
    kernels::chunk_table_kernel<0><<<grid_for(chunks), kernels::elementwise_threads, 0, stream>>>(chunk_bytes, d_out, layout);
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
  if ((e = cudaMemsetAsync(outlier_words, 0, (kernels::outlier_write_tiles(n) + 1) * sizeof(unsigned long long), stream)) !=
      cudaSuccess)
    return e;
  kernels::outlier_index_kernel<0><<<kernels::outlier_write_blocks(n), kernels::outlier_write_threads, 0, stream>>>(
      outlier_index, outlier_count, d_out, layout + 2, index_bytes, outlier_words);
  kernels::outlier_values_kernel<S><<<kernels::outlier_write_blocks(n), kernels::elementwise_threads, 0, stream>>>(
      in, outlier_index, outlier_count, d_out, layout + 2, index_bytes);
  kernels::header_kernel<S, MainQ><<<1, 1, 0, stream>>>(h, stages, image, layout, outlier_count, index_bytes, n,
                                                        opt.store_when_larger, d_out, d_out_bytes, words + 1);
  if (opt.store_when_larger && n > 0)
    kernels::stored_payload_kernel<S><<<g, kernels::elementwise_threads, 0, stream>>>(in, n, d_out + h.header_bytes(), words + 1);
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace cuda
EBAC_NAMESPACE_END
