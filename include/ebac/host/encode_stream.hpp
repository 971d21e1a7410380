// ebac/host/encode_stream.hpp - one tensor coded with given stages into a
// stream: quantize, predict, zigzag, [statistics -> codebook], encode each
// chunk, assemble the sections; or the stored form when that is smaller.
//
// When the predictor never looks outside a chunk (no prediction, flat 1-D
// Lorenzo whose tile divides the chunk) the steps run fused per chunk on a
// cache-resident scratch buffer; otherwise on a whole-tensor integer field.
// An encoder that codes several chunks side by side says so itself
// (encoder/context_ans_encode_x8.hpp: encode_chunks_side_by_side).
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/extents.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/encoder/context_ans_side_by_side.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stream_stages.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/encode_chunks.hpp>
#include <ebac/host/large_buffer.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>
#include <ebac/host/stream_destination.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// Writes the stored form of a tensor (docs/format.md): the header `h` with
/// the stored flag and no stages, then the n elements' raw bytes.
template <class S>
std::size_t write_stored(const stream_header& coded, const S* in, std::uint64_t n, bool checksum, int threads,
                         stream_destination destination) {
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
  detail::per_thread_scratch<std::byte> encode_scratch(threads);    // freed when the call returns
  if constexpr (!estimating_encoder<E>) estimated_bytes = nullptr;  // such an encoder codes the chunks
  std::uint64_t estimated_payload = 0;                              // with estimated_bytes: the payload section's estimated size

  // Chunks of whole predictor blocks (format/chunking.hpp) are coded on their
  // own: quantize, predict and zigzag one chunk in cache, then encode it.
  // Otherwise the integer field of the whole tensor is built first so that
  // residuals may use codes from other chunks.
  const bool local = chunks_independent(pred, shape, C);
  large_buffer<std::uint32_t> field_store;
  std::uint32_t* field = nullptr;
  if (!local) {
    // Uninitialized: every element is written before it is read.
    field_store.reset(static_cast<std::size_t>(n));
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
      detail::per_thread_scratch<std::uint32_t>(threads),
      detail::per_thread_scratch<std::uint32_t>(threads)};  // freed when the call returns
  // A codebook encoder that codes the chunks reads every chunk's codes
  // twice, for the statistics and for the coding. The first pass keeps a
  // chunk's codes in `kept_store` when all are below 2^16 (most are: a code
  // that large is a residual of 2^15 quantization bins or more), two bytes
  // an element until the call returns, so that the second widens them
  // instead of quantizing and predicting again; a chunk with a larger code
  // is computed again.
  //
  // A token encoder (concepts.hpp) keeps more: a chunk's tokens, a symbol
  // byte and 16 raw bits each (three bytes an element at most), where they
  // fit (E::keeps), so that the coding pass neither computes the codes nor
  // forms the tokens again (forming them was as costly as counting them:
  // docs/benchmarks.md). A chunk that does not fit is computed again.
  // (large_buffer: on huge pages where Linux has them, see large_buffer.hpp.)
  large_buffer<std::uint16_t> kept_store;
  std::vector<std::uint8_t> chunk_kept;  // chunk c's codes are in kept_store
  large_buffer<std::uint8_t> kept_symbol;
  large_buffer<std::uint16_t> kept_extra;
  constexpr std::size_t not_kept = ~std::size_t{0};
  std::vector<std::size_t> chunk_tokens;  // chunk c's kept tokens (at c * C), or not_kept
  if constexpr (token_encoder<E>) {
    if (estimated_bytes == nullptr && n > 0) {
      kept_symbol.reset(static_cast<std::size_t>(n));
      kept_extra.reset(static_cast<std::size_t>(n));
      chunk_tokens.assign(static_cast<std::size_t>(chunks), not_kept);
    }
  } else if constexpr (E::needs_codebook) {
    if (local && estimated_bytes == nullptr && n > 0) {
      kept_store.reset(static_cast<std::size_t>(n));
      chunk_kept.assign(static_cast<std::size_t>(chunks), 0);
    }
  }
  bool coding = false;  // set once the statistics pass has run: kept chunks are read back
  auto codes_of = [&](std::uint64_t c, bool record, detail::per_thread_scratch<std::uint32_t>& scratch) -> const std::uint32_t* {
    if (!local) return field + c * C;
    const std::size_t m = chunk_len(c);
    std::uint32_t* const quant = scratch.get(2 * m);
    if (coding && kept_store && chunk_kept[c]) {
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
  // The statistics of chunk c, whose codes are `codes`, from its tokens,
  // kept for the coding pass; false (nothing done) where they do not fit.
  auto count_kept_tokens = [&](auto& s, std::uint64_t c, const std::uint32_t* codes) {
    if constexpr (token_encoder<E>) {
      const std::size_t m = chunk_len(c);
      std::uint32_t any = 0;
      for (std::size_t i = 0; i < m; ++i) any |= codes[i];
      if (!kept_symbol || !E::keeps(m, any)) return false;
      std::uint8_t* const symbol = kept_symbol.get() + c * C;
      chunk_tokens[c] = E::tokenize(codes, m, symbol, kept_extra.get() + c * C);
      s.add_symbols(symbol, chunk_tokens[c]);
      return true;
    } else {
      (void)s, (void)c, (void)codes;
      return false;
    }
  };
  auto encode_all = [&](const auto& enc, bool record) {
    auto encode_one = [&](std::uint64_t c) {
      if constexpr (token_encoder<E>) {
        if (!chunk_tokens.empty() && chunk_tokens[c] != not_kept) {
          const std::size_t m = chunk_len(c);
          std::byte* const buf = encode_scratch.get(enc.max_chunk_bytes(m));
          const std::size_t bytes =
              enc.encode_tokens(kept_symbol.get() + c * C, kept_extra.get() + c * C, chunk_tokens[c], m, buf);
          payload[c].assign(buf, buf + bytes);
          return;
        }
      }
      detail::encode_into(enc, codes_of(c, record, code_scratch[0]), chunk_len(c), payload[c], encode_scratch);
    };
    // Several chunks side by side where the encoder can (the same bytes).
    const bool encoded = ::ebac::detail::encode_chunks_side_by_side(
        enc, n, C, static_cast<std::uint64_t>(resolve_threads(threads)),
        [&](std::int64_t k, const auto& f) { parallel_for(k, threads, f); },
        [&](std::uint64_t c, int slot) { return codes_of(c, record, code_scratch[slot]); },
        [&](std::size_t bytes) { return encode_scratch.get(bytes); },
        [&](std::uint64_t c, const std::byte* data, std::size_t size) { payload[c].assign(data, data + size); }, encode_one);
    if (encoded) return;
    parallel_for(static_cast<std::int64_t>(chunks), threads,
                 [&](std::int64_t ci) { encode_one(static_cast<std::uint64_t>(ci)); });
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
      for (std::uint64_t c = chunks * g / groups; c < chunks * (g + 1) / groups; ++c) {
        const std::uint32_t* const codes = codes_of(c, true, code_scratch[0]);
        if (!count_kept_tokens(stats[g], c, codes)) stats[g].add(codes, chunk_len(c));
      }
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

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
