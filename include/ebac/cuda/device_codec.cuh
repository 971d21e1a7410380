// ebac/cuda/device_codec.cuh - device-scope compress/decompress (the CUB contract).
//
//   size_t temp = 0, cap = ebac::cuda::output_capacity<Pipeline, T>(shape, pipe);
//   ebac::cuda::compress(nullptr, temp, d_in, shape, pipe, opt, nullptr, 0, nullptr, nullptr, stream);      // query
//   ... allocate temp and cap bytes of output (e.g. from PyTorch's caching allocator) ...
//   ebac::cuda::compress(d_temp, temp, d_in, shape, pipe, opt, d_out, cap, d_size, d_status, stream);    // run
//
// No allocation, no synchronization, no host read of a device value: every
// call only enqueues work on `stream`, so it can be captured in a CUDA graph.
// The compressed size goes to device memory (*d_out_bytes); size `d_out` with
// output_capacity() (the coded bound: the stream is assembled in d_out
// before the device knows whether the stored form is smaller). Device
// streams carry no checksum (the header says so); the bytes are otherwise
// identical to the host backend's stream for the same input and settings
// (compress_options::checksum = false).
//
// The stages are chosen per tensor on the device, as the host chooses them
// (quantizer/stage_choice.hpp): a palette of at most opt.max_levels values
// (kernels/levels.cuh: per-chunk level sets, merged by one block, decided
// by one thread), else the pipeline's quantizer for floats (with the top
// level of a 16-bit tensor), exact integers or max-pool window offsets for
// integer and bool tensors. Kernels that depend on the choice are launched
// for both stage sets and the one not chosen returns at once. A stream that
// coding made larger than the raw elements is rewritten on the device as
// the stored form (header_kernel, stored_payload_kernel).
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
#include <ebac/host/codec.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/quantizer/chosen_stages.hpp>
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

