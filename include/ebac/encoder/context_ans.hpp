// ebac/encoder/context_ans.hpp - context-modelled rANS over the codes.
//
// Why: Huffman spends at least one bit on every code outside a zero run and
// models each code alone. Saved activations are mostly zeros and small codes
// whose size follows their neighbours' (a code after and below zeros is
// almost surely zero): on training-size tensors (docs/entropy-contexts.md) a
// model conditioned on the left and upper neighbours reaches up to 2x what
// order-0 coding does at loose bounds, and an asymmetric numeral system
// codes a likely symbol in a small fraction of a bit.
//
// Model. A code v (zigzagged, as every encoder receives it) is a token and
// raw bits: v < 32 is token v; above, the token names v's bit width w and the
// bit below its leading one (32 + 2 (w - 6) + that bit), and the w - 2 bits
// under those two follow raw. A token is coded with the frequency table of
// its context: the magnitude classes min(k - 1, bit width) of the code to
// the left and of the code one row up (row = the tensor's last extent, kept
// in the codebook), 0 for a neighbour outside the chunk, and optionally
// (`diagonal`) whether the upper-left or upper-right code is non-zero. The
// tables are learned from the whole tensor (a codebook_encoder: the stream's
// codebook section), so their cost is paid once per stream; the writer takes
// the context set (k = 8, 4, 2 or 1 classes, with or without the diagonal
// bit) whose tables plus coded tokens are smallest: the richest on tensors
// of many MB, coarser ones where the tables would cost more than they save.
//
// Chunk layout: u32 rANS byte count R (bit 31: a zero-block bitmap
// follows); the bitmap, one bit per block of 1024 codes, set for a block
// whose codes are all zero, which takes no rANS step; R bytes of rANS (four
// interleaved 32-bit states, element i on state i % 4, byte-wise
// renormalisation, the four final states first); the raw bits, LSB first,
// in element order. The decoder ends with every state back at its initial
// value, every rANS byte and every raw bit read (trailing bits zero):
// anything else is a corrupt chunk, so the states double as a check of the
// chunk's integrity. docs/format.md has the exact steps.
//
// Why the bitmap: at loose bounds most blocks of a sparse map (an attention
// map's at rel 1e-1: 87% of them) are all zero, and a step per code was the
// largest part of coding them although each costs ~0.0001 bits.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/extents.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
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

