// ebac/host/codec.hpp - the host (CPU) reference backend.
//
// compress() and decompress() run the same policy functors the CUDA backend
// runs; only the loops and memory movement live here. Work is split into
// fixed chunks of the stream (never into per-thread pieces), so the serial
// and the OpenMP paths write identical bytes.
//
// Flow: [value range] -> quantize every element (outliers recorded, their
// code set to 0) -> predictor passes on the integer field -> zigzag ->
// [histogram -> codebook] -> encode each chunk -> assemble the stream.
// When the predictor never looks outside a chunk (no prediction, flat 1-D
// Lorenzo whose tile divides the chunk) the steps run fused per chunk on a
// cache-resident scratch buffer; otherwise on a whole-tensor integer field.
#pragma once

#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/host/parallel.hpp>
#include <ebac/host/scratch.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>
#include <ebac/status.hpp>

#include <algorithm>
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

struct compress_options {
  error_bound bound{};
  bool checksum = true;  ///< files always carry one; an in-memory buffer may skip it
  int threads = 0;       ///< 0: all OpenMP threads, 1: serial
};

/// decompress()'s default max_output_bytes: no limit.
inline constexpr std::uint64_t unlimited_output = std::numeric_limits<std::uint64_t>::max();

namespace detail {

/// Why compress() refuses these arguments, or nullptr when it takes them.
/// Every compress entry point asks this (host, CUDA device-scope and CUDA
/// convenience), so a refusal reads the same on either backend. Pointers are
/// the caller's to check: a device-scope size query takes none.
template <class Pipeline>
[[nodiscard]] const char* compress_argument_error(const extents& shape, const Pipeline& pipe, const compress_options& opt) noexcept {
  std::uint64_t n = 0;
  if (shape.count(n) != status::ok) return "extents: rank must be 1..8 and the element count must fit 64 bits";
  if (n > max_stream_elements) return "extents: more than 2^48 elements";
  if (opt.bound.validate() != status::ok) return "error bound must be finite and > 0 (a relative one at most 1e6)";
  if (pipe.predictor.validate(shape) != status::ok) return "predictor axes/tiles do not fit the tensor's rank";
  if (!valid_chunk_elements(pipe.chunk_elements)) return "chunk_elements must be a multiple of 32 in [32, 2^24]";
  return nullptr;
}

/// Why decompress() refuses an output for a (validated) stream header, or
/// nullptr. Shared by the host and the CUDA convenience decoder, which asks
/// before it allocates anything (a forged header may claim any count).
[[nodiscard]] inline const char* decompress_argument_error(const stream_header& h, dtype out_type, std::uint64_t count,
                                                           const void* out) noexcept {
  if (h.type != out_type) return "output element type does not match the stream's dtype";
  if (count != element_count(h)) return "output size does not match the stream's element count";
  if (count > 0 && out == nullptr) return "output pointer is null";
  return nullptr;
}

/// Throws status::buffer_too_small when a (validated) stream decodes to more
/// than max_output_bytes bytes (element count x element size): checked
/// before anything is allocated, since a tiny stream may claim 2^48 elements.
inline void check_output_limit(const stream_header& h, std::uint64_t max_output_bytes) {
  const std::uint64_t n = element_count(h);  // <= 2^48: the product cannot overflow
  const std::uint64_t bytes = n * size_of(h.type);
  if (bytes > max_output_bytes)
    fail(status::buffer_too_small, "the stream decodes to " + std::to_string(bytes) + " bytes (" + std::to_string(n) + " elements), more than the " +
                                       std::to_string(max_output_bytes) + " bytes allowed (max_output_bytes)");
}

}  // namespace detail

