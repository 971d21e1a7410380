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
      // Four partial histograms, so that equal neighbours do not wait on each other's increment.
      std::uint64_t part[4][striped_alphabet::size] = {};
      std::uint8_t symbol[token_block];
      std::uint32_t extra[token_block];
      striped_token_reader reader{codes, n};
      for (std::size_t got; (got = reader.fill(symbol, extra, token_block)) > 0;) {
        std::size_t k = 0;
        for (; k + 4 <= got; k += 4) {
          ++part[0][symbol[k]];
          ++part[1][symbol[k + 1]];
          ++part[2][symbol[k + 2]];
          ++part[3][symbol[k + 3]];
        }
        for (; k < got; ++k) ++part[0][symbol[k]];
      }
      for (std::uint32_t s = 0; s < striped_alphabet::size; ++s) count[s] += part[0][s] + part[1][s] + part[2][s] + part[3][s];
    }
    void merge(const statistics& o) {
      for (std::uint32_t s = 0; s < striped_alphabet::size; ++s) count[s] += o.count[s];
    }
  };
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
    auto put = [&](detail::stripe_writer& w, std::size_t k) EBAC_FORCE_INLINE_LAMBDA {
      const std::uint32_t s = symbol[k];
      w.put(code_lsb[s] | (std::uint64_t{extra[k]} << length[s]), length[s] + striped_raw_bits[s]);
    };
    striped_token_reader reader{codes, n};
    std::size_t held = 0;  // tokens at the front of the arrays from the block before
    for (;;) {
      const std::size_t room = token_block - held;
      const std::size_t got = reader.fill(symbol + held, extra + held, room);
      const std::size_t have = held + got, fours = have & ~std::size_t{3};
      for (std::size_t k = 0; k < fours; k += 4) {
        put(w0, k);
        put(w1, k + 1);
        put(w2, k + 2);
        put(w3, k + 3);
      }
      held = have - fours;
      if (got < room) {  // the chunk's last tokens: at most three, to streams 0, 1, 2
        if (held > 0) put(w0, fours);
        if (held > 1) put(w1, fours + 1);
        if (held > 2) put(w2, fours + 2);
        break;
      }
      for (std::size_t k = 0; k < held; ++k) symbol[k] = symbol[fours + k], extra[k] = extra[fours + k];
    }
    std::byte* const ends[streams] = {w0.finish(), w1.finish(), w2.finish(), w3.finish()};
    // The sizes, then the streams moved together behind them.
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
};

EBAC_NAMESPACE_END
