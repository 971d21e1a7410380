// ebac/host/codec.hpp - the host (CPU) reference backend.
//
// compress() and decompress() run the same policy functors the CUDA backend
// runs; only the loops and memory movement live here. Work is split into
// fixed chunks of the stream (never into per-thread pieces), so the serial
// and the OpenMP paths write identical bytes.
//
// Flow: [level palette] -> [value range] -> quantize every element
// (outliers recorded, their code set to 0) -> predictor passes on the
// integer field -> zigzag -> [histogram -> codebook] -> encode each chunk ->
// assemble the stream, or store the raw elements when that is smaller.
// Which quantizer codes a tensor is decided per tensor (choose_stages):
// a tensor of at most max_levels distinct values becomes palette indices,
// an integer tensor its own values (or, with a pooling geometry, offsets in
// its pooling windows), a floating-point tensor the pipeline's quantizer.
// When the predictor never looks outside a chunk (no prediction, flat 1-D
// Lorenzo whose tile divides the chunk) the steps run fused per chunk on a
// cache-resident scratch buffer; otherwise on a whole-tensor integer field.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/context_ans_encode_x8.hpp>
#include <ebac/encoder/context_ans_x8.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/format/stream_stages.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/predictor_sample.hpp>
#include <ebac/host/scratch.hpp>
#include <ebac/host/stream_destination.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/stage_choice.hpp>
#include <ebac/status.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN

namespace host {
namespace detail {

/// Elements a parallel task of run_pass should cover at least: a pass over
/// one tile of a 7x7 or 28x28 map is a microsecond of work, less than handing
/// it to another thread costs (measured on the corpus: Lorenzo 2-D decoding
/// at half the serial speed with 2 threads when every tile was a task).
inline constexpr std::uint64_t pass_task_elements = std::uint64_t{1} << 15;

/// One predictor pass over a whole field of wrapped int32 codes, its units
/// (P::pass_unit: one tile of one outer index) grouped into parallel tasks
/// of >= pass_task_elements, which changes no result.
template <bool Forward, class P>
void run_pass(const P&, std::uint32_t* f, const axis_pass& p, int threads) {
  const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
  const std::uint64_t units = p.outer * tiles;
  const std::uint64_t unit_elements = std::max<std::uint64_t>(1, std::min(p.tile, p.extent) * p.inner);
  const std::uint64_t per_task = std::max<std::uint64_t>(1, pass_task_elements / unit_elements);
  const auto tasks = static_cast<std::int64_t>((units + per_task - 1) / per_task);
  parallel_for(tasks, threads, [&](std::int64_t task) {
    const std::uint64_t u0 = static_cast<std::uint64_t>(task) * per_task, u1 = std::min(units, u0 + per_task);
    for (std::uint64_t u = u0; u < u1; ++u) P::template pass_unit<Forward>(f, p, u / tiles, u % tiles, 0, p.inner);
  });
}

template <class Q>
constexpr bool is_float_quantizer = std::is_same_v<Q, linear_quantizer> || std::is_same_v<Q, sign_preserving_quantizer>;

/// The elements of quantize_chunk's first pass taken at once, a constant
/// trip count: at -O2 GCC (12) vectorizes only a loop whose count is a known
/// multiple of the vector width and whose pointers need no run-time overlap
/// check (restrict), and this loop was half of a compression there.
inline constexpr std::size_t quantize_block = 512;

/// quantize_element_fast on quantize_block elements: codes, and 1 in
/// unsettled where quantize_element must decide.
template <class Q, class S>
inline void quantize_block_fast(const Q& quantizer, const S* EBAC_RESTRICT in, std::uint32_t* EBAC_RESTRICT codes,
                                std::uint8_t* EBAC_RESTRICT unsettled) noexcept {
  const Q q = quantizer;  // a local copy: the stores below cannot change it
  for (std::size_t i = 0; i < quantize_block; ++i) {
    const quantized r = quantize_element_fast(q, in[i]);
    codes[i] = static_cast<std::uint32_t>(r.code);
    unsettled[i] = r.outlier;
  }
}

/// Quantizes one chunk (elements first .. first + m - 1 of the tensor) into
/// codes, recording outliers (their code is 0).
template <class Q, class S>
inline void quantize_chunk(const Q& q, const S* in, std::size_t m, std::uint64_t first, std::uint32_t* codes,
                           std::vector<std::uint64_t>& outliers) {
  if constexpr (!is_float_quantizer<Q>) {
    for (std::size_t i = 0; i < m; ++i) {
      const quantized r = quantize_at(q, in[i], first + i);
      codes[i] = static_cast<std::uint32_t>(r.code);
      if (r.outlier) outliers.push_back(first + i);
    }
  } else {
    // Two loops: a branch-free first pass the compiler vectorizes, then the
    // exact decision for the few elements it could not settle.
    std::uint8_t unsettled[4096];
    for (std::size_t b = 0; b < m; b += sizeof unsettled) {
      const std::size_t e = std::min(m, b + sizeof unsettled);
      std::size_t i = b;
      for (; i + quantize_block <= e; i += quantize_block) quantize_block_fast(q, in + i, codes + i, unsettled + (i - b));
      for (; i < e; ++i) {
        const quantized r = quantize_element_fast(q, in[i]);
        codes[i] = static_cast<std::uint32_t>(r.code);
        unsettled[i - b] = r.outlier;
      }
      for (std::size_t i = b; i < e; ++i) {
        if ((i - b) % 8 == 0 && i + 8 <= e) {  // skip 8 settled elements at once
          std::uint64_t any;
          std::memcpy(&any, unsettled + (i - b), 8);
          if (!any) { i += 7; continue; }
        }
        if (!unsettled[i - b]) continue;
        const quantized r = quantize_element(q, in[i]);
        codes[i] = static_cast<std::uint32_t>(r.code);
        if (r.outlier) outliers.push_back(first + i);
      }
    }
  }
}

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

inline void zigzag_in_place(std::uint32_t* f, std::size_t m) {
  for (std::size_t i = 0; i < m; ++i) f[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(f[i]));
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

/// Elements in chunk c of n elements cut in chunks of C: C, or what is
/// left for the last chunk.
[[nodiscard]] inline std::size_t chunk_length(std::uint64_t c, std::uint32_t C, std::uint64_t n) noexcept {
  return static_cast<std::size_t>(std::min<std::uint64_t>(C, n - c * C));
}

/// An encoder's empty statistics for a tensor of extents e: constructed from
/// them when the encoder models the geometry (a row width, as
/// encoder/context_ans.hpp does), default-constructed otherwise.
template <class E>
typename E::statistics make_statistics(const extents& e) {
  if constexpr (std::is_constructible_v<typename E::statistics, const extents&>) return typename E::statistics(e);
  else return typename E::statistics{};
}

/// Encodes one chunk through the call's per-thread buffer, so the chunk's own
/// vector is sized once to its real length (no zero-fill of the worst case).
template <class E>
void encode_into(const E& enc, const std::uint32_t* codes, std::size_t m, std::vector<std::byte>& out,
                 per_thread_scratch<std::byte>& scratch) {
  std::byte* buf = scratch.get(enc.max_chunk_bytes(m));
  const std::size_t k = enc.encode_chunk(codes, m, buf);
  out.assign(buf, buf + k);
}

template <class T>
value_range finite_range(const T* in, std::uint64_t n, std::uint32_t chunk, int threads) {
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  std::vector<value_range> part(chunks);
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t c) {
    const std::uint64_t b = static_cast<std::uint64_t>(c) * chunk, e = std::min<std::uint64_t>(n, b + chunk);
    value_range r;
    if constexpr (std::is_same_v<T, float>) {
      r.add_block(in + b, static_cast<std::size_t>(e - b));
    } else {
      float buf[1024];
      for (std::uint64_t i = b; i < e; i += 1024) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(1024, e - i));
        for (std::size_t j = 0; j < k; ++j) buf[j] = to_float(in[i + j]);
        r.add_block(buf, k);
      }
    }
    part[static_cast<std::size_t>(c)] = r;
  });
  value_range all;
  for (const auto& r : part) all.merge(r);
  return all;
}

