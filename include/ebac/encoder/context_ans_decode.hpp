// ebac/encoder/context_ans_decode.hpp - context_ans::decode_chunk and
// decode_chunk_to (any pointer-like place: the CUDA kernel's interleaved
// warp array), and the checks of a chunk's head and bitmap that the
// eight-lane decoder (context_ans_x8.hpp) shares. A chunk is corrupt unless
// every state ends at its initial value and every byte and raw bit is used.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_functor.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

EBAC_HOST_DEVICE status context_ans::decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                  std::size_t n) const noexcept {
  return decode_chunk_to(in, bytes, codes, n);
}

template <class Codes>
EBAC_HOST_DEVICE status context_ans::decode_chunk_to(const std::byte* in, std::size_t bytes, Codes codes,
                                                     std::size_t n) const noexcept {
  chunk_head h;
  if (!read_head(in, bytes, n, h)) return status::corrupt_stream;
  const std::byte* const bitmap = in + 4;
  const std::size_t head = h.bitmap_length;
  const std::uint64_t rans_bytes = h.rans_bytes;
  const std::byte* p = in + 4 + head + 4 * model::lanes;  // past the states
  const std::byte* const rans_end = in + 4 + head + rans_bytes;
  std::uint32_t x[model::lanes];
  for (int s = 0; s < model::lanes; ++s) x[s] = h.states[s];
  detail::bit_reader r{rans_end, in + bytes};
  std::uint32_t left = 0;  // codes[i - 1], 0 before the first
  // Element i on state s; false for a corrupt chunk.
  auto step = [&](std::size_t i, std::uint32_t& s) EBAC_FORCE_INLINE_LAMBDA -> bool {
    const std::uint32_t c = model::context(left, codes, i, row, classes, diagonal);
    const std::uint32_t slot = s & (model::scale - 1u);
    // The token t with cum[t] <= slot < cum[t + 1], from the one holding
    // the first slot of slot's 64. A context the tensor never had is
    // refused by its first-token entry, not by a load of its own: the
    // check then waits for no memory the step does not read anyway.
    std::uint32_t t = first_token[std::size_t{c} * 256 + (slot >> 6)];
    if (t >= model::tokens) return false;
    const std::uint16_t* cum = cumulative + std::size_t{c} * (model::tokens + 1);
    std::uint32_t above = cum[t + 1];
    while (above <= slot) above = cum[++t + 1];
    const std::uint32_t below = cum[t];
    s = (above - below) * (s >> model::scale_bits) + slot - below;
    while (s < model::state_low) {
      if (p == rans_end) return false;
      s = (s << 8) | static_cast<std::uint32_t>(*p++);
    }
    std::uint32_t v = model::token_base(t);
    if (t >= model::direct_tokens) {
      const int k = model::extra_bits(t);
      v |= r.peek(k);
      r.skip(k);
    }
    codes[i] = v;
    left = v;
    return true;
  };
  // Element i is on state i % 4 (a flagged block, a multiple of four
  // codes, takes no step). On a GPU an array indexed at run time lives in
  // (local) memory: there a round of four names each state, so that each
  // is a register. On the host that form measured 4-12% slower
  // (docs/benchmarks.md), so the host steps one element at a time. The
  // same steps either way.
  static_assert(model::lanes == 4 && zero_block % 4 == 0);
  for (std::size_t b = 0; b < n; b += zero_block) {
    const std::size_t e = n - b < zero_block ? n : b + zero_block;
    if (head > 0 && block_flagged(bitmap, b)) {
      for (std::size_t i = b; i < e; ++i) codes[i] = 0;
      left = 0;
      continue;
    }
#if defined(__CUDA_ARCH__)
    for (std::size_t i = b; i < e; i += 4) {
      if (!step(i, x[0])) return status::corrupt_stream;
      if (i + 1 < e && !step(i + 1, x[1])) return status::corrupt_stream;
      if (i + 2 < e && !step(i + 2, x[2])) return status::corrupt_stream;
      if (i + 3 < e && !step(i + 3, x[3])) return status::corrupt_stream;
    }
#else
    for (std::size_t i = b; i < e; ++i)
      if (!step(i, x[i % model::lanes])) return status::corrupt_stream;
#endif
  }
  for (std::uint32_t s : x)
    if (s != model::state_low) return status::corrupt_stream;
  if (p != rans_end || r.overran()) return status::corrupt_stream;
  // The raw bits end within the last byte, and its unused bits are zero.
  const std::uint64_t consumed_bits =
      static_cast<std::uint64_t>(r.p - rans_end) * 8 + r.phantom_bits - static_cast<std::uint64_t>(r.count);
  if ((consumed_bits + 7) / 8 != bytes - 4 - head - rans_bytes) return status::corrupt_stream;
  if (consumed_bits % 8 != 0 && r.peek(static_cast<int>(8 - consumed_bits % 8)) != 0) return status::corrupt_stream;
  return status::ok;
}
EBAC_HOST_DEVICE bool context_ans::read_head(const std::byte* in, std::size_t bytes, std::size_t n,
                                             chunk_head& h) const noexcept {
  if (bytes < 4) return false;
  const std::uint32_t word = detail::load_le<std::uint32_t>(in);
  h.bitmap_length = (word & bitmap_flag) != 0 ? bitmap_bytes(n) : 0;
  h.rans_bytes = word & ~bitmap_flag;
  if (h.bitmap_length > bytes - 4 || h.rans_bytes < 4 * model::lanes || h.rans_bytes > bytes - 4 - h.bitmap_length) return false;
  if (h.bitmap_length != 0 && !valid_bitmap(in + 4, n)) return false;
  for (int s = 0; s < model::lanes; ++s) {
    h.states[s] = detail::load_le<std::uint32_t>(in + 4 + h.bitmap_length + 4 * s);
    if (h.states[s] < model::state_low || h.states[s] >= (model::state_low << 8)) return false;
  }
  return true;
}

EBAC_HOST_DEVICE bool context_ans::block_flagged(const std::byte* bitmap, std::size_t b) noexcept {
  const std::size_t k = b / zero_block;
  return ((static_cast<unsigned>(bitmap[k / 8]) >> (k % 8)) & 1u) != 0;
}

EBAC_HOST_DEVICE bool context_ans::valid_bitmap(const std::byte* bitmap, std::size_t n) const noexcept {
  if (!zero_blocks) return false;
  const std::size_t m = bitmap_bytes(n), blocks = block_count(n);
  unsigned any = 0;
  for (std::size_t k = 0; k < m; ++k) any |= static_cast<unsigned>(bitmap[k]);
  const unsigned past = blocks % 8 == 0 ? 0u : static_cast<unsigned>(bitmap[m - 1]) >> (blocks % 8);
  return any != 0 && past == 0;
}

EBAC_NAMESPACE_END
