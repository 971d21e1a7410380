// ebac/encoder/context_ans_codebook.hpp - context ANS's codebook: the
// frequency tables a stream stores (its codebook section), its context set
// and row width, and the tables derived from them that coding reads.
//
// Part of the context-ANS stage (encoder/context_ans.hpp); the model it
// tabulates is context_ans_model.hpp, how it is learned from a tensor
// context_ans_statistics.hpp.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN

/// The frequency tables of a stream (its codebook section), its context set
/// and the row width that places a code's upper neighbour.
struct context_ans_codebook {
  using model = detail::context_ans_model;
  /// The format's version: 1, chunks may flag blocks of zeros (the writer's);
  /// 0, they may not (streams written before the bitmap, still read).
  std::uint8_t version = 1;
  std::uint32_t row = 1;
  // The context set: classes x classes contexts (left, up), twice that with the diagonal bit.
  std::uint32_t classes = model::max_classes;
  bool diagonal = false;
  /// freq[c * tokens + t]; a context whose frequencies are all 0 never occurs.
  std::vector<std::uint16_t> freq = std::vector<std::uint16_t>(std::size_t{model::max_contexts} * model::tokens, 0);
  /// Derived, not stored: cumulative[c * (tokens + 1) + t] (sum of freq below
  /// t), and each (context, token)'s encoding step.
  std::vector<std::uint16_t> cumulative;
  std::vector<detail::context_ans_step> steps;
  /// first_token[c * 256 + b]: the token holding slot 64 b of context c, where
  /// the decoder's search for a slot in [64 b, 64 b + 64) starts;
  /// unused_context in every entry of a context the tensor never had.
  std::vector<std::uint8_t> first_token;
  /// The same at four times the resolution, first_token_fine[c * 1024 + b]
  /// for slot 16 b (first_token[c * 256 + b] is first_token_fine[c * 1024 +
  /// 4 b]), so that the search rarely takes a second step. Host only: the
  /// eight-lane decoder reads it (its extra search steps are whole gathers);
  /// the CUDA kernel keeps the coarse table, which fits its shared memory.
  std::vector<std::uint8_t> first_token_fine;
  static constexpr std::uint8_t unused_context = 0xff;
  static_assert(unused_context >= model::tokens);

  [[nodiscard]] std::uint32_t contexts() const noexcept { return model::contexts(classes, diagonal); }
  /// The context set's byte: bit 0 the diagonal bit, bits 1-2 log2(8 / classes).
  [[nodiscard]] std::uint8_t context_set() const noexcept {
    std::uint8_t k = 0;
    while ((model::max_classes >> k) > classes) ++k;
    return static_cast<std::uint8_t>((k << 1) | (diagonal ? 1 : 0));
  }

  /// Layout: u8 version (0 or 1), u8 context set (context_set()), varint row
  /// width, then per context a varint k (0: unused; else its last token with a
  /// non-zero frequency + 1) and k varint frequencies, which sum to 2^14.
  void serialize(std::vector<std::byte>& out) const {
    out.assign(max_serialized_bytes, std::byte{0});
    std::byte* p = out.data();
    *p++ = static_cast<std::byte>(version);
    *p++ = static_cast<std::byte>(context_set());
    p += detail::put_varint(p, row);
    for (std::uint32_t c = 0; c < contexts(); ++c) {
      const std::uint16_t* f = freq.data() + std::size_t{c} * model::tokens;
      const std::uint32_t k = stored_tokens(c);
      p += detail::put_varint(p, k);
      for (std::uint32_t t = 0; t < k; ++t) p += detail::put_varint(p, f[t]);
    }
    out.resize(static_cast<std::size_t>(p - out.data()));
  }
  /// The size serialize() writes, without writing it.
  [[nodiscard]] std::size_t serialized_bytes() const noexcept { return serialized_bytes_of(freq.data(), contexts(), row); }
  /// The same for `contexts` tables of frequencies at f (learn() weighs sets before it builds one).
  static std::size_t serialized_bytes_of(const std::uint16_t* f, std::uint32_t contexts, std::uint32_t row) noexcept {
    std::size_t bytes = 2 + detail::varint_size(row);
    for (std::uint32_t c = 0; c < contexts; ++c, f += model::tokens) {
      const std::uint32_t k = stored_tokens_of(f);
      bytes += detail::varint_size(k);
      for (std::uint32_t t = 0; t < k; ++t) bytes += detail::varint_size(f[t]);
    }
    return bytes;
  }
  /// Context c's stored frequencies: up to its last non-zero one.
  [[nodiscard]] std::uint32_t stored_tokens(std::uint32_t c) const noexcept {
    return stored_tokens_of(freq.data() + std::size_t{c} * model::tokens);
  }
  static std::uint32_t stored_tokens_of(const std::uint16_t* f) noexcept {
    std::uint32_t k = model::tokens;
    while (k > 0 && f[k - 1] == 0) --k;
    return k;
  }
  static constexpr std::size_t max_serialized_bytes = 2 + 5 + model::max_contexts * (1 + 3 * std::size_t{model::tokens});

