// ebac/encoder/huffman_functor.hpp - the huffman functor: the tables
// bind() points it at, its statistics, encode_chunk and decode_chunk;
// decode_range is declared here and defined in huffman_decode.hpp.
// Include encoder/huffman.hpp, which has all of it.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bit_io.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/huffman_codebook.hpp>
#include <ebac/encoder/huffman_encode.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

EBAC_NAMESPACE_BEGIN

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
    return huffman{cb.use_runs,      cb.length.data(), cb.code_lsb.data(), cb.table.data(),
                   cb.sorted.data(), cb.first_code,    cb.count,           cb.offset};
  }

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    return n * 7 + 16;  // <= 24-bit escape code + 32 raw bits per code
  }
  /// Codes known to fit in `bits` bits do not code shorter in the worst case.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept {
    return max_chunk_bytes(n);
  }

  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept {
    detail::bit_writer w{out};
    detail::huffman_tokenize(codes, n, use_runs, [&](std::uint32_t s, std::uint32_t extra, int extra_bits) {
      w.put(code_lsb[s], length[s]);
      if (extra_bits) w.put(extra, extra_bits);
    });
    return static_cast<std::size_t>(w.finish() - out);
  }

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept;

  /// Decodes the tokens of a chunk's stream in[0, bytes) from bit `start`
  /// on, while a token starts before `range_end` and fewer than
  /// `max_elements` codes came out; put(k, code) receives the k-th code of
  /// the range (huffman_count_only: only count them). The serial decoder is the
  /// whole stream as one range; the CUDA decoder gives each lane of a warp
  /// one range of bits (encoder/huffman_lanes.hpp).
  template <class Put>
  EBAC_HOST_DEVICE huffman_range decode_range(const std::byte* in, std::size_t bytes, std::uint64_t start,
                                              std::uint64_t range_end, std::uint64_t max_elements, Put&& put) const noexcept;
};

EBAC_NAMESPACE_END
