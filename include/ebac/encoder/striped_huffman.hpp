// ebac/encoder/striped_huffman.hpp - order-0 Huffman over a small alphabet
// of codes, code buckets and zero runs (encoder/striped_tokens.hpp), its
// tokens dealt round-robin to four bit streams so that the decoder's four
// table lookups do not wait on one another.
//
// Built for speed at a ratio near huffman's: a one-byte-symbol alphabet
// whose codes are at most 11 bits long, so one lookup in a 2048-entry table
// (16 KiB, in L1) decodes any token, raw bits and zero runs included; bit
// streams read and written eight bytes at a time, no per-bit loop. Token t
// of a chunk is in stream t mod 4.
//
// Chunk layout: the byte sizes of streams 0, 1 and 2 (LEB128 varints), then
// the four streams (stream 3 takes the rest). Each stream is LSB-first: per
// token its symbol's code (canonical, codebook in the stream's codebook
// section: encoder/striped_codebook.hpp), then its raw bits. A chunk decodes
// only when its n codes come out, no run passes the chunk's end, and every
// stream ends in its last byte.
//
// Host only: the CUDA backend neither codes nor decodes it
// (cuda::has_device_encoder / has_device_decoder are false: it has a
// codebook and no kernels), and refuses its pipelines and streams.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/striped_codebook.hpp>
#include <ebac/encoder/striped_decode.hpp>
#include <ebac/encoder/striped_tokens.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

EBAC_NAMESPACE_BEGIN

namespace detail {

/// An LSB-first writer that stores eight bytes at a time and keeps fewer
/// than 8 bits pending, so one put() takes up to 56 bits with no branch;
/// 8 bytes at p must be writable on every call.
struct stripe_writer {
  std::byte* p;
  std::uint64_t acc = 0;
  unsigned bits = 0;
  void put(std::uint64_t v, unsigned n) noexcept {  // n <= 49
    acc |= v << bits;
    bits += n;
    store_le<std::uint64_t>(p, acc);
    const unsigned whole = bits >> 3;
    p += whole;
    acc >>= 8 * whole;  // whole <= 7
    bits &= 7u;
  }
  /// The end of the stream: its pending bits were stored with the last put.
  std::byte* finish() const noexcept { return p + (bits > 0 ? 1 : 0); }
};

}  // namespace detail

struct striped_huffman {
  static constexpr encoder_id id = encoder_id::striped_huffman;
  static constexpr bool needs_codebook = true;
  static constexpr std::string_view name = "striped";
  static constexpr unsigned streams = 4;
  /// A zero-run token may cover any number of zeros.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t) noexcept { return 0; }

  const std::uint8_t* length = nullptr;
  const std::uint32_t* code_lsb = nullptr;
  const std::uint64_t* table = nullptr;

  /// Tokens formed at a time (striped_token_reader) by the encoder and its
  /// statistics, in arrays on the stack (2.5 KiB).
  static constexpr std::size_t token_block = 512;

  /// Token counts of a tensor's codes; chunks added in any grouping.
  struct statistics {
    std::vector<std::uint64_t> count = std::vector<std::uint64_t>(striped_alphabet::size, 0);
    void add(const std::uint32_t* codes, std::size_t n) {
      std::uint64_t part[4][striped_alphabet::size] = {};
      std::uint8_t symbol[token_block];
      std::uint32_t extra[token_block];
      striped_token_reader reader{codes, n};
      for (std::size_t got; (got = reader.fill(symbol, extra, token_block)) > 0;) count_into(part, symbol, got);
      merge_parts(part);
    }
    /// The tokens of a chunk already formed (tokenize).
    void add_symbols(const std::uint8_t* symbol, std::size_t k) {
      std::uint64_t part[4][striped_alphabet::size] = {};
      count_into(part, symbol, k);
      merge_parts(part);
    }
    void merge(const statistics& o) {
      for (std::uint32_t s = 0; s < striped_alphabet::size; ++s) count[s] += o.count[s];
    }

