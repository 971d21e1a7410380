// ebac/host/decompress_stream.hpp - host::decompress_stream: a stream read
// from a reader (a file, a pipe) and decoded window by window into a sink,
// never the whole stream nor (with a sink that writes elsewhere) the whole
// output in memory.
//
// A window is a run of whole chunks (or, where Lorenzo chunks depend on each
// other, of whole slabs: decode_lorenzo_windows): its compressed bytes are
// read, decoded into the sink's target, handed over (written), then the next
// window reuses the memory. What stays for the whole call: the header, the
// codebook, the chunk table (4 bytes a chunk, at most an eighth of the
// output) and the outlier index section. The stream is read once, in order,
// exactly as far as its header says; its checksum is verified at the end.
// Verdicts are host::decompress's: a stream one decodes the other decodes to
// the same bits, and one refuses the other refuses (fuzz_decompress checks
// both): a truncated stream, a checksum that does not match (also where a
// chunk fails to decode first: the rest of the stream is then read, so bit
// rot is named as the whole-buffer decoder, which checks the checksum first,
// names it), a chunk that does not decode, a code no quantizer writes, a bad
// outlier index. Where a stream without checksum has several faults, the
// first in stream order is named (the whole-buffer decoder names a chunk
// that does not decode before a bad code in an earlier chunk).
// Elements reach the sink before the checksum is verified: a caller that
// must not expose an unverified result writes to a temporary place (the
// ebac CLI: a temporary file, renamed once the call returns).
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stream_stages.hpp>
#include <ebac/host/chunk_passes.hpp>
#include <ebac/host/decode_chunks.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>
#include <ebac/host/stream_outliers.hpp>
#include <ebac/host/stream_source.hpp>

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {

/// Where decompress_stream puts elements of storage type S (storage_t<T>):
/// target(first, count) gives room for elements [first, first + count),
/// written(first, count) says they are there. Windows come in increasing
/// order and cover [0, n) once; then each outlier's run is put the same way,
/// over elements already written (a sink that cannot go back, such as a
/// pipe, must keep what it was given until the call returns). Exceptions
/// from either go through decompress_stream unchanged.
template <class K, class S>
concept element_sink = requires(K& k, std::uint64_t first, std::size_t count) {
  { k.target(first, count) } -> std::same_as<S*>;
  k.written(first, count);
};

/// A sink into memory: out[0, n) (the whole output at once, as decompress).
template <class S>
struct memory_sink {
  S* out;
  S* target(std::uint64_t first, std::size_t) const noexcept { return out + first; }
  void written(std::uint64_t, std::size_t) const noexcept {}
};

/// A sink that gives each window to write(first, elements, count) from one
/// buffer of its own (the largest window's elements).
template <class S, class Write>
class writer_sink {
 public:
  explicit writer_sink(Write write) : write_(std::move(write)) {}
  S* target(std::uint64_t, std::size_t count) {
    if (buffer_.size() < count) {
      buffer_.clear();
      buffer_.shrink_to_fit();  // not the old and the new buffer at once
      buffer_.resize(count);
    }
    return buffer_.data();
  }
  void written(std::uint64_t first, std::size_t count) { write_(first, static_cast<const S*>(buffer_.data()), count); }

 private:
  Write write_;
  std::vector<S> buffer_;
};

struct stream_decode_options {
  int threads = 0;                                      ///< as parallel_for takes them (0: all)
  std::uint64_t max_output_bytes = unlimited_output;    ///< refused from the header (status::buffer_too_small)
  std::uint64_t window_bytes = std::uint64_t{8} << 20;  ///< output a window of chunks holds (one chunk at least)
  /// Scratch beside a window; 0: decode_scratch_budget of a window's output.
  /// (Where a chunk's codes, or two Lorenzo slabs, exceed it, they are taken.)
  std::uint64_t scratch_bytes = 0;
};

/// The scratch decode_lorenzo_windows takes at least for a stream whose
/// Lorenzo chunks depend on each other (a block larger than a chunk): two
/// slabs of 4-byte codes (the window and the slab before it; a slab is the
/// elements inside the block's outermost axis) and one chunk's codes;
/// 0 for any other stream. That is beside the output, whatever the window
/// or the budget: a slab that is most of a u8 or f16 tensor takes several
/// times the output, which a caller with a memory rule refuses from the
/// header (the ebac CLI: 1.5 x the output + 64 MiB).
[[nodiscard]] inline std::uint64_t least_lorenzo_scratch(const stream_header& h) noexcept {
  if (h.is_stored() || h.predictor != predictor_id::lorenzo) return 0;
  if (chunks_independent(h.lorenzo_params, h.shape, h.chunk_elements)) return 0;
  const std::uint64_t slab = h.lorenzo_params.pass(h.shape, 0).inner;
  return 8 * slab + 4 * std::min<std::uint64_t>(h.chunk_elements, element_count(h));
}

namespace detail {

/// The body of a validated coded stream (codebook to outlier values) into
/// the sink, window by window. `src` stands after the stage parameters.
template <element T, class R, class Sink>
void decode_stream_body(stream_source<R>& src, const stream_header& h, Sink& sink, const stream_decode_options& o) {
  using S = storage_t<T>;
  const std::uint64_t n = element_count(h);
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  const int threads = o.threads;
  const std::uint64_t window_chunks = std::max<std::uint64_t>(1, o.window_bytes / (std::uint64_t{C} * sizeof(S)));
  ::ebac::detail::with_stream_stages<T>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
    using E = typename decltype(enc_tag)::type;
    E enc{};
    [[maybe_unused]] typename codebook_of<E>::type codebook;
    if constexpr (E::needs_codebook) {
      const status s =
          E::codebook::deserialize(src.take(h.section_bytes[section_codebook]), h.section_bytes[section_codebook], codebook);
      if (s != status::ok) ::ebac::detail::fail(s, "invalid codebook section");
      enc = E::bind(codebook);
    }
    // The chunk sizes, a megabyte of the table at a time (never the table
    // twice), held as they arrive (a truncated stream allocates what it holds).
    std::vector<std::uint32_t> sizes;
    std::uint64_t sum = 0;
    for (std::uint64_t c0 = 0; c0 < chunks; c0 += std::uint64_t{1} << 18) {
      const std::uint64_t k = std::min<std::uint64_t>(chunks - c0, std::uint64_t{1} << 18);
      const std::byte* t = src.take(4 * k);
      for (std::uint64_t i = 0; i < k; ++i) {
        sizes.push_back(::ebac::detail::load_le<std::uint32_t>(t + 4 * i));
        sum += sizes.back();
      }
    }
    if (sum != h.section_bytes[section_payload])
      ::ebac::detail::fail(status::corrupt_stream, "chunk sizes do not add up to the payload section");
    // Chunks [c0, c0 + k) from the reader; `local`: their offsets from the pointer returned.
    auto fetch = [&](std::uint64_t c0, std::uint64_t k, std::vector<std::uint64_t>& local) {
      local.resize(static_cast<std::size_t>(k + 1));
      local[0] = 0;
      for (std::uint64_t i = 0; i < k; ++i) local[i + 1] = local[i] + sizes[c0 + i];
      return src.take(local[k]);
    };
    auto fail_chunk = [](status s) { ::ebac::detail::fail(s, "a chunk's payload does not decode to its element count"); };
    const std::uint64_t window_elements = std::min<std::uint64_t>(n, window_chunks * C);
    const std::uint64_t budget = o.scratch_bytes ? o.scratch_bytes : decode_scratch_budget(window_elements * sizeof(S));
    if (chunks_independent(pred, h.shape, C)) {
      per_thread_scratch<std::uint32_t> scratch(threads);
      std::vector<std::uint64_t> local;
      std::vector<status> errors;
      std::vector<std::uint8_t> bad_codes;
      for (std::uint64_t c0 = 0; c0 < chunks; c0 += window_chunks) {
        const std::uint64_t k = std::min(window_chunks, chunks - c0), e0 = c0 * C, m = std::min(n, (c0 + k) * C) - e0;
        const std::byte* payload = fetch(c0, k, local);
        const decode_plan plan = plan_decode<E>(m, C, threads, budget);
        S* const out = sink.target(e0, static_cast<std::size_t>(m));
        errors.assign(static_cast<std::size_t>(k), status::ok);
        bad_codes.assign(static_cast<std::size_t>(k), 0);
        decode_chunks(
            enc, payload, static_cast<std::size_t>(local[k] + 8), local, m, C, plan, errors,
            [&](std::uint64_t c, std::size_t mc) {
              if (c >= plan.groups.grouped) return scratch.get(mc);
              constexpr std::size_t together = decode_chunks_together<E>;
              return scratch.get(std::size_t{C} * together) + std::size_t{C} * (c % together);
            },
            [&](std::uint64_t c, std::uint32_t* codes, std::size_t mc) {
              unzigzag_in_place(codes, mc);
              pred.unpredict_chunk(h.shape, codes, mc);
              if (!reconstruct_chunk<S>(q, codes, mc, e0 + c * C, out + c * C)) bad_codes[c] = 1;
            });
        for (status s : errors)
          if (s != status::ok) fail_chunk(s);
        for (std::uint8_t b : bad_codes)
          if (b) ::ebac::detail::fail(status::corrupt_stream, "a chunk holds a code its quantizer cannot have written");
        sink.written(e0, static_cast<std::size_t>(m));
      }
    } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(pred)>, lorenzo>) {
      bool bad = false;
      decode_lorenzo_windows<S>(
          enc, pred, h.shape, q, chunks, fetch, n, C, threads, budget,
          [&](std::uint64_t e0, std::size_t m) { return sink.target(e0, m); },
          [&](std::uint64_t e0, std::size_t m) { sink.written(e0, m); }, bad, fail_chunk);
      if (bad) ::ebac::detail::fail(status::corrupt_stream, "a chunk holds a code its quantizer cannot have written");
    } else {
      ::ebac::detail::fail(status::unsupported, "chunks that depend on each other without a Lorenzo predictor");
    }
  });
}

}  // namespace detail

