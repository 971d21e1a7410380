// ebac/cuda/device_codec_types.cuh - the device-scope API's types and limits.
//
// What a caller of cuda/device_codec.cuh names besides the calls
// themselves: which kernels run a bit-packing pipeline, which encoders the
// device codes and decodes, a stream's codebook in device memory (Huffman's
// image, the ANS tables), the chunk limit and the output capacity.
#pragma once

#include <ebac/config.hpp>
#include <ebac/cuda/config.cuh>
#include <ebac/dtype.hpp>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/max_compressed_bytes.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {

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
/// predictors always run staged. ANS streams (decode only): `staged` runs
/// one thread a chunk over the tables in global memory, `fused` and
/// `single_pass` the same decoder with the tables in shared memory and a
/// warp's codes interleaved (kernels/ans_decode.cuh). On the first GPU run
/// (an H200, docs/cuda.md) the fused paths gave the staged bytes and were
/// faster on 1 GiB tensors (not on every small one, nor for ANS in chunks
/// of 2^14); `staged` stays the default until the GPU tests of the fused
/// decoders on damaged streams have run.
enum class kernel_path : std::uint8_t { staged, fused, single_pass };

/// Whether the CUDA backend compresses with encoder E: every encoder without
/// a codebook (one thread a chunk runs its encode_chunk) and Huffman (its
/// codebook built on the device). The context-modelled ANS encoder
/// (encoder/context_ans.hpp) is not: its codebook is learned on the host
/// (context_ans::learn weighs eight context sets), so device compression
/// refuses it with cudaErrorNotSupported (status::unsupported from codec.cuh).
template <class E>
inline constexpr bool has_device_encoder = !E::needs_codebook || std::is_same_v<E, huffman>;

/// Whether the CUDA backend decodes encoder E's streams: every encoder the
/// device compresses with, and the ANS encoder (one thread a chunk runs the
/// host's decode_chunk over the stream's tables in device memory), so a
/// stream compressed on the host decodes on the device.
template <class E>
inline constexpr bool has_device_decoder = has_device_encoder<E> || std::is_same_v<E, context_ans>;

/// The same for a stream header's encoder id.
[[nodiscard]] inline bool has_device_decoder_for(encoder_id id) noexcept {
  return ::ebac::detail::encoder_property(id, false, [](auto t) { return has_device_decoder<typename decltype(t)::type>; });
}

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
  if (h.predictor != predictor_id::lorenzo || l.validate(h.shape) != status::ok || l.dims != 1 ||
      l.axis[0] != lorenzo_flat_axis || !chunks_independent(l, h.shape, h.chunk_elements) || l.tile[0] % 32 != 0)
    return false;
  tile_blocks = l.tile[0] / 32;
  return true;
}

/// A stream's codebook in device memory, for decompression: for Huffman,
/// the image of pack_huffman_image() at `image` (huffman_image_layout::bytes,
/// 8-byte aligned); for the ANS encoder, `ans` bound to the tables of a
/// validated context_ans_codebook copied to the device (its pointers are
/// device pointers). cuda/codec.cuh's detail::upload_codebook makes either
/// from the stream's codebook section.
struct device_codebook {
  const std::byte* image = nullptr;  // Huffman
  context_ans ans{};                 // ANS: freq, cumulative, steps and first_token in device memory
};
/// The name of device_codebook before it held the ANS tables too.
using device_huffman_codebook = device_codebook;

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

}  // namespace cuda
EBAC_NAMESPACE_END
