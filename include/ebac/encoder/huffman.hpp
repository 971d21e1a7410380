// ebac/encoder/huffman.hpp - canonical Huffman over literals and zero runs.
//
// Alphabet: literal codes 0..literals-1, then one symbol per zero-run class k
// (a run of L >= 2 zeros with 2^k <= L < 2^(k+1), followed by k extra bits),
// then an escape followed by the 32 raw bits of a code too large for a literal.
// Whether runs are used is decided per stream from the histogram ("where it
// pays"): runs help on sparse post-ReLU streams and only cost elsewhere.
//
// Code lengths are limited to max_code_length so that any symbol plus its
// extra bits fits a 64-bit bit buffer; decoding uses a table for codes of up
// to table_bits bits and a canonical walk for longer ones. The codebook is
// built from a histogram and stored as (symbol, length) pairs in the stream;
// the encoder functor only points at the tables. Construction, tables and
// serialization are host-device functions over caller-provided arrays: the
// host backend runs them inline, the CUDA backend in one block on the device
// (cuda/kernels/huffman_codebook.cuh), so both pick the same codebook.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <memory>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN

namespace huffman_alphabet {
inline constexpr std::uint32_t literals = 4096;
inline constexpr std::uint32_t run_classes = 31;           // k = 1..31
inline constexpr std::uint32_t run_base = literals;        // symbol of class k: run_base + k - 1
inline constexpr std::uint32_t escape = literals + run_classes;
inline constexpr std::uint32_t size = escape + 1;
inline constexpr int max_code_length = 24;
inline constexpr int table_bits = 12;
}  // namespace huffman_alphabet

namespace detail {

/// Calls emit(symbol, extra_bits, extra_count) for each token that starts
/// in codes[begin, end) of a chunk of n codes. A zero run belongs to the
/// segment where it starts and may run past `end`; zeros at `begin` that
/// continue a run from before it are skipped. So the tokens of consecutive
/// segments, in order, are the chunk's tokens, and segments can be coded by
/// different threads (cuda/kernels/encode.cuh: one warp a chunk).
template <class Emit>
EBAC_HOST_DEVICE void huffman_tokenize_segment(const std::uint32_t* codes, std::size_t n, std::size_t begin, std::size_t end,
                                               bool use_runs, Emit&& emit) {
  namespace A = huffman_alphabet;
  std::size_t i = begin;
  if (use_runs && i > 0 && i < end && codes[i - 1] == 0)
    while (i < end && codes[i] == 0) ++i;
  while (i < end) {
    const std::uint32_t c = codes[i];
    if (c == 0 && use_runs) {
      std::size_t j = i + 1;
      while (j < n && codes[j] == 0) ++j;
      std::size_t run = j - i;
      i = j;
      // Split runs longer than a class can hold (chunks larger than 2^32).
      while (run > 0) {
        if (run == 1) { emit(0u, 0u, 0); break; }
        const std::size_t take = run >= (std::size_t{1} << 32) ? (std::size_t{1} << 32) - 1 : run;
        const int k = bit_width(static_cast<std::uint32_t>(take)) - 1;
        emit(A::run_base + static_cast<std::uint32_t>(k) - 1u,
             static_cast<std::uint32_t>(take - (std::size_t{1} << k)), k);
        run -= take;
      }
      continue;
    }
    if (c < A::literals) emit(c, 0u, 0);
    else emit(A::escape, c, 32);
    ++i;
  }
}

/// Calls emit(symbol, extra_bits, extra_count) for each token of a chunk.
template <class Emit>
EBAC_HOST_DEVICE void huffman_tokenize(const std::uint32_t* codes, std::size_t n, bool use_runs, Emit&& emit) {
  huffman_tokenize_segment(codes, n, 0, n, use_runs, static_cast<Emit&&>(emit));
}

}  // namespace detail