   private:
    // Four partial histograms, so that equal neighbours do not wait on each other's increment.
    static void count_into(std::uint64_t (&part)[4][striped_alphabet::size], const std::uint8_t* symbol, std::size_t k) noexcept {
      std::size_t i = 0;
      for (; i + 4 <= k; i += 4) {
        ++part[0][symbol[i]];
        ++part[1][symbol[i + 1]];
        ++part[2][symbol[i + 2]];
        ++part[3][symbol[i + 3]];
      }
      for (; i < k; ++i) ++part[0][symbol[i]];
    }
    void merge_parts(const std::uint64_t (&part)[4][striped_alphabet::size]) {
      for (std::uint32_t s = 0; s < striped_alphabet::size; ++s) count[s] += part[0][s] + part[1][s] + part[2][s] + part[3][s];
    }
  };

  /// Whether a chunk of n codes, their bitwise OR codes_or, fits the kept
  /// token form (tokenize): codes below 2^16 have at most 13 raw bits, and
  /// in a chunk of at most 2^16 codes a zero run's raw bits (its length
  /// less 2^k, below 2^k <= 2^16) fit 16 bits too.
  [[nodiscard]] static constexpr bool keeps(std::size_t n, std::uint32_t codes_or) noexcept {
    return n <= (std::size_t{1} << 16) && codes_or < (1u << 16);
  }
  /// The tokens of a chunk of n codes that keeps(n, OR of the codes): their
  /// symbols into symbol[] and raw bits into extra[] (room for n each);
  /// returns how many. encode_tokens codes them as encode_chunk codes the codes.
  static std::size_t tokenize(const std::uint32_t* codes, std::size_t n, std::uint8_t* symbol, std::uint16_t* extra) noexcept {
    return striped_tokenize_kept(codes, n, symbol, extra);
  }

  using codebook = striped_codebook;
  static codebook learn(const statistics& s) { return striped_codebook::from_histogram(s.count.data()); }
  static striped_huffman bind(const striped_codebook& cb) noexcept {
    return striped_huffman{cb.length.data(), cb.code_lsb.data(), cb.table.data()};
  }

  /// Room for one stream of a chunk of n codes while it is written: at most
  /// ceil(n / 4) tokens of at most 42 bits, and the writer's 8 bytes of slack.
  [[nodiscard]] static constexpr std::size_t stream_room(std::size_t n) noexcept { return (n + streams - 1) / streams * 6 + 16; }
  static constexpr std::size_t size_bytes = 3 * 10;  ///< three varints at most
  [[nodiscard]] std::size_t max_chunk_bytes(std::size_t n) const noexcept { return size_bytes + streams * stream_room(n); }
  [[nodiscard]] std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept { return max_chunk_bytes(n); }