struct context_ans {
  using model = detail::context_ans_model;
  static constexpr encoder_id id = encoder_id::context_ans;
  static constexpr bool needs_codebook = true;
  static constexpr std::string_view name = "ans";
  /// Every non-empty chunk holds its byte count and four states.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t n) noexcept {
    return n > 0 ? 4 + 4 * model::lanes : 0;
  }
  /// Codes a bit of a chunk's zero-block bitmap stands for: a multiple of
  /// the four states' round, so a skipped block leaves element i on state i % 4.
  static constexpr std::size_t zero_block = 1024;
  /// The bit of a chunk's u32 byte count that says a bitmap follows it.
  static constexpr std::uint32_t bitmap_flag = 1u << 31;
  /// The blocks of a chunk of n codes: the bits of its bitmap that count.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::size_t block_count(std::size_t n) noexcept {
    return (n + zero_block - 1) / zero_block;
  }
  /// The bytes of the zero-block bitmap of a chunk of n codes.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::size_t bitmap_bytes(std::size_t n) noexcept { return (block_count(n) + 7) / 8; }

  // What bind() points at in a codebook (which must outlive the functor).
  std::uint32_t row = 1;
  std::uint32_t classes = model::max_classes;
  bool diagonal = false;
  const std::uint16_t* freq = nullptr;        // [context * tokens + token]
  const std::uint16_t* cumulative = nullptr;  // [context * (tokens + 1) + token]
  const detail::context_ans_step* steps = nullptr;
  const std::uint8_t* first_token = nullptr;  // [context * 256 + slot / 64]
  // [context * 1024 + slot / 16]; host tables only (null in a device view).
  const std::uint8_t* first_token_fine = nullptr;
  /// The codebook's version is 1: chunks flag their blocks of zeros (the
  /// encoder does; the decoder accepts a bitmap only then).
  bool zero_blocks = true;

  /// Contexts of the bound set: the rows of the tables above.
  [[nodiscard]] EBAC_HOST_DEVICE std::uint32_t contexts() const noexcept { return model::contexts(classes, diagonal); }
  /// The row after the set's contexts that derive() adds to `steps` (its
  /// only entry, at identity_context() * tokens), `cumulative` and
  /// `first_token_fine`: a step that changes no state (host tables only).
  [[nodiscard]] std::uint32_t identity_context() const noexcept { return contexts(); }

  /// Token counts per context of the richer context set (the other is its
  /// sum over the diagonal bit); chunks are added in any grouping and
  /// merged. Constructed from the tensor's extents (the host backend does so
  /// when the statistics type allows it): the last extent is the row width.
  class statistics {
    static constexpr std::size_t bins = std::size_t{model::max_contexts} * model::tokens;

   public:
    std::uint32_t row = 1;
    statistics() = default;
    explicit statistics(const extents& e) {
      const std::uint64_t w = e.rank > 0 ? e.dims[e.rank - 1] : 1;
      row = w == 0 ? 1u : (w > 0xffffffffull ? 0xffffffffu : static_cast<std::uint32_t>(w));
    }
    /// Counts the (context, token) of codes[0, n), one chunk.
    void add(const std::uint32_t* codes, std::size_t n) {
      // Element i is counted in table i % 4: counts_ and three 32-bit
      // tables. Why: a sparse map gives the same (context, token) for long
      // runs, and with one table each increment waits for the store of the
      // one before (about half of add()'s time); four tables overlap four.
      // The 32-bit tables are not summed per call (a sum costs as much as
      // counting 33K codes, more than a chunk of 256 has): totals() adds
      // them to counts_ when read, and add() folds them into counts_ only
      // before one could wrap.
      if (extra_.empty()) extra_.assign(3 * bins, 0);
      std::uint64_t* const t0 = counts_.data();
      std::uint32_t* const t1 = extra_.data();
      std::uint32_t* const t2 = t1 + bins;
      std::uint32_t* const t3 = t2 + bins;
      std::uint8_t context[context_block];
      std::uint32_t key[context_block];  // the bins of the block's elements
      for (std::size_t b = 0; b < n; b += context_block) {
        if (extra_elements_ > (std::uint64_t{1} << 32) - context_block) fold();  // no 32-bit count can reach 2^32
        const std::size_t e = n - b < context_block ? n : b + context_block;
        // A block of zeros takes no step (it is flagged in the chunk's
        // bitmap): not counted. context_block is the format's zero_block.
        if (model::all_zero(codes, b, e)) continue;
        model::contexts(codes, b, e, row, model::max_classes, true, context);
        detail::context_ans_keys(codes + b, context, e - b, key);
        std::size_t j = 0;
        for (; j + 4 <= e - b; j += 4) {
          ++t0[key[j]];
          ++t1[key[j + 1]];
          ++t2[key[j + 2]];
          ++t3[key[j + 3]];
        }
        for (; j < e - b; ++j) ++t0[key[j]];
        extra_elements_ += (e - b) / 4 * 3;
      }
    }
    /// Adds k to the count of `token` in the finest set's `context`.
    void add_count(std::uint32_t context, std::uint32_t token, std::uint64_t k) {
      counts_[std::size_t{context} * model::tokens + token] += k;
    }
    void merge(const statistics& o) {
      fold();
      const std::vector<std::uint64_t> theirs = o.totals();
      for (std::size_t i = 0; i < bins; ++i) counts_[i] += theirs[i];
    }
    /// The counts, [context * tokens + token] of the finest context set.
    [[nodiscard]] std::vector<std::uint64_t> totals() const {
      std::vector<std::uint64_t> t = counts_;
      if (!extra_.empty())
        for (std::size_t k = 0; k < bins; ++k) t[k] += extra_sum(k);
      return t;
    }

   private:
    /// Bin k's count in the three 32-bit tables.
    [[nodiscard]] std::uint64_t extra_sum(std::size_t k) const {
      return std::uint64_t{extra_[k]} + extra_[bins + k] + extra_[2 * bins + k];
    }
    void fold() {
      if (extra_.empty()) return;
      for (std::size_t k = 0; k < bins; ++k) {
        counts_[k] += extra_sum(k);
        extra_[k] = extra_[bins + k] = extra_[2 * bins + k] = 0;
      }
      extra_elements_ = 0;
    }
    std::vector<std::uint64_t> counts_ = std::vector<std::uint64_t>(bins, 0);
    std::vector<std::uint32_t> extra_;   // add()'s three other tables, [table * bins + bin]
    std::uint64_t extra_elements_ = 0;   // elements counted in them since they were last summed
  };
  using codebook = context_ans_codebook;

  /// The codebook of a tensor whose codes gave `s`: for each context set,
  /// frequencies proportional to the counts (summing to 2^14, never 0 for a
  /// token that occurs, so every code of the tensor can be coded); the set
  /// whose serialized tables plus ideal coded bits are fewest is kept (the
  /// first of equals, richest first).
  static codebook learn(const statistics& s) {
    codebook cb = learn_frequencies(s);
    cb.derive();
    return cb;
  }
  /// learn() without derive(): the frequencies, context set and row, which
  /// are what serialize() and estimated_payload_bits read, and none of the
  /// tables that coding reads (bind() needs learn()'s). Why: the host
  /// backend weighs its candidates (predictors, quantizers) on a sample by
  /// the estimate, six of the seven codebooks of a max-bound stream, and
  /// derive() is work they never read (its steps' divisions and the
  /// decoder's first-token tables: about 20 of learn()'s 173 us on a
  /// 2^17-code sample whose set had 4 contexts; more for richer sets).
  static codebook learn_frequencies(const statistics& s) {
    // Only the frequencies and the serialized size decide between the sets:
    // each is weighed in two buffers reused from set to set, and one codebook
    // is built, for the winner. On a small tensor most of the 128
    // finest contexts are empty and are skipped.
    const std::vector<std::uint64_t> totals = s.totals();
    const context_flags used = used_contexts(totals);
    std::vector<std::uint64_t> counts;
    std::vector<std::uint16_t> freq, best_freq;
    std::uint32_t best_classes = model::max_classes;
    bool best_diagonal = true;
    double best_bits = 0;
    bool first = true;
    for (std::uint32_t classes = model::max_classes; classes >= 1; classes /= 2) {
      for (bool diagonal : {true, false}) {
        const std::uint32_t contexts = model::contexts(classes, diagonal);
        counts_of(totals, used, classes, diagonal, counts);
        frequencies_of(counts, contexts, freq);
        const double bits = cost_bits(counts, freq, contexts, s.row);
        if (first || bits < best_bits) {
          best_freq.swap(freq);
          best_classes = classes;
          best_diagonal = diagonal;
          best_bits = bits;
          first = false;
        }
      }
    }
    codebook best;
    best.row = s.row;
    best.classes = best_classes;
    best.diagonal = best_diagonal;
    std::copy(best_freq.begin(), best_freq.end(), best.freq.begin());
    return best;
  }
  /// The bits encode_chunk writes for the codes that gave `s` under `cb`
  /// (learned from them), without coding them: each token's ideal cost in
  /// its context, -log2(f / 2^14), plus its raw bits. Leaves out what each
  /// chunk adds (its byte count and four final states: min_payload_bytes;
  /// its bitmap where a block is all zero, a byte per 8192 codes; up to a
  /// byte of padding) and rANS's loss against the ideal
  /// cost, which stays below 0.1% once a chunk has a few thousand codes.
  /// The host backend weighs predictors on a sample with it
  /// (host/compress.hpp: cheapest_predictor), instead of coding the sample.
  static double estimated_payload_bits(const statistics& s, const codebook& cb) {
    const std::vector<std::uint64_t> totals = s.totals();
    std::vector<std::uint64_t> counts;
    counts_of(totals, used_contexts(totals), cb.classes, cb.diagonal, counts);
    double bits = token_bits(counts, cb.freq, cb.contexts());
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < totals.size(); ++i) raw += totals[i] * model::extra_bits(static_cast<std::uint32_t>(i % model::tokens));
    return bits + static_cast<double>(raw);
  }
  static context_ans bind(const context_ans_codebook& cb) noexcept {
    return context_ans{cb.row,           cb.classes,         cb.diagonal,
                       cb.freq.data(),   cb.cumulative.data(), cb.steps.data(),
                       cb.first_token.data(), cb.first_token_fine.data(), cb.version >= 1};
  }

  /// Four bytes of count, the bitmap, at most two rANS bytes a code and
  /// four states, at most 30 raw bits (four bytes) a code.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    return 4 + bitmap_bytes(n) + rans_capacity(n) + 4 * n + 8;
  }
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept { return max_chunk_bytes(n); }

  /// Codes n codes that were part of the statistics this codebook was
  /// learned from (a token its context never had cannot be coded).
  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
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

  // encode_chunk's parts, shared with the host's encoder of two chunks at a
  // time (context_ans_encode_x8.hpp).
  /// Contexts computed at a time (model::contexts), on the stack: the
  /// format's blocks of zeros.
  static constexpr std::size_t context_block = zero_block;
  /// The end of a chunk's rANS space at out (the rANS bytes are written
  /// backwards from it, above the bitmap's place); the raw bits start there.
  [[nodiscard]] EBAC_HOST_DEVICE static std::byte* rans_end(std::byte* out, std::size_t n) noexcept {
    return out + 4 + bitmap_bytes(n) + rans_capacity(n);
  }
  /// The bitmap of a chunk being coded at out, all clear: at out + 4, where
  /// finish_chunk keeps it (or writes the rANS bytes over it if no bit is set).
  EBAC_HOST_DEVICE static std::byte* clear_bitmap(std::byte* out, std::size_t n) noexcept {
    for (std::size_t k = 0; k < bitmap_bytes(n); ++k) out[4 + k] = std::byte{0};
    return out + 4;
  }
  /// Flags the block that starts at element b (a multiple of zero_block).
  EBAC_HOST_DEVICE static void flag_block(std::byte* bitmap, std::size_t b) noexcept {
    const std::size_t k = b / zero_block;
    bitmap[k / 8] |= static_cast<std::byte>(1u << (k % 8));
  }
  /// Puts the raw bits of codes[0, n) at rans_end(out, n), forward; their bytes.
  EBAC_HOST_DEVICE static std::size_t put_raw_bits(const std::uint32_t* codes, std::size_t n, std::byte* out) noexcept {
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
  /// After the rANS steps left p (the lowest rANS byte) and the states x:
  /// puts the final states and the byte count (with bitmap_flag where the
  /// bitmap at out + 4 has a block flagged: it stays, else it is dropped),
  /// moves the rANS bytes and the raw_bytes of raw bits down behind them;
  /// the chunk's size.
  EBAC_HOST_DEVICE static std::size_t finish_chunk(std::byte* out, std::size_t n, std::byte* p, const std::uint32_t (&x)[model::lanes],
                                                   std::size_t raw_bytes) noexcept {
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

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept {
    return decode_chunk_to(in, bytes, codes, n);
  }
  /// decode_chunk into any place indexed like a pointer (codes[i] a
  /// std::uint32_t&, read back for the upper neighbours): the CUDA backend's
  /// ANS kernel decodes a warp's 32 chunks into one interleaved array, so that
  /// its lanes' writes and reads of element i fall in one cache line. Reads
  /// `cumulative` and `first_token` only (a token's frequency is the
  /// difference of its cumulative bounds, which derive() computed from it).
  template <class Codes>
  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk_to(const std::byte* in, std::size_t bytes, Codes codes, std::size_t n) const noexcept {
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

  /// What follows a chunk's u32 byte count: its bitmap's bytes (0 without
  /// one), then its rANS bytes, the four initial states first.
  struct chunk_head {
    std::size_t bitmap_length = 0;
    std::uint32_t rans_bytes = 0;
    std::uint32_t states[model::lanes] = {};
  };
  /// Reads the head of the chunk of `bytes` bytes at `in` (n codes) into h;
  /// false where decode_chunk refuses it: a byte count the chunk cannot
  /// hold (with the four states), a bitmap that is out of place
  /// (valid_bitmap), or an initial state outside [state_low, 2^31). The
  /// eight-lane decoder checks its lanes with it too. The states' bytes are
  /// the first 16 of the rANS bytes: the steps' bytes start after them.
  [[nodiscard]] EBAC_HOST_DEVICE bool read_head(const std::byte* in, std::size_t bytes, std::size_t n, chunk_head& h) const noexcept {
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
  /// Whether the block that starts at element b is flagged in `bitmap`.
  [[nodiscard]] EBAC_HOST_DEVICE static bool block_flagged(const std::byte* bitmap, std::size_t b) noexcept {
    const std::size_t k = b / zero_block;
    return ((static_cast<unsigned>(bitmap[k / 8]) >> (k % 8)) & 1u) != 0;
  }
  /// The checks of a chunk's bitmap beyond its place: a version-1 codebook
  /// (zero_blocks), at least one block flagged (else the writer leaves the
  /// bitmap out), and no bit past the chunk's last block. The caller has
  /// checked that the chunk holds the bitmap's bitmap_bytes(n) bytes.
  [[nodiscard]] EBAC_HOST_DEVICE bool valid_bitmap(const std::byte* bitmap, std::size_t n) const noexcept {
    if (!zero_blocks) return false;
    const std::size_t m = bitmap_bytes(n), blocks = block_count(n);
    unsigned any = 0;
    for (std::size_t k = 0; k < m; ++k) any |= static_cast<unsigned>(bitmap[k]);
    const unsigned past = blocks % 8 == 0 ? 0u : static_cast<unsigned>(bitmap[m - 1]) >> (blocks % 8);
    return any != 0 && past == 0;
  }

 private:
  [[nodiscard]] EBAC_HOST_DEVICE static std::size_t rans_capacity(std::size_t n) noexcept { return 2 * n + 4 * model::lanes; }

  /// Which contexts of the finest set (max_classes, diagonal) occurred.
  using context_flags = std::array<bool, model::max_contexts>;
  static context_flags used_contexts(const std::vector<std::uint64_t>& totals) {
    context_flags used{};
    for (std::uint32_t c = 0; c < model::max_contexts; ++c) {
      const std::uint64_t* from = totals.data() + std::size_t{c} * model::tokens;
      for (std::uint32_t t = 0; t < model::tokens && !used[c]; ++t) used[c] = from[t] != 0;
    }
    return used;
  }

  /// Token counts of every context of a coarser set: sums of the counts of
  /// the finest set's contexts (`totals`, statistics::totals()) that map to
  /// it. `used` (used_contexts) lets empty finest contexts be skipped.
  static void counts_of(const std::vector<std::uint64_t>& totals, const context_flags& used, std::uint32_t classes, bool diagonal,
                        std::vector<std::uint64_t>& out) {
    out.assign(std::size_t{model::contexts(classes, diagonal)} * model::tokens, 0);
    constexpr std::uint32_t K = model::max_classes;
    for (std::uint32_t left = 0; left < K; ++left)
      for (std::uint32_t up = 0; up < K; ++up)
        for (std::uint32_t d = 0; d < 2; ++d) {
          const std::uint32_t fine = 2 * (left * K + up) + d;
          if (!used[fine]) continue;
          // Classes above the set's last merge into it; without the diagonal bit both halves merge.
          const std::uint32_t l = left < classes ? left : classes - 1, u = up < classes ? up : classes - 1;
          const std::uint32_t c = diagonal ? 2 * (l * classes + u) + d : l * classes + u;
          const std::uint64_t* from = totals.data() + std::size_t{fine} * model::tokens;
          for (std::uint32_t t = 0; t < model::tokens; ++t) out[std::size_t{c} * model::tokens + t] += from[t];
        }
  }

  /// A set's frequencies for its counts, `contexts` tables of `tokens` (all
  /// zero for a context that never occurred).
  static void frequencies_of(const std::vector<std::uint64_t>& counts, std::uint32_t contexts, std::vector<std::uint16_t>& freq) {
    freq.assign(std::size_t{contexts} * model::tokens, 0);
    for (std::uint32_t c = 0; c < contexts; ++c) {
      std::uint64_t scaled[model::tokens];
      std::uint64_t total = 0;
      for (std::uint32_t t = 0; t < model::tokens; ++t) total += scaled[t] = counts[std::size_t{c} * model::tokens + t];
      if (total == 0) continue;
      while (total > (std::uint64_t{1} << 40)) {  // keeps count * 2^14 within 64 bits
        total = 0;
        for (std::uint32_t t = 0; t < model::tokens; ++t) total += scaled[t] = scaled[t] ? (scaled[t] + 1) / 2 : 0;
      }
      std::uint16_t* f = freq.data() + std::size_t{c} * model::tokens;
      std::uint32_t sum = 0, largest = 0;
      for (std::uint32_t t = 0; t < model::tokens; ++t) {
        // A token that never occurs gets 0 without the 64-bit division
        // (most of a context's tokens never occur).
        if (scaled[t] == 0) {
          f[t] = 0;
          continue;
        }
        std::uint64_t v = (scaled[t] * model::scale + total / 2) / total;
        if (scaled[t] > 0 && v == 0) v = 1;
        f[t] = static_cast<std::uint16_t>(v);
        sum += static_cast<std::uint32_t>(v);
        if (f[t] > f[largest]) largest = t;
      }
      // Rounding moves each frequency by at most one from its share and the
      // largest is at least 2^14 / 86: it absorbs the difference.
      f[largest] = static_cast<std::uint16_t>(f[largest] + model::scale - sum);
    }
  }

  /// Serialized table bits plus the ideal coded bits of a set's counts under its frequencies.
  static double cost_bits(const std::vector<std::uint64_t>& counts, const std::vector<std::uint16_t>& freq, std::uint32_t contexts,
                          std::uint32_t row) {
    return token_bits(counts, freq, contexts, 8.0 * static_cast<double>(codebook::serialized_bytes_of(freq.data(), contexts, row)));
  }
  /// `bits` plus the ideal coded bits of a set's counts under its
  /// frequencies: -log2(f / 2^14) a token (raw bits not included).
  static double token_bits(const std::vector<std::uint64_t>& counts, const std::vector<std::uint16_t>& freq, std::uint32_t contexts,
                           double bits = 0) {
    const double* const cost = token_cost();
    for (std::size_t i = 0; i < std::size_t{contexts} * model::tokens; ++i)
      if (const std::uint64_t k = counts[i]; k > 0) bits += static_cast<double>(k) * cost[freq[i]];
    return bits;
  }
  /// cost[f] = 14 - log2(f), the bits of a token of frequency f (1 to 2^14;
  /// cost[0] is never read: a token that occurs has a frequency), std::log2's
  /// own values, built once. Why: learn() weighs eight context sets and the
  /// host backend learns seven codebooks a max-bound stream; std::log2 took
  /// about a fifth of learn().
  static const double* token_cost() {
    static const std::vector<double> cost = [] {
      std::vector<double> c(model::scale + 1, 0.0);
      for (std::uint32_t f = 1; f <= model::scale; ++f) c[f] = model::scale_bits - std::log2(static_cast<double>(f));
      return c;
    }();
    return cost.data();
  }
};

EBAC_NAMESPACE_END