/// Tables of one canonical codebook; the huffman functor points into them.
struct huffman_codebook {
  bool use_runs = false;
  std::vector<std::uint8_t> length;      // per symbol, 0 = unused
  std::vector<std::uint32_t> code_lsb;   // bit-reversed canonical code
  std::vector<std::uint32_t> table;      // table_bits lookup: symbol << 8 | length (0: long code)
  std::vector<std::uint32_t> sorted;     // symbols ordered by (length, symbol)
  std::uint32_t first_code[huffman_alphabet::max_code_length + 2]{};
  std::uint32_t count[huffman_alphabet::max_code_length + 2]{};
  std::uint32_t offset[huffman_alphabet::max_code_length + 2]{};

  /// Fills code/table arrays from `length`; false if the lengths are not a prefix code.
  bool finalize();

  /// The codebook a stream uses: built from the histograms of the chunks'
  /// tokens with zero runs and without, whichever codes the payload smaller.
  /// Host and CUDA backends both call this, so they pick the same codebook.
  static huffman_codebook choose(const std::vector<std::uint64_t>& with_runs, const std::vector<std::uint64_t>& literals_only);

  void serialize(std::vector<std::byte>& out) const;
  /// Upper bound of serialize()'s output: two varint bytes of flags/count,
  /// then per used symbol a gap varint (<= 2 bytes) and a length byte.
  static constexpr std::size_t max_serialized_bytes = 3 + 3 * std::size_t{huffman_alphabet::size};
  static status deserialize(const std::byte* p, std::size_t bytes, huffman_codebook& cb);
};

/// What decoding a range of a Huffman stream found (huffman::decode_range).
struct huffman_range {
  std::uint64_t end_bit = 0;   ///< the bit after the last token decoded (where it stopped, if corrupt)
  std::uint64_t elements = 0;  ///< codes those tokens produced
  bool corrupt = false;        ///< an invalid code, a read past the stream's end, or a run past max_elements
};

/// decode_range's sink when only the number of codes matters (the CUDA
/// decoder's counting rounds): a run then advances the count in one step, so
/// a token claiming 2^32 zeros costs no more than any other. (An empty lambda
/// is not enough: nvcc keeps its loop.)
struct huffman_count_only {
  EBAC_HOST_DEVICE void operator()(std::uint64_t, std::uint32_t) const noexcept {}
};

/// The encoder functor: trivially copyable, points at a codebook's tables.
struct huffman {
  static constexpr encoder_id id = encoder_id::huffman;
  static constexpr bool needs_codebook = true;
  static constexpr std::string_view name = "huffman";
  /// A zero-run token may cover any number of zeros.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::uint64_t min_payload_bytes(std::uint64_t) noexcept { return 0; }

  bool use_runs = false;
  const std::uint8_t* length = nullptr;
  const std::uint32_t* code_lsb = nullptr;
  const std::uint32_t* table = nullptr;
  const std::uint32_t* sorted = nullptr;
  const std::uint32_t* first_code = nullptr;
  const std::uint32_t* count = nullptr;
  const std::uint32_t* offset = nullptr;

  // An encoder with a per-stream codebook (needs_codebook; concepts.hpp:
  // codebook_encoder): what the codebook is learned from, the codebook (the
  // stream's codebook section), and the functor bound to it. Backends call these and
  // nothing Huffman-specific.

  /// Token counts of a tensor's codes, with zero runs and without; chunks
  /// are added in any grouping and merged (sums do not depend on it).
  struct statistics {
    /// A token counter (a functor, not a lambda: huffman_tokenize is
    /// host-device, and nvcc warns about a host lambda passed to it).
    struct count {
      std::uint64_t* hist;
      EBAC_HOST_DEVICE void operator()(std::uint32_t sym, std::uint32_t, int) const noexcept { ++hist[sym]; }
    };
    std::vector<std::uint64_t> with_runs = std::vector<std::uint64_t>(huffman_alphabet::size, 0);
    std::vector<std::uint64_t> literals_only = std::vector<std::uint64_t>(huffman_alphabet::size, 0);
    void add(const std::uint32_t* codes, std::size_t n) {
      detail::huffman_tokenize(codes, n, true, count{with_runs.data()});
      detail::huffman_tokenize(codes, n, false, count{literals_only.data()});
    }
    void merge(const statistics& o) {
      for (std::uint32_t sym = 0; sym < huffman_alphabet::size; ++sym) {
        with_runs[sym] += o.with_runs[sym];
        literals_only[sym] += o.literals_only[sym];
      }
    }
  };
  using codebook = huffman_codebook;
  /// The codebook of a stream whose codes gave `s` (huffman_codebook::choose).
  static codebook learn(const statistics& s) { return huffman_codebook::choose(s.with_runs, s.literals_only); }

