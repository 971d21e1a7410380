// ebac/encoder/context_ans_statistics.hpp - what context ANS learns its
// codebook from: token counts per context over a tensor's codes
// (context_ans_statistics), and the learning itself: the context set and
// frequencies whose tables plus coded tokens are smallest, and the payload
// estimate the host backend weighs its candidates by.
//
// Part of the context-ANS stage (encoder/context_ans.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/encoder/context_ans_codebook.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/extents.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN

namespace detail {
/// Codes a bit of a chunk's zero-block bitmap stands for (context_ans::zero_block),
/// and the codes whose contexts are computed at a time.
inline constexpr std::size_t context_ans_zero_block = 1024;
}  // namespace detail

/// Token counts per context of the richer context set (the other is its
/// sum over the diagonal bit); chunks are added in any grouping and
/// merged. Constructed from the tensor's extents (the host backend does so
/// when the statistics type allows it): the last extent is the row width.
class context_ans_statistics {
  using model = detail::context_ans_model;

  static constexpr std::size_t bins = std::size_t{model::max_contexts} * model::tokens;

 public:
  std::uint32_t row = 1;
  context_ans_statistics() = default;
  explicit context_ans_statistics(const extents& e) {
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
    std::uint8_t context[detail::context_ans_zero_block];
    std::uint32_t key[detail::context_ans_zero_block];  // the bins of the block's elements
    for (std::size_t b = 0; b < n; b += detail::context_ans_zero_block) {
      if (extra_elements_ > (std::uint64_t{1} << 32) - detail::context_ans_zero_block) fold();  // no 32-bit count can reach 2^32
      const std::size_t e = n - b < detail::context_ans_zero_block ? n : b + detail::context_ans_zero_block;
      // A block of zeros takes no step (it is flagged in the chunk's
      // bitmap): not counted.
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
  void merge(const context_ans_statistics& o) {
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
  std::vector<std::uint32_t> extra_;  // add()'s three other tables, [table * bins + bin]
  std::uint64_t extra_elements_ = 0;  // elements counted in them since they were last summed
};

namespace detail {

/// How context_ans learns its codebook from statistics (context_ans::learn,
/// learn_frequencies, estimated_payload_bits call these).
struct context_ans_learning {
  using model = context_ans_model;
  using codebook = context_ans_codebook;
  using statistics = context_ans_statistics;

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
    for (std::size_t i = 0; i < totals.size(); ++i)
      raw += totals[i] * model::extra_bits(static_cast<std::uint32_t>(i % model::tokens));
    return bits + static_cast<double>(raw);
  }

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
  static double cost_bits(const std::vector<std::uint64_t>& counts, const std::vector<std::uint16_t>& freq,
                          std::uint32_t contexts, std::uint32_t row) {
    return token_bits(counts, freq, contexts,
                      8.0 * static_cast<double>(codebook::serialized_bytes_of(freq.data(), contexts, row)));
  }
  /// `bits` plus the ideal coded bits of a set's counts under its
  /// frequencies: -log2(f / 2^14) a token (raw bits not included).
  static double token_bits(const std::vector<std::uint64_t>& counts, const std::vector<std::uint16_t>& freq,
                           std::uint32_t contexts, double bits = 0) {
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

}  // namespace detail

EBAC_NAMESPACE_END
