// tests/fuzz/compress_input.hpp - how fuzz_compress reads its input, shared
// with make_seeds so the seeds mean what the target reads.
//
//   byte 0   dtype: f32, f16, bf16, bool, u8, i8, i16, i32, i64 (mod 9)
//   byte 1   rank 1..4 (1 + b mod 4)
//   bytes 2-4 the extents of all axes but the last: 1 + b mod 8 (the last
//            axis takes every remaining element, so it may be 0)
//   byte 5   bound: bit 0 relative, bits 1-7 the exponent; byte 6 the mantissa.
//            Integer dtypes take no bound; for them bit 0 asks for a max-pool
//            geometry (1..3 spatial dims: 1 + (b >> 1) % 3, at most the rank;
//            stride 1 + (b >> 3) % 3, padding (b >> 5) % 2) and byte 6 gives
//            its input sizes (1 + b % 16) and kernel (1 + (b >> 4) % 3).
//            Bool elements are their bytes' low bit (a bool holds 0 or 1).
//   byte 7   pipeline: predictor (none, flat, last 1, last 2, last 3 axes),
//            quantizer (sign, linear), encoder (bitpack, rle, huffman, ans)
//   byte 8   chunk size (32, 64, 96, 1024, 16384), Lorenzo tile (b / 5) and
//            from b / 25 bit 0: choose the predictor per tensor (choose_predictor),
//            bit 1: the quantizer too (choose_quantizer)
//   then     the elements, little-endian raw bits of the dtype
#pragma once

#include <ebac/ebac.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ebac_fuzz {

inline constexpr std::size_t compress_header_bytes = 9;

struct compress_case {
  ebac::dtype type = ebac::dtype::f32;
  ebac::extents shape;
  ebac::error_bound bound;
  ebac::pipeline_spec spec;
  ebac::pool_geometry pooling;         ///< dims == 0: none
  const std::uint8_t* data = nullptr;  ///< the elements' bytes
  std::uint64_t count = 0;             ///< elements
};

/// False when the input is shorter than the header.
inline bool read_compress_case(const std::uint8_t* p, std::size_t size, compress_case& c) {
  if (size < compress_header_bytes) return false;
  static constexpr ebac::dtype types[] = {ebac::dtype::f32, ebac::dtype::f16, ebac::dtype::bf16, ebac::dtype::b8, ebac::dtype::u8,
                                          ebac::dtype::i8,  ebac::dtype::i16, ebac::dtype::i32,  ebac::dtype::i64};
  c.type = types[p[0] % 9];
  const std::size_t elem = ebac::size_of(c.type);
  const std::uint64_t available = (size - compress_header_bytes) / elem;
  const int rank = 1 + p[1] % 4;
  c.shape = ebac::extents{};
  c.shape.rank = rank;
  std::uint64_t outer = 1;
  for (int i = 0; i + 1 < rank; ++i) {
    c.shape.dims[i] = 1 + p[2 + i] % 8;
    outer *= c.shape.dims[i];
  }
  c.shape.dims[rank - 1] = available / outer;
  c.count = outer * c.shape.dims[rank - 1];
  c.data = p + compress_header_bytes;

  // Bound: 2^(e - 40) x (1 + m/256), e in [0, 127]: from 2^-40 to ~2^88 (relative: capped at 1e6, the library's limit).
  c.bound.mode = (p[5] & 1) ? ebac::bound_mode::relative : ebac::bound_mode::absolute;
  c.bound.value = std::ldexp(1.0 + p[6] / 256.0, (p[5] >> 1) - 40);
  if (c.bound.mode == ebac::bound_mode::relative) c.bound.value = std::min(c.bound.value, 1e6);
  c.pooling = ebac::pool_geometry{};
  if (!ebac::is_floating(c.type) && c.type != ebac::dtype::b8 && (p[5] & 1)) {
    c.pooling.dims = static_cast<std::uint32_t>(std::min(1 + (p[5] >> 1) % 3, rank));
    for (std::uint32_t j = 0; j < c.pooling.dims; ++j) {
      c.pooling.input[j] = 1 + p[6] % 16;
      c.pooling.kernel[j] = 1 + (p[6] >> 4) % 3;
      c.pooling.stride[j] = 1 + (p[5] >> 3) % 3;
      c.pooling.padding[j] = (p[5] >> 5) % 2;
      c.pooling.dilation[j] = 1;
    }
  }

  c.spec = ebac::pipeline_spec{};
  const int pred = p[7] % 5, quant = (p[7] / 5) % 2, enc = (p[7] / 10) % 4;
  static constexpr std::uint32_t chunks[] = {32, 64, 96, 1024, 16384};
  static constexpr std::uint32_t tiles[] = {1, 3, 16, 64, 4096};
  c.spec.chunk_elements = chunks[p[8] % 5];
  const std::uint32_t tile = tiles[(p[8] / 5) % 5];
  if (pred == 0) {
    c.spec.predictor = ebac::predictor_id::none;
  } else {
    c.spec.predictor = ebac::predictor_id::lorenzo;
    c.spec.lorenzo_params =
        pred == 1 ? ebac::lorenzo::flat(tile) : ebac::lorenzo::along_last(std::min(pred - 1, rank), rank, tile);
  }
  c.spec.quantizer = quant ? ebac::quantizer_id::linear : ebac::quantizer_id::sign_preserving;
  constexpr ebac::encoder_id encoders[] = {ebac::encoder_id::block_bitpack, ebac::encoder_id::run_length,
                                           ebac::encoder_id::huffman, ebac::encoder_id::context_ans};
  c.spec.encoder = encoders[enc];
  c.spec.choose_predictor = (p[8] / 25) % 2 == 1;
  c.spec.choose_quantizer = (p[8] / 50) % 2 == 1;
  return true;
}

}  // namespace ebac_fuzz