  static huffman bind(const huffman_codebook& cb) noexcept {
    return huffman{cb.use_runs, cb.length.data(), cb.code_lsb.data(), cb.table.data(), cb.sorted.data(),
                   cb.first_code, cb.count, cb.offset};
  }

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    return n * 7 + 16;  // <= 24-bit escape code + 32 raw bits per code
  }
  /// Codes known to fit in `bits` bits do not code shorter in the worst case.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept { return max_chunk_bytes(n); }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    detail::bit_writer w{out};
    detail::huffman_tokenize(codes, n, use_runs, [&](std::uint32_t s, std::uint32_t extra, int extra_bits) {
      w.put(code_lsb[s], length[s]);
      if (extra_bits) w.put(extra, extra_bits);
    });
    return static_cast<std::size_t>(w.finish() - out);
  }

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept {
    const huffman_range r =
        decode_range(in, bytes, 0, ~std::uint64_t{0}, n, [&](std::uint64_t k, std::uint32_t c) { codes[k] = c; });
    // Every code decoded, and the stream ends within the last byte the encoder wrote.
    return (r.corrupt || r.elements != n || (r.end_bit + 7) / 8 != bytes) ? status::corrupt_stream : status::ok;
  }

  /// Decodes the tokens of a chunk's stream in[0, bytes) from bit `start`
  /// on, while a token starts before `range_end` and fewer than
  /// `max_elements` codes came out; put(k, code) receives the k-th code of
  /// the range (huffman_count_only: only count them). The serial decoder is the
  /// whole stream as one range; the CUDA decoder gives each lane of a warp
  /// one range of bits (encoder/huffman_lanes.hpp).
  template <class Put>
  EBAC_HOST_DEVICE huffman_range decode_range(const std::byte* in, std::size_t bytes, std::uint64_t start, std::uint64_t range_end,
                                              std::uint64_t max_elements, Put&& put) const noexcept {
    namespace A = huffman_alphabet;
    huffman_range out;
    out.end_bit = start;
    if (start >= range_end || max_elements == 0) return out;
    if (start > std::uint64_t{bytes} * 8) {  // no token starts past the stream
      out.corrupt = true;
      return out;
    }
    detail::bit_reader r{in + start / 8, in + bytes};
    if (start % 8) {
      r.peek(8);
      r.skip(static_cast<int>(start % 8));
    }
    auto position = [&]() -> std::uint64_t {
      return static_cast<std::uint64_t>(r.p - in) * 8 + r.phantom_bits - static_cast<std::uint64_t>(r.count);
    };
    auto fail = [&](std::uint64_t elements) {
      out.corrupt = true;
      out.elements = elements;
      out.end_bit = position();
      return out;
    };
    std::uint64_t i = 0;
    while (i < max_elements) {
      std::uint32_t sym;
      const std::uint32_t e = table[r.peek(A::table_bits)];
      if (e & 0xffu) {
        sym = e >> 8;
        r.skip(static_cast<int>(e & 0xffu));
      } else {  // long code: canonical walk, MSB of the code first
        std::uint32_t code = 0;
        int len = 0;
        for (;;) {
          code = (code << 1) | r.peek(1);
          r.skip(1);
          ++len;
          if (len > A::max_code_length) return fail(i);
          if (code - first_code[len] < count[len]) {
            sym = sorted[offset[len] + (code - first_code[len])];
            break;
          }
        }
      }
      if (r.overran()) return fail(i);
      if (sym < A::literals) {
        put(i++, sym);
      } else if (sym == A::escape) {
        put(i++, r.peek(32));
        r.skip(32);
      } else {
        const int k = static_cast<int>(sym - A::run_base) + 1;
        const std::uint64_t run = (std::uint64_t{1} << k) + r.peek(k);
        r.skip(k);
        if (run > max_elements - i) return fail(i);
        if constexpr (std::is_same_v<std::remove_cvref_t<Put>, huffman_count_only>) {
          i += run;  // counting only: a run of up to 2^32 zeros costs one step, not 2^32
        } else {
          for (std::uint64_t j = 0; j < run; ++j) put(i++, 0u);
        }
      }
      if (r.overran()) return fail(i);
      if (position() >= range_end) break;
    }
    out.elements = i;
    out.end_bit = position();
    return out;
  }
};