  /// Refuses (corrupt_stream) a version other than 0 or 1, a context set above
  /// 7, a row width of 0 or above 2^32 - 1, a context whose
  /// frequencies do not sum to 2^14 or whose k names a zero frequency, and
  /// bytes left over.
  static status deserialize(const std::byte* p, std::size_t bytes, context_ans_codebook& cb) {
    const std::byte* end = p + bytes;
    if (end - p < 2 || static_cast<unsigned>(p[0]) > 1 || static_cast<unsigned>(p[1]) > 7) return status::corrupt_stream;
    cb.version = static_cast<std::uint8_t>(p[0]);
    cb.diagonal = (static_cast<unsigned>(p[1]) & 1u) != 0;
    cb.classes = model::max_classes >> (static_cast<unsigned>(p[1]) >> 1);
    p += 2;
    std::uint64_t v = 0;
    if (!detail::get_varint(p, end, v) || v == 0 || v > 0xffffffffull) return status::corrupt_stream;
    cb.row = static_cast<std::uint32_t>(v);
    cb.freq.assign(cb.freq.size(), 0);
    for (std::uint32_t c = 0; c < cb.contexts(); ++c) {
      std::uint64_t k = 0;
      if (!detail::get_varint(p, end, k) || k > model::tokens) return status::corrupt_stream;
      std::uint16_t* f = cb.freq.data() + std::size_t{c} * model::tokens;
      std::uint64_t sum = 0;
      for (std::uint32_t t = 0; t < k; ++t) {
        std::uint64_t x = 0;
        if (!detail::get_varint(p, end, x) || x > model::scale) return status::corrupt_stream;
        f[t] = static_cast<std::uint16_t>(x);
        sum += x;
      }
      if (k > 0 && (sum != model::scale || f[k - 1] == 0)) return status::corrupt_stream;
    }
    if (p != end) return status::corrupt_stream;
    cb.derive();
    return status::ok;
  }

  /// Fills `cumulative`, `steps`, `first_token` and `first_token_fine` from
  /// `freq` for the set's contexts (sized to them: a coarse set's tables are
  /// small, which is what a small tensor's codebook is), and one row more
  /// in `steps`, `cumulative` and `first_token_fine`: a step that leaves a
  /// state as it is, writes no byte and decodes token 0 (frequency 2^14 at
  /// slot 0). The eight-lane coders give it to a lane whose chunk skips the
  /// block the others code (context_ans::identity_context).
  void derive() {
    const std::uint32_t k = contexts();
    cumulative.assign(std::size_t{k + 1} * (model::tokens + 1), 0);
    first_token.assign(std::size_t{k} * 256, 0);
    first_token_fine.assign(std::size_t{k + 1} * 1024, 0);
    steps.assign(std::size_t{k} * model::tokens + 1, detail::context_ans_step{});
    // The identity: limit 2^32 - 1 (no state reaches it: no byte), and
    // s += 0 + (mulhi(s, 0) >> 0) * 0; decoding, slot < cum[1] = 2^14 gives
    // token 0 and x = 2^14 (x >> 14) + slot = x.
    steps.back().limit = ~0u;
    for (std::uint32_t t = 1; t <= model::tokens; ++t) cumulative[std::size_t{k} * (model::tokens + 1) + t] = model::scale;
    for (std::uint32_t c = 0; c < contexts(); ++c) {
      std::uint32_t s = 0;
      for (std::uint32_t t = 0; t < model::tokens; ++t) {
        const std::uint32_t f = freq[std::size_t{c} * model::tokens + t];
        cumulative[std::size_t{c} * (model::tokens + 1) + t] = static_cast<std::uint16_t>(s);
        if (f > 0) {
          detail::context_ans_step& st = steps[std::size_t{c} * model::tokens + t];
          st.limit = ((model::state_low >> model::scale_bits) << 8) * f;
          st.complement = static_cast<std::uint16_t>(model::scale - f);
          if (f < 2) {  // x / 1: q = x via a reciprocal of 2^32 - 1 and the bias below
            st.reciprocal = ~0u;
            st.shift = 0;
            st.bias = s + model::scale - 1;
          } else {
            std::uint32_t shift = 0;
            while (f > (1u << shift)) ++shift;
            st.reciprocal = static_cast<std::uint32_t>(((std::uint64_t{1} << (shift + 31)) + f - 1) / f);
            st.shift = static_cast<std::uint16_t>(shift - 1);
            st.bias = s;
          }
        }
        s += f;
      }
      // 2^14 fits; an unused context's table is all zero and is never entered.
      cumulative[std::size_t{c} * (model::tokens + 1) + model::tokens] = static_cast<std::uint16_t>(s);
      std::uint8_t* const fine = first_token_fine.data() + std::size_t{c} * 1024;
      std::uint8_t* const coarse = first_token.data() + std::size_t{c} * 256;
      if (s == 0) {  // the decoder refuses a context whose first token is no token
        std::fill_n(fine, 1024, unused_context);
        std::fill_n(coarse, 256, unused_context);
        continue;
      }
      // Token t holds slots [cum[t], cum[t + 1]): the entries b with 16 b in
      // that range, [ceil(cum[t] / 16), ceil(cum[t + 1] / 16)).
      const std::uint16_t* cum = cumulative.data() + std::size_t{c} * (model::tokens + 1);
      for (std::uint32_t t = 0; t < model::tokens; ++t) {
        const std::uint32_t from = (cum[t] + 15u) / 16, to = (cum[t + 1] + 15u) / 16;
        std::fill(fine + from, fine + to, static_cast<std::uint8_t>(t));
      }
      for (std::uint32_t b = 0; b < 256; ++b) coarse[b] = fine[4 * b];
    }
  }
};

EBAC_NAMESPACE_END