/// The palette of a tensor with at most `capacity` distinct values (bit
/// patterns), or an empty one. Per-chunk sets merged in chunk order
/// (levels.hpp); once any chunk has seen more values than the capacity the
/// others stop early: the answer (no palette) no longer depends on them.
template <class S>
level_palette find_levels(const S* in, std::uint64_t n, std::uint32_t chunk, std::uint32_t capacity, int threads) {
  if (capacity == 0 || n == 0) return {};
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  std::vector<level_set> sets(chunks);
  std::atomic<bool> too_many{false};
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
    const auto c = static_cast<std::uint64_t>(ci);
    level_set& s = sets[c];
    s.capacity = capacity;
    if (too_many.load(std::memory_order_relaxed)) {
      s.overflow = true;
      return;
    }
    const std::uint64_t b = c * chunk, e = std::min<std::uint64_t>(n, b + chunk);
    // Runs of one value are the common case in a mask: count a run at once.
    std::uint64_t i = b;
    while (i < e && !s.overflow) {
      const auto v = raw_bits(in[i]);
      std::uint64_t j = i + 1;
      while (j < e && raw_bits(in[j]) == v) ++j;
      s.add(static_cast<std::uint64_t>(v), j - i);
      i = j;
    }
    if (s.overflow) too_many.store(true, std::memory_order_relaxed);
  });
  level_set all;
  all.capacity = capacity;
  for (const level_set& s : sets) all.merge(s);
  return palette_of(all);
}

}  // namespace detail

