// ebac/encoder/striped_decode.hpp - the striped Huffman decoder
// (encoder/striped_huffman.hpp): a chunk's four bit streams back into its
// codes, with the verdicts docs/format.md gives.
//
// Two loops, the same tokens and the same verdicts:
//  - the fast rounds, one token of each stream a round, while every stream
//    has eight bytes before the chunk's end and 17 codes of room remain:
//    a stream's state is two locals (striped_fast_rounds says why), read
//    with one eight-byte load a token (why: with the readers as objects
//    whose refill was a call, every token loaded and stored them through
//    the stack; and the run-or-code choice as a branch was mispredicted on
//    mixed tokens: 1.2-1.9x slower, docs/benchmarks.md);
//  - the tail, one token at a time through stripe_reader, which reads the
//    last bytes one at a time and zeros past them.
// A token's value or zero run comes out of one lookup in the codebook's
// decode table (encoder/striped_codebook.hpp). The chunk's codes are zeroed
// first (one memset), so a token stores its code and a run moves on over
// zeros; only runs of 18 codes or more take a branch of their own, as do
// bits that start no code (their entry is a run longer than any chunk).
// (16 zeros stored behind every token instead, two 32-byte stores, made
// decompression 1.02-1.17x slower: docs/benchmarks.md.)
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/striped_codebook.hpp>
#include <ebac/encoder/striped_tokens.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

EBAC_NAMESPACE_BEGIN

