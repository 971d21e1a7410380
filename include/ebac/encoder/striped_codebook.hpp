// ebac/encoder/striped_codebook.hpp - the striped Huffman encoder's
// codebook: code lengths of at most 11 bits over its 171 symbols
// (encoder/striped_tokens.hpp), learned from a token histogram with the
// length-limited construction the huffman encoder uses
// (huffman_codebook.hpp: detail::huffman_lengths_into), their canonical
// codes, and one 2048-entry decode table whose entry holds everything a
// token needs: code length, raw-bit count, run flag and base value.
//
// Stream form: a varint count of used symbols, then per used symbol its gap
// to the previous one (varint) and its length byte, as huffman's.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/huffman_codebook.hpp>
#include <ebac/encoder/striped_tokens.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

EBAC_NAMESPACE_BEGIN

/// A decode-table entry: bits 0-7 the code's length (0: no code has these
/// bits, a corrupt stream), 8-15 the raw bits that follow, bit 16 a zero
/// run, bits 24-31 the token's bits (length + raw bits: one read on the
/// decoder's critical path instead of two and an add), bits 32-63 the base
/// value (striped_symbol).
namespace striped_entry {
inline constexpr std::uint64_t run_flag = std::uint64_t{1} << 16;
/// The entry of bits no code starts with: length 0, and a run longer than
/// any chunk, so that the decoder meets it only on the branch it takes for
/// long runs (encoder/striped_decode.hpp), which checks the length.
inline constexpr std::uint64_t invalid = run_flag | (std::uint64_t{0xffffffffu} << 32);
[[nodiscard]] constexpr std::uint64_t make(std::uint32_t symbol, int length) noexcept {
  const striped_symbol_value v = striped_symbol(symbol);
  return static_cast<std::uint64_t>(length) | (std::uint64_t{v.nextra} << 8) | (v.run ? run_flag : 0) |
         (static_cast<std::uint64_t>(length + static_cast<int>(v.nextra)) << 24) | (std::uint64_t{v.base} << 32);
}
}  // namespace striped_entry

struct striped_codebook {
  std::vector<std::uint8_t> length = std::vector<std::uint8_t>(striped_alphabet::size, 0);      ///< 0: unused
  std::vector<std::uint32_t> code_lsb = std::vector<std::uint32_t>(striped_alphabet::size, 0);  ///< canonical, bit-reversed
  std::vector<std::uint64_t> table =
      std::vector<std::uint64_t>(std::size_t{1} << striped_alphabet::table_bits, striped_entry::invalid);

  /// Codes and table from `length`; false if a length exceeds the maximum
  /// or the lengths are not a prefix code (Kraft).
  bool finalize() {
    namespace A = striped_alphabet;
    std::uint32_t count[A::max_code_length + 1] = {};
    for (std::uint32_t s = 0; s < A::size; ++s) {
      if (length[s] > A::max_code_length) return false;
      if (length[s]) ++count[length[s]];
    }
    std::uint64_t kraft = 0;
    for (int l = 1; l <= A::max_code_length; ++l) kraft += std::uint64_t{count[l]} << (A::max_code_length - l);
    if (kraft > (std::uint64_t{1} << A::max_code_length)) return false;
    std::uint32_t next[A::max_code_length + 2] = {};
    std::uint32_t code = 0;
    for (int l = 1; l <= A::max_code_length; ++l) {
      next[l] = code;
      code = (code + count[l]) << 1;
    }
    std::fill(table.begin(), table.end(), striped_entry::invalid);
    for (std::uint32_t s = 0; s < A::size; ++s) {
      const int l = length[s];
      if (!l) continue;
      code_lsb[s] = detail::reverse_bits(next[l]++, l);
      const std::uint64_t e = striped_entry::make(s, l);
      for (std::uint32_t t = code_lsb[s]; t < (1u << A::table_bits); t += 1u << l) table[t] = e;
    }
    return true;
  }

  /// The codebook of a token histogram (hist[striped_alphabet::size]).
  static striped_codebook from_histogram(const std::uint64_t* hist) {
    namespace A = striped_alphabet;
    auto w = std::make_unique<detail::huffman_length_workspace>();
    for (std::uint32_t s = 0; s < A::size; ++s) w->freq[s] = hist[s];
    detail::huffman_host_exec ex;
    striped_codebook cb;
    detail::huffman_lengths_into(ex, *w, A::size, A::max_code_length, cb.length.data());
    cb.finalize();
    return cb;
  }

  static constexpr std::size_t max_serialized_bytes = 10 + 3 * std::size_t{striped_alphabet::size};

  void serialize(std::vector<std::byte>& out) const {
    namespace A = striped_alphabet;
    std::byte tmp[max_serialized_bytes];
    std::vector<std::uint8_t> len(length);
    len.resize(A::size, 0);
    out.insert(out.end(), tmp, detail::put_code_lengths(len.data(), A::size, tmp));
  }

  static status deserialize(const std::byte* p, std::size_t bytes, striped_codebook& cb) {
    namespace A = striped_alphabet;
    const std::byte* end = p + bytes;
    if (!detail::get_code_lengths(p, end, A::size, A::max_code_length, cb.length) || p != end) return status::corrupt_stream;
    return cb.finalize() ? status::ok : status::corrupt_stream;
  }
};

EBAC_NAMESPACE_END