/// Whether the fused decoders take a (validated) stream: no prediction, or
/// flat 1-D Lorenzo with a tile of whole 32-code blocks whose chunks decode
/// on their own (format/chunking.hpp's chunks_independent, as the host
/// decoder asks: the tile divides the chunk, or there is one chunk).
/// tile_blocks = tile / 32, or 0 without prediction. Lorenzo along axes
/// decodes staged.
inline bool fused_decode_tile_blocks(const stream_header& h, std::uint64_t& tile_blocks) noexcept {
  tile_blocks = 0;
  if (h.chunk_elements == 0) return false;
  if (h.predictor == predictor_id::none) return true;
  const lorenzo& l = h.lorenzo_params;
  if (h.predictor != predictor_id::lorenzo || l.validate(h.shape) != status::ok || l.dims != 1 || l.axis[0] != lorenzo_flat_axis ||
      !chunks_independent(l, h.shape, h.chunk_elements) || l.tile[0] % 32 != 0)
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

/// Bytes d_out must hold for compress(): the coded stream is assembled in
/// d_out before the device knows whether it is larger than the raw
/// elements, so this is the coded bound (format/max_compressed_bytes.hpp,
/// max_coded_bytes: host-tested against every stream the property tests
/// make), not max_compressed_bytes. The stream compress() leaves there is
/// never larger than max_compressed_bytes (with store_when_larger, the
/// default); a caller who keeps only the stream can copy it to a buffer of
/// that size or of the exact size read back.
template <class Pipeline, element T>
[[nodiscard]] std::size_t output_capacity(const extents& shape, const Pipeline& pipe) noexcept {
  return max_coded_bytes<Pipeline, T>(shape, pipe);
}

namespace detail {

/// A pointer to a member of a struct in device memory (nullptr on a size query).
template <class M, class U>
M* device_member(U* base, std::size_t offset) {
  return base ? reinterpret_cast<M*>(reinterpret_cast<std::byte*>(base) + offset) : nullptr;
}

/// How one stage set cuts the tensor: chunks of its predictor's size
/// (format/chunking.hpp, the size apply_stages writes to the header), and
/// for encoders that code a chunk into a worst-case slot first, the slot.
struct stage_cut {
  std::uint32_t chunk = 0;     ///< elements a chunk
  std::uint64_t chunks = 0;    ///< chunks of the tensor
  std::size_t slot = 0;        ///< worst-case bytes of one coded chunk
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
                                          ? sizeof(stages_t) : sizeof(chosen_stages<pool_window_quantizer>);
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
  if (out_capacity < output_capacity<Pipeline, T>(shape, pipe) || !d_out || !d_out_bytes) return cudaErrorInvalidValue;

  // The main stage set's header with the pipeline's chunk size;
  // choose_stages_kernel and header_kernel turn it into the chosen set's
  // (apply_stages: stages, parameters, chunk size and chunk table).
  stream_header h;
  h.type = dtype_of<T>::value;
  h.mode = opt.bound.mode;
  h.flags = 0;  // device streams carry no checksum
  h.shape = shape;
  h.predictor = MainP::id;
  if constexpr (std::is_same_v<MainP, lorenzo>) h.lorenzo_params = main_pred;
  h.quantizer = MainQ::id;
  h.encoder = E::id;
  h.eb_requested = floating_element<T> ? opt.bound.value : 0.0;
  h.chunk_elements = C;
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
    kernels::level_sets_kernel<S><<<static_cast<unsigned>(search_chunks), kernels::level_threads, 0, stream>>>(in, n, C, opt.max_levels,
                                                                                                              sets, words);
    kernels::level_merge_kernel<0><<<1, kernels::level_merge_threads, 0, stream>>>(sets, search_chunks, words);
  }
  kernels::range_init_kernel<0><<<1, 1, 0, stream>>>(keys);
  if constexpr (floating_element<T>) {
    if (scan_range) kernels::range_kernel<T><<<g, 256, 0, stream>>>(d_in, n, keys);
  }
  kernels::choose_stages_kernel<T, MainQ><<<1, 1, 0, stream>>>(opt.bound, keys, find_levels ? sets : nullptr, main_q, h, stages,
                                                               layout, d_status);
  if (n > 0 && !fused) {
    for_each_stage_set([&](const auto& pred, const auto* qp, kernels::stage_gate gate, const stage_cut&) {
      using Pv = std::remove_cvref_t<decltype(pred)>;
      using Qv = std::remove_cvref_t<decltype(*qp)>;
      kernels::quantize_kernel<Qv, S><<<g, 256, 0, stream>>>(gate, in, n, qp, field, flags);
      kernels::residual_kernel<Pv><<<g, 256, 0, stream>>>(gate, pred, shape, field, codes, n);
    });
  }

  if constexpr (E::needs_codebook) {  // histograms -> codebook image + the stream's codebook section
    constexpr std::size_t hist_bytes = 2 * std::size_t{huffman_alphabet::size} * sizeof(unsigned long long);
    if ((e = cudaMemsetAsync(hist, 0, hist_bytes, stream)) != cudaSuccess) return e;
    for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
      kernels::huffman_histogram_kernel<0><<<kernels::huffman_blocks(k.chunks), kernels::huffman_threads, 0, stream>>>(
          gate, codes, n, k.chunk, k.chunks, hist);
    });
    kernels::huffman_lengths_kernel<0><<<2, kernels::codebook_threads, 0, stream>>>(hist, workspace, lengths);
    kernels::huffman_codebook_kernel<0><<<1, kernels::codebook_threads, 0, stream>>>(hist, lengths, image, d_out, layout + 5);
  }

  if (chunks > 0) {
    if constexpr (bitpack) {
      if (any_single_pass && (e = cudaMemsetAsync(tile_words, 0, (chunks + 1) * sizeof(unsigned long long), stream)) != cudaSuccess)
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
          kernels::fused_bitpack_size_kernel<Pv, Qv, S><<<blocks, kernels::fused_threads, 0, stream>>>(gate, pred, shape, in, n,
                                                                                                       k.chunk, qp, flags, chunk_bytes);
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
        kernels::serial_encode_kernel<E><<<grid_for(k.chunks, 64), 64, 0, stream>>>(gate, E{}, codes, n, k.chunk, k.chunks, scratch,
                                                                                     k.slot, chunk_bytes);
      });
    }
    // A single-pass set wrote its offsets; the scan gives the same ones, so
    // it runs whenever the set that may be chosen needs it.
    std::size_t cb = cub_bytes;
    if (any_scan &&
        (e = cub::DeviceScan::ExclusiveSum(cub_temp, cb, chunk_bytes, chunk_offset, static_cast<std::int64_t>(chunks), stream)) != cudaSuccess)
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
          kernels::fused_bitpack_write_kernel<Pv, Qv, S><<<blocks, kernels::fused_threads, 0, stream>>>(gate, pred, shape, in, n, k.chunk,
                                                                                                        qp, chunk_offset, d_out, layout);
        } else {
          kernels::bitpack_write_kernel<0><<<blocks, kernels::bitpack_threads, 0, stream>>>(gate, codes, n, k.chunk, chunk_offset, d_out,
                                                                                            layout);
        }
      });
    } else {
      for_each_cut([&](kernels::stage_gate gate, const stage_cut& k) {
        kernels::copy_chunks_kernel<0><<<static_cast<unsigned>(k.chunks), 256, 0, stream>>>(gate, scratch, k.slot, chunk_bytes,
                                                                                            chunk_offset, d_out, layout);
      });
    }
    kernels::chunk_table_kernel<0><<<grid_for(chunks), 256, 0, stream>>>(chunk_bytes, d_out, layout);
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
  kernels::outlier_values_kernel<S><<<kernels::outlier_write_blocks(n), 256, 0, stream>>>(in, outlier_index, outlier_count, d_out,
                                                                                           layout + 2, index_bytes);
  kernels::header_kernel<S, MainQ><<<1, 1, 0, stream>>>(h, stages, image, layout, outlier_count, index_bytes, n, opt.store_when_larger,
                                                        d_out, d_out_bytes, words + 1);
  if (opt.store_when_larger && n > 0)
    kernels::stored_payload_kernel<S><<<g, 256, 0, stream>>>(in, n, d_out + h.header_bytes(), words + 1);
  return cudaGetLastError();
}

}  // namespace detail