namespace detail {

/// Writes the stored form of a tensor (docs/format.md): the header `h` with
/// the stored flag and no stages, then the n elements' raw bytes.
template <class S>
std::size_t write_stored(const stream_header& coded, const S* in, std::uint64_t n, bool checksum, int threads, stream_destination destination) {
  const stream_header h = stored_header(coded, n, checksum);  // every element comes back exactly
  const auto stream_bytes = static_cast<std::size_t>(h.section_offset(section_count) + (checksum ? 8 : 0));
  std::byte* const out = destination(stream_bytes);
  h.write(out);
  std::byte* p = out + h.header_bytes();
  constexpr std::uint64_t block = std::uint64_t{1} << 16;
  parallel_for(static_cast<std::int64_t>((n + block - 1) / block), threads, [&](std::int64_t bi) {
    const std::uint64_t b = static_cast<std::uint64_t>(bi) * block, e = std::min(n, b + block);
    for (std::uint64_t i = b; i < e; ++i) ::ebac::detail::store_le(p + i * sizeof(S), raw_bits(in[i]));
  });
  if (checksum) {
    const std::size_t body = stream_bytes - 8;
    ::ebac::detail::store_le<std::uint64_t>(out + body, ::ebac::detail::checksum64(out, body));
  }
  return stream_bytes;
}

/// Codes n elements with predictor `pred`, quantizer `q` and encoder E and
/// writes the stream, or the stored form when that is smaller. `h` arrives
/// with everything but the stage ids and the section sizes filled.
/// `destination(bytes)` is called once, when the stream's size is known and
/// before anything is written, and returns where to write it (or throws).
/// `coded`, when given, receives the coded form's complete header (what a
/// reader would parse back), whether or not the stored form replaced it.
/// `estimated_bytes`, when given and E is an estimating_encoder (otherwise
/// it is ignored and the stream coded as usual), asks for the coded form's
/// size without coding the chunks: the payload is E::estimated_payload_bits
/// plus each chunk's fixed bytes, `coded` gets the header with that payload
/// size, nothing is written (destination is not called) and 0 is returned.
template <class E, class P, class Q, class S>
std::size_t encode_stream(const S* in, std::uint64_t n, const extents& shape, const P& pred, const Q& q, stream_header h,
                          const compress_options& opt, stream_destination destination, stream_header* coded = nullptr,
                          std::uint64_t* estimated_bytes = nullptr) {
  const bool checksum = opt.checksum;
  const int threads = opt.threads;
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  std::vector<std::vector<std::uint64_t>> outliers(chunks);
  std::vector<std::vector<std::byte>> payload(chunks);
  std::vector<std::byte> codebook_bytes;
  auto chunk_len = [&](std::uint64_t c) { return detail::chunk_length(c, C, n); };
  detail::per_thread_scratch<std::byte> encode_scratch(threads);  // freed when the call returns
  if constexpr (!estimating_encoder<E>) estimated_bytes = nullptr;  // such an encoder codes the chunks
  std::uint64_t estimated_payload = 0;  // with estimated_bytes: the payload section's estimated size

  // Chunks of whole predictor blocks (format/chunking.hpp) are coded on their
  // own: quantize, predict and zigzag one chunk in cache, then encode it.
  // Otherwise the integer field of the whole tensor is built first so that
  // residuals may use codes from other chunks.
  const bool local = chunks_independent(pred, shape, C);
  std::unique_ptr<std::uint32_t[]> field_store;
  std::uint32_t* field = nullptr;
  if (!local) {
    // Uninitialized: every element is written before it is read.
    field_store.reset(new std::uint32_t[static_cast<std::size_t>(n)]);
    field = field_store.get();
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      detail::quantize_chunk(q, in + c * C, chunk_len(c), c * C, field + c * C, outliers[c]);
    });
    // An empty tensor may still have huge extents: no pass has work then.
    const int passes = n > 0 ? pred.passes() : 0;
    for (int k = 0; k < passes; ++k) detail::run_pass<true>(pred, field, pred.pass(shape, k), threads);
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      detail::zigzag_in_place(field + c * C, chunk_len(c));
    });
  }
  // The codes of chunk c: from the field, read back from kept_store, or
  // computed into `scratch` (recording the chunk's outliers only when
  // `record`). Chunks encoded together each take their own scratch.
  detail::per_thread_scratch<std::uint32_t> code_scratch[4] = {
      detail::per_thread_scratch<std::uint32_t>(threads), detail::per_thread_scratch<std::uint32_t>(threads),
      detail::per_thread_scratch<std::uint32_t>(threads), detail::per_thread_scratch<std::uint32_t>(threads)};  // freed when the call returns
  // A codebook encoder that codes the chunks reads every chunk's codes
  // twice, for the statistics and for the coding. The first pass keeps a
  // chunk's codes in `kept_store` when all are below 2^16 (most are: a code
  // that large is a residual of 2^15 quantization bins or more), two bytes
  // an element until the call returns, so that the second widens them
  // instead of quantizing and predicting again; a chunk with a larger code
  // is computed again.
  std::unique_ptr<std::uint16_t[]> kept_store;
  std::vector<std::uint8_t> chunk_kept;  // chunk c's codes are in kept_store
  if constexpr (E::needs_codebook) {
    if (local && estimated_bytes == nullptr && n > 0) {
      kept_store.reset(new std::uint16_t[static_cast<std::size_t>(n)]);
      chunk_kept.assign(static_cast<std::size_t>(chunks), 0);
    }
  }
  bool coding = false;  // set once the statistics pass has run: kept chunks are read back
  auto codes_of = [&](std::uint64_t c, bool record, detail::per_thread_scratch<std::uint32_t>& scratch) -> const std::uint32_t* {
    if (!local) return field + c * C;
    const std::size_t m = chunk_len(c);
    std::uint32_t* const quant = scratch.get(2 * m);
    if (coding && chunk_kept[c]) {
      const std::uint16_t* from = kept_store.get() + c * C;
      for (std::size_t i = 0; i < m; ++i) quant[i] = from[i];
      return quant;
    }
    std::vector<std::uint64_t> ignored;
    detail::quantize_chunk(q, in + c * C, m, c * C, quant, record ? outliers[c] : ignored);
    pred.predict_chunk(shape, quant, quant + m, m);
    if (!coding && kept_store) {
      std::uint32_t any = 0;
      for (std::size_t i = 0; i < m; ++i) any |= quant[m + i];
      if (any < (1u << 16)) {
        std::uint16_t* to = kept_store.get() + c * C;
        for (std::size_t i = 0; i < m; ++i) to[i] = static_cast<std::uint16_t>(quant[m + i]);
        chunk_kept[c] = 1;
      }
    }
    return quant + m;
  };
  auto encode_all = [&](const auto& enc, bool record) {
#if EBAC_HOST_AVX2
    if constexpr (std::is_same_v<E, context_ans>) {
      // Full chunks side by side (ebac/encoder/context_ans_encode_x8.hpp:
      // the same bytes): in fours (two pairs, whose rounds overlap) where
      // every thread still gets one, then in pairs; the last chunk alone
      // when it is short or odd.
      const std::uint64_t full = chunks > 0 && chunk_len(chunks - 1) != C ? chunks - 1 : chunks;
      const auto t = static_cast<std::uint64_t>(resolve_threads(threads));
      const std::uint64_t quads = full / 4 >= t ? full / 4 : 0;
      const std::uint64_t pairs = (full - 4 * quads) / 2;
      const std::uint64_t paired = 4 * quads + 2 * pairs;  // chunks [0, paired) go four or two at a time
      parallel_for(static_cast<std::int64_t>(quads + pairs + (chunks - paired)), threads, [&](std::int64_t ui) {
        const auto u = static_cast<std::uint64_t>(ui);
        if (u >= quads + pairs) {
          const std::uint64_t c = paired + (u - quads - pairs);
          detail::encode_into(enc, codes_of(c, record, code_scratch[0]), chunk_len(c), payload[c], encode_scratch);
          return;
        }
        auto encode = [&](auto pairs_constant, std::uint64_t c0) {
          constexpr int H = 2 * decltype(pairs_constant)::value;
          const std::size_t cap = enc.max_chunk_bytes(C);
          std::byte* const buf = encode_scratch.get(H * cap);
          const std::uint32_t* codes[H];
          std::byte* out[H];
          for (int h = 0; h < H; ++h) {
            codes[h] = codes_of(c0 + static_cast<std::uint64_t>(h), record, code_scratch[h]);
            out[h] = buf + static_cast<std::size_t>(h) * cap;
          }
          const auto bytes = ::ebac::detail::encode_context_ans_pairs<H / 2>(enc, codes, C, out);
          for (int h = 0; h < H; ++h) payload[c0 + static_cast<std::uint64_t>(h)].assign(out[h], out[h] + bytes[static_cast<std::size_t>(h)]);
        };
        if (u < quads) encode(std::integral_constant<int, 2>{}, 4 * u);
        else encode(std::integral_constant<int, 1>{}, 4 * quads + 2 * (u - quads));
      });
      return;
    }
#endif
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      detail::encode_into(enc, codes_of(c, record, code_scratch[0]), chunk_len(c), payload[c], encode_scratch);
    });
  };
  if constexpr (E::needs_codebook) {  // a codebook_encoder (concepts.hpp): learn the codebook from the codes first
    // Chunks are counted in a few groups, not one set of statistics each
    // (a Huffman histogram is 66 KB, as large as a chunk's input); one
    // thread counts them all in one. Sums do not depend on the grouping.
    // At least one group, built from the extents, even with no chunks.
    const std::uint64_t groups = resolve_threads(threads) > 1 ? std::clamp<std::uint64_t>(chunks, 1, 16) : 1;
    std::vector<typename E::statistics> stats(static_cast<std::size_t>(groups), make_statistics<E>(shape));
    parallel_for(static_cast<std::int64_t>(groups), threads, [&](std::int64_t gi) {
      const auto g = static_cast<std::uint64_t>(gi);
      for (std::uint64_t c = chunks * g / groups; c < chunks * (g + 1) / groups; ++c) stats[g].add(codes_of(c, true, code_scratch[0]), chunk_len(c));
    });
    coding = true;
    for (std::size_t g = 1; g < stats.size(); ++g) stats[0].merge(stats[g]);
    stats.resize(1);
    if constexpr (estimating_encoder<E>) {
      if (estimated_bytes != nullptr) {  // the frequencies only: the estimate builds no coding tables
        const typename E::codebook codebook = E::learn_frequencies(stats[0]);
        codebook.serialize(codebook_bytes);
        double bits = E::estimated_payload_bits(stats[0], codebook);
        for (std::uint64_t c = 0; c < chunks; ++c) bits += 8.0 * static_cast<double>(E::min_payload_bytes(chunk_len(c)));
        estimated_payload = static_cast<std::uint64_t>(std::ceil(bits / 8));
      }
    }
    if (estimated_bytes == nullptr) {
      const typename E::codebook codebook = E::learn(stats[0]);
      codebook.serialize(codebook_bytes);
      encode_all(E::bind(codebook), false);  // the statistics pass recorded the outliers
    }
  } else {
    encode_all(E{}, true);
  }
  field_store.reset();
  // Outlier indices (format/outlier_index.hpp), values as raw bits, both in index order.
  outlier_index_writer index;
  for (const auto& v : outliers)
    for (std::uint64_t i : v) index.add(i);
  const std::vector<std::byte>& index_bytes = index.bytes;
  const std::uint64_t outlier_count = index.count;
  ::ebac::detail::set_stream_stages<E>(h, pred, q);
  h.outlier_count = outlier_count;
  std::uint64_t payload_total = estimated_payload;
  for (const auto& v : payload) payload_total += v.size();
  h.set_sections(codebook_bytes.size(), payload_total, index_bytes.size());
  if (coded != nullptr) *coded = h;

  // Never larger than the raw elements plus a header: store them instead.
  const std::uint64_t coded_bytes = h.section_offset(section_count) + (checksum ? 8 : 0);
  if (estimated_bytes != nullptr) {
    *estimated_bytes = coded_bytes;
    return 0;
  }
  const std::uint64_t stored_bytes = h.header_bytes() + n * sizeof(S) + (checksum ? 8 : 0);
  if (opt.store_when_larger && coded_bytes > stored_bytes) return write_stored(h, in, n, checksum, threads, destination);

  // Everything that can throw happens before the destination is asked for:
  // from there on only copies, so a caller's buffer is written in full or not at all.
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + payload[c].size();
  const auto stream_bytes = static_cast<std::size_t>(coded_bytes);
  std::byte* const out = destination(stream_bytes);
  h.write(out);
  std::byte* p = out + h.header_bytes();
  h.write_params(p);
  p += h.section_bytes[section_params];
  if (!codebook_bytes.empty()) std::memcpy(p, codebook_bytes.data(), codebook_bytes.size());
  p += codebook_bytes.size();
  for (const auto& v : payload) {
    ::ebac::detail::store_le<std::uint32_t>(p, static_cast<std::uint32_t>(v.size()));
    p += 4;
  }
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
    const auto c = static_cast<std::size_t>(ci);
    if (!payload[c].empty()) std::memcpy(p + offsets[c], payload[c].data(), payload[c].size());
  });
  p += payload_total;
  if (!index_bytes.empty()) std::memcpy(p, index_bytes.data(), index_bytes.size());
  p += index_bytes.size();
  for (const auto& v : outliers)
    for (std::uint64_t i : v) {
      ::ebac::detail::store_le(p, raw_bits(in[i]));
      p += sizeof(S);
    }
  if (checksum) {
    const std::size_t body = stream_bytes - 8;
    ::ebac::detail::store_le<std::uint64_t>(out + body, ::ebac::detail::checksum64(out, body));
  }
  return stream_bytes;
}

