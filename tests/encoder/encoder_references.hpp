// tests/encoder/encoder_references.hpp - code sets, reference decoders written from
// docs/format.md, and the round-trip/truncation/mutation check, shared by the
// tests of the encoder headers (tests/encoder/*.cpp).
//
// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
#pragma once

#include "../host/test_support.hpp"

#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/pipeline.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using namespace ebac_test;
namespace A = ebac::huffman_alphabet;

namespace {

struct code_set {
  std::string name;
  std::vector<std::uint32_t> codes;
};

inline std::vector<std::size_t> sizes() { return {0, 1, 2, 31, 32, 33, 63, 64, 65, 1000, 4096, 16384, 65537}; }

inline std::vector<code_set> code_sets(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<code_set> out;
  for (std::size_t n : sizes()) {
    const std::string sn = "n=" + std::to_string(n);
    auto gen = [&](const std::string& kind, auto&& f) {
      code_set c{kind + " " + sn, std::vector<std::uint32_t>(n)};
      for (std::size_t i = 0; i < n; ++i) c.codes[i] = f(i);
      out.push_back(std::move(c));
    };
    gen("all-zero", [](std::size_t) { return 0u; });
    gen("all-ones", [](std::size_t) { return 1u; });
    gen("sparse", [&](std::size_t) { return (rng() % 20 == 0) ? static_cast<std::uint32_t>(1 + rng() % 50) : 0u; });
    std::geometric_distribution<std::uint32_t> geo(0.3);
    gen("geometric", [&](std::size_t) { return geo(rng); });
    std::geometric_distribution<std::uint32_t> geo_slow(0.002);
    gen("geometric-wide", [&](std::size_t) { return geo_slow(rng); });  // some above 4095: escapes
    gen("huge", [&](std::size_t) { return static_cast<std::uint32_t>(rng()); });
    gen("max", [](std::size_t) { return 0xffffffffu; });
    gen("literal-edge", [&](std::size_t i) { return (i % 3 == 0) ? 4095u : (i % 3 == 1 ? 4096u : 4094u); });
    gen("mostly-small-some-huge", [&](std::size_t) {
      return (rng() % 100 == 0) ? static_cast<std::uint32_t>(rng() | 0x80000000u) : static_cast<std::uint32_t>(rng() % 4);
    });
    gen("long-runs", [&, run = std::size_t{0}, val = 0u](std::size_t) mutable {
      if (run == 0) {
        run = 1 + rng() % 300;
        val = (rng() % 3 == 0) ? static_cast<std::uint32_t>(1 + rng() % 9) : 0u;
      }
      --run;
      return val;
    });
    gen("one-nonzero-at-end", [n](std::size_t i) { return i + 1 == n ? 12345u : 0u; });
  }
  return out;
}

/// Truncation lengths to try: all of them for small chunks, a sample otherwise.
inline std::vector<std::size_t> truncations(std::size_t bytes, std::mt19937_64& rng) {
  std::vector<std::size_t> v;
  if (bytes <= 3000) {
    for (std::size_t l = 0; l < bytes; ++l) v.push_back(l);
  } else {
    for (std::size_t l = 0; l < 16; ++l) v.push_back(l);
    for (std::size_t l = bytes - 32; l < bytes; ++l) v.push_back(l);
    for (int i = 0; i < 40; ++i) v.push_back(rng() % bytes);
  }
  return v;
}

inline std::unique_ptr<std::byte[]> exact_copy(const std::byte* p, std::size_t n) {
  std::unique_ptr<std::byte[]> b(new std::byte[n]);
  if (n) std::memcpy(b.get(), p, n);
  return b;
}

// --- Reference decoders -------------------------------------------------
// What a chunk payload decodes to, written from docs/format.md ("chunk
// payloads", "codebook") without the library's decoders: the codes, or
// nullopt where the format has no decoding (wrong size, a code that is not
// in the codebook, a run past the chunk, bytes left over, a read past the
// end). The library's decoders must agree on every input, damaged or not.

using ref_codes = std::optional<std::vector<std::uint32_t>>;

/// Bit k of a little-endian, LSB-first bit stream.
inline unsigned ref_bit(const std::byte* in, std::uint64_t k) { return (static_cast<unsigned>(in[k / 8]) >> (k % 8)) & 1u; }

/// An unsigned LEB128 varint of at most 64 bits.
inline bool ref_varint(const std::byte* in, std::size_t bytes, std::size_t& pos, std::uint64_t& v) {
  v = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos == bytes) return false;
    const auto b = static_cast<std::uint64_t>(in[pos++]);
    if (i == 9 && b > 1) return false;  // bits past 64
    v |= (b & 0x7f) << (7 * i);
    if (!(b & 0x80)) return true;
  }
  return false;
}