// --- codebook construction (host and device) ---------------------------------

namespace detail {

/// Scratch of one code-length construction, sized for the whole alphabet so
/// that the device can keep it in caller-provided temp storage.
struct huffman_length_workspace {
  static constexpr std::uint32_t capacity = huffman_alphabet::size;
  std::uint64_t freq[capacity];        // the histogram, flattened in place until the lengths fit
  std::uint32_t order[capacity];       // used symbols ordered by (freq, symbol)
  std::uint64_t weight[2 * capacity];  // nodes [0, used): leaves in order; then internal nodes
  std::uint32_t parent[2 * capacity];
  std::int32_t depth[2 * capacity];
  std::uint32_t used;
  std::int32_t flag;                   // a result every thread of a device block reads
};

/// The host's way to run the shared steps below: everything inline, the
/// order by std::sort. (The device runs serial sections in one thread of a
/// block, for_each and sum over all its threads, and ranks symbols in
/// parallel: cuda/kernels/huffman_codebook.cuh.)
struct huffman_host_exec {
  template <class F>
  void serial(F&& f) { f(); }
  /// f(i) for i in [0, n), in any order (the device splits them among threads).
  template <class F>
  void for_each(std::uint32_t n, F&& f) {
    for (std::uint32_t i = 0; i < n; ++i) f(i);
  }
  /// The sum of f(i) over [0, n).
  template <class F>
  std::uint64_t sum(std::uint32_t n, F&& f) {
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < n; ++i) total += f(i);
    return total;
  }
  void sort_used(huffman_length_workspace& w, std::uint32_t n) {
    std::uint32_t m = 0;
    for (std::uint32_t s = 0; s < n; ++s)
      if (w.freq[s]) w.order[m++] = s;
    std::sort(w.order, w.order + m, [&](std::uint32_t a, std::uint32_t b) {
      return w.freq[a] != w.freq[b] ? w.freq[a] < w.freq[b] : a < b;
    });
    w.used = m;
  }
};

/// Position of used symbol s (freq[s] != 0) in the order by (freq, symbol):
/// how many used symbols come before it. Ranks are distinct, so the device
/// places every symbol independently (order[rank(s)] = s) and gets the
/// order std::sort gives the host.
EBAC_HOST_DEVICE std::uint32_t huffman_used_rank(const std::uint64_t* freq, std::uint32_t n, std::uint32_t s) noexcept {
  const std::uint64_t f = freq[s];
  std::uint32_t rank = 0;
  for (std::uint32_t t = 0; t < n; ++t) {
    const std::uint64_t g = freq[t];
    rank += (g != 0 && (g < f || (g == f && t < s))) ? 1u : 0u;
  }
  return rank;
}