/// The candidates of pipeline::choose_predictor, in the order of preference
/// on a tie: the pipeline's own Lorenzo, flat 1-D Lorenzo, no prediction.
enum class predictor_candidate { pipeline, flat, none };

/// Codes the planned sample of the tensor with each candidate predictor
/// (quantizer `q`, encoder E, no checksum, never stored) and returns the one
/// whose stream, scaled to the whole tensor, is smallest. `h` is the
/// tensor's header, quantizer fields filled. An estimating_encoder
/// (concepts.hpp) only gathers the sample's statistics and learns its
/// codebook: the stream's size is estimated from them (within 0.1% and 8
/// bytes a chunk of the coded size: tests/host/test_encoders.cpp), which
/// skips each candidate's coding pass.
///
/// `every_predictor` false tries the pipeline's predictor only (a choice of
/// quantizer alone: pipeline::choose_quantizer); `predicted_bytes` receives
/// the winner's predicted stream size, which compress_to compares across
/// quantizers.
///
/// When the sample is the whole tensor and `whole_stream` is given, the
/// candidates are coded as the tensor's own stream (h and opt as they are,
/// but never stored; the sizes shift by the same bytes, so the choice is
/// the same) and the winner's stream is handed back in it, so that a small
/// tensor is not coded a fourth time.
template <class E, class S, class Q>
predictor_candidate cheapest_predictor(const S* in, std::uint64_t n, const extents& shape, const lorenzo& pred, const Q& q,
                                       const stream_header& h, const compress_options& opt,
                                       std::vector<std::byte>* whole_stream = nullptr, bool every_predictor = true,
                                       double* predicted_bytes = nullptr) {
  const predictor_sample plan = plan_predictor_sample(pred, shape, n);
  const bool keep = plan.whole && whole_stream != nullptr;
  std::vector<S> gathered;
  const S* x = in;
  std::uint64_t m = n;
  if (!plan.whole) {
    m = plan.elements();
    gathered.resize(static_cast<std::size_t>(m));
    gather_predictor_sample(in, plan, gathered.data());
    x = gathered.data();
  }
  compress_options o = opt;
  o.store_when_larger = false;
  stream_header hs = h;
  if (!keep) {
    o.checksum = false;
    hs.shape = plan.shape;
    hs.flags = 0;
  }
  std::vector<std::byte> stream, kept;
  // The stream's size: estimated without coding the chunks where the
  // encoder can (a sample's stream only predicts the tensor's anyway),
  // else the coded stream's.
  const bool estimate = estimating_encoder<E> && !keep;
  auto predicted = [&](const auto& candidate) {
    stream_header sample_header = hs;
    sample_header.chunk_elements = stream_chunk_elements(candidate, plan.shape, h.chunk_elements);
    stream_header written;
    std::uint64_t estimated = 0;
    encode_stream<E>(
        x, m, plan.shape, candidate, q, sample_header, o,
        [&](std::size_t bytes) {
          stream.resize(bytes);
          return stream.data();
        },
        &written, estimate ? &estimated : nullptr);
    return predicted_stream_bytes(estimate ? estimated : static_cast<std::uint64_t>(stream.size()), written.section_bytes[section_codebook], m, n);
  };
  predictor_candidate best = predictor_candidate::pipeline;
  double best_bytes = predicted(plan.pred);
  if (keep) kept.swap(stream);
  auto consider = [&](double bytes, predictor_candidate c) {
    if (!(bytes < best_bytes)) return;
    best = c, best_bytes = bytes;
    if (keep) kept.swap(stream);
  };
  if (every_predictor) {
    const bool already_flat = pred.dims == 1 && pred.axis[0] == lorenzo_flat_axis && pred.tile[0] == lorenzo::default_flat_tile;
    if (!already_flat) consider(predicted(lorenzo::flat()), predictor_candidate::flat);
    consider(predicted(no_prediction{}), predictor_candidate::none);
  }
  if (keep) *whole_stream = std::move(kept);
  if (predicted_bytes != nullptr) *predicted_bytes = best_bytes;
  return best;
}