/// Block bit-packing: a width byte (0..32) per block of 32 codes, then each
/// block's 32 codes at that width, LSB first, in 4 x width bytes.
inline ref_codes reference_decode(const ebac::block_bitpack&, const std::byte* in, std::size_t bytes, std::size_t n) {
  const std::size_t nb = (n + 31) / 32;
  if (bytes < nb) return std::nullopt;
  std::size_t total = nb;
  for (std::size_t b = 0; b < nb; ++b) {
    const auto w = static_cast<std::size_t>(in[b]);
    if (w > 32) return std::nullopt;
    total += 4 * w;
  }
  if (total != bytes) return std::nullopt;
  std::vector<std::uint32_t> out(n);
  const std::byte* block = in + nb;
  for (std::size_t b = 0; b < nb; ++b) {
    const auto w = static_cast<unsigned>(in[b]);
    for (std::size_t v = 0; v < 32 && 32 * b + v < n; ++v) {
      const std::uint64_t k0 = v * w;
      std::uint64_t acc = 0;
      for (std::uint64_t byte = k0 / 8; w > 0 && byte <= (k0 + w - 1) / 8; ++byte)
        acc |= static_cast<std::uint64_t>(block[byte]) << (8 * (byte - k0 / 8));
      out[32 * b + v] = static_cast<std::uint32_t>((acc >> (k0 % 8)) & ((std::uint64_t{1} << w) - 1));
    }
    block += 4 * w;
  }
  return out;
}

/// Zero-run-length: a token byte r << 4 | c; r == 15: 15 + a varint zeros,
/// else r zeros; then, unless the chunk is complete (and then c must be 0),
/// one code c + 1 (c == 15: 16 + a varint, at most 2^32 - 1).
inline ref_codes reference_decode(const ebac::run_length&, const std::byte* in, std::size_t bytes, std::size_t n) {
  std::vector<std::uint32_t> out(n);
  std::size_t pos = 0, i = 0;
  while (i < n) {
    if (pos == bytes) return std::nullopt;
    const auto token = static_cast<unsigned>(in[pos++]);
    std::uint64_t run = token >> 4;
    if (run == 15) {
      std::uint64_t extra;
      if (!ref_varint(in, bytes, pos, extra) || extra > n) return std::nullopt;
      run += extra;
    }
    if (run > n - i) return std::nullopt;
    for (std::uint64_t k = 0; k < run; ++k) out[i++] = 0;
    if (i == n) {
      if ((token & 15u) != 0) return std::nullopt;
      break;
    }
    std::uint64_t code = (token & 15u) + 1;
    if (code == 16) {
      std::uint64_t extra;
      if (!ref_varint(in, bytes, pos, extra) || extra > 0xffffffffull - 16) return std::nullopt;
      code += extra;
    }
    out[i++] = static_cast<std::uint32_t>(code);
  }
  if (pos != bytes) return std::nullopt;
  return out;
}

/// Canonical Huffman from code lengths alone: within a length, codes count
/// up in symbol order; the first code of length L + 1 is (first(L) +
/// count(L)) << 1. Codes are written MSB first into the LSB-first stream.
struct reference_huffman {
  std::vector<std::uint32_t> symbols[A::max_code_length + 1];  // by length, increasing
  std::uint64_t first[A::max_code_length + 1] = {};