namespace detail {

/// An LSB-first reader over [base, base + limit): eight bytes a refill where
/// they are there, zeros past the limit (consumed_bits() then tells).
struct stripe_reader {
  const std::byte* base;
  std::size_t pos;
  std::size_t limit;
  std::uint64_t buf = 0;
  unsigned count = 0;
  /// At least 56 bits in buf afterwards.
  void refill() noexcept {
    if (pos + 8 <= limit) {
      buf |= load_le<std::uint64_t>(base + pos) << count;
      pos += (63u - count) >> 3;
      count |= 56u;
      return;
    }
    while (count <= 56) {
      const std::uint64_t b = pos < limit ? static_cast<std::uint64_t>(base[pos]) : 0;
      buf |= b << count;
      ++pos;
      count += 8;
    }
  }
  [[nodiscard]] std::uint64_t consumed_bits() const noexcept { return std::uint64_t{pos} * 8 - count; }
};

/// What one decode-table lookup gives: the token's value (a code) or run
/// length, all ones in `run` for a run (else 0), its code's length (0: its
/// bits start no code) and the bits it takes. Masks, not a bool: a run and a
/// code are stored without a branch on which it is (mispredicted on mixed
/// tokens; with a bool, GCC 12 branched on it, and decoding at rel 1e-1 and
/// 1e-2 ran at 0.7-0.9x the speed).
struct striped_lookup {
  std::uint64_t value;
  std::uint64_t run;
  unsigned length;
  unsigned bits;
  /// The code stored where the token starts (0 for a run) and how many codes it covers.
  [[nodiscard]] std::uint32_t code() const noexcept { return static_cast<std::uint32_t>(value & ~run); }
  [[nodiscard]] std::uint64_t taken() const noexcept { return ((value - 1) & run) + 1; }
};

/// The token at the front of `next` (the stream's next 64 bits, at least the
/// 42 a token may take), its table entry found from `front`: the same bits,
/// at least table_bits of them (the fast rounds' w).
EBAC_FORCE_INLINE_LAMBDA inline striped_lookup striped_look_up(const std::uint64_t* table, std::uint64_t front,
                                                               std::uint64_t next) noexcept {
  constexpr std::uint64_t table_mask = (std::uint64_t{1} << striped_alphabet::table_bits) - 1;
  const std::uint64_t e = table[front & table_mask];
  const auto len = static_cast<unsigned>(e & 0xffu), nextra = static_cast<unsigned>((e >> 8) & 0xffu);
  const std::uint64_t value = (e >> 32) + ((next >> len) & ((std::uint64_t{1} << nextra) - 1));
  return {value, std::uint64_t{0} - ((e >> 16) & 1u), len, static_cast<unsigned>((e >> 24) & 0xffu)};
}

/// The token at the front of `next`, its entry found from the same bits.
EBAC_FORCE_INLINE_LAMBDA inline striped_lookup striped_look_up(const std::uint64_t* table, std::uint64_t next) noexcept {
  return striped_look_up(table, next, next);
}

/// Stores token k at out, [out, end) its room (out < end), and returns where
/// the next token goes: the codes behind it are zeros already. With 17 codes
/// of room (`roomy`) only a run longer than 17 takes the branch that checks
/// the room: out + taken is the one chain that runs through every token of
/// every stream, and the room as a clamp on it (a compare and a select a
/// token) made a decode 1.1-1.25x slower at rel 1e-2 and 1e-4. A run past
/// the room, or bits that start no code (their table entry is such a run:
/// striped_entry::invalid), is cut at the end and sets `bad`.
template <bool roomy>
EBAC_FORCE_INLINE_LAMBDA inline std::uint32_t* striped_store(std::uint32_t* out, const striped_lookup& k, std::uint32_t* end,
                                                             bool& bad) noexcept {
  *out = k.code();
  std::uint64_t taken = k.taken();
  if (taken > (roomy ? 17u : 1u)) [[unlikely]] {
    const auto room = static_cast<std::uint64_t>(end - out);
    if (taken > room || k.length == 0) bad = true, taken = std::min(taken, room);
  }
  return out + taken;
}

/// The fast loop (see the header) over a chunk of `bytes` bytes at `in`:
/// bit[s] is where stream s's next token starts (in bits from `in`), out
/// where its code goes, in [.., end). Returns whose turn it is where it
/// stops (bit[] and out moved on): once a stream is within eight bytes of
/// the chunk's end, or fewer than 17 codes of room remain.
inline unsigned striped_fast_rounds(const std::uint64_t* table, const std::byte* in, std::size_t bytes, std::uint64_t bit[4],
                                    std::uint32_t*& out_io, std::uint32_t* end, bool& bad) noexcept {
  if (bytes < 8 || end - out_io < 17) return 0;
  // Locals only: a member or a referenced variable would be reloaded after
  // every store of a code (which may alias it).
  //
  // A stream's state is two locals: b, the bit where its next token starts,
  // and w, the stream's bits from b on, at least table_bits of them: the
  // bits of the load at the token before, shifted past it. The lookup reads
  // w while the load at b runs beside it for the token's raw bits, so one
  // token's lookup waits for the one before's lookup and a shift, not for a
  // load at the bit position that lookup gave as well.
  static_assert(64 - 7 - striped_alphabet::max_token_bits >= striped_alphabet::table_bits,
                "a load's bits past the longest token must index the decode table");
  std::uint64_t b0 = bit[0], b1 = bit[1], b2 = bit[2], b3 = bit[3];
  std::uint32_t* out = out_io;
  std::uint32_t* const out_last = end - 17;                     // a token at out_last or before has 17 codes of room
  const std::uint64_t last_bit = std::uint64_t{bytes - 8} * 8;  // an 8-byte load at this bit's byte ends at the chunk's end
  auto bits_at = [&](std::uint64_t b) EBAC_FORCE_INLINE_LAMBDA {
    return load_le<std::uint64_t>(in + (b >> 3)) >> (b & 7u);  // at least 57 bits
  };
  // The first round's check before the first loads: a stream may start within eight bytes of the end.
  if (std::max(std::max(b0, b1), std::max(b2, b3)) > last_bit) return 0;
  std::uint64_t w0 = bits_at(b0), w1 = bits_at(b1), w2 = bits_at(b2), w3 = bits_at(b3);
  bool invalid = false;
  auto step = [&](std::uint64_t& b, std::uint64_t& w) EBAC_FORCE_INLINE_LAMBDA {
    const std::uint64_t next = bits_at(b);
    const striped_lookup k = striped_look_up(table, w, next);
    b += k.bits;
    w = next >> k.bits;  // at least 57 - 42 bits
    out = striped_store<true>(out, k, end, invalid);
  };
  unsigned turn = 0;
  // A token moves a stream on by at most 42 bits: one check of all four a round.
  while (std::max(std::max(b0, b1), std::max(b2, b3)) <= last_bit) {
    if (out > out_last) break;
    step(b0, w0);
    if (out > out_last) {
      turn = 1;
      break;
    }
    step(b1, w1);
    if (out > out_last) {
      turn = 2;
      break;
    }
    step(b2, w2);
    if (out > out_last) {
      turn = 3;
      break;
    }
    step(b3, w3);
  }
  bit[0] = b0, bit[1] = b1, bit[2] = b2, bit[3] = b3;
  out_io = out;
  bad |= invalid;
  return turn;
}

/// The tokens after the fast rounds, one at a time from stream `turn`'s,
/// through readers that read the last bytes one at a time and zeros past
/// them.
inline std::uint32_t* striped_tail(const std::uint64_t* table, stripe_reader r[4], unsigned turn, std::uint32_t* out,
                                   std::uint32_t* end, bool& bad) noexcept {
  while (out < end) {
    stripe_reader& rd = r[turn];
    rd.refill();
    const striped_lookup k = striped_look_up(table, rd.buf);
    rd.buf >>= k.bits;
    rd.count -= k.bits;
    out = end - out >= 17 ? striped_store<true>(out, k, end, bad) : striped_store<false>(out, k, end, bad);
    turn = (turn + 1) & 3u;
  }
  return out;
}

/// Decodes a chunk's four streams (sizes[s] bytes each, stream s at
/// first[s], all within [first[0], end)) into codes[0, n); status::ok only
/// when every code came out, no run passed the chunk's end, every token's
/// bits started a code and every stream ended in its last byte.
[[nodiscard]] inline status striped_decode_streams(const std::uint64_t* table, const std::byte* const first[4],
                                                   const std::uint64_t sizes[4], const std::byte* end, std::uint32_t* codes,
                                                   std::size_t n) noexcept {
  const std::byte* const in = first[0];
  const auto bytes = static_cast<std::size_t>(end - in);
  std::uint64_t start[4], bit[4];
  for (unsigned s = 0; s < 4; ++s) bit[s] = start[s] = std::uint64_t{8} * static_cast<std::uint64_t>(first[s] - in);
  if (n != 0) std::memset(codes, 0, n * sizeof(std::uint32_t));  // a run's codes (striped_store); codes may be null for none
  std::uint32_t* out = codes;
  bool bad = false;
  const unsigned turn = striped_fast_rounds(table, in, bytes, bit, out, codes + n, bad);
  stripe_reader r[4];
  for (unsigned s = 0; s < 4; ++s) {  // each reader where its stream's next token starts
    r[s] = stripe_reader{in, static_cast<std::size_t>(bit[s] >> 3), bytes};
    r[s].refill();
    const auto skip = static_cast<unsigned>(bit[s] & 7u);
    r[s].buf >>= skip;
    r[s].count -= skip;
  }
  striped_tail(table, r, turn, out, codes + n, bad);
  if (bad) return status::corrupt_stream;
  for (unsigned s = 0; s < 4; ++s)  // every stream ends in its last byte
    if ((r[s].consumed_bits() - start[s] + 7) / 8 != sizes[s]) return status::corrupt_stream;
  return status::ok;
}

}  // namespace detail

EBAC_NAMESPACE_END