/// Decompresses the stream that read() gives (byte_reader) into `sink`
/// (element_sink of storage_t<T>), window by window; T must be the stream's
/// dtype. Reads exactly the stream's bytes (whatever follows is the
/// caller's to judge). Throws ebac::error as host::decompress does (and
/// status::buffer_too_small from the header, before anything large is
/// allocated, past o.max_output_bytes). Memory beside the sink's: about
/// o.window_bytes of output, the compressed bytes of one window, scratch
/// within decode_scratch_budget of a window, the chunk table (4 bytes a
/// chunk) and the outlier index. Returns the stream's header.
template <element T, byte_reader R, element_sink<storage_t<T>> Sink>
stream_header decompress_stream(R&& read, Sink& sink, const stream_decode_options& o = {}) {
  using S = storage_t<T>;
  detail::stream_source<std::remove_reference_t<R>> src(read);
  std::uint64_t total = 0;
  const stream_header h = detail::read_stream_prefix(src, total);
  if (h.type != dtype_of<T>::value)
    ::ebac::detail::fail(status::invalid_argument, "output element type does not match the stream's dtype");
  ::ebac::detail::check_output_limit(h, o.max_output_bytes);
  const std::uint64_t n = element_count(h);
  const std::uint64_t window = std::max<std::uint64_t>(1, o.window_bytes / sizeof(S));
  try {
    if (h.is_stored()) {
      for (std::uint64_t e0 = 0; e0 < n; e0 += window) {
        const std::uint64_t m = std::min(window, n - e0);
        const std::byte* p = src.take(m * sizeof(S));
        S* out = sink.target(e0, static_cast<std::size_t>(m));
        for (std::uint64_t i = 0; i < m; ++i)
          out[i] = from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(p + i * sizeof(S)));
        sink.written(e0, static_cast<std::size_t>(m));
      }
    } else {
      detail::decode_stream_body<T>(src, h, sink, o);
      detail::place_outliers<S>(src, h, sink);
    }
  } catch (const error& e) {
    // A chunk or an index that does not decode where the bytes were damaged:
    // the checksum says so, as host::decompress (which checks it first) would.
    if (!h.has_checksum() || e.code() == status::truncated_stream) throw;
    const std::exception_ptr first = std::current_exception();
    src.skip_to_checksum();
    src.verify_checksum();
    std::rethrow_exception(first);
  }
  if (h.has_checksum()) src.verify_checksum();
  return h;
}

/// decompress_stream into a writer: write(first, elements, count) for each
/// window (then each run of outliers, over elements written before).
template <element T, byte_reader R, class Write>
stream_header decompress_stream_to(R&& read, Write&& write, const stream_decode_options& o = {}) {
  writer_sink<storage_t<T>, std::remove_cvref_t<Write>> sink(std::forward<Write>(write));
  return decompress_stream<T>(read, sink, o);
}

}  // namespace host
EBAC_NAMESPACE_END