namespace host {
namespace detail {

template <class P>
constexpr bool is_lorenzo = std::is_same_v<P, lorenzo>;

/// True when every residual of a chunk depends only on that chunk's codes.
template <class P>
bool chunk_local(const P& p, std::uint32_t chunk) noexcept {
  if constexpr (std::is_same_v<P, no_prediction>) return true;
  else return p.dims == 1 && p.axis[0] == lorenzo_flat_axis && chunk % p.tile[0] == 0;
}

/// Elements a parallel task of run_pass should cover at least: a pass over
/// one tile of a 7x7 or 28x28 map is a microsecond of work, less than handing
/// it to another thread costs (measured on the corpus: Lorenzo 2-D decoding
/// at half the serial speed with 2 threads when every tile was a task).
inline constexpr std::uint64_t pass_task_elements = std::uint64_t{1} << 15;

/// One predictor pass over a field of wrapped int32 codes. The units (one
/// tile of one outer index) are independent; consecutive units are grouped
/// into tasks of >= pass_task_elements, which changes no result.
template <bool Forward>
void run_pass(std::uint32_t* f, const axis_pass& p, int threads) {
  const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
  const std::uint64_t units = p.outer * tiles;
  const std::uint64_t unit_elements = std::max<std::uint64_t>(1, std::min(p.tile, p.extent) * p.inner);
  const std::uint64_t per_task = std::max<std::uint64_t>(1, pass_task_elements / unit_elements);
  const auto tasks = static_cast<std::int64_t>((units + per_task - 1) / per_task);
  parallel_for(tasks, threads, [&](std::int64_t task) {
    const std::uint64_t u0 = static_cast<std::uint64_t>(task) * per_task, u1 = std::min(units, u0 + per_task);
    for (std::uint64_t u = u0; u < u1; ++u) {
      const std::uint64_t o = u / tiles, t = u % tiles;
      const std::uint64_t c0 = t * p.tile, c1 = std::min(p.extent, c0 + p.tile);
      std::uint32_t* base = f + o * p.extent * p.inner;
      if constexpr (Forward) {
        for (std::uint64_t c = c1 - 1; c > c0; --c) {
          std::uint32_t* row = base + c * p.inner;
          const std::uint32_t* prev = row - p.inner;
          for (std::uint64_t k = 0; k < p.inner; ++k) row[k] = lorenzo::forward(row[k], prev[k]);
        }
      } else {
        for (std::uint64_t c = c0 + 1; c < c1; ++c) {
          std::uint32_t* row = base + c * p.inner;
          const std::uint32_t* prev = row - p.inner;
          for (std::uint64_t k = 0; k < p.inner; ++k) row[k] = lorenzo::inverse(row[k], prev[k]);
        }
      }
    }
  });
}

/// Flat 1-D passes inside one chunk (tile divides the chunk).
template <bool Forward>
inline void flat_pass_in_chunk(std::uint32_t* f, std::size_t m, std::uint64_t tile) {
  for (std::size_t t0 = 0; t0 < m; t0 += tile) {
    const std::size_t t1 = std::min<std::size_t>(m, t0 + tile);
    if constexpr (Forward) {
      for (std::size_t i = t1 - 1; i > t0; --i) f[i] = lorenzo::forward(f[i], f[i - 1]);
    } else {
      for (std::size_t i = t0 + 1; i < t1; ++i) f[i] = lorenzo::inverse(f[i], f[i - 1]);
    }
  }
}

/// Zigzagged flat 1-D Lorenzo residuals of one chunk, out of place so the
/// loop vectorizes (tile divides the chunk).
inline void flat_residuals(const std::uint32_t* q, std::uint32_t* codes, std::size_t m, std::uint64_t tile) {
  for (std::size_t t0 = 0; t0 < m; t0 += tile) {
    const std::size_t t1 = std::min<std::size_t>(m, t0 + tile);
    codes[t0] = ::ebac::detail::zigzag(static_cast<std::int32_t>(q[t0]));
    for (std::size_t i = t0 + 1; i < t1; ++i)
      codes[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(lorenzo::forward(q[i], q[i - 1])));
  }
}

template <class Q, class T>
inline void quantize_chunk(const Q& q, const T* in, std::size_t m, std::uint64_t first, std::uint32_t* codes,
                           std::vector<std::uint64_t>& outliers) {
  // Two loops: a branch-free first pass the compiler vectorizes, then the
  // exact decision for the few elements it could not settle.
  std::uint8_t unsettled[4096];
  for (std::size_t b = 0; b < m; b += sizeof unsettled) {
    const std::size_t e = std::min(m, b + sizeof unsettled);
    for (std::size_t i = b; i < e; ++i) {
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

inline void zigzag_in_place(std::uint32_t* f, std::size_t m) {
  for (std::size_t i = 0; i < m; ++i) f[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(f[i]));
}
inline void unzigzag_in_place(std::uint32_t* f, std::size_t m) {
  for (std::size_t i = 0; i < m; ++i) f[i] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(f[i]));
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

template <class P>
void fill_predictor(stream_header& h, const P& p) {
  h.predictor = P::id;
  if constexpr (is_lorenzo<P>) h.lorenzo_params = p;
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

}  // namespace detail

namespace detail {

/// The compressor. `destination(bytes)` is called once, when the stream's
/// size is known and before anything is written, and returns where to write
/// it (or throws); the two public compress() overloads differ only there.
template <class Pipeline, element T, class Destination>
std::size_t compress_to(const T* in, const extents& shape, const Pipeline& pipe, const compress_options& opt,
                        Destination&& destination) {
  using P = typename Pipeline::predictor_type;
  using Q = typename Pipeline::quantizer_type;
  using E = typename Pipeline::encoder_type;
  using ::ebac::detail::fail;

  if (const char* why = ::ebac::detail::compress_argument_error(shape, pipe, opt)) fail(status::invalid_argument, why);
  std::uint64_t n = 0;
  (void)shape.count(n);
  if (n > 0 && in == nullptr) fail(status::invalid_argument, "input pointer is null");
  const std::uint32_t C = pipe.chunk_elements;
  const int threads = opt.threads;

  value_range range;
  if (opt.bound.mode == bound_mode::relative) range = detail::finite_range(in, n, C, threads);
  const double eb_abs = quantizer_bound<Q, T>(opt.bound, range);
  if (!std::isfinite(eb_abs)) fail(status::invalid_argument, "relative bound times the value range is not finite");
  const Q q = Q::make(eb_abs);

  const std::uint64_t chunks = (n + C - 1) / C;
  std::vector<std::vector<std::uint64_t>> outliers(chunks);
  std::vector<std::vector<std::byte>> payload(chunks);
  std::vector<std::byte> codebook_bytes;
  auto chunk_len = [&](std::uint64_t c) { return static_cast<std::size_t>(std::min<std::uint64_t>(C, n - c * C)); };
  detail::per_thread_scratch<std::byte> encode_scratch(threads);  // freed when the call returns

  auto encode_all = [&](const auto& enc, auto&& codes_of_chunk) {
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      const std::size_t m = chunk_len(c);
      const std::uint32_t* codes = codes_of_chunk(c, m);
      detail::encode_into(enc, codes, m, payload[c], encode_scratch);
    });
  };

  bool fused = false;
  if constexpr (!E::needs_codebook) {
    if (detail::chunk_local(pipe.predictor, C)) {
      fused = true;
      // Fused path: quantize, predict, zigzag and encode one chunk in cache.
      const E enc{};
      detail::per_thread_scratch<std::uint32_t> scratch(threads);
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        const std::size_t m = chunk_len(c);
        std::uint32_t* quant = scratch.get(2 * m);
        std::uint32_t* codes = quant + m;
        detail::quantize_chunk(q, in + c * C, m, c * C, quant, outliers[c]);
        if constexpr (detail::is_lorenzo<P>) detail::flat_residuals(quant, codes, m, pipe.predictor.tile[0]);
        else for (std::size_t i = 0; i < m; ++i) codes[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(quant[i]));
        detail::encode_into(enc, codes, m, payload[c], encode_scratch);
      });
    }
  }
  if (!fused) {
    // Whole-tensor path: the integer field is built first so that residuals
    // may use codes from other chunks and a codebook can see every symbol.
    // Uninitialized: every element is written before it is read.
    std::unique_ptr<std::uint32_t[]> field_store(new std::uint32_t[static_cast<std::size_t>(n)]);
    std::uint32_t* const field = field_store.get();
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      detail::quantize_chunk(q, in + c * C, chunk_len(c), c * C, field + c * C, outliers[c]);
    });
    // An empty tensor may still have huge extents: no pass has work then.
    const int passes = n > 0 ? pipe.predictor.passes() : 0;
    for (int k = 0; k < passes; ++k) detail::run_pass<true>(field, pipe.predictor.pass(shape, k), threads);
    parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
      const auto c = static_cast<std::uint64_t>(ci);
      detail::zigzag_in_place(field + c * C, chunk_len(c));
    });
    auto codes_of = [&](std::uint64_t c, std::size_t) -> const std::uint32_t* { return field + c * C; };
    if constexpr (E::needs_codebook) {
      // Histograms with and without zero runs; keep whichever codes smaller.
      namespace A = huffman_alphabet;
      std::vector<std::vector<std::uint64_t>> hr(chunks), hl(chunks);
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        auto& a = hr[c];
        auto& b = hl[c];
        a.assign(A::size, 0);
        b.assign(A::size, 0);
        ::ebac::detail::huffman_tokenize(codes_of(c, 0), chunk_len(c), true, [&](std::uint32_t s, std::uint32_t, int) { ++a[s]; });
        ::ebac::detail::huffman_tokenize(codes_of(c, 0), chunk_len(c), false, [&](std::uint32_t s, std::uint32_t, int) { ++b[s]; });
      });
      std::vector<std::uint64_t> runs(A::size, 0), lits(A::size, 0);
      for (std::uint64_t c = 0; c < chunks; ++c)
        for (std::uint32_t s = 0; s < A::size; ++s) { runs[s] += hr[c][s]; lits[s] += hl[c][s]; }
      hr.clear();
      hl.clear();
      const huffman_codebook cb = huffman_codebook::choose(runs, lits);
      cb.serialize(codebook_bytes);
      encode_all(huffman::bind(cb), codes_of);
    } else {
      encode_all(E{}, codes_of);
    }
  }
  // Outlier indices as varint gaps, values as raw bits, both in index order.
  std::vector<std::byte> index_bytes;
  std::uint64_t outlier_count = 0;
  {
    std::byte tmp[10];
    std::uint64_t prev = 0;
    bool first = true;
    for (const auto& v : outliers)
      for (std::uint64_t i : v) {
        const std::size_t k = ::ebac::detail::put_varint(tmp, first ? i : i - prev - 1);
        index_bytes.insert(index_bytes.end(), tmp, tmp + k);
        prev = i;
        first = false;
        ++outlier_count;
      }
  }
  stream_header h;
  h.type = dtype_of<T>::value;
  h.mode = opt.bound.mode;
  h.flags = opt.checksum ? stream_flag_checksum : 0;
  h.shape = shape;
  detail::fill_predictor(h, pipe.predictor);
  h.quantizer = Q::id;
  h.encoder = E::id;
  h.eb_requested = opt.bound.value;
  h.eb_abs = eb_abs;
  h.chunk_elements = C;
  h.outlier_count = outlier_count;
  std::uint64_t payload_total = 0;
  for (const auto& v : payload) payload_total += v.size();
  h.section_bytes[section_codebook] = codebook_bytes.size();
  h.section_bytes[section_chunk_table] = 4 * chunks;
  h.section_bytes[section_payload] = payload_total;
  h.section_bytes[section_outlier_index] = index_bytes.size();
  h.section_bytes[section_outlier_value] = outlier_count * sizeof(T);

  // Everything that can throw happens before the destination is asked for:
  // from there on only copies, so a caller's buffer is written in full or not at all.
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + payload[c].size();
  const auto stream_bytes = static_cast<std::size_t>(h.section_offset(section_count) + (opt.checksum ? 8 : 0));
  std::byte* const out = destination(stream_bytes);
  h.write(out);
  std::byte* p = out + h.header_bytes();
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
      p += sizeof(T);
    }
  if (opt.checksum) {
    const std::size_t body = stream_bytes - 8;
    ::ebac::detail::store_le<std::uint64_t>(out + body, ::ebac::detail::checksum64(out, body));
  }
  return stream_bytes;
}

}  // namespace detail

