// ebac/host/decode_chunks.hpp - the host decompressor's per-chunk steps:
// decode every chunk of a payload (several at once where the encoder can:
// encoder/context_ans_x8.hpp), unzigzag, reconstruct the elements.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/encoder/context_ans_side_by_side.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
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

/// The working memory the host decompressor may take beside its output of
/// `output_bytes` bytes: half the output and 48 MiB. Its peak is then at
/// most 1.5 x the output + 64 MiB (with the stream and the program's own),
/// whatever chunk size, chunk count or thread count a stream names: the
/// chunk size is the writer's choice (up to 2^24 codes, 64 MiB of codes a
/// chunk), and a stream of a few hundred bytes may name 2^28 elements. Where
/// even one thread's scratch exceeds it (one chunk's codes), one thread runs.
[[nodiscard]] inline std::uint64_t decode_scratch_budget(std::uint64_t output_bytes) noexcept {
  return output_bytes / 2 + (std::uint64_t{48} << 20);
}

/// How decode_chunks runs a payload: which chunks go in groups side by side
/// (none where their scratch would not fit the budget), on how many threads.
struct decode_plan {
  ::ebac::detail::chunk_groups groups;
  int threads = 1;
  /// Bytes of scratch one thread takes under this plan (its place buffers and interleaved lanes).
  std::uint64_t thread_bytes = 0;
};

/// The scratch one thread of decode_chunks takes with encoder E: a chunk's
/// codes (4 C bytes) where it decodes one chunk at a time; with groups,
/// decode_chunks_together<E> chunks' codes and the interleaved lanes of a unit.
template <class E>
[[nodiscard]] std::uint64_t decode_thread_bytes(const ::ebac::detail::chunk_groups& g, std::uint32_t C) noexcept {
  const std::uint64_t one = std::uint64_t{4} * C;
  if (g.groups == 0) return one;
  const std::uint64_t stride = (std::uint64_t{8} * C + 8 + C + 7) / 8 * 8;
  return one * decode_chunks_together<E> + 4 * (g.groups_a_unit * stride + 8) + 32;
}

/// The plan for n codes in chunks of C on `threads` (as parallel_for takes
/// them) whose scratch stays within `budget` bytes: as many threads as fit,
/// groups where they fit, and at least one thread decoding one chunk at a time.
template <class E>
[[nodiscard]] decode_plan plan_decode(std::uint64_t n, std::uint32_t C, int threads, std::uint64_t budget) {
  int t = resolve_threads(threads);
  if (t < 1) t = 1;
  for (;;) {
    decode_plan p;
    p.groups = ::ebac::detail::plan_chunk_groups<E>(n, C, static_cast<std::uint64_t>(t));
    p.threads = t;
    p.thread_bytes = decode_thread_bytes<E>(p.groups, C);
    if (p.thread_bytes * static_cast<std::uint64_t>(t) <= budget) return p;
    if (t > 1) {
      t = static_cast<int>(
          std::max<std::uint64_t>(1, std::min<std::uint64_t>(static_cast<std::uint64_t>(t - 1), budget / p.thread_bytes)));
      continue;
    }
    p.groups = {};  // one thread, one chunk at a time: the least there is
    p.thread_bytes = decode_thread_bytes<E>(p.groups, C);
    return p;
  }
}

/// Decodes every chunk of a payload with `enc` as `plan` says: place(c, m)
/// says where chunk c's m codes go, done(c, codes, m) takes them
/// (zigzagged, in place) once they are decoded, and a chunk that does not
/// decode gets its status in errors[c]. `readable`: the bytes from
/// `payload` to the end of the stream. Where AVX2 is compiled in, context
/// ANS chunks go eight at a time (ebac/encoder/context_ans_x8.hpp: the same
/// codes and the same verdicts), in groups of eight full chunks, two groups
/// side by side where there are enough; the rest one at a time. A group
/// places all eight chunks before it takes any: place must give the chunks
/// c .. c + 7 (c a multiple of 8, c < plan.groups.grouped) of one group
/// distinct buffers (decode_chunks_together<E> says how many a caller's
/// buffers must be); a chunk at or past plan.groups.grouped needs one buffer.
template <class E, class Place, class Done>
void decode_chunks(const E& enc, const std::byte* payload, std::size_t readable, const std::vector<std::uint64_t>& offsets,
                   std::uint64_t n, std::uint32_t C, const decode_plan& plan, std::vector<status>& errors, Place&& place,
                   Done&& done) {
  const std::uint64_t chunks = offsets.size() - 1;
  const int threads = plan.threads;
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
  const ::ebac::detail::chunk_groups& groups = plan.groups;
  std::optional<per_thread_scratch<std::uint32_t>> interleaved;
  if (groups.groups > 0) interleaved.emplace(threads);
  parallel_for(
      static_cast<std::int64_t>(chunks - groups.grouped + groups.units), threads,
      [&](std::int64_t ui) {
        const auto u = static_cast<std::uint64_t>(ui);
        if (u >= groups.units) return decode_one(groups.grouped + (u - groups.units));
        ::ebac::detail::decode_chunk_group_unit(
            enc, groups, u, payload, readable, offsets, C, [&](std::size_t k) { return interleaved->get(k); }, errors, place,
            done, decode_one);
      },
      groups.units > 0 ? 1 : 4);
}

