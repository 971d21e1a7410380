// ebac/encoder/huffman_image.hpp - a Huffman codebook as one flat byte image
// (its decode/encode tables, then its serialized form), for copying to
// device memory in one transfer. The `huffman` functor bound to the image's
// address reads exactly what it reads from a huffman_codebook's vectors, so
// the CUDA backend encodes and decodes with the host's functor and tables.
//
// Host code: the CUDA backend packs on the host and uploads
// (ebac/cuda/device_codec.cuh); host tests bind the functor to a host image
// and check that it codes like the codebook itself.
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/huffman.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

EBAC_NAMESPACE_BEGIN

/// Byte offsets of each table in the image (all 4-byte aligned).
struct huffman_image_layout {
  static constexpr std::size_t symbols = huffman_alphabet::size;
  static constexpr std::size_t levels = huffman_alphabet::max_code_length + 2;
  static constexpr std::size_t length = 0;
  static constexpr std::size_t code_lsb = (symbols + 3) / 4 * 4;
  static constexpr std::size_t table = code_lsb + 4 * symbols;
  static constexpr std::size_t sorted = table + 4 * (std::size_t{1} << huffman_alphabet::table_bits);
  static constexpr std::size_t first_code = sorted + 4 * symbols;
  static constexpr std::size_t count = first_code + 4 * levels;
  static constexpr std::size_t offset = count + 4 * levels;
  static constexpr std::size_t serialized = offset + 4 * levels;
  /// Image bytes for any codebook (the serialized part at its upper bound).
  static constexpr std::size_t bytes = serialized + huffman_codebook::max_serialized_bytes;
};

/// A packed codebook: the image to copy and how many serialized bytes it holds.
struct huffman_image {
  std::vector<std::byte> bytes;   ///< huffman_image_layout::bytes long
  std::size_t serialized_bytes = 0;
};

inline huffman_image pack_huffman_image(const huffman_codebook& cb) {
  using L = huffman_image_layout;
  huffman_image img;
  img.bytes.assign(L::bytes, std::byte{0});
  std::byte* b = img.bytes.data();
  auto put = [&](std::size_t at, const void* src, std::size_t n) {
    if (n) std::memcpy(b + at, src, n);
  };
  put(L::length, cb.length.data(), cb.length.size());
  put(L::code_lsb, cb.code_lsb.data(), 4 * cb.code_lsb.size());
  put(L::table, cb.table.data(), 4 * cb.table.size());
  put(L::sorted, cb.sorted.data(), 4 * cb.sorted.size());
  put(L::first_code, cb.first_code, sizeof cb.first_code);
  put(L::count, cb.count, sizeof cb.count);
  put(L::offset, cb.offset, sizeof cb.offset);
  std::vector<std::byte> ser;
  cb.serialize(ser);
  put(L::serialized, ser.data(), ser.size());
  img.serialized_bytes = ser.size();
  return img;
}

/// The functor reading tables at `base` (the image's address in whichever
/// memory the coder runs in).
inline huffman bind_huffman_image(const std::byte* base, bool use_runs) noexcept {
  using L = huffman_image_layout;
  auto u32 = [&](std::size_t at) { return reinterpret_cast<const std::uint32_t*>(base + at); };
  return huffman{use_runs,
                 reinterpret_cast<const std::uint8_t*>(base + L::length),
                 u32(L::code_lsb),
                 u32(L::table),
                 u32(L::sorted),
                 u32(L::first_code),
                 u32(L::count),
                 u32(L::offset)};
}

EBAC_NAMESPACE_END