  explicit reference_huffman(const std::uint8_t* length) {
    for (std::uint32_t s = 0; s < A::size; ++s)
      if (length[s]) symbols[length[s]].push_back(s);
    std::uint64_t code = 0;
    for (int l = 1; l <= A::max_code_length; ++l) {
      first[l] = code;
      code = (code + symbols[l].size()) << 1;
    }
  }

  /// Reads the token at bit `pos` of in[0, end bits): literals 0..4095 are
  /// one code; symbol 4096 + k - 1 then k bits is a run of 2^k + bits zeros;
  /// the escape then 32 bits is one code. False when no code of up to 24
  /// bits matches or the token runs past the end.
  bool token(const std::byte* in, std::uint64_t end, std::uint64_t& pos, std::uint64_t& count, std::uint32_t& value) const {
    auto bits = [&](int k, std::uint64_t& v) {
      if (end - pos < static_cast<std::uint64_t>(k)) return false;
      v = 0;
      for (int j = 0; j < k; ++j) v |= std::uint64_t{ref_bit(in, pos++)} << j;
      return true;
    };
    std::uint64_t code = 0;
    std::int64_t sym = -1;
    for (int l = 1; l <= A::max_code_length && sym < 0; ++l) {
      if (pos == end) return false;
      code = (code << 1) | ref_bit(in, pos++);
      if (code >= first[l] && code - first[l] < symbols[l].size()) sym = symbols[l][code - first[l]];
    }
    if (sym < 0) return false;
    std::uint64_t v = 0;
    if (sym < A::literals) {
      count = 1;
      value = static_cast<std::uint32_t>(sym);
    } else if (sym == A::escape) {
      if (!bits(32, v)) return false;
      count = 1;
      value = static_cast<std::uint32_t>(v);
    } else {
      const int k = static_cast<int>(sym - A::run_base) + 1;
      if (!bits(k, v)) return false;
      count = (std::uint64_t{1} << k) + v;
      value = 0;
    }
    return true;
  }

  /// A chunk of n codes: n codes of tokens (no run past the n-th), ending
  /// in the byte that holds the last token's last bit.
  ref_codes decode(const std::byte* in, std::size_t bytes, std::size_t n) const {
    std::vector<std::uint32_t> out(n);
    const std::uint64_t end = std::uint64_t{bytes} * 8;
    std::uint64_t pos = 0, count = 0;
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < n;) {
      if (!token(in, end, pos, count, value) || count > n - i) return std::nullopt;
      for (std::uint64_t j = 0; j < count; ++j) out[i++] = value;
    }
    if ((pos + 7) / 8 != bytes) return std::nullopt;
    return out;
  }

  /// The element count (at most `limit`) for which in[0, bytes) is a
  /// whole chunk, if there is one: garbage that happens to decode.
  std::optional<std::size_t> whole_count(const std::byte* in, std::size_t bytes, std::uint64_t limit) const {
    const std::uint64_t end = std::uint64_t{bytes} * 8;
    std::uint64_t pos = 0, count = 0, n = 0;
    std::uint32_t value = 0;
    while (bytes > 0 && (pos + 7) / 8 < bytes) {
      if (!token(in, end, pos, count, value) || count > limit - n) return std::nullopt;
      n += count;
    }
    return static_cast<std::size_t>(n);
  }
};

inline ref_codes reference_decode(const ebac::huffman& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
  return reference_huffman(enc.length).decode(in, bytes, n);
}

