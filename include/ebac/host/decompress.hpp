// ebac/host/decompress.hpp - host::decompress: a stream back into its
// elements, on the CPU. The header is parsed and validated once
// (host/inspect.hpp), the stages it names rebuilt (format/stream_stages.hpp),
// the chunks decoded (host/decode_chunks.hpp), then the outliers restored.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stream_stages.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/decode_chunks.hpp>
#include <ebac/host/inspect.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {

namespace detail {
/// A stored stream's elements (its payload, the raw little-endian bits of
/// each) copied to out[0, n), chunk by chunk on `threads`.
template <class S>
void copy_stored_elements(const stream_header& h, const std::byte* data, S* out, std::uint64_t n, int threads) {
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  const std::byte* p = data + h.section_offset(section_payload);
  parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
    const auto c = static_cast<std::uint64_t>(ci);
    for (std::uint64_t i = c * C, e = c * C + detail::chunk_length(c, C, n); i < e; ++i)
      out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(p + i * sizeof(S)));
  });
}

/// Where each chunk's payload starts in the payload section (chunks + 1
/// offsets, the last the section's size): every size is checked against the
/// payload section.
inline std::vector<std::uint64_t> chunk_offsets(const stream_header& h, const std::byte* data, std::uint64_t chunks) {
  const std::byte* table = data + h.section_offset(section_chunk_table);
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + ::ebac::detail::load_le<std::uint32_t>(table + 4 * c);
  if (offsets[chunks] != h.section_bytes[section_payload])
    ::ebac::detail::fail(status::corrupt_stream, "chunk sizes do not add up to the payload section");
  return offsets;
}

/// The stream's encoder, bound to its codebook section where it has one
/// (`codebook` owns what the encoder points into).
template <class E>
E bind_encoder(const stream_header& h, const std::byte* data, [[maybe_unused]] typename codebook_of<E>::type& codebook) {
  E enc{};
  if constexpr (E::needs_codebook) {
    const status s =
        E::codebook::deserialize(data + h.section_offset(section_codebook), h.section_bytes[section_codebook], codebook);
    if (s != status::ok) ::ebac::detail::fail(s, "invalid codebook section");
    enc = E::bind(codebook);
  }
  return enc;
}

/// Outliers (format/outlier_index.hpp, the section as one segment):
/// strictly increasing indices below n, raw bits restored into out.
template <class S>
void place_outliers(const stream_header& h, const std::byte* data, S* out, std::uint64_t n) {
  const outlier_index_reader index{data + h.section_offset(section_outlier_index), h.section_bytes[section_outlier_index], n};
  const std::byte* values = data + h.section_offset(section_outlier_value);
  std::uint64_t placed = 0;
  const bool indices_ok = index.place(0, index.bytes, {}, h.outlier_count, [&](std::uint64_t j, std::uint64_t i) {
    out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(values + j * sizeof(S)));
    ++placed;
  });
  if (!indices_ok || placed != h.outlier_count)
    ::ebac::detail::fail(status::corrupt_stream,
                         "outlier index section: a varint runs past the section, an index is not below the element count, "
                         "or it does not hold exactly outlier_count indices");
}