/// Compresses d_in into d_out (capacity >= output_capacity()); the
/// stream's size goes to *d_out_bytes, a bound that is not finite on this
/// tensor to *d_status. Every dtype: floats under opt.bound, integers and
/// bool losslessly; the stages are chosen on the device as the host
/// chooses them (a level palette, the pipeline's quantizer, exact integers
/// or max-pool offsets), and a stream that coding would make larger than
/// the raw elements is stored (unless opt.store_when_larger is false).
/// `path` picks the kernels of a bit-packing pipeline (see kernel_path).
/// With d_temp == nullptr only sets temp_bytes, which depends on `path`
/// and the options: query with the path and options you run.
template <class Pipeline, element T>
[[nodiscard]] cudaError_t compress(void* d_temp, std::size_t& temp_bytes, const T* d_in, const extents& shape,
                                   const Pipeline& pipe, const compress_options& opt, std::byte* d_out,
                                   std::size_t out_capacity, std::uint64_t* d_out_bytes, int* d_status,
                                   cudaStream_t stream = nullptr, kernel_path path = kernel_path::staged) {
  if (::ebac::detail::compress_argument_error<T>(shape, pipe, opt)) return cudaErrorInvalidValue;  // the host's rules
  std::uint64_t n = 0;
  (void)shape.count(n);
  if ((n + pipe.chunk_elements - 1) / pipe.chunk_elements > max_chunks) return cudaErrorInvalidValue;
  auto run = [&](const auto& main_pred, const auto& main_q) {
    return detail::compress_stages(d_temp, temp_bytes, d_in, shape, pipe, opt, main_pred, main_q, d_out, out_capacity, d_out_bytes,
                                   d_status, stream, path);
  };
  if constexpr (floating_element<T>) {
    return run(pipe.predictor, typename Pipeline::quantizer_type{});  // made on the device from the bound
  } else {
    if (opt.pooling.dims != 0) return run(no_prediction{}, pool_window_quantizer::make(opt.pooling, shape));
    return run(pipe.predictor, exact_quantizer{});
  }
}