/// Context-modelled rANS (docs/format.md, "ans"): u32 byte count R, R bytes
/// of rANS (four little-endian states, then renormalisation bytes), then the
/// raw bits LSB first. Element i runs on state i % 4; its context is the
/// magnitude classes min(k - 1, bit width) of its left and upper (row
/// elements back) neighbours, k the codebook's classes (8, 4, 2 or 1), 0 outside the chunk, and with the diagonal set whether
/// the upper-left or upper-right code is non-zero; frequencies of a context
/// sum to 2^14. Tokens: v < 32 itself, else 32 + 2 (width - 6) + the bit
/// below the leading one, width - 2 raw bits after. Written bit by bit, with
/// sums instead of the decoder's tables. With bit 31 of the byte count (a
/// version-1 codebook only), a bitmap of ceil(ceil(n / 1024) / 8) bytes
/// follows it: bit k (LSB first) set says the codes [1024 k, 1024 (k + 1))
/// are all 0 and take no state step; at least one is set, none past the
/// last block.
inline ref_codes reference_decode(const ebac::context_ans& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
  constexpr std::size_t T = 86;  // tokens
  auto le32 = [&](std::size_t pos) {
    std::uint32_t v = 0;
    for (int k = 3; k >= 0; --k) v = v * 256 + static_cast<std::uint32_t>(in[pos + static_cast<std::size_t>(k)]);
    return v;
  };
  auto magnitude_class = [&](std::uint32_t v) {
    std::uint32_t w = 0;
    while (v) {
      ++w;
      v >>= 1;
    }
    return std::min<std::uint32_t>(w, enc.classes - 1);
  };
  if (bytes < 4) return std::nullopt;
  const bool has_bitmap = le32(0) >= (1u << 31);
  const std::uint64_t R = le32(0) % (1u << 31);
  const std::size_t blocks = (n + 1023) / 1024, map_bytes = has_bitmap ? (blocks + 7) / 8 : 0;
  if (has_bitmap && !enc.zero_blocks) return std::nullopt;
  if (map_bytes > bytes - 4 || R < 16 || R > bytes - 4 - map_bytes) return std::nullopt;
  std::vector<bool> skipped(blocks, false);
  bool any = false;
  for (std::size_t k = 0; k < 8 * map_bytes; ++k) {
    const bool bit = ref_bit(in + 4, k) != 0;
    if (bit && k >= blocks) return std::nullopt;
    if (bit) skipped[k] = any = true;
  }
  if (has_bitmap && !any) return std::nullopt;
  const std::size_t states = 4 + map_bytes;
  std::uint32_t x[4];
  for (std::size_t l = 0; l < 4; ++l) {
    x[l] = le32(states + 4 * l);
    if (x[l] < (1u << 23) || x[l] >= (1u << 31)) return std::nullopt;
  }
  std::size_t pos = states + 16;
  const std::size_t rans_end = states + static_cast<std::size_t>(R);
  const std::uint64_t raw_bits = 8 * (bytes - rans_end);
  std::uint64_t rb = 0;
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (skipped[i / 1024]) continue;  // out[i] stays 0
    const std::uint32_t left = i > 0 ? magnitude_class(out[i - 1]) : 0;
    const std::uint32_t up = i >= enc.row ? magnitude_class(out[i - enc.row]) : 0;
    std::size_t ctx = left * enc.classes + up;
    if (enc.diagonal) ctx = 2 * ctx + (enc.row >= 2 && i > enc.row && (out[i - enc.row - 1] != 0 || out[i - enc.row + 1] != 0));
    const std::uint16_t* f = enc.freq + ctx * T;
    std::uint32_t total = 0;
    for (std::size_t t = 0; t < T; ++t) total += f[t];
    if (total == 0) return std::nullopt;
    std::uint32_t& s = x[i % 4];
    const std::uint32_t slot = s % 16384;
    std::uint32_t t = 0, cum = 0;
    while (cum + f[t] <= slot) cum += f[t++];
    s = f[t] * (s / 16384) + slot - cum;
    while (s < (1u << 23)) {
      if (pos == rans_end) return std::nullopt;
      s = s * 256 + static_cast<std::uint32_t>(in[pos++]);
    }
    std::uint32_t v = t;
    if (t >= 32) {
      const unsigned width = 6 + (t - 32) / 2, k = width - 2;
      v = (1u << (width - 1)) | (((t - 32) % 2) << k);
      for (unsigned b = 0; b < k; ++b, ++rb) {
        if (rb >= raw_bits) return std::nullopt;
        v |= ref_bit(in + rans_end, rb) << b;
      }
    }
    out[i] = v;
  }
  for (std::uint32_t s : x)
    if (s != (1u << 23)) return std::nullopt;
  if (pos != rans_end || (rb + 7) / 8 != bytes - rans_end) return std::nullopt;
  for (std::uint64_t b = rb; b < raw_bits; ++b)
    if (ref_bit(in + rans_end, b)) return std::nullopt;
  return out;
}