/// Compresses n = count(shape) elements of `in` into a self-describing stream.
/// Throws ebac::error naming the offending argument.
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
/// always suffices; with less, a stream that does not fit throws
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

namespace detail {

/// Calls f(pipeline<P, Q, E>) for the stages a validated header names.
template <class F>
void with_stream_pipeline(const stream_header& h, F&& f) {
  pipeline_spec s;
  s.predictor = h.predictor;
  s.lorenzo_params = h.lorenzo_params;
  s.quantizer = h.quantizer;
  s.encoder = h.encoder;
  s.chunk_elements = h.chunk_elements;
  with_pipeline(s, h.shape, std::forward<F>(f));
}

}  // namespace detail

/// Decompresses a stream into out[0, count); T must match the stream's dtype
/// and count its element count. Throws ebac::error on any inconsistency, and
/// status::buffer_too_small when the stream decodes to more than
/// max_output_bytes bytes (count x sizeof(T)), before decoding anything.
template <element T>
void decompress(const std::byte* data, std::size_t size, T* out, std::uint64_t count, int threads = 0,
                std::uint64_t max_output_bytes = unlimited_output) {
  using ::ebac::detail::fail;
  const stream_header h = inspect(data, size);
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  if (const char* why = ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, out)) fail(status::invalid_argument, why);
  const std::uint64_t n = count;
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  auto chunk_len = [&](std::uint64_t c) { return static_cast<std::size_t>(std::min<std::uint64_t>(C, n - c * C)); };

  huffman_codebook cb;
  if (h.encoder == encoder_id::huffman) {
    const status s = huffman_codebook::deserialize(data + h.section_offset(section_codebook), h.section_bytes[section_codebook], cb);
    if (s != status::ok) fail(s, "invalid Huffman codebook");
  }
  // Chunk offsets: every size is checked against the payload section.
  const std::byte* table = data + h.section_offset(section_chunk_table);
  const std::byte* payload = data + h.section_offset(section_payload);
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + ::ebac::detail::load_le<std::uint32_t>(table + 4 * c);
  if (offsets[chunks] != h.section_bytes[section_payload]) fail(status::corrupt_stream, "chunk sizes do not add up to the payload section");

  detail::with_stream_pipeline(h, [&](auto pipe) {
    using Pipe = decltype(pipe);
    using P = typename Pipe::predictor_type;
    using Q = typename Pipe::quantizer_type;
    using E = typename Pipe::encoder_type;
    E enc{};
    if constexpr (E::needs_codebook) enc = huffman::bind(cb);
    const Q q = Q::make(h.eb_abs);
    std::vector<status> errors(chunks, status::ok);

    if (detail::chunk_local(pipe.predictor, C)) {
      detail::per_thread_scratch<std::uint32_t> scratch(threads);  // freed when the call returns
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        const std::size_t m = chunk_len(c);
        std::uint32_t* codes = scratch.get(m);
        const status s = enc.decode_chunk(payload + offsets[c], static_cast<std::size_t>(offsets[c + 1] - offsets[c]), codes, m);
        if (s != status::ok) { errors[c] = s; return; }
        detail::unzigzag_in_place(codes, m);
        if constexpr (detail::is_lorenzo<P>) detail::flat_pass_in_chunk<false>(codes, m, pipe.predictor.tile[0]);
        T* o = out + c * C;
        for (std::size_t i = 0; i < m; ++i) o[i] = reconstruct_element<T>(q, static_cast<std::int32_t>(codes[i]));
      });
    } else {
      // Uninitialized: every element is written before it is read.
    std::unique_ptr<std::uint32_t[]> field_store(new std::uint32_t[static_cast<std::size_t>(n)]);
    std::uint32_t* const field = field_store.get();
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        const std::size_t m = chunk_len(c);
        const status s = enc.decode_chunk(payload + offsets[c], static_cast<std::size_t>(offsets[c + 1] - offsets[c]), field + c * C, m);
        if (s != status::ok) { errors[c] = s; return; }
        detail::unzigzag_in_place(field + c * C, m);
      });
      for (status s : errors)
        if (s != status::ok) fail(s, "a chunk's payload does not decode to its element count");
      for (int k = (n > 0 ? pipe.predictor.passes() : 0) - 1; k >= 0; --k)
        detail::run_pass<false>(field, pipe.predictor.pass(h.shape, k), threads);
      parallel_for(static_cast<std::int64_t>(chunks), threads, [&](std::int64_t ci) {
        const auto c = static_cast<std::uint64_t>(ci);
        const std::size_t m = chunk_len(c);
        const std::uint32_t* f = field + c * C;
        T* o = out + c * C;
        for (std::size_t i = 0; i < m; ++i) o[i] = reconstruct_element<T>(q, static_cast<std::int32_t>(f[i]));
      });
    }
    for (status s : errors)
      if (s != status::ok) fail(s, "a chunk's payload does not decode to its element count");
  });

  // Outliers: strictly increasing indices below n, raw bits restored.
  const std::byte* ip = data + h.section_offset(section_outlier_index);
  const std::byte* iend = ip + h.section_bytes[section_outlier_index];
  const std::byte* vp = data + h.section_offset(section_outlier_value);
  std::uint64_t idx = 0;
  for (std::uint64_t k = 0; k < h.outlier_count; ++k) {
    std::uint64_t gap;
    if (!::ebac::detail::get_varint(ip, iend, gap)) fail(status::corrupt_stream, "outlier index section truncated");
    if (k == 0) idx = gap;
    else if (gap >= n || idx + gap + 1 < idx) fail(status::corrupt_stream, "outlier index out of range");
    else idx = idx + gap + 1;
    if (idx >= n) fail(status::corrupt_stream, "outlier index out of range");
    out[idx] = from_raw_bits<T>(::ebac::detail::load_le<typename bits_of<T>::type>(vp + k * sizeof(T)));
  }
  if (ip != iend) fail(status::corrupt_stream, "outlier index section has trailing bytes");
}

