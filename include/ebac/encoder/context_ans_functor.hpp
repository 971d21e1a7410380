// ebac/encoder/context_ans_functor.hpp - the context_ans functor: its
// constants, the codebook tables bind() points it at, what it learns from
// (context_ans_statistics.hpp); encode_chunk and decode_chunk are declared
// here and defined in context_ans_encode.hpp and context_ans_decode.hpp.
// Include encoder/context_ans.hpp, which has all of it.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_codebook.hpp>
#include <ebac/encoder/context_ans_model.hpp>
#include <ebac/encoder/context_ans_statistics.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

EBAC_NAMESPACE_BEGIN

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
  static constexpr std::size_t zero_block = detail::context_ans_zero_block;
  /// The bit of a chunk's u32 byte count that says a bitmap follows it.
  static constexpr std::uint32_t bitmap_flag = 1u << 31;
  /// The blocks of a chunk of n codes: the bits of its bitmap that count.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::size_t block_count(std::size_t n) noexcept {
    return (n + zero_block - 1) / zero_block;
  }
  /// The bytes of the zero-block bitmap of a chunk of n codes.
  [[nodiscard]] EBAC_HOST_DEVICE static constexpr std::size_t bitmap_bytes(std::size_t n) noexcept {
    return (block_count(n) + 7) / 8;
  }

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

  /// Token counts per context of the richer context set; chunks are added
  /// in any grouping and merged (context_ans_statistics.hpp).
  using statistics = context_ans_statistics;
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
  /// learn() without derive() (context_ans_statistics.hpp says why).
  static codebook learn_frequencies(const statistics& s) { return detail::context_ans_learning::learn_frequencies(s); }
  /// The bits encode_chunk writes for the codes that gave `s` under `cb`,
  /// without coding them (context_ans_statistics.hpp says what it leaves out).
  static double estimated_payload_bits(const statistics& s, const codebook& cb) {
    return detail::context_ans_learning::estimated_payload_bits(s, cb);
  }
  static context_ans bind(const context_ans_codebook& cb) noexcept {
    return context_ans{cb.row,
                       cb.classes,
                       cb.diagonal,
                       cb.freq.data(),
                       cb.cumulative.data(),
                       cb.steps.data(),
                       cb.first_token.data(),
                       cb.first_token_fine.data(),
                       cb.version >= 1};
  }

  /// Four bytes of count, the bitmap, at most two rANS bytes a code and
  /// four states, at most 30 raw bits (four bytes) a code.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n) const noexcept {
    return 4 + bitmap_bytes(n) + rans_capacity(n) + 4 * n + 8;
  }
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t max_chunk_bytes(std::size_t n, unsigned) const noexcept {
    return max_chunk_bytes(n);
  }

  /// Codes n codes that were part of the statistics this codebook was
  /// learned from (a token its context never had cannot be coded).
  EBAC_HOST_DEVICE std::size_t encode_chunk(const std::uint32_t* codes, std::size_t n, std::byte* out) const noexcept;

  // encode_chunk's parts, shared with the host's encoder of two chunks at a
  // time (context_ans_encode_x8.hpp).
  /// Contexts computed at a time (model::contexts), on the stack: the
  /// format's blocks of zeros.
  static constexpr std::size_t context_block = zero_block;
  /// The end of a chunk's rANS space at out (the rANS bytes are written
  /// backwards from it, above the bitmap's place); the raw bits start there.
  [[nodiscard]] EBAC_HOST_DEVICE static std::byte* rans_end(std::byte* out, std::size_t n) noexcept;
  /// The bitmap of a chunk being coded at out, all clear: at out + 4, where
  /// finish_chunk keeps it (or writes the rANS bytes over it if no bit is set).
  EBAC_HOST_DEVICE static std::byte* clear_bitmap(std::byte* out, std::size_t n) noexcept;
  /// Flags the block that starts at element b (a multiple of zero_block).
  EBAC_HOST_DEVICE static void flag_block(std::byte* bitmap, std::size_t b) noexcept;
  /// Puts the raw bits of codes[0, n) at rans_end(out, n), forward; their bytes.
  EBAC_HOST_DEVICE static std::size_t put_raw_bits(const std::uint32_t* codes, std::size_t n, std::byte* out) noexcept;
  /// After the rANS steps left p (the lowest rANS byte) and the states x:
  /// puts the final states and the byte count (with bitmap_flag where the
  /// bitmap at out + 4 has a block flagged: it stays, else it is dropped),
  /// moves the rANS bytes and the raw_bytes of raw bits down behind them;
  /// the chunk's size.
  EBAC_HOST_DEVICE static std::size_t finish_chunk(std::byte* out, std::size_t n, std::byte* p,
                                                   const std::uint32_t (&x)[model::lanes], std::size_t raw_bytes) noexcept;

  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk(const std::byte* in, std::size_t bytes, std::uint32_t* codes,
                                                     std::size_t n) const noexcept;
  /// decode_chunk into any place indexed like a pointer (codes[i] a
  /// std::uint32_t&, read back for the upper neighbours): the CUDA backend's
  /// ANS kernel decodes a warp's 32 chunks into one interleaved array, so that
  /// its lanes' writes and reads of element i fall in one cache line. Reads
  /// `cumulative` and `first_token` only (a token's frequency is the
  /// difference of its cumulative bounds, which derive() computed from it).
  template <class Codes>
  [[nodiscard]] EBAC_HOST_DEVICE status decode_chunk_to(const std::byte* in, std::size_t bytes, Codes codes,
                                                        std::size_t n) const noexcept;

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
  [[nodiscard]] EBAC_HOST_DEVICE bool read_head(const std::byte* in, std::size_t bytes, std::size_t n,
                                                chunk_head& h) const noexcept;
  /// Whether the block that starts at element b is flagged in `bitmap`.
  [[nodiscard]] EBAC_HOST_DEVICE static bool block_flagged(const std::byte* bitmap, std::size_t b) noexcept;
  /// The checks of a chunk's bitmap beyond its place: a version-1 codebook
  /// (zero_blocks), at least one block flagged (else the writer leaves the
  /// bitmap out), and no bit past the chunk's last block. The caller has
  /// checked that the chunk holds the bitmap's bitmap_bytes(n) bytes.
  [[nodiscard]] EBAC_HOST_DEVICE bool valid_bitmap(const std::byte* bitmap, std::size_t n) const noexcept;

 private:
  [[nodiscard]] EBAC_HOST_DEVICE static std::size_t rans_capacity(std::size_t n) noexcept { return 2 * n + 4 * model::lanes; }
};

EBAC_NAMESPACE_END
