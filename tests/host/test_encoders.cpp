// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
#include "test_support.hpp"

#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/pipeline.hpp>

#include <algorithm>
#include <cstring>
#include <cstdint>
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

namespace {

namespace A = ebac::huffman_alphabet;

struct code_set {
  std::string name;
  std::vector<std::uint32_t> codes;
};

std::vector<std::size_t> sizes() { return {0, 1, 2, 31, 32, 33, 63, 64, 65, 1000, 4096, 16384, 65537}; }

std::vector<code_set> code_sets(std::uint64_t seed) {
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
std::vector<std::size_t> truncations(std::size_t bytes, std::mt19937_64& rng) {
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

std::unique_ptr<std::byte[]> exact_copy(const std::byte* p, std::size_t n) {
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
unsigned ref_bit(const std::byte* in, std::uint64_t k) { return (static_cast<unsigned>(in[k / 8]) >> (k % 8)) & 1u; }

/// An unsigned LEB128 varint of at most 64 bits.
bool ref_varint(const std::byte* in, std::size_t bytes, std::size_t& pos, std::uint64_t& v) {
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
ref_codes reference_decode(const ebac::block_bitpack&, const std::byte* in, std::size_t bytes, std::size_t n) {
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
ref_codes reference_decode(const ebac::run_length&, const std::byte* in, std::size_t bytes, std::size_t n) {
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

ref_codes reference_decode(const ebac::huffman& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
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
ref_codes reference_decode(const ebac::context_ans& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
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
ref_codes reference_decode(const ebac::striped_huffman& enc, const std::byte* in, std::size_t bytes, std::size_t n) {
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

std::vector<std::uint64_t> histogram(const std::vector<std::uint32_t>& codes, bool runs) {
  std::vector<std::uint64_t> h(A::size, 0);
  ebac::detail::huffman_tokenize(codes.data(), codes.size(), runs, [&](std::uint32_t s, std::uint32_t, int) { ++h[s]; });
  return h;
}

/// The codebook of one token histogram (with or without zero runs), built
/// the way huffman_codebook::choose builds the one it picks: length-limited
/// lengths, then finalize(). (The library only ever builds the choice.)
ebac::huffman_codebook codebook_of(const std::vector<std::uint64_t>& hist, bool runs) {
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

std::uint64_t kraft_units(const std::vector<std::uint8_t>& len) {  // sum 2^(24 - l)
  std::uint64_t k = 0;
  for (auto l : len)
    if (l) k += std::uint64_t{1} << (A::max_code_length - l);
  return k;
}

/// Optimal (unlimited) Huffman cost sum(freq * len), computed independently
/// as the sum of all merged weights.
std::uint64_t optimal_cost(const std::vector<std::uint64_t>& freq) {
  std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>> q;
  for (auto f : freq)
    if (f) q.push(f);
  if (q.size() == 1) return q.top();
  std::uint64_t cost = 0;
  while (q.size() > 1) {
    const auto a = q.top();
    q.pop();
    const auto b = q.top();
    q.pop();
    cost += a + b;
    q.push(a + b);
  }
  return cost;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("block_bitpack: byte layout") {
    const ebac::block_bitpack e{};
    std::vector<std::byte> buf(e.max_chunk_bytes(100));
    const std::vector<std::uint32_t> zeros(64, 0);
    CHECK(e.encode_chunk(zeros.data(), 64, buf.data()) == 2);  // two all-zero blocks: width bytes only
    CHECK(buf[0] == std::byte{0});
    CHECK(buf[1] == std::byte{0});
    std::vector<std::uint32_t> ones(33, 1);
    CHECK(e.encode_chunk(ones.data(), 33, buf.data()) == 2 + 4 + 4);
    CHECK(buf[0] == std::byte{1});
    CHECK(buf[1] == std::byte{1});
    CHECK(buf[2] == std::byte{0xff});  // 32 one-bit codes, LSB first
    CHECK(buf[6] == std::byte{0x01});  // the 33rd code, zero padded
    CHECK(buf[7] == std::byte{0});
    std::vector<std::uint32_t> v = {5, 0, 0, 0x80000000u};
    CHECK(e.encode_chunk(v.data(), 4, buf.data()) == 1 + 4 * 32);
    CHECK(buf[0] == std::byte{32});
    CHECK(e.encode_chunk(v.data(), 0, buf.data()) == 0);
    CHECK(e.max_chunk_bytes(0) == 0);
    CHECK(e.max_chunk_bytes(33) == 2 * 129);
  }

  TEST_CASE("block_bitpack: round trips, truncations and mutations") {
    std::mt19937_64 rng(21);
    for (const auto& cs : code_sets(1)) check_encoder(ebac::block_bitpack{}, cs, rng);
  }

  TEST_CASE("block_bitpack: width bytes above 32 and wrong sizes are rejected") {
    const ebac::block_bitpack e{};
    std::vector<std::uint32_t> codes(40, 3);
    std::vector<std::byte> buf(e.max_chunk_bytes(40));
    const std::size_t bytes = e.encode_chunk(codes.data(), 40, buf.data());
    std::vector<std::uint32_t> out(40);
    for (int w : {33, 64, 255}) {
      auto t = exact_copy(buf.data(), bytes);
      t[1] = static_cast<std::byte>(w);
      CHECK(e.decode_chunk(t.get(), bytes, out.data(), 40) != ebac::status::ok);
    }
    auto longer = std::unique_ptr<std::byte[]>(new std::byte[bytes + 4]{});
    std::memcpy(longer.get(), buf.data(), bytes);
    CHECK(e.decode_chunk(longer.get(), bytes + 4, out.data(), 40) != ebac::status::ok);  // trailing bytes
    std::vector<std::uint32_t> out70(70);
    CHECK(e.decode_chunk(buf.data(), bytes, out70.data(), 70) != ebac::status::ok);  // 3 blocks do not fit these bytes
  }

  TEST_CASE("run_length: byte layout") {
    const ebac::run_length e{};
    std::vector<std::byte> buf(64);
    auto enc = [&](std::vector<std::uint32_t> v) {
      const std::size_t k = e.encode_chunk(v.data(), v.size(), buf.data());
      std::vector<int> r;
      for (std::size_t i = 0; i < k; ++i) r.push_back(static_cast<int>(buf[i]));
      return r;
    };
    // token = run << 4 | (code - 1); 15 in either nibble: a varint of the rest follows
    CHECK(enc({}) == std::vector<int>{});
    CHECK(enc({0, 0, 0, 5}) == std::vector<int>{0x34});
    CHECK(enc({7}) == std::vector<int>{0x06});
    CHECK(enc({0, 0}) == std::vector<int>{0x20});                         // a final run: code nibble 0, no code
    CHECK(enc({1, 0, 200}) == std::vector<int>{0x00, 0x1f, 0xb8, 0x01});  // 200 = 16 + 184
    CHECK(enc({16}) == std::vector<int>{0x0f, 0x00});
    std::vector<std::uint32_t> long_run(20, 0);
    long_run.push_back(3);
    CHECK(enc(long_run) == std::vector<int>{0xf2, 5});  // 15 + 5 zeros, then 3
    CHECK(enc(std::vector<std::uint32_t>(16, 0)) == std::vector<int>{0xf0, 1});
    CHECK(enc(std::vector<std::uint32_t>(15, 0)) == std::vector<int>{0xf0, 0});
    CHECK(enc({2, 1, 3, 1}) == std::vector<int>{0x01, 0x00, 0x02, 0x00});  // level indices: a byte each
    CHECK(e.max_chunk_bytes(10) >= 10 * 6);
  }

  TEST_CASE("run_length: round trips, truncations and mutations") {
    std::mt19937_64 rng(22);
    for (const auto& cs : code_sets(2)) check_encoder(ebac::run_length{}, cs, rng);
  }

  TEST_CASE("run_length: runs past the chunk, trailing bytes and overlong varints are rejected") {
    const ebac::run_length e{};
    std::vector<std::uint32_t> out(8);
    auto dec = [&](std::vector<std::uint8_t> b, std::size_t n) {
      auto t = std::unique_ptr<std::byte[]>(new std::byte[b.size() ? b.size() : 1]);
      for (std::size_t i = 0; i < b.size(); ++i) t[i] = static_cast<std::byte>(b[i]);
      return e.decode_chunk(t.get(), b.size(), out.data(), n);
    };
    CHECK(dec({0x80}, 8) == ebac::status::ok);
    CHECK(dec({0x90}, 8) != ebac::status::ok);        // run longer than the chunk
    CHECK(dec({0x80, 0}, 8) != ebac::status::ok);     // trailing byte
    CHECK(dec({0x81}, 8) != ebac::status::ok);        // a final run with a code nibble
    CHECK(dec({0xf0, 0}, 8) != ebac::status::ok);     // an escaped run (>= 15) in an 8-element chunk
    CHECK(dec({0x70}, 8) == ebac::status::ok);        // 7 zeros, then code 1
    CHECK(dec({0x70, 0x00}, 8) != ebac::status::ok);  // ... and a token too many
    CHECK(out[6] == 0);
    CHECK(out[7] == 1);
    CHECK(dec({0x0f, 0xf0, 0xff, 0xff, 0xff, 0x0f}, 1) != ebac::status::ok);  // code - 1 = 15 + 0xfffffff0: overflows
    CHECK(dec({0x0f, 0xef, 0xff, 0xff, 0xff, 0x0f}, 1) == ebac::status::ok);
    CHECK(out[0] == 0xffffffffu);
    CHECK(dec({0x0f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1) != ebac::status::ok);  // > 64 bits
    CHECK(dec({0x0f}, 1) != ebac::status::ok);  // escaped code without its varint
    CHECK(dec({}, 1) != ebac::status::ok);
    CHECK(dec({}, 0) == ebac::status::ok);
  }

  TEST_CASE("huffman: round trips with and without zero runs, truncations and mutations") {
    std::mt19937_64 rng(23);
    for (const auto& cs : code_sets(3)) {
      for (bool runs : {false, true}) {
        CAPTURE(runs);
        const auto cb = codebook_of(histogram(cs.codes, runs), runs);
        for (std::uint32_t s = 0; s < A::size; ++s) REQUIRE(cb.length[s] <= A::max_code_length);
        CHECK(kraft_units(cb.length) <= (std::uint64_t{1} << A::max_code_length));
        check_encoder(ebac::huffman::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
        // The serialized codebook describes the same code.
        std::vector<std::byte> ser;
        cb.serialize(ser);
        ebac::huffman_codebook back;
        auto in = exact_copy(ser.data(), ser.size());
        REQUIRE(ebac::huffman_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
        CHECK(back.use_runs == cb.use_runs);
        CHECK(back.length == cb.length);
        CHECK(back.code_lsb == cb.code_lsb);
      }
    }
  }

  TEST_CASE("huffman: segments coded apart (one warp a chunk on the device) give the serial tokens and bytes") {
    struct token {
      std::uint32_t symbol, extra;
      int extra_bits;
      bool operator==(const token&) const = default;
    };
    for_each_coded_set(4, [&](const coded_set& c) {
      const auto& cs = c.cs;
      const auto& cb = c.cb;
      const bool runs = c.runs;
      const std::size_t m = cs.codes.size();
      const std::vector<std::byte>& serial = c.stream;
      const std::size_t bytes = serial.size();
      std::vector<token> expect;
      ebac::detail::huffman_tokenize(cs.codes.data(), m, runs, [&](std::uint32_t s, std::uint32_t e, int k) {
        expect.push_back({s, e, k});
      });
      for (std::size_t segments : {std::size_t{1}, std::size_t{3}, std::size_t{32}}) {
        CAPTURE(segments);
        const std::size_t seg = (m + segments - 1) / segments;  // the kernel's split: lane l takes [l seg, (l + 1) seg)
        auto bounds = [&](std::size_t l) {
          const std::size_t b = std::min(l * seg, m);
          return std::pair{b, std::min(b + seg, m)};
        };
        std::vector<token> got;
        std::vector<std::uint64_t> offset(segments + 1, 0);
        for (std::size_t l = 0; l < segments; ++l) {
          const auto [b, e] = bounds(l);
          std::uint64_t bits = 0;
          ebac::detail::huffman_tokenize_segment(cs.codes.data(), m, b, e, runs, [&](std::uint32_t s, std::uint32_t x, int k) {
            got.push_back({s, x, k});
            bits += cb.length[s] + static_cast<std::uint64_t>(k);
          });
          offset[l + 1] = offset[l] + bits;
        }
        CHECK(got == expect);
        const std::uint64_t total = offset[segments];
        REQUIRE((total + 7) / 8 == bytes);
        // Scratch starts as garbage, as device memory would; only the shared words are zeroed first.
        std::vector<std::uint32_t> words((bytes + 3) / 4 + 1, 0xdeadbeefu);
        for (std::size_t l = 0; l < segments; ++l)
          if (offset[l] % 32) words[offset[l] / 32] = 0;
        if (total % 32) words[total / 32] = 0;
        for (std::size_t l = segments; l-- > 0;) {  // any order: the segments touch disjoint bits
          const auto [b, e] = bounds(l);
          auto or_word = [&](std::uint64_t i, std::uint32_t v) { words[i] |= v; };
          ebac::detail::segment_bit_writer<decltype(or_word)> w(words.data(), offset[l], or_word);
          ebac::detail::huffman_tokenize_segment(cs.codes.data(), m, b, e, runs, [&](std::uint32_t s, std::uint32_t x, int k) {
            w.put(cb.code_lsb[s], cb.length[s]);
            if (k) w.put(x, k);
          });
          w.finish();
        }
        CHECK(std::memcmp(words.data(), serial.data(), bytes) == 0);
      }
    });
  }

  namespace {
  /// The CUDA decoder's lane protocol (encoder/huffman_lanes.hpp), replayed
  /// with arrays: what a warp computes with shuffles and ballots.
  ebac::status lanes_decode(const ebac::huffman& enc, const std::byte* in, std::size_t bytes, std::uint32_t* codes, std::size_t m,
                            int& rounds) {
    using L = ebac::huffman_lanes;
    constexpr unsigned W = L::count;
    const L lanes(bytes);
    std::uint64_t start[W];
    ebac::huffman_range res[W];
    bool decoded[W] = {};
    for (unsigned l = 0; l < W; ++l) start[l] = lanes.first_guess(l);
    for (rounds = 1;; ++rounds) {
      REQUIRE(rounds <= static_cast<int>(W) + 1);
      for (unsigned l = 0; l < W; ++l)
        if (!decoded[l]) {
          res[l] = lanes.count_from(enc, in, bytes, start[l], l, m);
          decoded[l] = true;
        }
      bool changed = false;
      for (unsigned l = 1; l < W; ++l) {
        const std::uint64_t s = L::next_start(res[l - 1]);
        if (s != start[l]) {
          start[l] = s;
          decoded[l] = false;
          changed = true;
        }
      }
      if (!changed) break;
    }
    std::uint64_t first[W], sum = 0;
    for (unsigned l = 0; l < W; ++l) {
      first[l] = sum;
      sum += res[l].elements;
    }
    unsigned last = W;
    for (unsigned l = 0; l < W && last == W; ++l)
      if (L::holds_last(first[l], res[l].elements, m)) last = l;
    if (last == W) return ebac::status::corrupt_stream;
    for (unsigned l = 0; l < last; ++l)
      if (res[l].corrupt) return ebac::status::corrupt_stream;
    for (unsigned l = 0; l <= last; ++l) {
      const std::uint64_t wanted = l == last ? m - first[l] : res[l].elements;
      const auto r = enc.decode_range(in, bytes, start[l], lanes.range_end(l), l == last ? wanted : L::unlimited,
                                      [&](std::uint64_t k, std::uint32_t c) { codes[first[l] + k] = c; });
      if (l == last ? !L::last_lane_ok(r, wanted, bytes) : (r.corrupt || r.elements != wanted))
        return ebac::status::corrupt_stream;
    }
    return ebac::status::ok;
  }
  }  // namespace

  TEST_CASE("huffman: 32 lanes decode what the serial decoder decodes, and reject what it rejects") {
    std::mt19937_64 rng(41);
    int max_rounds = 0;
    std::uint64_t streams = 0, round_sum = 0;
    for_each_coded_set(5, [&](const coded_set& c) {
      const auto& cs = c.cs;
      const auto& enc = c.enc;
      const auto& stream = c.stream;
      const std::size_t m = cs.codes.size();
      std::vector<std::uint32_t> got(m, 0xdeadbeefu);
      int rounds = 0;
      REQUIRE(lanes_decode(enc, stream.data(), stream.size(), got.data(), m, rounds) == ebac::status::ok);
      CHECK(got == cs.codes);
      max_rounds = std::max(max_rounds, rounds);
      round_sum += static_cast<std::uint64_t>(rounds);
      ++streams;
      // Damaged and cut streams: the same verdict as the serial decoder, and the same codes when accepted.
      for (int trial = 0; trial < 40; ++trial) {
        auto bad = stream;
        if (trial % 4 == 3 && bad.size() > 1) bad.resize(rng() % bad.size());
        else if (!bad.empty()) bad[rng() % bad.size()] ^= static_cast<std::byte>(1 + rng() % 255);
        std::vector<std::uint32_t> serial(m), lanes(m);
        const auto s1 = enc.decode_chunk(bad.data(), bad.size(), serial.data(), m);
        int r2 = 0;
        const auto s2 = lanes_decode(enc, bad.data(), bad.size(), lanes.data(), m, r2);
        CHECK(s1 == s2);
        if (s1 == ebac::status::ok && s2 == ebac::status::ok) CHECK(serial == lanes);
      }
    });
    MESSAGE("lane rounds: max " << max_rounds << ", mean " << static_cast<double>(round_sum) / static_cast<double>(streams)
                                << " over " << streams << " streams");
  }

  TEST_CASE("huffman: runs of 2^32 zeros cost the lanes one step each, and cannot wrap their counts") {
    // A codebook a stream may carry (it validates): code 0 and the longest run
    // class, one bit each. Every 32-bit token then claims 2^32 - 1 zeros.
    std::vector<std::uint64_t> h(A::size, 0);
    const std::uint32_t longest = A::run_base + A::run_classes - 1;
    h[0] = 1;
    h[longest] = 1;
    const auto cb = codebook_of(h, true);
    const auto enc = ebac::huffman::bind(cb);
    REQUIRE(cb.length[longest] == 1);
    constexpr int tokens = 64;
    std::vector<std::byte> stream(4 * tokens + 8);
    ebac::detail::bit_writer w{stream.data()};
    for (int t = 0; t < tokens; ++t) {
      w.put(cb.code_lsb[longest], 1);
      w.put(0x7fffffffu, 31);
    }
    stream.resize(static_cast<std::size_t>(w.finish() - stream.data()));
    const std::uint64_t per_token = (std::uint64_t{1} << 32) - 1;
    // Counting only: 64 x (2^32 - 1) zeros, counted token by token (the
    // element-by-element loop would take minutes here and, on the GPU, was
    // kept by nvcc even with a sink that drops the codes).
    const auto counted = enc.decode_range(stream.data(), stream.size(), 0, 8 * stream.size(), ebac::huffman_lanes::unlimited,
                                          ebac::huffman_count_only{});
    CHECK_FALSE(counted.corrupt);
    CHECK(counted.elements == tokens * per_token);
    CHECK(counted.end_bit == 32u * tokens);
    // A lane counts no further than its chunk: at most m codes, corrupt when a
    // token would pass m (reaching m exactly just stops the count).
    const ebac::huffman_lanes lanes(stream.size());
    for (const std::uint64_t m : std::vector<std::uint64_t>{1, 1000, per_token - 1, per_token, 3 * per_token}) {
      CAPTURE(m);
      const auto r = lanes.count_from(enc, stream.data(), stream.size(), 0, 0, m);
      CHECK(r.elements <= m);
      CHECK(r.corrupt == (m < 2 * per_token && m != per_token));  // lane 0's range (2048 bits / 32) holds 2 tokens
    }
    // And the verdict stays the serial decoder's: a chunk of 1000 codes cannot be this stream.
    std::vector<std::uint32_t> serial(1000), lane_codes(1000);
    int rounds = 0;
    CHECK(enc.decode_chunk(stream.data(), stream.size(), serial.data(), serial.size()) == ebac::status::corrupt_stream);
    CHECK(lanes_decode(enc, stream.data(), stream.size(), lane_codes.data(), lane_codes.size(), rounds) ==
          ebac::status::corrupt_stream);
  }

  TEST_CASE("huffman: the flat codebook image (what the CUDA backend uploads) codes exactly like the codebook") {
    std::mt19937_64 rng(29);
    for (const auto& cs : code_sets(2)) {
      if (cs.codes.empty()) continue;
      const auto cb = ebac::huffman_codebook::choose(histogram(cs.codes, true), histogram(cs.codes, false));
      const ebac::huffman_image img = ebac::pack_huffman_image(cb);
      REQUIRE(img.bytes.size() == ebac::huffman_image_layout::bytes);
      REQUIRE(img.serialized_bytes <= ebac::huffman_codebook::max_serialized_bytes);
      // Copied somewhere else, as an upload would: the functor reads only the image.
      std::vector<std::uint64_t> storage((img.bytes.size() + 7) / 8);
      std::memcpy(storage.data(), img.bytes.data(), img.bytes.size());
      const auto* base = reinterpret_cast<const std::byte*>(storage.data());
      const ebac::huffman from_image = ebac::bind_huffman_image(base);
      CHECK(from_image.use_runs == cb.use_runs);
      CHECK(ebac::detail::load_le<std::uint64_t>(base + ebac::huffman_image_layout::serialized_size) == img.serialized_bytes);
      const ebac::huffman from_book = ebac::huffman::bind(cb);
      const std::size_t m = cs.codes.size();  // the whole set: the codebook was built from all of its tokens
      std::vector<std::byte> a(from_book.max_chunk_bytes(m)), b(a.size());
      const std::size_t na = from_book.encode_chunk(cs.codes.data(), m, a.data());
      const std::size_t nb = from_image.encode_chunk(cs.codes.data(), m, b.data());
      REQUIRE(na == nb);
      CHECK(std::memcmp(a.data(), b.data(), na) == 0);
      std::vector<std::uint32_t> back(m);
      REQUIRE(from_image.decode_chunk(b.data(), nb, back.data(), m) == ebac::status::ok);
      CHECK(std::equal(back.begin(), back.end(), cs.codes.begin()));
      // The image's serialized part is the stream's codebook section.
      std::vector<std::byte> ser;
      cb.serialize(ser);
      REQUIRE(ser.size() == img.serialized_bytes);
      CHECK(std::memcmp(ser.data(), base + ebac::huffman_image_layout::serialized, ser.size()) == 0);
      check_encoder(from_image, cs, rng, false);
    }
    // Every symbol used, with maximal gaps: the serialized size stays within its bound.
    std::vector<std::uint64_t> all(A::size);
    for (std::uint32_t s = 0; s < A::size; ++s) all[s] = 1 + (s % 7);
    const auto full = codebook_of(all, true);
    std::vector<std::byte> ser;
    full.serialize(ser);
    CHECK(ser.size() <= ebac::huffman_codebook::max_serialized_bytes);
  }

  TEST_CASE("huffman: lengths are optimal when the limit does not bind") {
    std::mt19937_64 rng(24);
    for (int t = 0; t < 300; ++t) {
      std::vector<std::uint64_t> h(A::size, 0);
      const int used = 2 + static_cast<int>(rng() % 200);
      for (int i = 0; i < used; ++i) h[rng() % A::literals] += 1 + rng() % 1000;
      const auto cb = codebook_of(h, false);
      std::uint64_t cost = 0;
      bool covered = true;
      for (std::uint32_t s = 0; s < A::size; ++s) {
        cost += h[s] * cb.length[s];
        if (h[s] && !cb.length[s]) covered = false;
      }
      CHECK(covered);
      CHECK(cost == optimal_cost(h));
      std::uint64_t estimated = 0;  // what the stream's runs-or-literals choice weighs (no extra bits: literals only)
      for (std::uint32_t s = 0; s < A::size; ++s) estimated += ebac::detail::huffman_symbol_cost_bits(s, h[s], cb.length[s]);
      CHECK(cost == estimated);
    }
  }

  TEST_CASE("huffman: length limit <= 24 on highly skewed (Fibonacci) histograms") {
    std::mt19937_64 rng(25);
    for (int nsym : {26, 40, 60, 90}) {
      for (bool runs : {false, true}) {
        CAPTURE(nsym);
        CAPTURE(runs);
        std::vector<std::uint64_t> h(A::size, 0);
        // Symbols: literals, and with runs also run classes and the escape.
        std::vector<std::uint32_t> syms;
        for (int i = 0; i < nsym; ++i) syms.push_back(static_cast<std::uint32_t>(i * 37 % A::literals));
        if (runs) {
          syms.push_back(A::run_base);
          syms.push_back(A::run_base + 4);
        }
        syms.push_back(A::escape);
        std::uint64_t a = 1, b = 1;
        for (auto s : syms) {
          h[s] = a;  // Fibonacci weights: an unlimited Huffman tree would be a chain
          const auto c = a + b;
          a = b;
          b = std::min<std::uint64_t>(c, std::uint64_t{1} << 40);  // realistic counts: no overflow in sums
        }
        const auto cb = codebook_of(h, runs);
        int longest = 0;
        for (auto s : syms) {
          CHECK(cb.length[s] >= 1);
          longest = std::max<int>(longest, cb.length[s]);
        }
        CHECK(longest <= A::max_code_length);
        if (syms.size() > 30) CHECK(longest >= 13);  // the long-code walk is exercised
        CHECK(kraft_units(cb.length) <= (std::uint64_t{1} << A::max_code_length));
        // Every symbol (incl. the longest codes) encodes and decodes.
        code_set cs{"fibonacci", {}};
        for (int rep = 0; rep < 3; ++rep)
          for (auto s : syms) {
            if (s < A::literals) cs.codes.push_back(s);
            else if (s == A::escape) cs.codes.push_back(0x12345678u + static_cast<std::uint32_t>(rep));
            else if (runs) {  // a run of class k, closed by a non-zero literal so runs never merge
              const std::size_t k = s - A::run_base + 1;
              cs.codes.insert(cs.codes.end(), (std::size_t{1} << k) + static_cast<std::size_t>(rep) % (std::size_t{1} << k), 0u);
              cs.codes.push_back(syms[1]);
            }
          }
        // Tokenize with the same run setting: only symbols in `syms` may appear.
        const auto hist = histogram(cs.codes, runs);
        bool subset = true;
        for (std::uint32_t s = 0; s < A::size; ++s)
          if (hist[s] && !h[s]) subset = false;
        REQUIRE(subset);
        check_encoder(ebac::huffman::bind(cb), cs, rng);
      }
    }
  }

  namespace {
  /// The CUDA codebook kernel's way to run the shared steps (one thread for
  /// the serial parts, symbols placed by rank), replayed on the host.
  struct rank_exec {
    template <class F>
    void serial(F&& f) {
      f();
    }
    template <class F>
    void for_each(std::uint32_t n, F&& f) {  // in reverse: any order must do
      for (std::uint32_t i = n; i-- > 0;) f(i);
    }
    template <class F>
    std::uint64_t sum(std::uint32_t n, F&& f) {
      std::uint64_t total = 0;
      for (std::uint32_t i = n; i-- > 0;) total += f(i);
      return total;
    }
    void sort_used(ebac::detail::huffman_length_workspace& w, std::uint32_t n) {
      w.used = 0;
      for (std::uint32_t s = 0; s < n; ++s)
        if (w.freq[s]) {
          w.order[ebac::detail::huffman_used_rank(w.freq, n, s)] = s;
          ++w.used;
        }
    }
  };
  }  // namespace

  TEST_CASE("huffman: the device's construction (two blocks, ranks, one serial thread) picks the host's codebook and image") {
    std::mt19937_64 rng(31);
    auto w = std::make_unique<ebac::detail::huffman_length_workspace[]>(2);
    for (int t = 0; t < 60; ++t) {
      CAPTURE(t);
      std::vector<std::uint64_t> runs(A::size, 0), lits(A::size, 0);
      const int kind = t % 4;
      if (kind == 3) {  // Fibonacci weights: the 24-bit limit binds and the histogram is flattened
        std::uint64_t a = 1, b = 1;
        for (int i = 0; i < 60; ++i) {
          lits[i * 7] = a;
          runs[i * 5] = a;
          const std::uint64_t c = a + b;
          a = b;
          b = c;
        }
      } else {
        const int used = kind == 0 ? 1 : 2 + static_cast<int>(rng() % 3000);  // one symbol .. most of the alphabet
        for (int i = 0; i < used; ++i) {
          const std::uint64_t f = kind == 2 ? 5 : 1 + rng() % 100000;  // kind 2: all ties, order by symbol
          runs[rng() % A::size] += f;
          lits[rng() % A::literals] += f;
        }
      }
      const auto host = ebac::huffman_codebook::choose(runs, lits);
      std::vector<std::uint8_t> lr(A::size), ll(A::size);
      rank_exec ex;
      // As the two blocks of the length kernel: one workspace per histogram,
      // each left with the garbage of device temp memory, then the choice.
      std::memset(static_cast<void*>(w.get()), 0xab, 2 * sizeof(ebac::detail::huffman_length_workspace));
      ebac::detail::huffman_histogram_lengths(ex, w[1], lits.data(), ll.data());  // either block may finish first
      ebac::detail::huffman_histogram_lengths(ex, w[0], runs.data(), lr.data());
      const bool use_runs = ebac::detail::huffman_prefer_runs(ex, runs.data(), lits.data(), lr.data(), ll.data());
      CHECK(use_runs == host.use_runs);
      CHECK((use_runs ? lr : ll) == host.length);
      // Device temp memory holds garbage: the image must not depend on what was there.
      using L = ebac::huffman_image_layout;
      std::vector<std::uint64_t> image((L::bytes + 7) / 8, 0xababababababababull);
      auto* base = reinterpret_cast<std::byte*>(image.data());
      const std::size_t ser = ebac::huffman_write_image(ex, use_runs ? lr.data() : ll.data(), use_runs, base);
      const auto packed = ebac::pack_huffman_image(host);
      REQUIRE(ser == packed.serialized_bytes);
      const std::size_t used = host.sorted.size();  // sorted[] past the used symbols is never read
      auto same = [&](std::size_t from, std::size_t to) {
        return std::memcmp(base + from, packed.data() + from, to - from) == 0;
      };
      CHECK(same(0, L::sorted));
      CHECK(same(L::sorted, L::sorted + 4 * used));
      CHECK(same(L::first_code, L::serialized + ser));
    }
  }

  TEST_CASE("huffman: codebook deserialization rejects malformed input, and what it accepts is a usable prefix code") {
    std::vector<std::uint64_t> h(A::size, 0);
    for (std::uint32_t s = 0; s < 50; ++s) h[s * 3] = 1 + s * s;
    h[A::escape] = 7;
    const auto cb = codebook_of(h, true);
    std::vector<std::byte> ser;
    cb.serialize(ser);
    ebac::huffman_codebook out;
    // Every truncation fails.
    for (std::size_t l = 0; l < ser.size(); ++l) {
      auto t = exact_copy(ser.data(), l);
      CAPTURE(l);
      CHECK(ebac::huffman_codebook::deserialize(t.get(), l, out) != ebac::status::ok);
    }
    // Mutations that deserialize give a usable prefix code: Kraft holds, the
    // codes of its symbols round-trip, and garbage decodes as the format says.
    std::mt19937_64 rng(26);
    std::size_t usable = 0;
    for (std::size_t pos = 0; pos < ser.size(); ++pos)
      for (std::uint8_t x : {0x01, 0x02, 0x10, 0x80, 0xff}) {
        CAPTURE(pos);
        CAPTURE(int(x));
        auto t = exact_copy(ser.data(), ser.size());
        t[pos] ^= static_cast<std::byte>(x);
        if (ebac::huffman_codebook::deserialize(t.get(), ser.size(), out) == ebac::status::ok) {
          ++usable;
          CHECK(kraft_units(out.length) <= (std::uint64_t{1} << A::max_code_length));
          const auto enc = ebac::huffman::bind(out);
          const reference_huffman ref(out.length.data());
          // Codes whose tokens all have a code in this codebook (no zeros when
          // runs are on: they would become run tokens).
          std::vector<std::uint32_t> codes;
          for (std::uint32_t sym = out.use_runs ? 1 : 0; sym < A::literals; ++sym)
            if (out.length[sym]) codes.push_back(sym);
          if (out.length[A::escape]) codes.push_back(4096u + static_cast<std::uint32_t>(rng() % 1000000));
          for (std::size_t i = 0, m = codes.size(); i < 3 * m; ++i) codes.push_back(codes[rng() % m]);
          if (!codes.empty()) {
            std::vector<std::byte> buf(enc.max_chunk_bytes(codes.size()));
            buf.resize(enc.encode_chunk(codes.data(), codes.size(), buf.data()));
            auto bin = exact_copy(buf.data(), buf.size());
            std::vector<std::uint32_t> back(codes.size(), 0xdeadbeefu);
            CHECK(enc.decode_chunk(bin.get(), buf.size(), back.data(), back.size()) == ebac::status::ok);
            CHECK(back == codes);
            const ref_codes r = ref.decode(bin.get(), buf.size(), codes.size());
            CHECK((r && *r == codes));
          }
          std::vector<std::byte> garbage(64);
          for (auto& g : garbage) g = static_cast<std::byte>(rng());
          auto gin = exact_copy(garbage.data(), garbage.size());
          for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100}})
            check_against_reference(enc, gin.get(), garbage.size(), n, ref.decode(gin.get(), garbage.size(), n));
        }
      }
    CHECK(usable > 0);
    auto raw = [&](std::vector<std::uint8_t> b) {
      auto t = std::unique_ptr<std::byte[]>(new std::byte[b.size() ? b.size() : 1]);
      for (std::size_t i = 0; i < b.size(); ++i) t[i] = static_cast<std::byte>(b[i]);
      return ebac::huffman_codebook::deserialize(t.get(), b.size(), out);
    };
    CHECK(raw({0, 0}) == ebac::status::ok);                       // empty codebook
    CHECK(raw({0, 2, 5, 1, 0, 1}) == ebac::status::ok);           // symbols 5, 6 with length 1
    CHECK(raw({0, 3, 5, 1, 0, 1, 0, 1}) != ebac::status::ok);     // three codes of length 1: Kraft > 1
    CHECK(raw({0, 1, 5, 25}) != ebac::status::ok);                // length above 24
    CHECK(raw({0, 1, 5, 0}) != ebac::status::ok);                 // length 0 listed
    CHECK(raw({2, 0}) != ebac::status::ok);                       // unknown flag
    CHECK(raw({0, 1, 0xa0, 0x20, 1}) != ebac::status::ok);        // symbol 4128 >= alphabet size
    CHECK(raw({0, 2, 0x9f, 0x20, 1, 0, 1}) != ebac::status::ok);  // second symbol past the alphabet
    CHECK(raw({0, 1, 5, 1, 0}) != ebac::status::ok);              // trailing byte
    CHECK(raw({0, 0xff, 0xff, 0x03}) != ebac::status::ok);        // more symbols than the alphabet
  }

  TEST_CASE("huffman: garbage chunk bytes decode as the format says (rejected, or the reference decoder's codes)") {
    std::mt19937_64 rng(27);
    std::vector<std::uint64_t> h(A::size, 0);
    std::uint64_t a = 1, b = 1;
    for (std::uint32_t s = 0; s < 40; ++s) {
      h[s] = a;
      const auto c = a + b;
      a = b;
      b = c;
    }
    h[A::run_base] = 3;
    h[A::run_base + 30] = 1;
    h[A::escape] = 2;
    const auto skewed = codebook_of(h, true);
    std::vector<std::uint64_t> flat(A::size, 1);
    const auto uniform = codebook_of(flat, true);
    std::size_t whole_chunks = 0;
    for (const auto* cb : {&skewed, &uniform}) {
      const auto enc = ebac::huffman::bind(*cb);
      const reference_huffman ref(cb->length.data());
      for (int t = 0; t < 3000; ++t) {
        const std::size_t bytes = rng() % 80, n = rng() % 300;
        auto in = std::unique_ptr<std::byte[]>(new std::byte[bytes ? bytes : 1]);
        for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::byte>(rng());
        CAPTURE(t);
        CAPTURE(bytes);
        CAPTURE(n);
        check_against_reference(enc, in.get(), bytes, n, ref.decode(in.get(), bytes, n));
        // The count these bytes do decode to, when they happen to be a whole
        // chunk, and one code either side of it.
        if (const auto whole = ref.whole_count(in.get(), bytes, 100000)) {
          ++whole_chunks;
          for (std::size_t m : {*whole, *whole + 1, *whole > 0 ? *whole - 1 : std::size_t{2}})
            check_against_reference(enc, in.get(), bytes, m, ref.decode(in.get(), bytes, m));
        }
      }
    }
    CHECK(whole_chunks > 100);  // the accepted side was exercised too
  }

  namespace {
  /// The codebook context_ans learns from `codes` with rows of `row` codes.
  ebac::context_ans_codebook learn_ans(const std::vector<std::uint32_t>& codes, std::uint32_t row) {
    ebac::context_ans::statistics st(ebac::extents{1, row});
    CHECK(st.row == row);
    st.add(codes.data(), codes.size());
    return ebac::context_ans::learn(st);
  }
  std::vector<std::byte> bytes_of(std::initializer_list<unsigned> v) {
    std::vector<std::byte> b;
    for (unsigned x : v) b.push_back(static_cast<std::byte>(x));
    return b;
  }
  /// The chunk context_ans bound to cb writes for `codes`.
  std::vector<std::byte> ans_chunk(const ebac::context_ans_codebook& cb, const std::vector<std::uint32_t>& codes) {
    const auto enc = ebac::context_ans::bind(cb);
    std::vector<std::byte> buf(enc.max_chunk_bytes(codes.size()));
    buf.resize(enc.encode_chunk(codes.data(), codes.size(), buf.data()));
    return buf;
  }
  }  // namespace

  namespace {
  /// The striped codebook of a code set's own tokens, counted here from the
  /// format's token rules (not the encoder's statistics).
  std::vector<std::uint64_t> striped_histogram(const std::vector<std::uint32_t>& codes) {
    std::vector<std::uint64_t> h(171, 0);
    for (std::size_t i = 0; i < codes.size();) {
      std::size_t j = i;
      while (j < codes.size() && codes[j] == 0) ++j;
      if (j - i >= 2) {  // a run of L zeros: class floor(log2 L)
        unsigned k = 0;
        while ((std::uint64_t{2} << k) <= j - i) ++k;
        ++h[139 + k];
        i = j;
        continue;
      }
      const std::uint32_t v = codes[i++];
      if (v < 32) {
        ++h[v];
      } else {
        unsigned b = 0;
        while (b < 32 && (v >> b) != 0) ++b;
        ++h[32 + 4 * (b - 6) + ((v >> (b - 3)) & 3u)];
      }
    }
    return h;
  }
  }  // namespace

  TEST_CASE("striped: round trips, truncations and mutations, and statistics that count the format's tokens") {
    std::mt19937_64 rng(41);
    for (const auto& cs : code_sets(4)) {
      CAPTURE(cs.name);
      ebac::striped_huffman::statistics st;
      // Added in two parts and merged: sums do not depend on the grouping
      // (the chunk is cut after a non-zero code, so no run is split).
      std::size_t cut = cs.codes.size() / 2;
      while (cut > 0 && cs.codes[cut - 1] == 0) --cut;
      ebac::striped_huffman::statistics second;
      st.add(cs.codes.data(), cut);
      second.add(cs.codes.data() + cut, cs.codes.size() - cut);
      st.merge(second);
      CHECK(st.count == striped_histogram(cs.codes));
      const auto cb = ebac::striped_huffman::learn(st);
      for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
        CHECK(cb.length[s] <= 11);
        CHECK((cb.length[s] != 0) == (st.count[s] != 0));  // every token that occurs has a code
      }
      check_encoder(ebac::striped_huffman::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
      std::vector<std::byte> ser;
      cb.serialize(ser);
      ebac::striped_codebook back;
      auto in = exact_copy(ser.data(), ser.size());
      REQUIRE(ebac::striped_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
      CHECK(back.length == cb.length);
      CHECK(back.code_lsb == cb.code_lsb);
    }
  }

  TEST_CASE("striped: lengths stay within 11 bits on Fibonacci histograms, and every symbol codes") {
    std::mt19937_64 rng(42);
    std::vector<std::uint64_t> h(ebac::striped_alphabet::size, 0);
    std::uint64_t a = 1, b = 1;
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
      h[s] = a;
      const auto c = a + b;
      a = b;
      b = std::min<std::uint64_t>(c, std::uint64_t{1} << 40);
    }
    const auto cb = ebac::striped_codebook::from_histogram(h.data());
    std::uint64_t kraft = 0;
    for (std::uint32_t s = 0; s < ebac::striped_alphabet::size; ++s) {
      REQUIRE(cb.length[s] >= 1);
      REQUIRE(cb.length[s] <= 11);
      kraft += std::uint64_t{1} << (11 - cb.length[s]);
    }
    CHECK(kraft <= 2048);
    // One value of every bucket (both ends), every literal, a run of every
    // class a 2^16 chunk can hold, each closed by a non-zero code.
    code_set cs{"every symbol", {}};
    for (std::uint32_t v = 0; v < 32; ++v) cs.codes.push_back(v);
    for (unsigned width = 6; width <= 32; ++width)
      for (std::uint32_t m = 0; m < 4; ++m) {
        const std::uint32_t low = static_cast<std::uint32_t>((std::uint64_t{4 + m} << (width - 3)));
        cs.codes.push_back(low);
        cs.codes.push_back(static_cast<std::uint32_t>(low + ((std::uint64_t{1} << (width - 3)) - 1)));
      }
    for (unsigned k = 1; k <= 15; ++k) {
      cs.codes.insert(cs.codes.end(), (std::size_t{1} << k) + (k % 3), 0u);
      cs.codes.push_back(7);
    }
    check_encoder(ebac::striped_huffman::bind(cb), cs, rng, false);
  }

  TEST_CASE("striped: codebook sections that break the format are refused, and what is accepted decodes as the format says") {
    std::vector<std::uint64_t> h(ebac::striped_alphabet::size, 0);
    for (std::uint32_t s = 0; s < 60; ++s) h[s * 2] = 1 + s * s;
    const auto cb = ebac::striped_codebook::from_histogram(h.data());
    std::vector<std::byte> ser;
    cb.serialize(ser);
    ebac::striped_codebook out;
    for (std::size_t l = 0; l < ser.size(); ++l) {
      auto t = exact_copy(ser.data(), l);
      CAPTURE(l);
      CHECK(ebac::striped_codebook::deserialize(t.get(), l, out) != ebac::status::ok);
    }
    // A length of 12, a symbol past the alphabet, an over-full code: refused.
    auto refused = [&](std::vector<std::uint8_t> bytes) {
      std::vector<std::byte> b(bytes.size());
      for (std::size_t i = 0; i < bytes.size(); ++i) b[i] = static_cast<std::byte>(bytes[i]);
      auto t = exact_copy(b.data(), b.size());
      return ebac::striped_codebook::deserialize(t.get(), b.size(), out) != ebac::status::ok;
    };
    CHECK(refused({1, 5, 12}));             // one symbol, length 12
    CHECK(refused({1, 171, 1}));            // symbol 171
    CHECK(refused({3, 0, 1, 0, 1, 0, 1}));  // three codes of one bit
    CHECK(refused({1, 0, 0}));              // length 0
    CHECK_FALSE(refused({2, 0, 1, 0, 1}));  // two codes of one bit: a complete code
    std::mt19937_64 rng(43);
    std::vector<std::uint32_t> codes(3000);
    for (auto& c : codes) c = static_cast<std::uint32_t>(rng() % 120);
    std::size_t usable = 0;
    for (std::size_t pos = 0; pos < ser.size(); ++pos)
      for (std::uint8_t x : {0x01, 0x02, 0x10, 0x80, 0xff}) {
        auto t = exact_copy(ser.data(), ser.size());
        t[pos] ^= static_cast<std::byte>(x);
        if (ebac::striped_codebook::deserialize(t.get(), ser.size(), out) != ebac::status::ok) continue;
        ++usable;
        std::uint64_t kraft = 0;
        for (auto l : out.length)
          if (l) kraft += std::uint64_t{1} << (11 - l);
        CHECK(kraft <= 2048);
        // Garbage through a codebook the stream names: decoded as the format says.
        const ebac::striped_huffman enc = ebac::striped_huffman::bind(out);
        std::vector<std::byte> garbage(200);
        for (auto& g : garbage) g = static_cast<std::byte>(rng());
        garbage[0] = std::byte{60}, garbage[1] = std::byte{50}, garbage[2] = std::byte{40};
        auto gin = exact_copy(garbage.data(), garbage.size());
        for (std::size_t n : {1u, 7u, 100u, 400u})
          check_against_reference(enc, gin.get(), garbage.size(), n, reference_decode(enc, gin.get(), garbage.size(), n));
      }
    CHECK(usable > 0);
  }

  TEST_CASE("context_ans: byte layout") {
    // All zeros: the chunk's one block is all zero, flagged in a bitmap of
    // one byte (bit 31 of the byte count says it follows) and takes no step:
    // R = 16, the four states at 2^23, no raw bits. Nothing was counted, so
    // no context has a table.
    {
      const std::vector<std::uint32_t> zeros(10, 0);
      const auto cb = learn_ans(zeros, 5);
      CHECK(std::all_of(cb.freq.begin(), cb.freq.end(), [](std::uint16_t f) { return f == 0; }));
      const auto buf = ans_chunk(cb, zeros);
      CHECK(buf == bytes_of({16, 0, 0, 0x80, 0x01, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0}));
      std::vector<std::uint32_t> back(10, 99);
      CHECK(ebac::context_ans::bind(cb).decode_chunk(buf.data(), buf.size(), back.data(), back.size()) == ebac::status::ok);
      CHECK(back == zeros);
    }
    // One code 77 = 0b1001101: bit width 7, the bit below the leading one 0:
    // token 32 + 2 x (7 - 6) + 0 = 34, raw bits 01101 -> byte 0x0d.
    {
      const std::vector<std::uint32_t> one{77};
      const auto cb = learn_ans(one, 1);
      CHECK_FALSE(cb.diagonal);  // the smaller tables win on one code
      CHECK(cb.freq[34] == 16384);
      CHECK(ans_chunk(cb, one) == bytes_of({16, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0x0d}));
    }
    // A set table of two tokens at 1/2 each, one code 1 (token 1, start
    // 8192): x' = (x / 8192) * 2^14 + x % 8192 + 8192 = 2^24 + 8192 from
    // x = 2^23, on state 0; the other three stay at 2^23.
    {
      const std::vector<std::uint32_t> codes{1};
      ebac::context_ans_codebook cb{};
      cb.row = 1;
      cb.freq[0] = 8192;
      cb.freq[1] = 8192;
      cb.derive();
      const auto buf = ans_chunk(cb, codes);
      // state 0 = 2^24 + 8192 = 0x01002000; no renormalisation (limit 2^9 * 2^8 * 8192 = 2^30)
      CHECK(buf == bytes_of({16, 0, 0, 0, 0x00, 0x20, 0x00, 0x01, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0}));
      std::uint32_t back = 99;
      CHECK(ebac::context_ans::bind(cb).decode_chunk(buf.data(), buf.size(), &back, 1) == ebac::status::ok);
      CHECK(back == 1);
    }
  }

  TEST_CASE(
      "context_ans: blocks of zeros are flagged, take no step and decode as zeros, and chunks without a bitmap still decode") {
    // 5000 codes, rows of 28: blocks of 1024 (the last one 904 long). Blocks
    // 1 and 4 are all zero, so the bitmap is 0b10010; the others hold small
    // codes and zeros, some of block 2's beside block 1's zeros.
    std::mt19937_64 rng(71);
    const std::size_t n = 5000;
    std::vector<std::uint32_t> codes(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (i / 1024 != 1 && i / 1024 != 4 && rng() % 3 == 0) codes[i] = static_cast<std::uint32_t>(1 + rng() % 40);
    const auto cb = learn_ans(codes, 28);
    const ebac::context_ans enc = ebac::context_ans::bind(cb);
    const auto buf = ans_chunk(cb, codes);
    REQUIRE(buf.size() > 5);
    CHECK((static_cast<unsigned>(buf[3]) & 0x80u) != 0);  // bit 31 of the byte count: a bitmap follows
    CHECK(static_cast<unsigned>(buf[4]) == 0x12u);
    std::vector<std::uint32_t> back(n, 99);
    CHECK(enc.decode_chunk(buf.data(), buf.size(), back.data(), n) == ebac::status::ok);
    CHECK(back == codes);
    auto refused = [&](std::vector<std::byte> b) {
      std::vector<std::uint32_t> out(n);
      return enc.decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream;
    };
    {  // no block left flagged: the writer would have left the bitmap out
      auto b = buf;
      b[4] = std::byte{0};
      CHECK(refused(b));
    }
    {  // a bit past the chunk's five blocks
      auto b = buf;
      b[4] |= std::byte{0x20};
      CHECK(refused(b));
    }
    {  // under a version-0 codebook no chunk has a bitmap
      ebac::context_ans v0 = enc;
      v0.zero_blocks = false;
      std::vector<std::uint32_t> out(n);
      CHECK(v0.decode_chunk(buf.data(), buf.size(), out.data(), n) == ebac::status::corrupt_stream);
    }
    {  // a chunk cut inside its bitmap
      std::vector<std::uint32_t> out(n);
      CHECK(enc.decode_chunk(buf.data(), 4, out.data(), n) == ebac::status::corrupt_stream);
    }
    {  // the head: the one-byte bitmap, then the rANS bytes the count names, the four states first
      // The chunk's own bytes, read here byte by byte (not by the reader under test).
      auto le32 = [&](std::size_t at) {
        return static_cast<std::uint32_t>(buf[at]) | static_cast<std::uint32_t>(buf[at + 1]) << 8 |
               static_cast<std::uint32_t>(buf[at + 2]) << 16 | static_cast<std::uint32_t>(buf[at + 3]) << 24;
      };
      ebac::context_ans::chunk_head h;
      REQUIRE(enc.read_head(buf.data(), buf.size(), n, h));
      CHECK(h.bitmap_length == 1);
      CHECK(h.rans_bytes == (le32(0) & 0x7fffffffu));
      for (std::size_t s = 0; s < 4; ++s) CHECK(h.states[s] == le32(5 + 4 * s));
      // A count one past what the chunk holds after its bitmap, and one that
      // leaves no room for the four states: refused before any rANS byte is read.
      for (const std::uint32_t count : {static_cast<std::uint32_t>(buf.size() - 4), 15u}) {
        auto b = buf;
        ebac::detail::store_le<std::uint32_t>(b.data(), count | 0x80000000u);
        CHECK_FALSE(enc.read_head(b.data(), b.size(), n, h));
        CHECK(refused(b));
      }
      // An initial state below 2^23 or from 2^31: no encoder writes one.
      for (const std::uint32_t state : {(1u << 23) - 1, 1u << 31}) {
        for (std::size_t s = 0; s < 4; ++s) {
          auto b = buf;
          ebac::detail::store_le<std::uint32_t>(b.data() + 5 + 4 * s, state);
          CHECK_FALSE(enc.read_head(b.data(), b.size(), n, h));
          CHECK(refused(b));
        }
      }
      CHECK_FALSE(enc.read_head(buf.data(), 3, n, h));
    }
    // A chunk with no block of zeros has no bitmap and no flag: the bytes of
    // version 0, which a version-0 codebook (streams written before the
    // bitmap) decodes, and writes when it encodes.
    std::vector<std::uint32_t> dense(n);
    for (auto& v : dense) v = static_cast<std::uint32_t>(rng() % 3);
    dense[0] = 1;
    for (std::size_t b = 0; b < n; b += 1024) dense[b] = 1;  // no block all zero
    auto cb0 = learn_ans(dense, 28);
    const auto with = ans_chunk(cb0, dense);
    CHECK((static_cast<unsigned>(with[3]) & 0x80u) == 0);
    std::vector<std::byte> image;
    cb0.serialize(image);
    CHECK(static_cast<unsigned>(image[0]) == 1u);  // the writer's version
    image[0] = std::byte{0};
    ebac::context_ans_codebook old;
    REQUIRE(ebac::context_ans_codebook::deserialize(image.data(), image.size(), old) == ebac::status::ok);
    CHECK(old.version == 0);
    const ebac::context_ans enc0 = ebac::context_ans::bind(old);
    CHECK_FALSE(enc0.zero_blocks);
    std::vector<std::uint32_t> out(n);
    CHECK(enc0.decode_chunk(with.data(), with.size(), out.data(), n) == ebac::status::ok);
    CHECK(out == dense);
    CHECK(ans_chunk(old, dense) == with);
    {  // the same chunk with a bitmap that flags no block: not the writer's form, refused
      std::vector<std::byte> b = with;
      b[3] |= std::byte{0x80};
      b.insert(b.begin() + 4, std::byte{0});
      CHECK(enc0.decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream);  // version 0: no bitmap at all
      CHECK(ebac::context_ans::bind(cb0).decode_chunk(b.data(), b.size(), out.data(), n) == ebac::status::corrupt_stream);
    }
    // Version 0 codes a block of zeros step by step (when its tables have token 0 where it falls).
    std::vector<std::uint32_t> gap = dense;
    std::fill(gap.begin() + 1024, gap.begin() + 2048, 0u);
    std::vector<std::byte> zimage;
    auto cbg = learn_ans(dense, 28);  // counted without the gap: (context 0, token 0) occurs in dense
    cbg.version = 0;
    cbg.serialize(zimage);
    ebac::context_ans_codebook oldg;
    REQUIRE(ebac::context_ans_codebook::deserialize(zimage.data(), zimage.size(), oldg) == ebac::status::ok);
    const auto stepwise = ans_chunk(oldg, gap);
    CHECK((static_cast<unsigned>(stepwise[3]) & 0x80u) == 0);
    CHECK(ebac::context_ans::bind(oldg).decode_chunk(stepwise.data(), stepwise.size(), out.data(), n) == ebac::status::ok);
    CHECK(out == gap);
  }

  TEST_CASE("context_ans: round trips, truncations and mutations, rows of 1, 7 and 64") {
    std::mt19937_64 rng(29);
    for (std::uint32_t row : {1u, 7u, 64u}) {
      CAPTURE(row);
      for (const auto& cs : code_sets(5)) {
        const auto cb = learn_ans(cs.codes, row);
        check_encoder(ebac::context_ans::bind(cb), cs, rng, !cs.codes.empty() && cs.codes.size() <= 16384);
      }
    }
  }

  TEST_CASE("context_ans: learned frequencies sum to 2^14 and never drop a token that occurs") {
    ebac::context_ans::statistics st(ebac::extents{3, 0});
    CHECK(st.row == 1);  // an empty last extent still gives a usable row
    // Statistics count the diagonal set (context 2 (8 left + up) + diagonal bit).
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    CHECK(T == 86);
    st.add_count(0, 0, std::uint64_t{1} << 50);  // large enough to need the rescaling
    for (std::uint32_t t = 1; t < T; ++t) st.add_count(0, t, 1);
    // Fine context 2 (8 left + up) + d: left 0, up 5 and 7, diagonal bit 1,
    // one token each, often enough that merging classes 4-7 (k = 4) would cost
    // a bit a code: the 8 classes win; the diagonal bit tells nothing here, so
    // the flat set (fewer table bytes, the same bits) wins over it.
    st.add_count(11, 3, 1000000);
    st.add_count(15, 4, 1000000);
    const auto cb = ebac::context_ans::learn(st);
    CHECK(cb.classes == 8);
    CHECK_FALSE(cb.diagonal);
    std::uint32_t sum0 = 0;
    for (std::size_t t = 0; t < T; ++t) {
      CHECK(cb.freq[t] >= 1);
      sum0 += cb.freq[t];
    }
    CHECK(sum0 == 16384);
    CHECK(cb.freq[0] == 16384 - (T - 1));
    CHECK(cb.freq[5 * T + 3] == 16384);
    CHECK(cb.freq[7 * T + 4] == 16384);
    for (std::size_t c = 0; c < 128; ++c)
      if (c != 0 && c != 5 && c != 7)
        for (std::size_t t = 0; t < T; ++t) CHECK(cb.freq[c * T + t] == 0);
    // Few codes: the tables of 64 contexts would cost more than they save, so
    // a coarser set is kept (one context: every code is a zero).
    const auto small = learn_ans(std::vector<std::uint32_t>(50, 0), 7);
    CHECK(small.classes == 1);
    CHECK_FALSE(small.diagonal);
    // Serialized and read back: the same tables.
    std::vector<std::byte> ser;
    cb.serialize(ser);
    CHECK(ser.size() <= ebac::context_ans_codebook::max_serialized_bytes);
    // learn() weighs the sets by serialized_bytes(), which must be what serialize writes.
    CHECK(cb.serialized_bytes() == ser.size());
    for (const auto& other : {small, learn_ans(std::vector<std::uint32_t>{0, 3, 900, 0, 1, 70000, 2, 2, 0}, 3)}) {
      std::vector<std::byte> b;
      other.serialize(b);
      CHECK(other.serialized_bytes() == b.size());
    }
    ebac::context_ans_codebook back;
    auto in = exact_copy(ser.data(), ser.size());
    REQUIRE(ebac::context_ans_codebook::deserialize(in.get(), ser.size(), back) == ebac::status::ok);
    CHECK(back.row == cb.row);
    CHECK(back.classes == cb.classes);
    CHECK(back.diagonal == cb.diagonal);
    CHECK(back.freq == cb.freq);
    CHECK(back.cumulative == cb.cumulative);
  }

  TEST_CASE("context_ans: the diagonal context set is kept where it pays, and decodes") {
    // Rows of 16 of random bits in the first row and column, every other code
    // its upper-left neighbour: left and up say nothing, the diagonal bit
    // (upper-left or upper-right non-zero) does (0 when it is 0; 1 two times
    // in three otherwise): about 0.69 bits a code against 1.
    const std::uint32_t row = 16;
    std::vector<std::uint32_t> codes(row * 400);
    std::mt19937_64 rng(31);
    for (std::size_t i = 0; i < codes.size(); ++i)
      codes[i] = (i < row || i % row == 0) ? static_cast<std::uint32_t>(rng() % 2) : codes[i - row - 1];
    const auto cb = learn_ans(codes, row);
    CHECK(cb.diagonal);
    const auto enc = ebac::context_ans::bind(cb);
    for (std::size_t n : {codes.size(), std::size_t{17}, std::size_t{1000}}) {
      std::vector<std::byte> buf(enc.max_chunk_bytes(n));
      const std::size_t k = enc.encode_chunk(codes.data(), n, buf.data());
      std::vector<std::uint32_t> back(n);
      REQUIRE(enc.decode_chunk(buf.data(), k, back.data(), n) == ebac::status::ok);
      CHECK(std::equal(back.begin(), back.end(), codes.begin()));
      const ref_codes ref = reference_decode(enc, buf.data(), k, n);
      REQUIRE(ref.has_value());
      CHECK(std::equal(ref->begin(), ref->end(), codes.begin()));
    }
  }

  TEST_CASE("context_ans: estimated_payload_bits is what encode_chunk writes, within 0.1% and 8 bytes") {
    // The host backend weighs predictors by this estimate instead of coding
    // (host/codec.hpp: cheapest_predictor). Checked against the bytes the
    // encoder writes, less the chunk's fixed 20 (byte count, four states).
    std::mt19937_64 rng(43);
    std::geometric_distribution<std::uint32_t> small(0.35), large(0.002);
    for (const std::uint32_t row : {28u, 128u}) {
      for (int kind = 0; kind < 3; ++kind) {
        // 0: sparse, runs of zeros and small codes; 1: codes like their upper
        // neighbour, many with raw bits; 2: independent codes up to 2^12.
        std::vector<std::uint32_t> codes(std::size_t{1} << 16);
        for (std::size_t i = 0; i < codes.size(); ++i) {
          if (kind == 0) codes[i] = rng() % 4 == 0 ? small(rng) : 0u;
          else if (kind == 1) codes[i] = i >= row && rng() % 3 != 0 ? codes[i - row] : large(rng);
          else codes[i] = static_cast<std::uint32_t>(rng() % 4096);
        }
        ebac::context_ans::statistics st(ebac::extents{1, row});
        st.add(codes.data(), codes.size());
        const auto cb = ebac::context_ans::learn(st);
        // The estimate is made on learn_frequencies' codebook (as the host
        // backend does): learn()'s frequencies, set, row and serialized bytes,
        // without the coding tables.
        const auto freq_only = ebac::context_ans::learn_frequencies(st);
        CHECK(freq_only.freq == cb.freq);
        CHECK(freq_only.classes == cb.classes);
        CHECK(freq_only.diagonal == cb.diagonal);
        CHECK(freq_only.row == cb.row);
        CHECK((freq_only.steps.empty() && freq_only.cumulative.empty() && freq_only.first_token_fine.empty()));
        std::vector<std::byte> a_bytes, b_bytes;
        cb.serialize(a_bytes);
        freq_only.serialize(b_bytes);
        CHECK(a_bytes == b_bytes);
        const double estimate = ebac::context_ans::estimated_payload_bits(st, freq_only) / 8;
        const double coded = static_cast<double>(ans_chunk(cb, codes).size()) - 20;
        CAPTURE(row);
        CAPTURE(kind);
        CAPTURE(estimate);
        CAPTURE(coded);
        CHECK(std::fabs(coded - estimate) <= 0.001 * coded + 8);
      }
    }
  }

  namespace {
  // The format's context of element i, written from docs/format.md: the
  // magnitude classes min(k - 1, bit width) of the left and upper codes (0
  // outside the chunk), with the diagonal set times two plus whether the
  // upper-left or upper-right code is non-zero (a row of at least 2, i > row).
  std::uint32_t reference_context(const std::vector<std::uint32_t>& c, std::size_t i, std::uint32_t row, std::uint32_t classes,
                                  bool diagonal) {
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
  std::uint32_t reference_token(std::uint32_t v) {
    if (v < 32) return v;
    std::uint32_t w = 0;
    for (std::uint32_t x = v; x; x >>= 1) ++w;
    return 32 + 2 * (w - 6) + ((v >> (w - 2)) & 1u);
  }
  }  // namespace

  TEST_CASE("context_ans: estimated_payload_bits is each code's -log2(f / 2^14) in its context plus its raw bits, summed here") {
    // The estimate's own arithmetic, against a sum over the codes computed
    // from the format's contexts and tokens and std::log2 (the estimate reads
    // a table of log2's values; learn() weighs its context sets by the same).
    std::mt19937_64 rng(47);
    std::geometric_distribution<std::uint32_t> small(0.3);
    for (const std::uint32_t row : {1u, 28u, 300u}) {
      std::vector<std::uint32_t> codes(std::size_t{1} << 15);
      for (std::size_t i = 0; i < codes.size(); ++i)
        codes[i] = rng() % 3 == 0 ? small(rng) : (rng() % 50 == 0 ? static_cast<std::uint32_t>(rng() % 100000) : 0u);
      ebac::context_ans::statistics st(ebac::extents{1, row});
      st.add(codes.data(), codes.size());
      const auto cb = ebac::context_ans::learn_frequencies(st);
      double want = 0;
      for (std::size_t i = 0; i < codes.size(); ++i) {
        const std::uint32_t t = reference_token(codes[i]);
        const std::uint16_t f = cb.freq[std::size_t{reference_context(codes, i, row, cb.classes, cb.diagonal)} *
                                            ebac::detail::context_ans_model::tokens +
                                        t];
        REQUIRE(f > 0);
        want += 14.0 - std::log2(static_cast<double>(f)) + ebac::detail::context_ans_model::extra_bits(t);
      }
      const double got = ebac::context_ans::estimated_payload_bits(st, cb);
      CAPTURE(row);
      CAPTURE(want);
      CAPTURE(got);
      CHECK(std::fabs(got - want) <= 1e-9 * want);
    }
  }

  TEST_CASE("context_ans: a code's token, raw-bit count and token base are the format's") {
    // At both edges of every bit width and a few values between: the token
    // from its definition, the raw-bit count w - 2 (none below 32), and the
    // token's base plus the code's low raw bits giving the code back.
    using model = ebac::detail::context_ans_model;
    std::vector<std::uint32_t> values;
    for (std::uint32_t v = 0; v < 70; ++v) values.push_back(v);
    for (int w = 6; w <= 32; ++w) {
      const std::uint64_t lo = std::uint64_t{1} << (w - 1), hi = (std::uint64_t{1} << w) - 1;
      for (std::uint64_t v : {lo, lo + 1, lo + lo / 2 - 1, lo + lo / 2, hi - 1, hi})
        values.push_back(static_cast<std::uint32_t>(v));
    }
    for (std::uint32_t v : values) {
      CAPTURE(v);
      std::uint32_t w = 0;
      for (std::uint32_t x = v; x; x >>= 1) ++w;
      const int raw = v < 32 ? 0 : static_cast<int>(w) - 2;
      const std::uint32_t t = model::token(v);
      CHECK(t == reference_token(v));
      CHECK(model::raw_bits_of(v) == raw);
      CHECK(model::extra_bits(t) == raw);
      CHECK((model::token_base(t) | (v & static_cast<std::uint32_t>((std::uint64_t{1} << raw) - 1))) == v);
    }
  }

  TEST_CASE("context_ans: a block's contexts (what the encoder and the statistics use) are the format's, for every set and row") {
    std::mt19937_64 rng(37);
    // Zeros, small codes, every bit width up to 32: each class and the diagonal bit both ways.
    std::vector<std::uint32_t> codes(3000);
    for (auto& v : codes) v = rng() % 3 == 0 ? 0u : static_cast<std::uint32_t>(rng() >> (32 + rng() % 32));
    std::size_t compared = 0;
    for (std::uint32_t row : {1u, 2u, 3u, 28u, 1023u, 2999u, 5000u, 0xffffffffu})
      for (std::uint32_t classes : {1u, 2u, 4u, 8u})
        for (bool diagonal : {false, true})
          for (auto [b, e] : {std::pair<std::size_t, std::size_t>{0, 3000},
                              {0, 1},
                              {1, 2},
                              {27, 29},
                              {28, 30},
                              {29, 1053},
                              {1000, 3000},
                              {2998, 3000}}) {
            CAPTURE(row);
            CAPTURE(classes);
            CAPTURE(diagonal);
            CAPTURE(b);
            std::vector<std::uint8_t> got(e - b, 0xff);
            ebac::detail::context_ans_model::contexts(codes.data(), b, e, row, classes, diagonal, got.data());
            for (std::size_t i = b; i < e; ++i, ++compared)
              if (got[i - b] != reference_context(codes, i, row, classes, diagonal)) {
                CAPTURE(i);
                FAIL_CHECK("context differs");
                break;
              }
          }
    CHECK(compared == 8 * 4 * 2 * (3000 + 1 + 1 + 2 + 2 + 1024 + 2000 + 2));
    // The encoder codes a chunk in blocks of contexts from its end, four states
    // a round: lengths around the block's size and every remainder mod 4
    // decode (by the reference decoder) to the codes.
    for (std::uint32_t row : {1u, 28u}) {
      const auto cb = learn_ans(codes, row);
      const auto enc = ebac::context_ans::bind(cb);
      for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 1022u, 1023u, 1024u, 1025u, 1026u, 1027u, 2047u, 2048u, 2049u, 2050u, 3000u}) {
        CAPTURE(row);
        CAPTURE(n);
        std::vector<std::byte> buf(enc.max_chunk_bytes(n));
        const std::size_t k = enc.encode_chunk(codes.data(), n, buf.data());
        const ref_codes ref = reference_decode(enc, buf.data(), k, n);
        REQUIRE(ref.has_value());
        CHECK(std::equal(ref->begin(), ref->end(), codes.begin()));
      }
    }
  }

  namespace {
  /// Adds to `counts` the (finest context, token) of each code of a chunk,
  /// from the format's definitions, but for the blocks of 1024 codes (from
  /// the chunk's first) that are all 0: those take no step.
  void count_reference(const std::vector<std::uint32_t>& codes, std::uint32_t row, std::vector<std::uint64_t>& counts) {
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    for (std::size_t b = 0; b < codes.size(); b += 1024) {
      const std::size_t e = std::min(codes.size(), b + 1024);
      bool zero = true;
      for (std::size_t i = b; i < e; ++i) zero = zero && codes[i] == 0;
      if (zero) continue;
      for (std::size_t i = b; i < e; ++i)
        ++counts[std::size_t{reference_context(codes, i, row, 8, true)} * T + reference_token(codes[i])];
    }
  }
  }  // namespace

  TEST_CASE("context_ans: statistics count every chunk's (context, token), whatever the chunk sizes and merges") {
    // Chunks of 1 to 5000 codes, added one call each into three statistics
    // that are then merged: totals() must be the count of each chunk's
    // (finest context, token) pairs computed here from the format's
    // definitions (blocks of zeros left out). Many small chunks in a row are the case where add()'s
    // extra tables are carried from call to call, not summed each time.
    std::mt19937_64 rng(41);
    const std::uint32_t row = 28;
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    std::vector<std::uint64_t> expected(std::size_t{ebac::detail::context_ans_model::max_contexts} * T, 0);
    std::vector<ebac::context_ans::statistics> st(3, ebac::context_ans::statistics(ebac::extents{4, row}));
    std::size_t chunks = 0;
    for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 7u, 256u, 256u, 256u, 1023u, 1024u, 1025u, 5000u, 256u, 17u}) {
      for (int again = 0; again < 40; ++again, ++chunks) {
        std::vector<std::uint32_t> codes(n);
        for (auto& v : codes) v = rng() % 2 == 0 ? 0u : static_cast<std::uint32_t>(rng() >> (32 + rng() % 32));
        count_reference(codes, row, expected);
        st[chunks % 3].add(codes.data(), n);
      }
    }
    // One read before more are added must not lose or double what follows.
    (void)st[1].totals();
    std::vector<std::uint32_t> more(300, 5);
    st[1].add(more.data(), more.size());
    for (std::size_t i = 0; i < more.size(); ++i) ++expected[std::size_t{reference_context(more, i, row, 8, true)} * T + 5];
    st[0].merge(st[1]);
    st[0].merge(st[2]);
    const std::vector<std::uint64_t> got = st[0].totals();
    REQUIRE(got.size() == expected.size());
    std::size_t differ = 0;
    for (std::size_t k = 0; k < got.size(); ++k) differ += got[k] != expected[k] ? 1 : 0;
    CHECK(differ == 0);
  }

  TEST_CASE(
      "context_ans: statistics leave out blocks of zeros and count zeros beside a non-zero neighbour as the format's contexts") {
    // A chunk's block of 1024 codes that are all 0 is flagged in its bitmap
    // and takes no rANS step (docs/format.md), so add() does not count it.
    // Chunks of zeros with one non-zero code placed just inside and just
    // outside what a block's first element reads (its left, upper-left,
    // upper and upper-right neighbours), for rows of 1, 2, 28, 1024 and wider
    // than a block: the totals must be the (context, token) computed here of
    // each element of the blocks [1024 k, 1024 (k + 1)) with a non-zero code.
    const std::size_t T = ebac::detail::context_ans_model::tokens;
    for (std::uint32_t row : {1u, 2u, 28u, 1024u, 1025u, 3000u}) {
      CAPTURE(row);
      std::vector<std::uint64_t> expected(std::size_t{ebac::detail::context_ans_model::max_contexts} * T, 0);
      ebac::context_ans::statistics st(ebac::extents{4, row});
      const std::size_t n = 5000;
      // Where the non-zero code goes, relative to the second block's start
      // (b = 1024): b - row - 2 is read by no element of that block.
      std::vector<std::int64_t> at = {-1, 0, 1023, 1024, -static_cast<std::int64_t>(row) - 2};
      for (std::int64_t d = -static_cast<std::int64_t>(row) - 1; d <= -static_cast<std::int64_t>(row) + 1; ++d) at.push_back(d);
      for (std::int64_t d : at) {
        std::vector<std::uint32_t> codes(n, 0);
        const std::int64_t i = 1024 + d;
        if (i >= 0 && i < static_cast<std::int64_t>(n)) codes[static_cast<std::size_t>(i)] = 7;
        count_reference(codes, row, expected);
        st.add(codes.data(), n);
      }
      const std::vector<std::uint64_t> got = st.totals();
      std::size_t differ = 0;
      for (std::size_t k = 0; k < got.size(); ++k) differ += got[k] != expected[k] ? 1 : 0;
      CHECK(differ == 0);
    }
  }

  TEST_CASE("context_ans: codebook sections that break the format are refused") {
    // version 0, context set 0, row 3, 64 contexts: the first with two tokens
    // 8192 + 8192 (varint 0x80 0x40), the rest unused.
    auto good = [] {
      std::vector<std::byte> b = bytes_of({0, 0, 3, 2, 0x80, 0x40, 0x80, 0x40});
      for (int c = 1; c < 64; ++c) b.push_back(std::byte{0});
      return b;
    };
    auto reads = [](const std::vector<std::byte>& b) {
      ebac::context_ans_codebook cb;
      auto in = exact_copy(b.data(), b.size());
      return ebac::context_ans_codebook::deserialize(in.get(), b.size(), cb);
    };
    {
      const auto b = good();
      ebac::context_ans_codebook cb;
      REQUIRE(ebac::context_ans_codebook::deserialize(b.data(), b.size(), cb) == ebac::status::ok);
      CHECK(cb.row == 3);
      CHECK_FALSE(cb.diagonal);
      CHECK(cb.freq[0] == 8192);
      CHECK(cb.freq[1] == 8192);
      CHECK(cb.cumulative[1] == 8192);
    }
    auto bad = good();
    bad[0] = std::byte{2};  // an unknown version
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[1] = std::byte{8};  // an unknown context set
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[1] = std::byte{1};  // the diagonal set: 128 contexts, so 64 are missing
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad.resize(bad.size() + 64, std::byte{0});  // with them it reads
    CHECK(reads(bad) == ebac::status::ok);
    bad = good();
    bad[1] = std::byte{2};  // 4 classes: 16 contexts, so 48 bytes are left over
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad.resize(bad.size() - 48);
    {
      ebac::context_ans_codebook cb;
      REQUIRE(ebac::context_ans_codebook::deserialize(bad.data(), bad.size(), cb) == ebac::status::ok);
      CHECK(cb.classes == 4);
      CHECK(cb.contexts() == 16);
    }
    bad[1] = std::byte{7};  // 1 class with the diagonal bit: 2 contexts
    bad.resize(bad.size() - 14);
    CHECK(reads(bad) == ebac::status::ok);
    bad = good();
    bad[2] = std::byte{0};  // row 0
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[7] = std::byte{0x41};  // second frequency 8320: the sum is not 2^14
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad[3] = std::byte{87};  // more tokens than the alphabet
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad.push_back(std::byte{0});  // a byte left over
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    bad = good();
    bad.pop_back();  // the last context missing
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    // k = 3 whose third frequency is 0: not the canonical form (k names the last non-zero)
    bad = bytes_of({0, 0, 3, 3, 0x80, 0x40, 0x80, 0x40, 0});
    for (int c = 1; c < 64; ++c) bad.push_back(std::byte{0});
    CHECK(reads(bad) == ebac::status::corrupt_stream);
    CHECK(reads({}) == ebac::status::corrupt_stream);
  }

  TEST_CASE("context_ans: the decoder's first-token tables name the token holding each 64th and 16th slot") {
    // Frequency tables drawn here: some contexts unused, some with one token of
    // 2^14, most with many tokens of 1-3 (boundaries off every multiple of 16)
    // beside a few large ones. The token holding slot s is found from the
    // frequencies by the test's own running sum.
    using model = ebac::detail::context_ans_model;
    constexpr std::uint32_t T = model::tokens;
    std::mt19937 rng(20261205);
    int checked = 0, contexts = 0;
    for (int round = 0; round < 20; ++round) {
      ebac::context_ans_codebook cb{};
      cb.classes = round % 2 == 0 ? 8u : 4u;
      cb.diagonal = round % 3 != 0;
      for (std::uint32_t c = 0; c < cb.contexts(); ++c) {
        std::uint16_t* f = cb.freq.data() + std::size_t{c} * T;
        const std::uint32_t kind = rng() % 4;
        if (kind == 0) continue;  // unused
        if (kind == 1) {
          f[rng() % T] = model::scale;
          continue;
        }
        std::uint32_t left = model::scale;
        for (std::uint32_t t = 0; t + 1 < T && left > 0; ++t) {
          if (rng() % 3 == 0) continue;
          const std::uint32_t want = kind == 2 ? 1 + rng() % 3 : rng() % 900;
          const std::uint32_t v = std::min(want, left);
          f[t] = static_cast<std::uint16_t>(v);
          left -= v;
        }
        f[T - 1] = static_cast<std::uint16_t>(f[T - 1] + left);
      }
      cb.derive();
      REQUIRE(cb.first_token.size() == std::size_t{cb.contexts()} * 256);
      // One row more in first_token_fine, cumulative and steps: the identity
      // (token 0 at every slot, frequency 2^14; a step that changes no state).
      REQUIRE(cb.first_token_fine.size() == std::size_t{cb.contexts() + 1} * 1024);
      REQUIRE(cb.cumulative.size() == std::size_t{cb.contexts() + 1} * (T + 1));
      REQUIRE(cb.steps.size() == std::size_t{cb.contexts()} * T + 1);
      CHECK(std::all_of(cb.first_token_fine.end() - 1024, cb.first_token_fine.end(), [](std::uint8_t t) { return t == 0; }));
      CHECK(cb.cumulative[std::size_t{cb.contexts()} * (T + 1)] == 0);
      CHECK(std::all_of(cb.cumulative.end() - T, cb.cumulative.end(), [](std::uint16_t c) { return c == model::scale; }));
      for (std::uint32_t s0 : {1u << 23, (1u << 23) + 12345u, (1u << 31) - 1u}) {
        std::byte space[8] = {};
        std::byte* p = space + 8;
        std::uint32_t s = s0;
        ebac::detail::context_ans_encode_step(cb.steps.back(), s, p);
        CHECK(s == s0);
        CHECK(p == space + 8);
      }
      for (std::uint32_t c = 0; c < cb.contexts(); ++c) {
        const std::uint16_t* f = cb.freq.data() + std::size_t{c} * T;
        std::vector<std::uint32_t> holder;  // holder[s]: the token holding slot s
        for (std::uint32_t t = 0; t < T; ++t) holder.insert(holder.end(), f[t], t);
        const bool unused = holder.empty();
        if (!unused) REQUIRE(holder.size() == model::scale);
        bool same = true;
        for (std::uint32_t b = 0; b < 1024; ++b) {
          const std::uint32_t want = unused ? ebac::context_ans_codebook::unused_context : holder[16 * b];
          same = same && cb.first_token_fine[std::size_t{c} * 1024 + b] == want;
          if (b < 256) {
            const std::uint32_t want_coarse = unused ? ebac::context_ans_codebook::unused_context : holder[64 * b];
            same = same && cb.first_token[std::size_t{c} * 256 + b] == want_coarse;
          }
        }
        CHECK_MESSAGE(same, "round " << round << ": context " << c << ": a first-token entry is not the token holding its slot");
        checked += same;
        ++contexts;
      }
    }
    CHECK(checked == contexts);
  }

  TEST_CASE("context_ans: a chunk that reaches a context the tensor never had is refused") {
    // Tables only for context 0, token 1: decoding a 1 moves the next element to
    // context (class 1, 0), which has no table.
    ebac::context_ans_codebook cb{};
    cb.row = 100;
    cb.freq[1] = 16384;
    cb.derive();
    const auto enc = ebac::context_ans::bind(cb);
    const std::vector<std::uint32_t> one{1};
    std::vector<std::byte> buf(enc.max_chunk_bytes(2));
    const std::size_t k = enc.encode_chunk(one.data(), 1, buf.data());
    std::uint32_t out[2] = {};
    CHECK(enc.decode_chunk(buf.data(), k, out, 1) == ebac::status::ok);
    CHECK(enc.decode_chunk(buf.data(), k, out, 2) == ebac::status::corrupt_stream);
    CHECK_FALSE(reference_decode(enc, buf.data(), k, 2).has_value());
  }

}  // TEST_SUITE

TEST_CASE("encoder registry: ids, names and reader checks come from the encoders' own headers") {
  // What each encoder states, written out here from the format (docs/format.md).
  struct expected {
    ebac::encoder_id id;
    std::string_view name;
    bool codebook;
    std::uint64_t min_payload_for_100;  // least payload bytes of a 100-code stream
  };
  const expected want[] = {{ebac::encoder_id::block_bitpack, "bitpack", false, 4},
                           {ebac::encoder_id::run_length, "rle", false, 0},
                           {ebac::encoder_id::huffman, "huffman", true, 0},
                           {ebac::encoder_id::context_ans, "ans", true, 20},
                           {ebac::encoder_id::striped_huffman, "striped", true, 0}};
  int registered = 0;
  for (int raw = 0; raw < 256; ++raw) registered += ebac::encoder_registered(static_cast<std::uint8_t>(raw));
  CHECK(registered == 5);
  for (const auto& w : want) {
    CAPTURE(w.name);
    CHECK(ebac::encoder_registered(static_cast<std::uint8_t>(w.id)));
    CHECK(ebac::encoder_name(w.id) == w.name);
    ebac::encoder_id got{};
    REQUIRE(ebac::encoder_named(w.name, got));
    CHECK(got == w.id);
    CHECK(ebac::encoder_needs_codebook(w.id) == w.codebook);
    CHECK(ebac::encoder_min_payload_bytes(w.id, 100) == w.min_payload_for_100);
    // The pipeline triple of that name resolves to a pipeline with that encoder type.
    ebac::pipeline_spec spec;
    REQUIRE(ebac::parse_pipeline(std::string("none:sign:") + std::string(w.name), spec));
    const ebac::encoder_id resolved = ebac::with_pipeline(
        spec, ebac::extents{100}, [](const auto& pipe) { return std::remove_cvref_t<decltype(pipe)>::encoder_type::id; });
    CHECK(resolved == w.id);
  }
  ebac::encoder_id none{};
  CHECK_FALSE(ebac::encoder_named("zstd", none));
  CHECK(ebac::encoder_name(static_cast<ebac::encoder_id>(0)) == "?");
  CHECK_FALSE(ebac::encoder_needs_codebook(static_cast<ebac::encoder_id>(200)));
  ebac::pipeline_spec spec;
  CHECK_FALSE(ebac::parse_pipeline("none:sign:zstd", spec));
  // An id no encoder has is refused by name.
  bool threw = false;
  try {
    (void)ebac::visit_encoder(static_cast<ebac::encoder_id>(9), [](auto) { return 0; });
  } catch (const ebac::error& e) { threw = std::string(e.what()).find("unknown encoder id") != std::string::npos; }
  CHECK(threw);
}
