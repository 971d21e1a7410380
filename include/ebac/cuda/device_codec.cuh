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
// device image (device_codebook::image) packed on the host from the
// stream's codebook section after huffman_codebook::deserialize validated
// it; the convenience layer (cuda/codec.cuh) does that. The histogram and
// encode kernels run one warp per chunk (32 segments, host-tested to give
// the serial tokens and bytes); so does decoding (32 bit ranges whose lanes
// agree on where their first tokens start: encoder/huffman_lanes.hpp).
//
// The context-modelled ANS encoder (`max`) is decode-only here: its
// codebook is learned on the host, so streams come from host::compress; the
// device decodes them (one thread a chunk runs context_ans::decode_chunk,
// the host's code, over the tables of device_codebook::ans, uploaded the
// same way after context_ans_codebook::deserialize validated them), to the
// host decoder's values, byte for byte.
//
// Layout: the types and limits a caller names are in device_codec_types.cuh;
// the temp carving and kernel launches in dispatch/; block sizes in
// tuning/block_sizes.cuh; the kernels in kernels/. Stages, header and
// stream format are the backend-neutral policies the host backend runs.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/config.hpp>
#include <ebac/cuda/config.cuh>
#include <ebac/cuda/device_codec_types.cuh>
#include <ebac/cuda/dispatch/compress.cuh>
#include <ebac/cuda/dispatch/decompress.cuh>
#include <ebac/dtype.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/pool_window.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {

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
                                   const Pipeline& pipe, const compress_options& opt, std::byte* d_out, std::size_t out_capacity,
                                   std::uint64_t* d_out_bytes, int* d_status, cudaStream_t stream = nullptr,
                                   kernel_path path = kernel_path::staged) {
  if (::ebac::detail::compress_argument_error<T>(shape, pipe, opt)) return cudaErrorInvalidValue;  // the host's rules
  if (pipe.choose_predictor || pipe.choose_quantizer) return cudaErrorNotSupported;  // host-only choices (pipeline.hpp)
  if constexpr (!has_device_encoder<typename Pipeline::encoder_type>) {
    return cudaErrorNotSupported;
  } else {
    std::uint64_t n = 0;
    (void)shape.count(n);
    if ((n + pipe.chunk_elements - 1) / pipe.chunk_elements > max_chunks) return cudaErrorInvalidValue;
    auto run = [&](const auto& main_pred, const auto& main_q) {
      return detail::compress_stages(d_temp, temp_bytes, d_in, shape, pipe, opt, main_pred, main_q, d_out, out_capacity,
                                     d_out_bytes, d_status, stream, path);
    };
    if constexpr (floating_element<T>) {
      return run(pipe.predictor, typename Pipeline::quantizer_type{});  // made on the device from the bound
    } else {
      if (opt.pooling.dims != 0) return run(no_prediction{}, pool_window_quantizer::make(opt.pooling, shape));
      return run(pipe.predictor, exact_quantizer{});
    }
  }
}

/// Decompresses a stream whose (validated, host-side) header is `h`: every
/// dtype, stored streams and every quantizer (stages as the host's
/// with_stream_stages names them). *d_status receives 0 or a device_status
/// code (a lossless quantizer's code out of range: device_corrupt_code).
/// Huffman and ANS streams need `codebook` (device_codebook: the stream's
/// codebook section, validated and uploaded); without it they are refused
/// (cudaErrorInvalidValue). `path` as for compress(); the fused decoder needs no field in temp
/// storage, so the temp size depends on it (query with the same path).
template <element T>
[[nodiscard]] cudaError_t decompress(void* d_temp, std::size_t& temp_bytes, const stream_header& h, const std::byte* d_in,
                                     std::size_t in_bytes, T* d_out, std::uint64_t count, int* d_status,
                                     cudaStream_t stream = nullptr, const device_codebook* codebook = nullptr,
                                     kernel_path path = kernel_path::staged) {
  return detail::decompress_stages(d_temp, temp_bytes, h, d_in, in_bytes, d_out, count, d_status, stream, codebook, path);
}

}  // namespace cuda
EBAC_NAMESPACE_END