  std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    const std::size_t room = stream_room(n);
    std::byte* const first = out + size_bytes;
    detail::stripe_writer w0{first}, w1{first + room}, w2{first + 2 * room}, w3{first + 3 * room};
    // Tokens a block at a time, in fours, each to its stream: the writers
    // stay in registers. Up to three tokens of a block that are not a whole
    // four move to the front of the next.
    std::uint8_t symbol[token_block];
    std::uint32_t extra[token_block];
    striped_token_reader reader{codes, n};
    std::size_t held = 0;  // tokens at the front of the arrays from the block before
    for (;;) {
      const std::size_t space = token_block - held;
      const std::size_t got = reader.fill(symbol + held, extra + held, space);
      const std::size_t have = held + got, fours = have & ~std::size_t{3};
      put_fours(w0, w1, w2, w3, symbol, extra, fours);
      held = have - fours;
      if (got < space) {  // the chunk's last tokens: at most three, to streams 0, 1, 2
        put_tail(w0, w1, w2, symbol + fours, extra + fours, held);
        break;
      }
      for (std::size_t k = 0; k < held; ++k) symbol[k] = symbol[fours + k], extra[k] = extra[fours + k];
    }
    return finish_chunk(out, room, w0, w1, w2, w3);
  }

  /// A chunk of n codes from its k tokens (tokenize): the bytes encode_chunk
  /// writes for those codes.
  std::size_t encode_tokens(const std::uint8_t* symbol, const std::uint16_t* extra, std::size_t k, std::size_t n,
                            std::byte* out) const noexcept {
    const std::size_t room = stream_room(n);
    std::byte* const first = out + size_bytes;
    detail::stripe_writer w0{first}, w1{first + room}, w2{first + 2 * room}, w3{first + 3 * room};
    const std::size_t fours = k & ~std::size_t{3};
    put_fours(w0, w1, w2, w3, symbol, extra, fours);
    put_tail(w0, w1, w2, symbol + fours, extra + fours, k - fours);
    return finish_chunk(out, room, w0, w1, w2, w3);
  }

  [[nodiscard]] status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes, std::size_t n) const noexcept {
    const std::byte* p = in;
    const std::byte* const end = in + bytes;
    std::uint64_t sizes[streams];
    std::uint64_t used = 0;
    for (unsigned s = 0; s + 1 < streams; ++s) {
      if (!detail::get_varint(p, end, sizes[s]) || sizes[s] > static_cast<std::uint64_t>(end - p)) return status::corrupt_stream;
      used += sizes[s];
    }
    const auto after = static_cast<std::uint64_t>(end - p);
    if (used > after) return status::corrupt_stream;
    sizes[3] = after - used;
    const std::byte* first[streams];
    first[0] = p;
    for (unsigned s = 1; s < streams; ++s) first[s] = first[s - 1] + sizes[s - 1];
    return detail::striped_decode_streams(table, first, sizes, end, codes, n);
  }

 private:
  template <class Extra>
  EBAC_FORCE_INLINE void put(detail::stripe_writer& w, std::uint32_t s, Extra x) const noexcept {
    w.put(code_lsb[s] | (std::uint64_t{x} << length[s]), length[s] + striped_raw_bits[s]);
  }
  /// Tokens 0 .. fours - 1 (a multiple of 4), token t to stream t mod 4.
  template <class Extra>
  EBAC_FORCE_INLINE void put_fours(detail::stripe_writer& w0, detail::stripe_writer& w1, detail::stripe_writer& w2,
                                   detail::stripe_writer& w3, const std::uint8_t* symbol, const Extra* extra,
                                   std::size_t fours) const noexcept {
    for (std::size_t k = 0; k < fours; k += 4) {
      put(w0, symbol[k], extra[k]);
      put(w1, symbol[k + 1], extra[k + 1]);
      put(w2, symbol[k + 2], extra[k + 2]);
      put(w3, symbol[k + 3], extra[k + 3]);
    }
  }
  /// A chunk's last `left` (< 4) tokens, to streams 0, 1, 2.
  template <class Extra>
  EBAC_FORCE_INLINE void put_tail(detail::stripe_writer& w0, detail::stripe_writer& w1, detail::stripe_writer& w2,
                                  const std::uint8_t* symbol, const Extra* extra, std::size_t left) const noexcept {
    if (left > 0) put(w0, symbol[0], extra[0]);
    if (left > 1) put(w1, symbol[1], extra[1]);
    if (left > 2) put(w2, symbol[2], extra[2]);
  }
  /// The sizes, then the streams moved together behind them; the chunk's bytes.
  static std::size_t finish_chunk(std::byte* out, std::size_t room, const detail::stripe_writer& w0,
                                  const detail::stripe_writer& w1, const detail::stripe_writer& w2,
                                  const detail::stripe_writer& w3) noexcept {
    std::byte* const first = out + size_bytes;
    std::byte* const ends[streams] = {w0.finish(), w1.finish(), w2.finish(), w3.finish()};
    std::size_t sizes[streams];
    for (unsigned s = 0; s < streams; ++s) sizes[s] = static_cast<std::size_t>(ends[s] - (first + s * room));
    std::byte* p = out;
    for (unsigned s = 0; s + 1 < streams; ++s) p += detail::put_varint(p, sizes[s]);
    for (unsigned s = 0; s < streams; ++s) {
      std::memmove(p, first + s * room, sizes[s]);
      p += sizes[s];
    }
    return static_cast<std::size_t>(p - out);
  }
};

EBAC_NAMESPACE_END
