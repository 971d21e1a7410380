// ebac/encoder/block_bitpack.hpp - fixed-width packing per block of 32 codes.
//
// Chunk layout: one width byte per block of 32 codes, then the blocks' payloads
// (4 * width bytes each: the 32 codes, zero-padded, packed LSB-first at
// `width` bits). An all-zero block costs its width byte only. Keeping the
// widths apart from the payload lets a decoder find every block's offset with
// a prefix sum over bytes it has already validated.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

EBAC_NAMESPACE_BEGIN

struct block_bitpack {
  static constexpr encoder_id id = encoder_id::block_bitpack;
  static constexpr bool needs_codebook = false;
  static constexpr std::string_view name = "bitpack";
  static constexpr std::size_t block = 32;
  /// Every 32 codes spend at least their width byte.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t n) noexcept {
    return (n + 31) / 32;
  }

  [[nodiscard]] EBAC_HOST_DEVICE static std::size_t blocks(std::size_t n) noexcept { return (n + block - 1) / block; }

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept { return blocks(n) * (1 + 4 * block); }
  /// The same for codes known to fit in `bits` bits: no block is wider.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned bits) const noexcept {
    return blocks(n) * (1 + 4 * std::size_t{bits < 32 ? bits : 32});
  }

  /// Packs 32 codes at a compile-time width; fully unrolled by the compiler.
  template <int W>
  EBAC_HOST_DEVICE static void pack_fixed(const std::uint32_t* codes, std::byte* out) noexcept {
    std::uint64_t acc = 0;
    int bits = 0;
    int word = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC unroll 32
#endif
    for (int i = 0; i < 32; ++i) {
      acc |= static_cast<std::uint64_t>(codes[i]) << bits;
      bits += W;
      if (bits >= 32) {
        detail::store_le<std::uint32_t>(out + 4 * word++, static_cast<std::uint32_t>(acc));
        acc >>= 32;
        bits -= 32;
      }
    }
  }

  template <int W>
  EBAC_HOST_DEVICE static void unpack_fixed(const std::byte* in, std::uint32_t* codes) noexcept {
    constexpr std::uint64_t mask = (W == 32) ? 0xffffffffull : ((1ull << W) - 1);
    std::uint64_t acc = 0;
    int bits = 0;
    int word = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC unroll 32
#endif
    for (int i = 0; i < 32; ++i) {
      if (bits < W) {
        acc |= static_cast<std::uint64_t>(detail::load_le<std::uint32_t>(in + 4 * word++)) << bits;
        bits += 32;
      }
      codes[i] = static_cast<std::uint32_t>(acc & mask);
      acc >>= W;
      bits -= W;
    }
  }

  /// Word l (0 <= l < width) of a block packed at `width` bits (1..32):
  /// bits [32 l, 32 l + 32) of the 32 codes (each < 2^width) laid end to end,
  /// LSB first - what pack_fixed stores at out + 4 l. Lets 32 threads pack a
  /// block in parallel, one word each (cuda/kernels/fused_bitpack.cuh).
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint32_t packed_word(const std::uint32_t* codes, int width, int l) noexcept {
    const int first_bit = 32 * l;
    std::uint64_t acc = 0;
    for (int v = first_bit / width; v < 32 && v * width < first_bit + 32; ++v) {
      const int shift = v * width - first_bit;  // negative for a code that starts in the previous word
      const std::uint64_t c = codes[v];
      acc |= shift >= 0 ? (c << shift) : (c >> -shift);
    }
    return static_cast<std::uint32_t>(acc);
  }

  /// Code v (0 <= v < 32) of a block packed at `width` bits (1..32), read
  /// from its words alone: bits [v width, v width + width) span at most two
  /// words, both inside the block's 4 * width bytes. Lets 32 threads unpack a
  /// block in parallel, one code each (cuda/kernels/fused_bitpack_decode.cuh).
  [[nodiscard]] EBAC_HOST_DEVICE static std::uint32_t code_at(const std::byte* words, int width, int v) noexcept {
    const int first_bit = v * width;
    const int word = first_bit / 32, shift = first_bit % 32;
    std::uint64_t acc = detail::load_le<std::uint32_t>(words + 4 * word);
    if (shift + width > 32) acc |= static_cast<std::uint64_t>(detail::load_le<std::uint32_t>(words + 4 * (word + 1))) << 32;
    const std::uint64_t mask = (width == 32) ? 0xffffffffull : ((1ull << width) - 1);
    return static_cast<std::uint32_t>((acc >> shift) & mask);
  }

  /// Packs one block of `m <= 32` codes at `width` bits; returns bytes written.
  EBAC_HOST_DEVICE static std::size_t pack_block(const std::uint32_t* codes, std::size_t m, int width, std::byte* out) noexcept {
    if (width == 0) return 0;
    std::uint32_t padded[block];
    if (m < block) {
      for (std::size_t i = 0; i < block; ++i) padded[i] = i < m ? codes[i] : 0u;
      codes = padded;
    }
    dispatch_width(width, [&](auto w) { pack_fixed<decltype(w)::value>(codes, out); });
    return 4 * static_cast<std::size_t>(width);
  }

  EBAC_HOST_DEVICE static void unpack_block(const std::byte* in, int width, std::uint32_t* codes, std::size_t m) noexcept {
    if (width == 0) {
      for (std::size_t i = 0; i < m; ++i) codes[i] = 0;
      return;
    }
    if (m == block) {
      dispatch_width(width, [&](auto w) { unpack_fixed<decltype(w)::value>(in, codes); });
      return;
    }
    std::uint32_t full[block];
    dispatch_width(width, [&](auto w) { unpack_fixed<decltype(w)::value>(in, full); });
    for (std::size_t i = 0; i < m; ++i) codes[i] = full[i];
  }

  /// Calls f(std::integral_constant<int, width>) for width in 1..32.
  template <class F>
  EBAC_HOST_DEVICE static void dispatch_width(int width, F&& f) noexcept {
    dispatch_width_impl(width, f, std::make_integer_sequence<int, 33>{});
  }
  template <class F, int... W>
  EBAC_HOST_DEVICE static void dispatch_width_impl(int width, F& f, std::integer_sequence<int, W...>) noexcept {
    (void)((W == width && W > 0 ? (f(std::integral_constant<int, W>{}), true) : false) || ...);
  }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    const std::size_t nb = blocks(n);
    std::byte* payload = out + nb;
    for (std::size_t b = 0; b < nb; ++b) {
      const std::size_t first = b * block;
      const std::size_t m = (n - first < block) ? n - first : block;
      std::uint32_t any = 0;
      for (std::size_t i = 0; i < m; ++i) any |= codes[first + i];
      const int w = detail::bit_width(any);
      out[b] = static_cast<std::byte>(w);
      payload += pack_block(codes + first, m, w, payload);
    }
    return static_cast<std::size_t>(payload - out);
  }

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept {
    const std::size_t nb = blocks(n);
    if (bytes < nb) return status::corrupt_stream;
    std::size_t payload = 0;
    for (std::size_t b = 0; b < nb; ++b) {
      const auto w = static_cast<unsigned>(in[b]);
      if (w > 32) return status::corrupt_stream;
      payload += 4 * w;
    }
    if (payload != bytes - nb) return status::corrupt_stream;
    const std::byte* p = in + nb;
    for (std::size_t b = 0; b < nb; ++b) {
      const std::size_t first = b * block;
      const std::size_t m = (n - first < block) ? n - first : block;
      const int w = static_cast<int>(in[b]);
      unpack_block(p, w, codes + first, m);
      p += 4 * static_cast<std::size_t>(w);
    }
    return status::ok;
  }
};

EBAC_NAMESPACE_END