/// Huffman code lengths of the symbols w.order[0, w.used) (sorted by
/// (freq, symbol)) by the two-queue method (van Leeuwen): leaves in order,
/// internal nodes created in non-decreasing weight order, so the two
/// lightest nodes are always at the queues' fronts; on equal weights the
/// leaf is taken first. Linear, deterministic. Writes len[] of the used
/// symbols and returns true if the deepest leaf fits max_len; otherwise
/// writes nothing and returns false.
EBAC_HOST_DEVICE bool huffman_lengths_from_order(huffman_length_workspace& w, int max_len, std::uint8_t* len) noexcept {
  const std::uint32_t m = w.used;
  if (m == 0) return true;
  if (m == 1) {
    len[w.order[0]] = 1;
    return true;
  }
  for (std::uint32_t i = 0; i < m; ++i) w.weight[i] = w.freq[w.order[i]];
  std::uint32_t leaf = 0, inner = m, next = m;
  auto take = [&]() -> std::uint32_t {
    if (leaf < m && (inner >= next || w.weight[leaf] <= w.weight[inner])) return leaf++;
    return inner++;
  };
  while (next < 2 * m - 1) {
    const std::uint32_t a = take(), b = take();
    w.weight[next] = w.weight[a] + w.weight[b];
    w.parent[a] = w.parent[b] = next;
    ++next;
  }
  // Depths from the root (the last node) down: a parent is always created
  // after its children, so one backward sweep suffices.
  w.depth[2 * m - 2] = 0;
  int deepest = 0;
  for (std::uint32_t i = 2 * m - 2; i-- > 0;) {
    w.depth[i] = w.depth[w.parent[i]] + 1;
    if (i < m && w.depth[i] > deepest) deepest = w.depth[i];
  }
  if (deepest > max_len) return false;
  for (std::uint32_t i = 0; i < m; ++i) len[w.order[i]] = static_cast<std::uint8_t>(w.depth[i]);
  return true;
}

/// Code lengths len[0, n) for the histogram in w.freq[0, n) (0 = unused),
/// limited to max_len by flattening the histogram until they fit. Every
/// thread of a device block calls this (Exec says who runs what).
EBAC_EXEC_CHECK_DISABLE
template <class Exec>
EBAC_HOST_DEVICE void huffman_lengths_into(Exec& ex, huffman_length_workspace& w, std::uint32_t n, int max_len,
                                           std::uint8_t* len) {
  ex.for_each(n, [&](std::uint32_t s) { len[s] = 0; });
  for (;;) {
    ex.sort_used(w, n);
    ex.serial([&] { w.flag = huffman_lengths_from_order(w, max_len, len) ? 1 : 0; });
    if (w.flag) return;
    ex.for_each(w.used, [&](std::uint32_t i) { w.freq[w.order[i]] = (w.freq[w.order[i]] >> 1) | 1u; });  // flatten, keep non-zero
  }
}

/// Payload bits of `count` tokens of symbol s at code length `len` (extra bits included).
EBAC_HOST_DEVICE std::uint64_t huffman_symbol_cost_bits(std::uint32_t s, std::uint64_t count, std::uint8_t len) noexcept {
  namespace A = huffman_alphabet;
  if (!count) return 0;
  std::uint64_t extra = 0;
  if (s == A::escape) extra = 32;
  else if (s >= A::run_base) extra = s - A::run_base + 1;
  return count * (len + extra);
}

/// Code lengths for one token histogram (its counts copied into w.freq).
EBAC_EXEC_CHECK_DISABLE
template <class Exec, class Count>
EBAC_HOST_DEVICE void huffman_histogram_lengths(Exec& ex, huffman_length_workspace& w, const Count* hist, std::uint8_t* len) {
  namespace A = huffman_alphabet;
  ex.for_each(A::size, [&](std::uint32_t s) { w.freq[s] = static_cast<std::uint64_t>(hist[s]); });
  huffman_lengths_into(ex, w, A::size, A::max_code_length, len);
}

/// Whether the alphabet with zero runs codes the payload in fewer bits than
/// the literal-only one, under their code lengths (a tie keeps literals).
EBAC_EXEC_CHECK_DISABLE
template <class Exec, class Count>
EBAC_HOST_DEVICE bool huffman_prefer_runs(Exec& ex, const Count* with_runs, const Count* literals_only, const std::uint8_t* len_runs,
                                          const std::uint8_t* len_literals) {
  namespace A = huffman_alphabet;
  const std::uint64_t runs_bits =
      ex.sum(A::size, [&](std::uint32_t s) { return huffman_symbol_cost_bits(s, static_cast<std::uint64_t>(with_runs[s]), len_runs[s]); });
  const std::uint64_t literal_bits = ex.sum(A::size, [&](std::uint32_t s) {
    return huffman_symbol_cost_bits(s, static_cast<std::uint64_t>(literals_only[s]), len_literals[s]);
  });
  return runs_bits < literal_bits;
}