/// The compressor: picks the stages for this tensor (stage_choice.hpp) and
/// codes it. The two public compress() overloads differ only in `destination`
/// (stream_destination.hpp: one copy of the encoder serves both).
template <class Pipeline, element T>
std::size_t compress_to(const T* input, const extents& shape, const Pipeline& pipe, const compress_options& opt,
                        stream_destination destination) {
  using E = typename Pipeline::encoder_type;
  using S = storage_t<T>;
  using ::ebac::detail::fail;

  if (const char* why = ::ebac::detail::compress_argument_error<T>(shape, pipe, opt)) fail(status::invalid_argument, why);
  std::uint64_t n = 0;
  (void)shape.count(n);
  if (n > 0 && input == nullptr) fail(status::invalid_argument, "input pointer is null");
  const S* in = reinterpret_cast<const S*>(input);  // a bool is read as its byte (dtype.hpp)
  const std::uint32_t C = pipe.chunk_elements;
  const int threads = opt.threads;

  stream_header h = begin_stream_header<T>(shape, pipe, opt, opt.checksum);
  auto code = [&](const auto& pred, const auto& q) {
    h.chunk_elements = stream_chunk_elements(pred, shape, C);
    return detail::encode_stream<E>(in, n, shape, pred, q, h, opt, destination);
  };
  // The candidates quantizer q's sample (h holding q's eb_abs and top)
  // weighs smallest (detail::cheapest_predictor): every predictor with
  // pipeline::choose_predictor, else the pipeline's own.
  struct weighed {
    detail::predictor_candidate predictor = detail::predictor_candidate::pipeline;
    double bytes = 0;
    std::vector<std::byte> whole;  // a small tensor's candidates were coded whole: the winner's stream
  };
  auto weigh = [&](const auto& q) {
    weighed w;
    w.predictor = detail::cheapest_predictor<E>(in, n, shape, pipe.predictor, q, h, opt, &w.whole, pipe.choose_predictor, &w.bytes);
    return w;
  };
  // The winner's stream is the stream, unless it might have to be stored
  // (then the usual path decides; a stream no larger than the raw elements
  // never is).
  auto code_weighed = [&](const auto& q, const weighed& w) {
    if (!w.whole.empty() && !(opt.store_when_larger && w.whole.size() > n * sizeof(S))) {
      std::memcpy(destination(w.whole.size()), w.whole.data(), w.whole.size());
      return w.whole.size();
    }
    switch (w.predictor) {
      case detail::predictor_candidate::flat: return code(lorenzo::flat(), q);
      case detail::predictor_candidate::none: return code(no_prediction{}, q);
      case detail::predictor_candidate::pipeline: break;
    }
    return code(pipe.predictor, q);
  };
  constexpr bool lorenzo_pipeline = std::is_same_v<typename Pipeline::predictor_type, lorenzo>;
  // The pipeline's predictor, or the candidate a sample codes smallest
  // (pipeline::choose_predictor).
  auto code_predicted = [&](const auto& q) {
    if constexpr (lorenzo_pipeline) {
      if (pipe.choose_predictor && n > 0) return code_weighed(q, weigh(q));
    }
    return code(pipe.predictor, q);
  };

  const level_palette palette = detail::find_levels(in, n, C, opt.max_levels, threads);
  if constexpr (floating_element<T>) {
    using Q = typename Pipeline::quantizer_type;
    // The range: for a relative bound, and for 16-bit elements, whose
    // largest magnitude becomes the quantizer's top level (linear.hpp).
    constexpr bool wants_top = sizeof(T) == 2;
    value_range range;
    if (opt.bound.mode == bound_mode::relative || wants_top)
      range = palette.count > 0 ? palette_range<T>(palette) : detail::finite_range(in, n, C, threads);
    // Finite: compress_argument_error took only a finite bound (a relative
    // one at most 1e6) and a range of finite floats spans at most 2 FLT_MAX.
    const double eb_abs = quantizer_bound<Q, T>(opt.bound, range);
    const Q q = Q::make(eb_abs).with_top(wants_top ? top_level_of(range) : 0.0f);
    if (palette.count > 0 && levels_pay<T>(palette, q)) {
      h.palette = palette;  // lossless: eb_abs stays 0
      return code(no_prediction{}, level_quantizer{palette});
    }
    h.eb_abs = eb_abs;
    h.top = q.top.value;
    // pipeline::choose_quantizer: the linear quantizer of the same bound
    // where its stream is predicted smaller (a tie keeps zeros and signs).
    if constexpr (lorenzo_pipeline && std::is_same_v<Q, sign_preserving_quantizer>) {
      if (pipe.choose_quantizer && n > 0) {
        const weighed keeping_signs = weigh(q);
        const double linear_eb = quantizer_bound<linear_quantizer, T>(opt.bound, range);
        const linear_quantizer linear = linear_quantizer::make(linear_eb).with_top(wants_top ? top_level_of(range) : 0.0f);
        h.eb_abs = linear_eb;
        h.top = linear.top.value;
        const weighed plain = weigh(linear);
        if (plain.bytes < keeping_signs.bytes) return code_weighed(linear, plain);
        h.eb_abs = eb_abs;
        h.top = q.top.value;
        return code_weighed(q, keeping_signs);
      }
    }
    return code_predicted(q);
  } else {
    if (palette.count > 0) {
      h.palette = palette;
      return code(no_prediction{}, level_quantizer{palette});
    }
    if (opt.pooling.dims != 0) {
      h.pool = opt.pooling;
      return code(no_prediction{}, pool_window_quantizer::make(opt.pooling, shape));
    }
    return code_predicted(exact_quantizer{});
  }
}