/// Striped Huffman (docs/format.md, "striped"): varints R0, R1, R2, then
/// four bit streams of R0, R1, R2 and the remaining bytes. Token t is in
/// stream t mod 4: its symbol's canonical code (MSB first into the
/// LSB-first stream), then raw bits LSB first. Symbols: v < 32 is the code
/// v; 32 <= s < 140 is a code of bit width b = 6 + (s - 32) / 4 whose two
/// bits below the leading one are (s - 32) mod 4, its b - 3 lower bits raw;
/// 140 <= s < 171 is a run of 2^k + raw(k) zeros, k = s - 139. Every
/// stream must end in its last byte once n codes are out, no run past the
/// n-th code. Written bit by bit, from the code lengths alone.
inline ref_codes reference_decode(const ebac::striped_huffman& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
  constexpr int max_len = 11;
  std::vector<std::uint32_t> symbols[max_len + 1];
  std::uint64_t first[max_len + 1] = {};
  for (std::uint32_t s = 0; s < 171; ++s)
    if (enc.length[s]) symbols[enc.length[s]].push_back(s);
  std::uint64_t next = 0;
  for (int l = 1; l <= max_len; ++l) {
    first[l] = next;
    next = (next + symbols[l].size()) << 1;
  }
  std::size_t pos = 0;
  std::uint64_t size[4];
  std::uint64_t used = 0;
  for (int s = 0; s < 3; ++s) {
    if (!ref_varint(in, bytes, pos, size[s])) return std::nullopt;
    used += size[s];
    if (size[s] > bytes || used > bytes - pos) return std::nullopt;
  }
  size[3] = bytes - pos - used;
  std::uint64_t begin[4], bit[4];  // each stream's first bit and next bit, counted from `in`
  for (int s = 0; s < 4; ++s) { begin[s] = bit[s] = 8 * (s == 0 ? pos : begin[s - 1] / 8 + size[s - 1]); }
  auto read = [&](int s, unsigned k, std::uint64_t& v) {
    v = 0;
    for (unsigned j = 0; j < k; ++j) {
      if (bit[s] >= begin[s] + 8 * size[s]) return false;
      v |= std::uint64_t{ref_bit(in, bit[s]++)} << j;
    }
    return true;
  };
  std::vector<std::uint32_t> out(n);
  std::size_t i = 0;
  for (std::uint64_t t = 0; i < n; ++t) {
    const int s = static_cast<int>(t % 4);
    std::int64_t sym = -1;
    std::uint64_t code = 0;
    for (int l = 1; l <= max_len && sym < 0; ++l) {
      std::uint64_t b;
      if (!read(s, 1, b)) return std::nullopt;
      code = (code << 1) | b;
      if (code >= first[l] && code - first[l] < symbols[l].size()) sym = symbols[l][code - first[l]];
    }
    if (sym < 0) return std::nullopt;
    std::uint64_t raw;
    if (sym < 32) {
      out[i++] = static_cast<std::uint32_t>(sym);
    } else if (sym < 140) {
      const unsigned b = 6 + static_cast<unsigned>(sym - 32) / 4, m = static_cast<unsigned>(sym - 32) % 4;
      if (!read(s, b - 3, raw)) return std::nullopt;
      out[i++] = static_cast<std::uint32_t>((std::uint64_t{1} << (b - 1)) | (std::uint64_t{m} << (b - 3)) | raw);
    } else {
      const unsigned k = static_cast<unsigned>(sym - 139);
      if (!read(s, k, raw)) return std::nullopt;
      const std::uint64_t run = (std::uint64_t{1} << k) + raw;
      if (run > n - i) return std::nullopt;
      for (std::uint64_t j = 0; j < run; ++j) out[i++] = 0;
    }
  }
  for (int s = 0; s < 4; ++s)
    if ((bit[s] - begin[s] + 7) / 8 != size[s]) return std::nullopt;
  return out;
}