/// Decodes a payload whose chunks depend on each other (a Lorenzo block
/// larger than a chunk: format/chunking.hpp) into out[0, n), without the
/// integer field of the whole tensor (4 bytes an element, 4x a u8 output):
/// window by window along the predictor's outermost axis. The codes of a
/// window of whole slabs (one index of that axis: the product of the
/// extents inside it) are gathered in element order from chunks decoded a
/// batch at a time, the inner axes' passes run on the window, the outer
/// axis's prefix sum continues from the slab before it (kept across
/// windows), and the window is reconstructed. The same codes as the passes
/// over the whole field (wrapping sums, in any order), the same verdicts:
/// the first chunk in order that does not decode is reported (`fail_chunk`),
/// and a code the quantizer cannot have written sets `bad`.
/// Scratch: a window (at least two slabs) and a batch of chunks' codes, in
/// `budget` bytes where two slabs and one chunk fit.
/// The payload comes a batch at a time: fetch(c0, k, local) gives the bytes
/// of chunks [c0, c0 + k) (asked for in increasing order; the pointer is
/// valid until the next call) with chunk c0 + i at [local[i], local[i + 1]).
/// A window's elements [e0, e0 + m) go where target(e0, m) says, and
/// written(e0, m) follows once they are final (windows in order).
template <class S, class E, class Q, class Fetch, class Target, class Written, class FailChunk>
void decode_lorenzo_windows(const E& enc, const lorenzo& pred, const extents& shape, const Q& q, std::uint64_t chunks,
                            Fetch&& fetch, std::uint64_t n, std::uint32_t C, int threads, std::uint64_t budget, Target&& target,
                            Written&& written, bool& bad, FailChunk&& fail_chunk) {
  const axis_pass p0 = pred.pass(shape, 0);
  const std::uint64_t slab = p0.inner, D = p0.extent, T = p0.tile;
  // Slabs a window: about 2^22 codes (16 MiB), at least one, at most D,
  // within half the budget where more than one slab fits it.
  const std::uint64_t fit = budget / 8 / slab;  // slabs in half the budget
  std::uint64_t w = std::max<std::uint64_t>(1, (std::uint64_t{1} << 22) / slab);
  w = std::min<std::uint64_t>({w, D, fit > 1 ? fit - 1 : 1});
  const std::uint64_t window_bytes = 4 * (w + 1) * slab;
  // Chunks a batch: one a thread, more while they hold under 64 MiB of
  // codes, fewer where the budget left after the window says so (one at least).
  const std::uint64_t chunk_bytes = std::uint64_t{4} * C;
  const std::uint64_t left = budget > window_bytes ? budget - window_bytes : 0;
  const auto t = static_cast<std::uint64_t>(std::max(1, resolve_threads(threads)));
  std::uint64_t batch = std::max<std::uint64_t>(t, (std::uint64_t{64} << 20) / chunk_bytes);
  batch = std::max<std::uint64_t>(1, std::min<std::uint64_t>({batch, left / chunk_bytes, chunks}));
  std::unique_ptr<std::uint32_t[]> window_store(new std::uint32_t[static_cast<std::size_t>((w + 1) * slab)]);
  std::unique_ptr<std::uint32_t[]> batch_store(new std::uint32_t[static_cast<std::size_t>(batch * C)]);
  std::uint32_t* const carry = window_store.get();  // the slab before the window, final
  std::uint32_t* const window = carry + slab;
  std::vector<status> batch_errors(static_cast<std::size_t>(batch));
  std::vector<std::uint64_t> local;

  // The codes in element order: chunks [first_chunk, first_chunk + decoded) are in batch_store.
  std::uint64_t first_chunk = 0, decoded = 0;
  auto decode_batch = [&](std::uint64_t c0) {
    const std::uint64_t k = std::min<std::uint64_t>(batch, chunks - c0);
    const std::byte* const payload = fetch(c0, k, local);
    parallel_for(
        static_cast<std::int64_t>(k), threads,
        [&](std::int64_t i) {
          const std::uint64_t c = c0 + static_cast<std::uint64_t>(i);
          const std::size_t m = detail::chunk_length(c, C, n);
          std::uint32_t* codes = batch_store.get() + static_cast<std::size_t>(i) * C;
          const auto u = static_cast<std::size_t>(i);
          const status s = enc.decode_chunk(payload + local[u], static_cast<std::size_t>(local[u + 1] - local[u]), codes, m);
          batch_errors[static_cast<std::size_t>(i)] = s;
          if (s == status::ok) unzigzag_in_place(codes, m);
        },
        1);
    for (std::uint64_t i = 0; i < k; ++i)
      if (batch_errors[static_cast<std::size_t>(i)] != status::ok) fail_chunk(batch_errors[static_cast<std::size_t>(i)]);
    first_chunk = c0;
    decoded = k;
  };
  // Copies the codes of elements [e0, e1) to dst.
  auto gather = [&](std::uint64_t e0, std::uint64_t e1, std::uint32_t* dst) {
    while (e0 < e1) {
      if (e0 >= (first_chunk + decoded) * C || decoded == 0) decode_batch(e0 / C);
      const std::uint64_t end = std::min<std::uint64_t>(e1, std::min<std::uint64_t>((first_chunk + decoded) * C, n));
      std::copy(batch_store.get() + (e0 - first_chunk * C), batch_store.get() + (end - first_chunk * C), dst);
      dst += end - e0;
      e0 = end;
    }
  };

  std::atomic<bool> any_bad{false};
  extents we = shape;
  const int a0 = pred.axis[0] == lorenzo_flat_axis ? -1 : pred.axis[0];
  for (int i = 0; i < a0; ++i) we.dims[i] = 1;
  for (std::uint64_t o = 0; o < p0.outer; ++o) {
    for (std::uint64_t j0 = 0; j0 < D; j0 += w) {
      const std::uint64_t j1 = std::min(D, j0 + w), e0 = (o * D + j0) * slab, m = (j1 - j0) * slab;
      gather(e0, e0 + m, window);
      // The inner axes' passes, within each slab of the window.
      if (a0 >= 0) {
        we.dims[a0] = j1 - j0;
        for (int k = pred.passes() - 1; k >= 1; --k) run_pass<false>(pred, window, pred.pass(we, k), threads);
      }
      // The outer axis: slab j adds slab j - 1 unless j starts a tile (slab j0 - 1 is `carry`).
      const std::uint64_t parts = std::max<std::uint64_t>(
          1, std::min<std::uint64_t>(static_cast<std::uint64_t>(resolve_threads(threads)), slab / pass_task_elements));
      parallel_for(
          static_cast<std::int64_t>(parts), threads,
          [&](std::int64_t pi) {
            const std::uint64_t s0 = slab * static_cast<std::uint64_t>(pi) / parts,
                                s1 = slab * (static_cast<std::uint64_t>(pi) + 1) / parts;
            for (std::uint64_t j = j0; j < j1; ++j) {
              if (j % T == 0) continue;
              std::uint32_t* row = window + (j - j0) * slab;
              const std::uint32_t* prev = j == j0 ? carry : row - slab;
              for (std::uint64_t s = s0; s < s1; ++s) row[s] += prev[s];
            }
          },
          1);
      // Reconstruct the window, in tasks of whole 2^15 elements.
      const std::uint64_t tasks = (m + pass_task_elements - 1) / pass_task_elements;
      S* const out = target(e0, static_cast<std::size_t>(m));
      parallel_for(static_cast<std::int64_t>(tasks), threads, [&](std::int64_t ti) {
        const std::uint64_t b0 = static_cast<std::uint64_t>(ti) * pass_task_elements, b1 = std::min(m, b0 + pass_task_elements);
        if (!reconstruct_chunk<S>(q, window + b0, static_cast<std::size_t>(b1 - b0), e0 + b0, out + b0))
          any_bad.store(true, std::memory_order_relaxed);
      });
      written(e0, static_cast<std::size_t>(m));
      std::copy(window + m - slab, window + m, carry);
    }
  }
  bad = any_bad.load();
}

/// decode_lorenzo_windows of a payload in memory (chunk c at payload +
/// offsets[c]) into out[0, n).
template <class S, class E, class Q, class FailChunk>
void decode_lorenzo_windows(const E& enc, const lorenzo& pred, const extents& shape, const Q& q, const std::byte* payload,
                            const std::vector<std::uint64_t>& offsets, std::uint64_t n, std::uint32_t C, int threads,
                            std::uint64_t budget, S* out, bool& bad, FailChunk&& fail_chunk) {
  decode_lorenzo_windows<S>(
      enc, pred, shape, q, offsets.size() - 1,
      [&](std::uint64_t c0, std::uint64_t k, std::vector<std::uint64_t>& local) {
        local.resize(static_cast<std::size_t>(k + 1));
        for (std::uint64_t i = 0; i <= k; ++i) local[static_cast<std::size_t>(i)] = offsets[c0 + i] - offsets[c0];
        return payload + offsets[c0];
      },
      n, C, threads, budget, [&](std::uint64_t e0, std::size_t) { return out + e0; }, [](std::uint64_t, std::size_t) {}, bad,
      fail_chunk);
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