/// How many chunks decode_chunks decodes together with encoder E, each in
/// its own buffer from place(): chunk c in buffer c % this.
template <class E>
inline constexpr std::size_t decode_chunks_together =
#if EBAC_HOST_AVX2
    std::is_same_v<E, context_ans> ? ::ebac::detail::context_ans_x8_lanes : 1;
#else
    1;
#endif

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
  std::uint64_t groups = 0;   // groups of up to eight chunks
  std::uint64_t grouped = 0;  // the chunks [0, grouped) the groups decode
#if EBAC_HOST_AVX2
  constexpr std::uint64_t G = ::ebac::detail::context_ans_x8_lanes;
  const auto t = static_cast<std::uint64_t>(resolve_threads(threads));
  if constexpr (std::is_same_v<E, context_ans>) {
    // A group is eight chunks' work for one thread: grouping where there
    // are fewer groups than threads would leave threads idle
    // that single chunks keep busy. Chunks of up to 2^22 codes keep a
    // lane's bit position within 32 bits. The full chunks left over, when
    // there are at least four, make a last group whose free lanes decode
    // its first chunk again: eight lanes take about as long as four chunks
    // one at a time (a tensor of 31 chunks of 2^16 codes decoded 7 alone).
    const std::uint64_t full = n / C;
    std::uint64_t g = full / G, k = g * G;
    if (full % G >= G / 2) {
      ++g;
      k = full;
    }
    if (C <= (1u << 22) && (t <= 1 || g >= t)) {
      groups = g;
      grouped = k;
    }
  }
  per_thread_scratch<std::uint32_t> interleaved(groups > 0 ? threads : 1);
#else
  (void)readable;  // only the grouped decoder reads past a chunk
#endif
  // Units [0, units) of parallel_for cover groups [0, groups): two groups a
  // unit where there are enough of them (decode_context_ans_groups: their
  // steps overlap; 1.14-1.25x one at a time at rel 1e-3 and 1e-4), one
  // where two a unit would leave threads idle. The rest are single chunks.
  std::uint64_t units = groups;
#if EBAC_HOST_AVX2
  constexpr std::uint64_t GU = ::ebac::detail::context_ans_x8_groups;
  static_assert(GU == 2);
  if (groups >= GU && (t <= 1 || groups / GU >= t))
    units = (groups + GU - 1) / GU;
  const std::uint64_t groups_a_unit = units == groups ? 1 : GU;