/// The library decoder and the reference agree on `in`: both reject it, or
/// both decode it, to the same codes, every one written.
template <class E>
void check_against_reference(const E& enc, const std::byte* in, std::size_t bytes, std::size_t n, const ref_codes& want) {
  std::vector<std::uint32_t> o(n, 0xdeadbeefu);
  const ebac::status s = enc.decode_chunk(in, bytes, o.data(), n);
  CHECK_MESSAGE(s == (want ? ebac::status::ok : ebac::status::corrupt_stream), "decoder says ", ebac::to_string(s),
                ", the format ", want ? "decodes it" : "rejects it");
  if (s == ebac::status::ok && want) CHECK_MESSAGE(o == *want, "decoded other codes than the format says");
}

/// Encode, decode, compare; then every truncation must fail and every
/// mutation must decode as the format says (the reference decoder above):
/// rejected, or the same codes. The sanitizer build checks the "no
/// out-of-bounds" part.
template <class E>
void check_encoder(const E& enc, const code_set& cs, std::mt19937_64& rng, bool mutate = true) {
  INFO("codes: ", cs.name);
  const std::size_t n = cs.codes.size();
  const std::size_t cap = enc.max_chunk_bytes(n);
  auto buf = std::unique_ptr<std::byte[]>(new std::byte[cap ? cap : 1]);
  const std::size_t bytes = enc.encode_chunk(cs.codes.data(), n, buf.get());
  REQUIRE(bytes <= cap);
  auto in = exact_copy(buf.get(), bytes);
  std::vector<std::uint32_t> out(n, 0xdeadbeefu);
  REQUIRE(enc.decode_chunk(in.get(), bytes, out.data(), n) == ebac::status::ok);
  const bool equal = out == cs.codes;
  CHECK_MESSAGE(equal, "decoded codes differ");
  const ref_codes ref = reference_decode(enc, in.get(), bytes, n);  // the encoder writes the format
  REQUIRE_MESSAGE(ref.has_value(), "the reference decoder rejects the encoder's output");
  CHECK_MESSAGE(*ref == cs.codes, "the reference decoder reads other codes from the encoder's output");

  std::size_t accepted = 0, first = 0;
  for (std::size_t l : truncations(bytes, rng)) {
    auto t = exact_copy(buf.get(), l);
    std::vector<std::uint32_t> o(n);
    if (enc.decode_chunk(t.get(), l, o.data(), n) == ebac::status::ok && accepted++ == 0) first = l;
    CHECK_FALSE(reference_decode(enc, t.get(), l, n).has_value());
  }
  CHECK_MESSAGE(accepted == 0, accepted, " truncations decoded as ok, first at length ", first, " of ", bytes);

  if (!mutate || bytes == 0) return;
  const int tries = bytes <= 200 ? static_cast<int>(bytes) * 3 : 150;
  for (int k = 0; k < tries; ++k) {
    auto t = exact_copy(buf.get(), bytes);
    const std::size_t pos = bytes <= 200 ? static_cast<std::size_t>(k / 3) : rng() % bytes;
    const std::uint8_t x[3] = {0x01, 0x80, 0xff};
    t[pos] ^= static_cast<std::byte>(bytes <= 200 ? x[k % 3] : static_cast<std::uint8_t>(1 + rng() % 255));
    CAPTURE(pos);
    check_against_reference(enc, t.get(), bytes, n, reference_decode(enc, t.get(), bytes, n));
  }
}

inline std::vector<std::uint64_t> histogram(const std::vector<std::uint32_t>& codes, bool runs) {
  std::vector<std::uint64_t> h(A::size, 0);
  ebac::detail::huffman_tokenize(codes.data(), codes.size(), runs, [&](std::uint32_t s, std::uint32_t, int) { ++h[s]; });
  return h;
}

/// The codebook of one token histogram (with or without zero runs), built
/// the way huffman_codebook::choose builds the one it picks: length-limited
/// lengths, then finalize(). (The library only ever builds the choice.)
inline ebac::huffman_codebook codebook_of(const std::vector<std::uint64_t>& hist, bool runs) {
  REQUIRE(hist.size() == A::size);
  auto w = std::make_unique<ebac::detail::huffman_length_workspace>();
  ebac::detail::huffman_host_exec ex;
  ebac::huffman_codebook cb;
  cb.use_runs = runs;
  cb.length.assign(A::size, 0);
  ebac::detail::huffman_histogram_lengths(ex, *w, hist.data(), cb.length.data());
  REQUIRE(cb.finalize());
  return cb;
}

