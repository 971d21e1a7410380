// ebac/encoder/huffman_image.hpp - a Huffman codebook as one flat byte image
// (its flags, decode/encode tables, then its serialized form), for building
// or copying in device memory. The `huffman` functor bound to the image's
// address reads exactly what it reads from a huffman_codebook's vectors, so
// the CUDA backend encodes and decodes with the host's functor and tables.
//
// huffman_write_image() fills an image from code lengths; the host packs
// codebooks with it (pack_huffman_image: decompression uploads the stream's
// validated codebook this way), and the CUDA backend runs the same function
// on the device after building the lengths there (cuda/kernels/huffman_codebook.cuh).
// Host tests bind the functor to a host image and check that it codes like
// the codebook itself.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/huffman.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN

/// Byte offsets of each part of the image (tables 4-byte aligned, the
/// serialized size 8-byte aligned; the image itself must be 8-byte aligned).
struct huffman_image_layout {
  static constexpr std::size_t symbols = huffman_alphabet::size;
  static constexpr std::size_t levels = huffman_alphabet::max_code_length + 2;
  static constexpr std::size_t flags = 0;            // u32: bit 0 = use_runs
  static constexpr std::size_t serialized_size = 8;  // u64: bytes of the serialized part
  static constexpr std::size_t length = 16;
  static constexpr std::size_t code_lsb = length + (symbols + 3) / 4 * 4;
  static constexpr std::size_t table = code_lsb + 4 * symbols;
  static constexpr std::size_t sorted = table + 4 * (std::size_t{1} << huffman_alphabet::table_bits);
  static constexpr std::size_t first_code = sorted + 4 * symbols;
  static constexpr std::size_t count = first_code + 4 * levels;
  static constexpr std::size_t offset = count + 4 * levels;
  static constexpr std::size_t serialized = offset + 4 * levels;
  /// Image bytes for any codebook (the serialized part at its upper bound).
  static constexpr std::size_t bytes = serialized + huffman_codebook::max_serialized_bytes;
};

/// Writes the image of the codebook with code lengths length[0, size) to
/// `image` (huffman_image_layout::bytes, 8-byte aligned). Returns the
/// serialized part's size, or 0 if the lengths are not a valid code (then
/// the image is not usable). Every thread of a device block calls this (Exec
/// says who runs what, as in huffman_choose_lengths).
EBAC_EXEC_CHECK_DISABLE
template <class Exec>
EBAC_HOST_DEVICE std::size_t huffman_write_image(Exec& ex, const std::uint8_t* length, bool use_runs, std::byte* image) {
  using L = huffman_image_layout;
  auto u32 = [image](std::size_t at) { return reinterpret_cast<std::uint32_t*>(image + at); };
  auto* len = reinterpret_cast<std::uint8_t*>(image + L::length);
  ex.for_each(static_cast<std::uint32_t>(L::code_lsb - L::length),
              [&](std::uint32_t s) { len[s] = s < L::symbols ? length[s] : 0; });
  ex.for_each(static_cast<std::uint32_t>(L::symbols), [&](std::uint32_t s) { u32(L::code_lsb)[s] = 0; });
  ex.for_each(1u << huffman_alphabet::table_bits, [&](std::uint32_t t) { u32(L::table)[t] = 0; });
  ex.serial([&] {
    std::uint64_t ser = 0;
    if (detail::huffman_assign_codes(len, u32(L::code_lsb), u32(L::sorted), u32(L::first_code), u32(L::count), u32(L::offset)))
      ser = detail::huffman_serialize(len, use_runs, image + L::serialized);
    detail::store_le<std::uint32_t>(image + L::flags, use_runs ? 1u : 0u);
    detail::store_le<std::uint32_t>(image + L::flags + 4, 0u);
    detail::store_le<std::uint64_t>(image + L::serialized_size, ser);
  });
  const auto ser = static_cast<std::size_t>(detail::load_le<std::uint64_t>(image + L::serialized_size));
  if (ser != 0)  // symbols fill disjoint table entries
    ex.for_each(static_cast<std::uint32_t>(L::symbols),
                [&](std::uint32_t s) { detail::huffman_fill_table(s, len, u32(L::code_lsb), u32(L::table)); });
  return ser;
}

/// A packed codebook: the image to copy and how many serialized bytes it holds.
struct huffman_image {
  std::vector<std::byte> bytes;  ///< huffman_image_layout::bytes long
  std::size_t serialized_bytes = 0;
  [[nodiscard]] const std::byte* data() const noexcept { return bytes.data(); }
};

inline huffman_image pack_huffman_image(const huffman_codebook& cb) {
  using L = huffman_image_layout;
  std::vector<std::uint8_t> len(cb.length);
  len.resize(L::symbols, 0);
  // 8-byte aligned storage, returned as bytes.
  std::vector<std::uint64_t> storage((L::bytes + 7) / 8, 0);
  auto* base = reinterpret_cast<std::byte*>(storage.data());
  huffman_image img;
  detail::huffman_host_exec ex;
  img.serialized_bytes = huffman_write_image(ex, len.data(), cb.use_runs, base);
  if (img.serialized_bytes == 0)
    detail::fail(status::invalid_argument, "pack_huffman_image: the codebook's lengths are not a prefix code");
  img.bytes.assign(base, base + L::bytes);
  return img;
}

/// The functor reading the image at `base` (the image's address in whichever
/// memory the coder runs in; on the device, called inside the kernel).
EBAC_HOST_DEVICE huffman bind_huffman_image(const std::byte* base) noexcept {
  using L = huffman_image_layout;
  auto u32 = [&](std::size_t at) { return reinterpret_cast<const std::uint32_t*>(base + at); };
  return huffman{(detail::load_le<std::uint32_t>(base + L::flags) & 1u) != 0,
                 reinterpret_cast<const std::uint8_t*>(base + L::length),
                 u32(L::code_lsb),
                 u32(L::table),
                 u32(L::sorted),
                 u32(L::first_code),
                 u32(L::count),
                 u32(L::offset)};
}

EBAC_NAMESPACE_END