#endif
  parallel_for(static_cast<std::int64_t>(chunks - grouped + units), threads, [&](std::int64_t ui) {
    const auto u = static_cast<std::uint64_t>(ui);
    if (u >= units) return decode_one(grouped + (u - units));
#if EBAC_HOST_AVX2
    if constexpr (std::is_same_v<E, context_ans>) {
      // Decodes groups [g0, g0 + k) (k <= GU) together; false, with nothing
      // placed, where their chunks are not all within the reach of 32-bit byte
      // offsets from the first, or the 8 bytes after the last are not readable.
      auto decode_groups = [&](std::uint64_t g0, std::uint64_t k) -> bool {
        const std::uint64_t c0 = g0 * G;
        const std::uint64_t c_end = std::min(grouped, (g0 + k) * G);
        const std::byte* base = payload + offsets[c0];
        const std::uint64_t span = offsets[c_end] - offsets[c0];
        const std::uint64_t after = readable - offsets[c0];  // bytes readable from base
        if (after < span + 8 || span + 8 >= (std::uint64_t{1} << 28)) return false;
        const auto limit = static_cast<std::uint32_t>(std::min<std::uint64_t>(after - 8, (std::uint64_t{1} << 28) - 1));
        std::uint32_t off[GU * G], len[GU * G];
        std::uint32_t* lanes[GU];
        // Each group's eight lanes' codes, 32-byte aligned, then room for a free lane's.
        const std::size_t stride = (G * C + 8 + C + 7) / 8 * 8;
        std::uint32_t* const raw = interleaved.get(k * stride + 8);
        auto* const aligned = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(raw) + 31) & ~std::uintptr_t{31});
        for (std::uint64_t h = 0; h < k; ++h) {
          const std::uint64_t first = c0 + h * G;
          const std::uint64_t used = std::min<std::uint64_t>(G, c_end - first);  // lanes [used, G) decode chunk `first` again
          for (std::uint64_t l = 0; l < G; ++l) {
            const std::uint64_t c = l < used ? first + l : first;
            off[h * G + l] = static_cast<std::uint32_t>(offsets[c] - offsets[c0]);
            len[h * G + l] = static_cast<std::uint32_t>(offsets[c + 1] - offsets[c]);
          }
          lanes[h] = aligned + h * stride;
        }
        unsigned bad[GU] = {};
        if (k == 2) ::ebac::detail::decode_context_ans_groups<2>(enc, base, off, len, C, limit, lanes, bad);
        else ::ebac::detail::decode_context_ans_groups<1>(enc, base, off, len, C, limit, lanes, bad);
        // Group by group: a group places its eight chunks before it takes any.
        for (std::uint64_t h = 0; h < k; ++h) {
          const std::uint64_t first = c0 + h * G;
          const std::uint64_t used = std::min<std::uint64_t>(G, c_end - first);
          std::uint32_t* to[G];
          for (std::uint64_t l = 0; l < G; ++l) to[l] = l < used ? place(first + l, C) : lanes[h] + G * C;
          ::ebac::detail::deinterleave_context_ans_x8(lanes[h], C, to);  // C is a multiple of 32
          for (std::uint64_t l = 0; l < used; ++l) {
            const std::uint64_t c = first + l;
            if (bad[h] >> l & 1u) errors[c] = status::corrupt_stream;
            else done(c, to[l], static_cast<std::size_t>(C));
          }
        }
        return true;
      };
      const std::uint64_t g0 = u * groups_a_unit;
      const std::uint64_t k = std::min(groups_a_unit, groups - g0);
      if (decode_groups(g0, k)) return;
      for (std::uint64_t g = g0; g < g0 + k; ++g)  // each group alone, or its chunks one at a time
        if (!decode_groups(g, 1))
          for (std::uint64_t c = g * G; c < std::min(grouped, (g + 1) * G); ++c) decode_one(c);
    }
#endif
  }, units > 0 ? 1 : 4);
}
}  // namespace detail

/// Compresses n = count(shape) elements of `in` into a self-describing stream.
/// Floating-point elements are compressed under opt.bound; integer and bool
/// elements losslessly. Throws ebac::error naming the offending argument.
/// Working memory besides the stream: the coded chunks, and with a codebook
/// encoder (Huffman, context ANS) the tensor's codes, two bytes an element
/// (four with a predictor whose chunks depend on each other).
template <class Pipeline, element T>
std::vector<std::byte> compress(const T* in, const extents& shape, const Pipeline& pipe, const compress_options& opt) {
  std::vector<std::byte> out;
  detail::compress_to(in, shape, pipe, opt, [&](std::size_t bytes) {
    out.resize(bytes);
    return out.data();
  });
  return out;
}

/// Compresses into a caller's buffer (an arena, pinned memory, ...) and
/// returns the stream's size. A capacity of max_compressed_bytes(shape, pipe)
/// always suffices (max_coded_bytes with opt.store_when_larger off); with less, a stream that does not fit throws
/// status::buffer_too_small. On any error `out` is left untouched. `out`
/// must not overlap `in` (outlier values are read from `in` while writing).
template <class Pipeline, element T>
std::size_t compress(const T* in, const extents& shape, const Pipeline& pipe, const compress_options& opt, std::byte* out,
                     std::size_t capacity) {
  if (out == nullptr) ::ebac::detail::fail(status::invalid_argument, "output pointer is null");
  return detail::compress_to(in, shape, pipe, opt, [&](std::size_t bytes) {
    if (bytes > capacity)
      ::ebac::detail::fail(status::buffer_too_small, "the stream takes " + std::to_string(bytes) + " bytes, the buffer holds " +
                                                         std::to_string(capacity) + " (max_compressed_bytes() always suffices)");
    return out;
  });
}

/// Parses and validates a stream's header (checksum included); throws ebac::error.
inline stream_header inspect(const std::byte* data, std::size_t size) {
  stream_header h;
  const char* what = "";
  const status s = read_stream_header(data, size, h, &what);
  if (s != status::ok) ::ebac::detail::fail(s, what);
  return h;
}