/// decompress() of a stream whose header `h` inspect() has parsed and
/// validated: the public overloads parse it once, here or before allocating.
template <element T>
void decompress_parsed(const stream_header& h, const std::byte* data, std::size_t size, T* output, std::uint64_t count,
                       int threads, std::uint64_t max_output_bytes) {
  using ::ebac::detail::fail;
  using S = storage_t<T>;
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  if (const char* why = ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, output))
    fail(status::invalid_argument, why);
  S* const out = reinterpret_cast<S*>(output);  // a bool is written as its byte
  const std::uint64_t n = count;
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  auto chunk_len = [&](std::uint64_t c) { return detail::chunk_length(c, C, n); };

  if (h.is_stored()) return copy_stored_elements(h, data, out, n, threads);

  const std::byte* payload = data + h.section_offset(section_payload);
  const std::vector<std::uint64_t> offsets = chunk_offsets(h, data, chunks);

  ::ebac::detail::with_stream_stages<T>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
    using E = typename decltype(enc_tag)::type;
    typename detail::codebook_of<E>::type codebook;  // owns what enc points into
    E enc = bind_encoder<E>(h, data, codebook);
    std::vector<status> errors(chunks, status::ok);  // a payload that does not decode
    std::vector<std::uint8_t> bad_codes(chunks, 0);  // a code the quantizer cannot have written
    auto report = [&] {
      for (status s : errors)
        if (s != status::ok) fail(s, "a chunk's payload does not decode to its element count");
      for (std::uint8_t b : bad_codes)
        if (b) fail(status::corrupt_stream, "a chunk holds a code its quantizer cannot have written");
    };

    const auto readable = static_cast<std::size_t>((data + size) - payload);
    // Scratch beside the output: at most decode_scratch_budget (half the
    // output and 48 MiB), whatever chunk size and thread count.
    const std::uint64_t budget = detail::decode_scratch_budget(n * sizeof(S));
    if (chunks_independent(pred, h.shape, C)) {
      const detail::decode_plan plan = detail::plan_decode<E>(n, C, threads, budget);
      detail::per_thread_scratch<std::uint32_t> scratch(plan.threads);  // freed when the call returns
      detail::decode_chunks(
          enc, payload, readable, offsets, n, C, plan, errors,
          [&](std::uint64_t c, std::size_t m) {
            // A group's chunks need distinct buffers; a chunk on its own, its own codes.
            if (c >= plan.groups.grouped) return scratch.get(m);
            constexpr std::size_t k = detail::decode_chunks_together<E>;
            return scratch.get(std::size_t{C} * k) + std::size_t{C} * (c % k);
          },
          [&](std::uint64_t c, std::uint32_t* codes, std::size_t m) {
            detail::unzigzag_in_place(codes, m);
            pred.unpredict_chunk(h.shape, codes, m);
            if (!detail::reconstruct_chunk<S>(q, codes, m, c * C, out + c * C)) bad_codes[c] = 1;
          });
    } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(pred)>, lorenzo>) {
      // Window by window (decode_lorenzo_windows), not the tensor's codes at once.
      bool bad = false;
      detail::decode_lorenzo_windows<S>(enc, pred, h.shape, q, payload, offsets, n, C, threads, budget, out, bad,
                                        [&](status s) { fail(s, "a chunk's payload does not decode to its element count"); });
      if (bad) bad_codes[0] = 1;
    } else {
      // Uninitialized: every element is written before it is read.
      std::unique_ptr<std::uint32_t[]> field_store(new std::uint32_t[static_cast<std::size_t>(n)]);
      std::uint32_t* const field = field_store.get();
      const detail::decode_plan plan = detail::plan_decode<E>(n, C, threads, budget);
      detail::decode_chunks(
          enc, payload, readable, offsets, n, C, plan, errors, [&](std::uint64_t c, std::size_t) { return field + c * C; },
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

  place_outliers(h, data, out, n);
}

}  // namespace detail

/// Decompresses a stream into out[0, count); T must match the stream's dtype
/// and count its element count. Throws ebac::error on any inconsistency, and
/// status::buffer_too_small when the stream decodes to more than
/// max_output_bytes bytes (count x sizeof(T)), before decoding anything.
/// Working memory beside the output: at most half the output's bytes and
/// 48 MiB (decode_scratch_budget), whatever chunk size and thread count the
/// stream and the caller name; fewer threads run, and context-ANS chunks
/// go one at a time instead of side by side, where theirs would not fit.
/// A chunk's codes per thread (four bytes a code); with context ANS where
/// AVX2 is compiled in, sixteen chunks' (decode_chunks: eight decoded side by
/// side, then placed); with a Lorenzo predictor whose chunks depend on each
/// other, a window of whole slabs along its outermost axis and a batch of
/// chunks' codes (decode_lorenzo_windows), never the tensor's codes. (One
/// chunk's codes, up to 64 MiB, and two slabs are the least it takes.)
template <element T>
void decompress(const std::byte* data, std::size_t size, T* output, std::uint64_t count, int threads = 0,
                std::uint64_t max_output_bytes = unlimited_output) {
  detail::decompress_parsed(inspect(data, size), data, size, output, count, threads, max_output_bytes);
}

/// Decompresses a whole stream into a new vector. For bool streams the
/// vector holds one byte per element (std::vector<bool> packs bits and has
/// no data()), 0 or 1 for a tensor that held valid bools. max_output_bytes
/// bounds what a stream may make it allocate (element count x element size,
/// checked against the header before allocating; status::buffer_too_small
/// when exceeded): pass one when the stream is not trusted.
template <element T>
std::vector<storage_t<T>> decompress(const std::byte* data, std::size_t size, int threads = 0,
                                     std::uint64_t max_output_bytes = unlimited_output) {
  const stream_header h = inspect(data, size);
  if (h.type != dtype_of<T>::value)
    ::ebac::detail::fail(status::invalid_argument, "output element type does not match the stream's dtype");
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
  detail::decompress_parsed(h, data, size, reinterpret_cast<T*>(out.data()), out.size(), threads, max_output_bytes);
  return out;
}

}  // namespace host
EBAC_NAMESPACE_END
