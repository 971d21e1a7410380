// ebac/encoder/huffman_codebook.hpp - Huffman's alphabet and codebook:
// length-limited canonical codes built from the token histograms (with zero
// runs and without, whichever codes the payload smaller), their decode
// tables, and the codebook's stream form. Construction, tables and
// serialization are host-device functions over caller-provided arrays: the
// host runs them inline, the CUDA backend in one block
// (cuda/kernels/huffman_codebook.cuh), so both pick the same codebook.
//
// Part of the Huffman stage (encoder/huffman.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

EBAC_NAMESPACE_BEGIN

namespace huffman_alphabet {
inline constexpr std::uint32_t literals = 4096;
inline constexpr std::uint32_t run_classes = 31;     // k = 1..31
inline constexpr std::uint32_t run_base = literals;  // symbol of class k: run_base + k - 1
inline constexpr std::uint32_t escape = literals + run_classes;
inline constexpr std::uint32_t size = escape + 1;
inline constexpr int max_code_length = 24;
inline constexpr int table_bits = 12;
}  // namespace huffman_alphabet

/// Tables of one canonical codebook; the huffman functor points into them.
struct huffman_codebook {
  bool use_runs = false;
  std::vector<std::uint8_t> length;     // per symbol, 0 = unused
  std::vector<std::uint32_t> code_lsb;  // bit-reversed canonical code
  std::vector<std::uint32_t> table;     // table_bits lookup: symbol << 8 | length (0: long code)
  std::vector<std::uint32_t> sorted;    // symbols ordered by (length, symbol)
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
  std::int32_t flag;  // a result every thread of a device block reads
};

/// The host's way to run the shared steps below: everything inline, the
/// order by std::sort. (The device runs serial sections in one thread of a
/// block, for_each and sum over all its threads, and ranks symbols in
/// parallel: cuda/kernels/huffman_codebook.cuh.)
struct huffman_host_exec {
  template <class F>
  void serial(F&& f) {
    f();
  }
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
    std::sort(w.order, w.order + m,
              [&](std::uint32_t a, std::uint32_t b) { return w.freq[a] != w.freq[b] ? w.freq[a] < w.freq[b] : a < b; });
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
EBAC_HOST_DEVICE bool huffman_prefer_runs(Exec& ex, const Count* with_runs, const Count* literals_only,
                                          const std::uint8_t* len_runs, const std::uint8_t* len_literals) {
  namespace A = huffman_alphabet;
  const std::uint64_t runs_bits = ex.sum(A::size, [&](std::uint32_t s) {
    return huffman_symbol_cost_bits(s, static_cast<std::uint64_t>(with_runs[s]), len_runs[s]);
  });
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
  for (std::uint32_t t = code_lsb[s]; t < (1u << A::table_bits); t += 1u << l)
    table[t] = (s << 8) | static_cast<std::uint32_t>(l);
}

/// A code-length table's stream form, shared by the Huffman codebooks
/// (this one and striped_codebook): a varint count of used symbols, then per
/// used symbol its gap to the previous one (varint) and its length byte.
/// Writes at p and returns the end of what it wrote.
EBAC_HOST_DEVICE std::byte* put_code_lengths(const std::uint8_t* length, std::uint32_t alphabet, std::byte* p) noexcept {
  std::uint64_t used = 0;
  for (std::uint32_t s = 0; s < alphabet; ++s) used += length[s] != 0;
  p += put_varint(p, used);
  std::uint64_t prev = 0;
  bool first = true;
  for (std::uint32_t s = 0; s < alphabet; ++s) {
    if (!length[s]) continue;
    p += put_varint(p, first ? s : s - prev - 1);
    *p++ = static_cast<std::byte>(length[s]);
    prev = s;
    first = false;
  }
  return p;
}

/// Reads put_code_lengths' form from [p, end) into `length` (alphabet
/// entries, 0 for unused symbols), advancing p: false on a count, gap or
/// length outside the alphabet or 1..max_length, or bytes running out.
inline bool get_code_lengths(const std::byte*& p, const std::byte* end, std::uint32_t alphabet, unsigned max_length,
                             std::vector<std::uint8_t>& length) {
  std::uint64_t used;
  if (!get_varint(p, end, used) || used > alphabet) return false;
  length.assign(alphabet, 0);
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < used; ++i) {
    std::uint64_t d;
    if (!get_varint(p, end, d) || d >= alphabet) return false;
    s = (i == 0) ? d : s + d + 1;
    if (s >= alphabet || p >= end) return false;
    const auto l = static_cast<std::uint8_t>(*p++);
    if (l == 0 || l > max_length) return false;
    length[s] = l;
  }
  return true;
}

/// The codebook's stream form: varint flags (use_runs), then the code
/// lengths (put_code_lengths). Returns the bytes written (<= huffman_codebook::max_serialized_bytes).
EBAC_HOST_DEVICE std::size_t huffman_serialize(const std::uint8_t* length, bool use_runs, std::byte* out) noexcept {
  std::byte* p = out;
  p += put_varint(p, use_runs ? 1 : 0);
  return static_cast<std::size_t>(put_code_lengths(length, huffman_alphabet::size, p) - out);
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
  std::uint64_t flags;
  if (!detail::get_varint(p, end, flags) || flags > 1) return status::corrupt_stream;
  cb.use_runs = flags == 1;
  if (!detail::get_code_lengths(p, end, A::size, A::max_code_length, cb.length) || p != end) return status::corrupt_stream;
  return cb.finalize() ? status::ok : status::corrupt_stream;
}

EBAC_NAMESPACE_END