/// The allocating form. max_output_bytes bounds what a stream may make it
/// allocate (element count x sizeof(T), checked against the header before
/// allocating; status::buffer_too_small when exceeded): pass one when the
/// stream is not trusted.
template <element T>
std::vector<T> decompress(const std::byte* data, std::size_t size, int threads = 0, std::uint64_t max_output_bytes = unlimited_output) {
  const stream_header h = inspect(data, size);
  if (h.type != dtype_of<T>::value) ::ebac::detail::fail(status::invalid_argument, "output element type does not match the stream's dtype");
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  const std::uint64_t n = element_count(h);
  std::vector<T> out;
  // A header can claim far more elements than memory holds (run-length and
  // Huffman streams of zeros are legitimately tiny): a clear error, not std::bad_alloc.
  try {
    if (n > out.max_size()) throw std::length_error("too many elements");
    out.resize(static_cast<std::size_t>(n));
  } catch (const std::exception&) {
    ::ebac::detail::fail(status::out_of_memory, "cannot allocate the " + std::to_string(n) + " elements of " +
                                                    std::to_string(sizeof(T)) + " bytes the stream decodes to");
  }
  decompress(data, size, out.data(), out.size(), threads, max_output_bytes);
  return out;
}

}  // namespace host
EBAC_NAMESPACE_END
