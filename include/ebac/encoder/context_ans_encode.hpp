// ebac/encoder/context_ans_encode.hpp - context_ans::encode_chunk and its
// parts (shared with the host's encoder of two or four chunks at a time,
// context_ans_encode_x8.hpp): rANS backwards over the chunk's tokens, the
// zero-block bitmap, the raw bits; encoder/context_ans.hpp has the layout.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_functor.hpp>
#include <ebac/encoder/context_ans_model.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

EBAC_HOST_DEVICE std::size_t context_ans::encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
  const std::size_t raw_bytes = put_raw_bits(codes, n, out);
  // rANS backwards from the end of its space, last element first; element
  // i on state i % 4, each state a named variable (a register; an array
  // indexed by i % 4 would live in memory).
  std::byte* p = rans_end(out, n);
  std::byte* const bitmap = clear_bitmap(out, n);
  std::uint32_t x0 = model::state_low, x1 = model::state_low, x2 = model::state_low, x3 = model::state_low;
  // The contexts of the block [b, e) being coded (zeroed only because
  // nvcc takes the lambda's capture of it for a read before it is set).
  std::uint8_t context[context_block] = {};
  std::size_t b = 0;
  auto step = [&](std::size_t i, std::uint32_t& s) EBAC_FORCE_INLINE_LAMBDA {
    detail::context_ans_encode_step(steps[std::size_t{context[i - b]} * model::tokens + model::token(codes[i])], s, p);
  };
  static_assert(model::lanes == 4 && context_block % 4 == 0);
  for (std::size_t e = n; e > 0; e = b) {
    b = (e - 1) / context_block * context_block;
    if (zero_blocks && model::all_zero(codes, b, e)) {
      flag_block(bitmap, b);
      continue;
    }
    model::contexts(codes, b, e, row, classes, diagonal, context);
    // Only the chunk's last block can end inside a round of four.
    std::size_t i = e - e % 4;
    if (e % 4 >= 3) step(i + 2, x2);
    if (e % 4 >= 2) step(i + 1, x1);
    if (e % 4 >= 1) step(i, x0);
    for (; i > b; i -= 4) {
      step(i - 1, x3);
      step(i - 2, x2);
      step(i - 3, x1);
      step(i - 4, x0);
    }
  }
  const std::uint32_t x[model::lanes] = {x0, x1, x2, x3};
  return finish_chunk(out, n, p, x, raw_bytes);
}

EBAC_HOST_DEVICE std::byte* context_ans::rans_end(std::byte* out, std::size_t n) noexcept {
  return out + 4 + bitmap_bytes(n) + rans_capacity(n);
}

EBAC_HOST_DEVICE std::byte* context_ans::clear_bitmap(std::byte* out, std::size_t n) noexcept {
  for (std::size_t k = 0; k < bitmap_bytes(n); ++k) out[4 + k] = std::byte{0};
  return out + 4;
}

EBAC_HOST_DEVICE void context_ans::flag_block(std::byte* bitmap, std::size_t b) noexcept {
  const std::size_t k = b / zero_block;
  bitmap[k / 8] |= static_cast<std::byte>(1u << (k % 8));
}

EBAC_HOST_DEVICE std::size_t context_ans::put_raw_bits(const std::uint32_t* codes, std::size_t n, std::byte* out) noexcept {
  // Eight codes at a time: none of them 32 or more (most of a sparse map)
  // puts nothing; otherwise each puts its bits without a branch on the
  // code or on a full word (a mix of small and large codes would
  // mispredict both): a code below 32 puts 0 bits. put_unbranched's
  // stores stay within max_chunk_bytes: 4 bytes past bits that take at
  // most 30 a code.
  std::byte* const raw = rans_end(out, n);
  detail::bit_writer w{raw};
  for (std::size_t b = 0; b < n; b += 8) {
    const std::size_t e = n - b < 8 ? n : b + 8;
    std::uint32_t any = 0;
    for (std::size_t i = b; i < e; ++i) any |= codes[i];
    if (any < model::direct_tokens) continue;
    for (std::size_t i = b; i < e; ++i) {
      const std::uint32_t v = codes[i];
      const int k = model::raw_bits_of(v);
      w.put_unbranched(v & ((1u << k) - 1u), k);
    }
  }
  return static_cast<std::size_t>(w.finish() - raw);
}

EBAC_HOST_DEVICE std::size_t context_ans::finish_chunk(std::byte* out, std::size_t n, std::byte* p,
                                                       const std::uint32_t (&x)[model::lanes], std::size_t raw_bytes) noexcept {
  std::byte* const raw = rans_end(out, n);
  for (int l = model::lanes; l-- > 0;) {  // the four final states, state 0 first
    p -= 4;
    detail::store_le<std::uint32_t>(p, x[l]);
  }
  const auto rans_bytes = static_cast<std::size_t>(raw - p);
  unsigned flagged = 0;
  for (std::size_t k = 0; k < bitmap_bytes(n); ++k) flagged |= static_cast<unsigned>(out[4 + k]);
  const std::size_t head = 4 + (flagged != 0 ? bitmap_bytes(n) : 0);
  detail::store_le<std::uint32_t>(out, static_cast<std::uint32_t>(rans_bytes) | (flagged != 0 ? bitmap_flag : 0u));
  // Both moves go to lower addresses (the rANS space starts after the
  // bitmap's place), so a forward copy is a memmove.
  for (std::size_t k = 0; k < rans_bytes; ++k) out[head + k] = p[k];
  for (std::size_t k = 0; k < raw_bytes; ++k) out[head + rans_bytes + k] = raw[k];
  return head + rans_bytes + raw_bytes;
}

EBAC_NAMESPACE_END