/// A non-empty code set with the codebook of its own tokens (with or without
/// zero runs) and the stream the serial encoder writes for it.
struct coded_set {
  const code_set& cs;
  bool runs;
  ebac::huffman_codebook cb;
  ebac::huffman enc;  // points into cb
  std::vector<std::byte> stream;
};

/// f(coded_set) for every non-empty set of code_sets(seed), runs on and off.
template <class F>
void for_each_coded_set(std::uint64_t seed, F&& f) {
  for (const auto& cs : code_sets(seed)) {
    if (cs.codes.empty()) continue;
    CAPTURE(cs.name);
    for (bool runs : {true, false}) {
      CAPTURE(runs);
      coded_set c{cs, runs, codebook_of(histogram(cs.codes, runs), runs), {}, {}};
      c.enc = ebac::huffman::bind(c.cb);
      c.stream.resize(c.enc.max_chunk_bytes(cs.codes.size()));
      c.stream.resize(c.enc.encode_chunk(cs.codes.data(), cs.codes.size(), c.stream.data()));
      f(static_cast<const coded_set&>(c));
    }
  }
}

inline std::uint64_t kraft_units(const std::vector<std::uint8_t>& len) {  // sum 2^(24 - l)
  std::uint64_t k = 0;
  for (auto l : len)
    if (l) k += std::uint64_t{1} << (A::max_code_length - l);
  return k;
}

/// The codebook context_ans learns from `codes` with rows of `row` codes.
inline ebac::context_ans_codebook learn_ans(const std::vector<std::uint32_t>& codes, std::uint32_t row) {
  ebac::context_ans::statistics st(ebac::extents{1, row});
  CHECK(st.row == row);
  st.add(codes.data(), codes.size());
  return ebac::context_ans::learn(st);
}

inline std::vector<std::byte> bytes_of(std::initializer_list<unsigned> v) {
  std::vector<std::byte> b;
  for (unsigned x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}

/// The chunk context_ans bound to cb writes for `codes`.
inline std::vector<std::byte> ans_chunk(const ebac::context_ans_codebook& cb, const std::vector<std::uint32_t>& codes) {
  const auto enc = ebac::context_ans::bind(cb);
  std::vector<std::byte> buf(enc.max_chunk_bytes(codes.size()));
  buf.resize(enc.encode_chunk(codes.data(), codes.size(), buf.data()));
  return buf;
}

// The format's context of element i, written from docs/format.md: the
// magnitude classes min(k - 1, bit width) of the left and upper codes (0
// outside the chunk), with the diagonal set times two plus whether the
// upper-left or upper-right code is non-zero (a row of at least 2, i > row).
inline std::uint32_t reference_context(const std::vector<std::uint32_t>& c, std::size_t i, std::uint32_t row,
                                       std::uint32_t classes, bool diagonal) {
  auto cls = [&](std::uint32_t v) {
    std::uint32_t w = 0;
    while (v) {
      ++w;
      v >>= 1;
    }
    return std::min<std::uint32_t>(w, classes - 1);
  };
  std::uint32_t ctx = (i > 0 ? cls(c[i - 1]) : 0) * classes + (i >= row ? cls(c[i - row]) : 0);
  if (diagonal) ctx = 2 * ctx + (row >= 2 && i > row && (c[i - row - 1] != 0 || c[i - row + 1] != 0) ? 1 : 0);
  return ctx;
}

// The format's token of a code: itself below 32, else two per bit width w
// from 6, told apart by the bit under the leading one.
inline std::uint32_t reference_token(std::uint32_t v) {
  if (v < 32) return v;
  std::uint32_t w = 0;
  for (std::uint32_t x = v; x; x >>= 1) ++w;
  return 32 + 2 * (w - 6) + ((v >> (w - 2)) & 1u);
}

}  // namespace
