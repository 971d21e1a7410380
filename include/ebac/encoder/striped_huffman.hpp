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
    refill_near_end();
  }
  /// The last bytes (and zeros past them), one at a time: kept out of line
  /// so that the hot loop holds only the eight-byte path.
#if defined(__GNUC__) || defined(__clang__)
  __attribute__((noinline))
#endif
  void
  refill_near_end() noexcept {
    while (count <= 56) {
      const std::uint64_t b = pos < limit ? static_cast<std::uint64_t>(base[pos]) : 0;
      buf |= b << count;
      ++pos;
      count += 8;
    }
  }
  [[nodiscard]] std::uint64_t consumed_bits() const noexcept { return std::uint64_t{pos} * 8 - count; }
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
    // Every reader may read on to the chunk's end (into the next streams):
    // consumed_bits() against its own size decides at the end.
    // Four named readers, not an array: each stays in registers.
    auto reader = [&](unsigned s) {
      std::uint64_t start = 0;
      for (unsigned k = 0; k < s; ++k) start += sizes[k];
      return detail::stripe_reader{p + start, 0, static_cast<std::size_t>(after - start)};
    };
    detail::stripe_reader r0 = reader(0), r1 = reader(1), r2 = reader(2), r3 = reader(3);
    constexpr std::uint64_t table_mask = (std::uint64_t{1} << striped_alphabet::table_bits) - 1;
    const std::uint64_t* const t = table;
    std::size_t i = 0;
    std::uint64_t bad = 0;
    // One token of reader rd, without a branch on its kind: a literal is
    // stored, a run stores zeros; where 17 codes of room remain, 16 zeros
    // go behind every token (the next tokens overwrite them), so only runs
    // longer than 16 take the fill loop. A run past the chunk's end is cut
    // there and marks the chunk bad.
    auto token = [&](detail::stripe_reader& rd) EBAC_FORCE_INLINE_LAMBDA {
      rd.refill();
      const std::uint64_t e = t[rd.buf & table_mask];
      const auto len = static_cast<unsigned>(e & 0xffu), nextra = static_cast<unsigned>((e >> 8) & 0xffu);
      std::uint64_t v = (e >> 32) + ((rd.buf >> len) & ((std::uint64_t{1} << nextra) - 1));
      rd.buf >>= len + nextra;
      rd.count -= len + nextra;
      const bool run = (e & striped_entry::run_flag) != 0;
      const std::uint64_t room = n - i;
      const bool past = run && v > room;
      bad |= static_cast<std::uint64_t>(len == 0) | static_cast<std::uint64_t>(past);  // bits no code starts with
      v = past ? room : v;
      codes[i] = run ? 0u : static_cast<std::uint32_t>(v);
      const std::size_t step = run ? static_cast<std::size_t>(v) : 1;
      if (room >= 17) {
        std::uint32_t* z = codes + i + 1;
        std::memset(z, 0, 16 * sizeof(std::uint32_t));  // a constant size: two vector stores
        if (step > 17) std::memset(z + 16, 0, (step - 17) * sizeof(std::uint32_t));
      } else if (step > 1) {
        std::memset(codes + i + 1, 0, (step - 1) * sizeof(std::uint32_t));
      }
      i += step;
    };
    while (i < n) {
      token(r0);
      if (i == n) break;
      token(r1);
      if (i == n) break;
      token(r2);
      if (i == n) break;
      token(r3);
      if (bad) return status::corrupt_stream;
    }
    if (bad) return status::corrupt_stream;
    const detail::stripe_reader* const readers[streams] = {&r0, &r1, &r2, &r3};
    for (unsigned s = 0; s < streams; ++s) {  // every stream ends in its last byte
      const std::uint64_t c = readers[s]->consumed_bits();
      if ((c + 7) / 8 != sizes[s]) return status::corrupt_stream;
    }
    return status::ok;
  }
};

EBAC_NAMESPACE_END