/// Decompresses a stream whose (validated, host-side) header is `h`: every
/// dtype, stored streams and every quantizer (stages as the host's
/// with_stream_stages names them). *d_status receives 0 or a device_status
/// code (a lossless quantizer's code out of range: device_corrupt_code).
/// `path` as for compress(); the fused decoder needs no field in temp
/// storage, so the temp size depends on it (query with the same path).
template <element T>
[[nodiscard]] cudaError_t decompress(void* d_temp, std::size_t& temp_bytes, const stream_header& h, const std::byte* d_in,
                                     std::size_t in_bytes, T* d_out, std::uint64_t count, int* d_status,
                                     cudaStream_t stream = nullptr, const device_huffman_codebook* codebook = nullptr,
                                     kernel_path path = kernel_path::staged) {
  using S = storage_t<T>;
  S* const out = reinterpret_cast<S*>(d_out);  // a bool is written as its byte
  const std::uint64_t n = element_count(h);
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = C ? (n + C - 1) / C : 0;
  if (chunks > max_chunks) return cudaErrorInvalidValue;
  // Stage ids this decoder runs (a validated header has them; a caller's own may not).
  const auto encoder = static_cast<std::uint8_t>(h.encoder);
  if (!h.is_stored() && (!quantizer_fits_dtype(h.quantizer, h.type) || encoder < 1 || encoder > 3)) return cudaErrorInvalidValue;
  auto refused = [&] {
    return ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, d_out) ||
           in_bytes != h.section_offset(section_count) + (h.has_checksum() ? 8 : 0) || !d_status || (n > 0 && !d_in);
  };

  if (h.is_stored()) {  // the payload is the raw elements
    detail::temp_carver t(d_temp);
    if (d_temp == nullptr) {
      temp_bytes = t.required();
      return cudaSuccess;
    }
    if (temp_bytes < t.required() || refused()) return cudaErrorInvalidValue;
    cudaError_t e = cudaMemsetAsync(d_status, 0, sizeof(int), stream);
    if (e != cudaSuccess) return e;
    if (h.has_checksum()) kernels::checksum_kernel<0><<<1, 1, 0, stream>>>(d_in, in_bytes, d_status);
    if (n > 0) kernels::stored_values_kernel<S><<<detail::grid_for(n), 256, 0, stream>>>(d_in + h.section_offset(section_payload), n, out);
    return cudaGetLastError();
  }

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
  if (temp_bytes < t.required() || refused() || (h.encoder == encoder_id::huffman && (codebook == nullptr || codebook->image == nullptr)))
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
  ::ebac::host::detail::with_stream_stages<T>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
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
      kernels::fused_values_kernel<Q, S><<<static_cast<unsigned>(chunks), kernels::fused_threads, 0, stream>>>(
          tile_blocks, field, n, C, q, out, d_status);
    } else if (n > 0) {
      kernels::unzigzag_kernel<0><<<detail::grid_for(n), 256, 0, stream>>>(field, n);
      for (int k = pred.passes() - 1; k >= 0; --k) {
        const axis_pass p = pred.pass(h.shape, k);
        kernels::inverse_pass_kernel<0><<<detail::grid_for(p.outer * ((p.extent + p.tile - 1) / p.tile) * p.inner), 256, 0, stream>>>(field, p);
      }
      kernels::reconstruct_kernel<Q, S><<<detail::grid_for(n), 256, 0, stream>>>(field, n, q, out, d_status);
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
    kernels::outlier_place_kernel<S><<<static_cast<unsigned>(outlier_tiles), kernels::outlier_threads, 0, stream>>>(
        outliers, tile_before, tile_sum, outlier_tiles, outlier_count, d_in + h.section_offset(section_outlier_value), out, d_status);
  }
  return cudaGetLastError();
}

}  // namespace cuda
EBAC_NAMESPACE_END
