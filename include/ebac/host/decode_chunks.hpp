// ebac/host/decode_chunks.hpp - the host decompressor's per-chunk steps:
// decode every chunk of a payload (several at once where the encoder can:
// encoder/context_ans_x8.hpp), unzigzag, reconstruct the elements.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_side_by_side.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// reconstruct_element on Count codes (Count 0: m), in runs of a constant
/// count for -O2 (quantize_block).
template <class S, std::size_t Count, class Q>
inline void reconstruct_block(const Q& quantizer, const std::uint32_t* EBAC_RESTRICT codes, S* EBAC_RESTRICT out,
                              std::size_t m = Count) noexcept {
  const Q q = quantizer;  // a local copy: the stores below cannot change it
  const std::size_t count = Count != 0 ? Count : m;
  for (std::size_t i = 0; i < count; ++i) out[i] = reconstruct_element<S>(q, static_cast<std::int32_t>(codes[i]));
}

/// Turns one chunk's decoded codes (elements first .. first + m - 1) into
/// elements; false when a lossless quantizer meets a code it cannot have
/// written (a corrupt stream).
template <class S, class Q>
inline bool reconstruct_chunk(const Q& q, const std::uint32_t* codes, std::size_t m, std::uint64_t first, S* out) {
  if constexpr (is_lossless_quantizer<Q>) {
    bool ok = true;
    for (std::size_t i = 0; i < m; ++i) {
      const auto c = static_cast<std::int32_t>(codes[i]);
      ok &= code_valid<S>(q, c);
      out[i] = reconstruct_at<S>(q, c, first + i);
    }
    return ok;
  } else {
    std::size_t i = 0;
    for (; i + quantize_block <= m; i += quantize_block) reconstruct_block<S, quantize_block>(q, codes + i, out + i);
    reconstruct_block<S, 0>(q, codes + i, out + i, m - i);
    return true;
  }
}

inline void unzigzag_in_place(std::uint32_t* f, std::size_t m) {
  // Runs of a constant count for -O2 (quantize_block); in place, so no
  // overlap check is needed.
  std::size_t i = 0;
  for (; i + quantize_block <= m; i += quantize_block)
    for (std::size_t j = 0; j < quantize_block; ++j) f[i + j] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(f[i + j]));
  for (; i < m; ++i) f[i] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(f[i]));
}

/// E's per-stream codebook type, or an empty one for encoders without.
template <class E, bool = E::needs_codebook>
struct codebook_of {
  struct type {};
};
template <class E>
struct codebook_of<E, true> {
  using type = typename E::codebook;
};

/// How many chunks decode_chunks decodes together with encoder E, each in
/// its own buffer from place(): chunk c in buffer c % this.
template <class E>
inline constexpr std::size_t decode_chunks_together = ::ebac::detail::chunks_decoded_together<E>;

/// Decodes every chunk of a payload with `enc`: place(c, m) says where
/// chunk c's m codes go, done(c, codes, m) takes them (zigzagged, in place)
/// once they are decoded, and a chunk that does not decode gets its status
/// in errors[c]. `readable`: the bytes from `payload` to the end of the
/// stream. Where AVX2 is compiled in, context ANS chunks go eight at a
/// time (ebac/encoder/context_ans_x8.hpp: the same codes and the same
/// verdicts), in groups of eight full chunks, two groups side by side where
/// there are enough; the rest one at a time. A
/// group places all eight chunks before it takes any: place must give the
/// chunks c .. c + 7 (c a multiple of 8) of one group distinct buffers
/// (decode_chunks_together<E> says how many a caller's buffers must be).
template <class E, class Place, class Done>
void decode_chunks(const E& enc, const std::byte* payload, std::size_t readable, const std::vector<std::uint64_t>& offsets,
                   std::uint64_t n, std::uint32_t C, int threads, std::vector<status>& errors, Place&& place, Done&& done) {
  const std::uint64_t chunks = offsets.size() - 1;
  auto chunk_len = [&](std::uint64_t c) { return detail::chunk_length(c, C, n); };
  auto decode_one = [&](std::uint64_t c) {
    const std::size_t m = chunk_len(c);
    std::uint32_t* codes = place(c, m);
    const status s = enc.decode_chunk(payload + offsets[c], static_cast<std::size_t>(offsets[c + 1] - offsets[c]), codes, m);
    if (s != status::ok) errors[c] = s;
    else done(c, codes, m);
  };
  // Chunks in groups side by side where the encoder can
  // (encoder/context_ans_side_by_side.hpp): units [0, groups.units) of
  // parallel_for cover the groups, the rest are single chunks.
  const ::ebac::detail::chunk_groups groups =
      ::ebac::detail::plan_chunk_groups<E>(n, C, static_cast<std::uint64_t>(resolve_threads(threads)));
  std::optional<per_thread_scratch<std::uint32_t>> interleaved;
  if (groups.groups > 0) interleaved.emplace(threads);
  parallel_for(static_cast<std::int64_t>(chunks - groups.grouped + groups.units), threads, [&](std::int64_t ui) {
    const auto u = static_cast<std::uint64_t>(ui);
    if (u >= groups.units) return decode_one(groups.grouped + (u - groups.units));
    ::ebac::detail::decode_chunk_group_unit(
        enc, groups, u, payload, readable, offsets, C, [&](std::size_t k) { return interleaved->get(k); }, errors, place, done,
        decode_one);
  }, groups.units > 0 ? 1 : 4);
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