/// Decompresses a stream into out[0, count); T must match the stream's dtype
/// and count its element count. Throws ebac::error on any inconsistency, and
/// status::buffer_too_small when the stream decodes to more than
/// max_output_bytes bytes (count x sizeof(T)), before decoding anything.
/// Working memory: a chunk's codes per thread (four bytes a code); with
/// context ANS where AVX2 is compiled in, sixteen chunks' (decode_chunks:
/// eight decoded side by side, then placed);
/// with a predictor whose chunks depend on each other, the tensor's codes.
template <element T>
void decompress(const std::byte* data, std::size_t size, T* output, std::uint64_t count, int threads = 0,
                std::uint64_t max_output_bytes = unlimited_output) {
  using ::ebac::detail::fail;
  using S = storage_t<T>;
  const stream_header h = inspect(data, size);
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  if (const char* why = ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, output)) fail(status::invalid_argument, why);
  S* const out = reinterpret_cast<S*>(output);  // a bool is written as its byte
  const std::uint64_t n = count;
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  auto chunk_len = [&](std::uint64_t c) { return detail::chunk_length(c, C, n); };

  if (h.is_stored()) {
    const std::byte* p = data + h.section_offset(section_payload);
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      for (std::uint64_t i = c * C, e = c * C + chunk_len(c); i < e; ++i)
        out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(p + i * sizeof(S)));
    });
    return;
  }

  // Chunk offsets: every size is checked against the payload section.
  const std::byte* table = data + h.section_offset(section_chunk_table);
  const std::byte* payload = data + h.section_offset(section_payload);
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + ::ebac::detail::load_le<std::uint32_t>(table + 4 * c);
  if (offsets[chunks] != h.section_bytes[section_payload]) fail(status::corrupt_stream, "chunk sizes do not add up to the payload section");

  ::ebac::detail::with_stream_stages<T>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
    using E = typename decltype(enc_tag)::type;
    E enc{};
    [[maybe_unused]] typename detail::codebook_of<E>::type codebook;  // owns what enc points into
    if constexpr (E::needs_codebook) {
      const status s = E::codebook::deserialize(data + h.section_offset(section_codebook), h.section_bytes[section_codebook], codebook);
      if (s != status::ok) fail(s, "invalid codebook section");
      enc = E::bind(codebook);
    }
    std::vector<status> errors(chunks, status::ok);   // a payload that does not decode
    std::vector<std::uint8_t> bad_codes(chunks, 0);     // a code the quantizer cannot have written
    auto report = [&] {
      for (status s : errors)
        if (s != status::ok) fail(s, "a chunk's payload does not decode to its element count");
      for (std::uint8_t b : bad_codes)
        if (b) fail(status::corrupt_stream, "a chunk holds a code its quantizer cannot have written");
    };

    const auto readable = static_cast<std::size_t>((data + size) - payload);
    if (chunks_independent(pred, h.shape, C)) {
      detail::per_thread_scratch<std::uint32_t> scratch(threads);  // freed when the call returns
      detail::decode_chunks(
          enc, payload, readable, offsets, n, C, threads, errors,
          [&](std::uint64_t c, std::size_t) {
            constexpr std::size_t k = detail::decode_chunks_together<E>;
            return scratch.get(std::size_t{C} * k) + std::size_t{C} * (c % k);
          },
          [&](std::uint64_t c, std::uint32_t* codes, std::size_t m) {
            detail::unzigzag_in_place(codes, m);
            pred.unpredict_chunk(h.shape, codes, m);
            if (!detail::reconstruct_chunk<S>(q, codes, m, c * C, out + c * C)) bad_codes[c] = 1;
          });
    } else {
      // Uninitialized: every element is written before it is read.
      std::unique_ptr<std::uint32_t[]> field_store(new std::uint32_t[static_cast<std::size_t>(n)]);
      std::uint32_t* const field = field_store.get();
      detail::decode_chunks(
          enc, payload, readable, offsets, n, C, threads, errors, [&](std::uint64_t c, std::size_t) { return field + c * C; },
          [&](std::uint64_t, std::uint32_t* codes, std::size_t m) { detail::unzigzag_in_place(codes, m); });
      report();
      for (int k = (n > 0 ? pred.passes() : 0) - 1; k >= 0; --k)
        detail::run_pass<false>(pred, field, pred.pass(h.shape, k), threads);
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        if (!detail::reconstruct_chunk<S>(q, field + c * C, chunk_len(c), c * C, out + c * C)) bad_codes[c] = 1;
      });
    }
    report();
  });

  // Outliers (format/outlier_index.hpp, the section as one segment):
  // strictly increasing indices below n, raw bits restored.
  const outlier_index_reader index{data + h.section_offset(section_outlier_index), h.section_bytes[section_outlier_index], n};
  const std::byte* values = data + h.section_offset(section_outlier_value);
  std::uint64_t placed = 0;
  const bool indices_ok = index.place(0, index.bytes, {}, h.outlier_count, [&](std::uint64_t j, std::uint64_t i) {
    out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(values + j * sizeof(S)));
    ++placed;
  });
  if (!indices_ok || placed != h.outlier_count)
    fail(status::corrupt_stream, "outlier index section: a varint runs past the section, an index is not below the element count, "
                                 "or it does not hold exactly outlier_count indices");
}

/// Decompresses a whole stream into a new vector. For bool streams the
/// vector holds one byte per element (std::vector<bool> packs bits and has
/// no data()), 0 or 1 for a tensor that held valid bools. max_output_bytes
/// bounds what a stream may make it allocate (element count x element size,
/// checked against the header before allocating; status::buffer_too_small
/// when exceeded): pass one when the stream is not trusted.
template <element T>
std::vector<storage_t<T>> decompress(const std::byte* data, std::size_t size, int threads = 0, std::uint64_t max_output_bytes = unlimited_output) {
  const stream_header h = inspect(data, size);
  if (h.type != dtype_of<T>::value) ::ebac::detail::fail(status::invalid_argument, "output element type does not match the stream's dtype");
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  const std::uint64_t n = element_count(h);
  std::vector<storage_t<T>> out;
  // A header can claim far more elements than memory holds (run-length and
  // Huffman streams of zeros are legitimately tiny): a clear error, not std::bad_alloc.
  try {
    if (n > out.max_size()) throw std::length_error("too many elements");
    out.resize(static_cast<std::size_t>(n));
  } catch (const std::exception&) {
    ::ebac::detail::fail(status::out_of_memory, "cannot allocate the " + std::to_string(n) + " elements of " +
                                                    std::to_string(sizeof(T)) + " bytes the stream decodes to");
  }
  decompress(data, size, reinterpret_cast<T*>(out.data()), out.size(), threads, max_output_bytes);
  return out;
}

}  // namespace host
EBAC_NAMESPACE_END

// A program that compiles the codec once (host/codec_instances.hpp) sees its
// instantiations declared here, so no unit instantiates them again.
#ifdef EBAC_HOST_CODEC_PREBUILT
#include <ebac/host/codec_instances.hpp>
#endif