/// The stream's choice: lengths for the token histogram with zero runs and
/// for the one without; returns whether runs code the payload smaller. (The
/// CUDA backend runs the two huffman_histogram_lengths calls in two blocks
/// at once, each with its own workspace, then huffman_prefer_runs.)
EBAC_EXEC_CHECK_DISABLE
template <class Exec, class Count>
EBAC_HOST_DEVICE bool huffman_choose_lengths(Exec& ex, huffman_length_workspace& w, const Count* with_runs,
                                             const Count* literals_only, std::uint8_t* len_runs, std::uint8_t* len_literals) {
  huffman_histogram_lengths(ex, w, with_runs, len_runs);
  huffman_histogram_lengths(ex, w, literals_only, len_literals);
  return huffman_prefer_runs(ex, with_runs, literals_only, len_runs, len_literals);
}

/// Canonical codes from length[0, size): code_lsb[size] (bit-reversed,
/// for an LSB-first writer; entries of unused symbols are left alone),
/// sorted[size] (symbols by (length, symbol); the used count is
/// offset[max + 1]), first_code/count/offset[max + 2]. False if a length
/// exceeds the maximum or the lengths break Kraft.
EBAC_HOST_DEVICE bool huffman_assign_codes(const std::uint8_t* length, std::uint32_t* code_lsb, std::uint32_t* sorted,
                                           std::uint32_t* first_code, std::uint32_t* count, std::uint32_t* offset) noexcept {
  namespace A = huffman_alphabet;
  for (int l = 0; l <= A::max_code_length + 1; ++l) count[l] = 0;
  for (std::uint32_t s = 0; s < A::size; ++s) {
    if (length[s] > A::max_code_length) return false;
    if (length[s]) ++count[length[s]];
  }
  // Kraft inequality: a valid (possibly incomplete) prefix code.
  std::uint64_t kraft = 0;
  for (int l = 1; l <= A::max_code_length; ++l) kraft += std::uint64_t{count[l]} << (A::max_code_length - l);
  if (kraft > (std::uint64_t{1} << A::max_code_length)) return false;
  std::uint32_t code = 0, off = 0;
  first_code[0] = offset[0] = 0;
  for (int l = 1; l <= A::max_code_length; ++l) {
    first_code[l] = code;
    offset[l] = off;
    off += count[l];
    code = (code + count[l]) << 1;
  }
  first_code[A::max_code_length + 1] = code;
  offset[A::max_code_length + 1] = off;
  std::uint32_t next[A::max_code_length + 2];
  for (int l = 0; l <= A::max_code_length + 1; ++l) next[l] = 0;
  for (std::uint32_t s = 0; s < A::size; ++s) {
    const int l = length[s];
    if (!l) continue;
    sorted[offset[l] + next[l]] = s;
    code_lsb[s] = reverse_bits(first_code[l] + next[l], l);
    ++next[l];
  }
  return true;
}

/// Symbol s's entries of the table_bits decode table (symbol << 8 | length
/// for every index whose low bits are its code; codes longer than
/// table_bits have none). Symbols fill disjoint entries, so they can be
/// filled in parallel; entries no code reaches must be zero beforehand.
EBAC_HOST_DEVICE void huffman_fill_table(std::uint32_t s, const std::uint8_t* length, const std::uint32_t* code_lsb,
                                         std::uint32_t* table) noexcept {
  namespace A = huffman_alphabet;
  const int l = length[s];
  if (!l || l > A::table_bits) return;
  for (std::uint32_t t = code_lsb[s]; t < (1u << A::table_bits); t += 1u << l) table[t] = (s << 8) | static_cast<std::uint32_t>(l);
}

/// The codebook's stream form: varint flags (use_runs) and used-symbol
/// count, then per used symbol its gap to the previous one (varint) and its
/// length byte. Returns the bytes written (<= huffman_codebook::max_serialized_bytes).
EBAC_HOST_DEVICE std::size_t huffman_serialize(const std::uint8_t* length, bool use_runs, std::byte* out) noexcept {
  namespace A = huffman_alphabet;
  std::byte* p = out;
  std::uint64_t used = 0;
  for (std::uint32_t s = 0; s < A::size; ++s) used += length[s] != 0;
  p += put_varint(p, use_runs ? 1 : 0);
  p += put_varint(p, used);
  std::uint64_t prev = 0;
  bool first = true;
  for (std::uint32_t s = 0; s < A::size; ++s) {
    if (!length[s]) continue;
    p += put_varint(p, first ? s : s - prev - 1);
    *p++ = static_cast<std::byte>(length[s]);
    prev = s;
    first = false;
  }
  return static_cast<std::size_t>(p - out);
}
}  // namespace detail

inline huffman_codebook huffman_codebook::choose(const std::vector<std::uint64_t>& with_runs,
                                                 const std::vector<std::uint64_t>& literals_only) {
  namespace A = huffman_alphabet;
  if (with_runs.size() != A::size || literals_only.size() != A::size)
    detail::fail(status::invalid_argument, "Huffman histograms must have huffman_alphabet::size entries");
  auto w = std::make_unique<detail::huffman_length_workspace>();
  std::vector<std::uint8_t> lr(A::size), ll(A::size);
  detail::huffman_host_exec ex;
  huffman_codebook cb;
  cb.use_runs = detail::huffman_choose_lengths(ex, *w, with_runs.data(), literals_only.data(), lr.data(), ll.data());
  cb.length = cb.use_runs ? std::move(lr) : std::move(ll);
  cb.finalize();  // only the winner's tables are built
  return cb;
}

inline bool huffman_codebook::finalize() {
  namespace A = huffman_alphabet;
  length.resize(A::size, 0);
  code_lsb.assign(A::size, 0);
  table.assign(std::size_t{1} << A::table_bits, 0);
  sorted.assign(A::size, 0);
  if (!detail::huffman_assign_codes(length.data(), code_lsb.data(), sorted.data(), first_code, count, offset)) {
    sorted.clear();
    return false;
  }
  for (std::uint32_t s = 0; s < A::size; ++s) detail::huffman_fill_table(s, length.data(), code_lsb.data(), table.data());
  sorted.resize(offset[A::max_code_length + 1]);
  return true;
}

inline void huffman_codebook::serialize(std::vector<std::byte>& out) const {
  std::byte tmp[max_serialized_bytes];
  std::vector<std::uint8_t> len(length);
  len.resize(huffman_alphabet::size, 0);
  const std::size_t k = detail::huffman_serialize(len.data(), use_runs, tmp);
  out.insert(out.end(), tmp, tmp + k);
}

inline status huffman_codebook::deserialize(const std::byte* p, std::size_t bytes, huffman_codebook& cb) {
  namespace A = huffman_alphabet;
  const std::byte* end = p + bytes;
  std::uint64_t flags, used;
  if (!detail::get_varint(p, end, flags) || flags > 1) return status::corrupt_stream;
  if (!detail::get_varint(p, end, used) || used > A::size) return status::corrupt_stream;
  cb.use_runs = flags == 1;
  cb.length.assign(A::size, 0);
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < used; ++i) {
    std::uint64_t d;
    if (!detail::get_varint(p, end, d) || d >= A::size) return status::corrupt_stream;
    s = (i == 0) ? d : s + d + 1;
    if (s >= A::size || p >= end) return status::corrupt_stream;
    const auto l = static_cast<std::uint8_t>(*p++);
    if (l == 0 || l > A::max_code_length) return status::corrupt_stream;
    cb.length[s] = l;
  }
  if (p != end) return status::corrupt_stream;
  return cb.finalize() ? status::ok : status::corrupt_stream;
}

EBAC_NAMESPACE_END
