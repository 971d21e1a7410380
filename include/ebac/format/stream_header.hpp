// ebac/format/stream_header.hpp - the self-describing stream header.
//
// Layout (little-endian, offsets in bytes; docs/format.md):
//    0  magic "EBAC"               4  u16 format version     6  u16 header bytes
//    8  u8 dtype  9 u8 bound mode  10 u8 flags               11 u8 rank
//   12  u8 predictor id  13 u8 predictor dims  14 u8 quantizer id  15 u8 encoder id
//   16  u8 axis[3], u8 reserved    20 u32 tile[3]
//   32  f64 requested bound        40 f64 absolute bound used
//   48  u32 chunk elements         52 f32 quantizer top level (16-bit floats; else 0)
//   56  u64 outlier count
//   64  u64 section bytes[6]: stage parameters, codebook, chunk table,
//                             chunk payloads, outlier indices, outlier values
//  112  u64 extents[rank]
// then the six sections in that order, then (flag bit 0) a u64 checksum of
// every byte before it. An in-memory buffer may omit the checksum; the flag
// says so. A stored stream (flag bit 1) holds the elements' raw bytes as its
// payload and nothing else: the writer's answer when coding would not make
// the tensor smaller. Every size is validated before it is used.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

EBAC_NAMESPACE_BEGIN

enum section : int {
  section_params = 0,
  section_codebook,
  section_chunk_table,
  section_payload,
  section_outlier_index,
  section_outlier_value,
  section_count
};

inline constexpr std::uint8_t stream_flag_checksum = 1;
inline constexpr std::uint8_t stream_flag_stored = 2;
inline constexpr std::size_t stream_fixed_header_bytes = 112;

/// The largest stage-parameter section: a palette of max_levels int64 levels
/// (a pooling geometry takes at most 76 bytes).
inline constexpr std::size_t max_parameter_bytes = 1 + max_levels * 8;

/// Bytes from the start of any stream that hold its header and its stage
/// parameters (all a decoder needs before the payload; what a device
/// stream's reader copies to the host).
inline constexpr std::size_t max_stream_prefix_bytes = stream_fixed_header_bytes + 8 * max_rank + max_parameter_bytes;

/// Elements a stream may hold (the header reader rejects more; both
/// backends refuse to compress more).
inline constexpr std::uint64_t max_stream_elements = std::uint64_t{1} << 48;

/// Chunk sizes the format allows: a multiple of 32 (the bit-packing block) in
/// [32, 2^24]. Both backends refuse others; the header reader rejects them.
[[nodiscard]] EBAC_HOST_DEVICE constexpr bool valid_chunk_elements(std::uint64_t c) noexcept {
  return c >= 32 && c % 32 == 0 && c <= (std::uint64_t{1} << 24);
}

/// The bound-mode byte of a losslessly coded integer stream (no bound).
inline constexpr std::uint8_t bound_mode_none = 0;

/// Which quantizers a dtype's streams may name.
[[nodiscard]] EBAC_HOST_DEVICE constexpr bool quantizer_fits_dtype(quantizer_id q, dtype t) noexcept {
  if (q == quantizer_id::levels) return true;
  if (is_floating(t)) return q == quantizer_id::linear || q == quantizer_id::sign_preserving;
  return q == quantizer_id::exact || q == quantizer_id::pool_window;
}

struct stream_header {
  dtype type = dtype::f32;
  bound_mode mode = bound_mode::absolute;  ///< meaningful for floating dtypes only
  std::uint8_t flags = stream_flag_checksum;
  extents shape;
  predictor_id predictor = predictor_id::none;
  lorenzo lorenzo_params;  // meaningful when predictor == lorenzo
  quantizer_id quantizer = quantizer_id::sign_preserving;
  encoder_id encoder = encoder_id::block_bitpack;
  double eb_requested = 0;  ///< 0 for integer dtypes (lossless)
  double eb_abs = 0;        ///< the quantizer's bound; 0 when the coding is lossless
  float top = 0;            ///< the float quantizer's top level (detail::top_level), 0: none
  std::uint32_t chunk_elements = 0;
  std::uint64_t outlier_count = 0;
  std::uint64_t section_bytes[section_count]{};
  // Stage parameters (the parameter section), by quantizer:
  level_palette palette;  ///< quantizer == levels
  pool_geometry pool;     ///< quantizer == pool_window

  [[nodiscard]] EBAC_HOST_DEVICE std::size_t header_bytes() const noexcept {
    return stream_fixed_header_bytes + 8 * static_cast<std::size_t>(shape.rank);
  }
  [[nodiscard]] EBAC_HOST_DEVICE bool has_checksum() const noexcept { return flags & stream_flag_checksum; }
  [[nodiscard]] EBAC_HOST_DEVICE bool is_stored() const noexcept { return flags & stream_flag_stored; }
  [[nodiscard]] EBAC_HOST_DEVICE bool lossless() const noexcept {
    return !is_floating(type) || quantizer == quantizer_id::levels || is_stored();
  }

  /// Offset of a section from the start of the stream.
  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t section_offset(int s) const noexcept {
    std::uint64_t off = header_bytes();
    for (int i = 0; i < s; ++i) off += section_bytes[i];
    return off;
  }

  /// Bytes of the stage-parameter section this header's stages write.
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t params_bytes() const noexcept {
    if (is_stored()) return 0;
    if (quantizer == quantizer_id::levels) return palette.serialized_bytes(size_of(type));
    if (quantizer == quantizer_id::pool_window) return pool.serialized_bytes();
    return 0;
  }
  /// The section layout of a coded stream, for every writer: the parameter
  /// section from the stages (params_bytes), the chunk table from the chunk
  /// size and shape, the outlier values from outlier_count; the other three
  /// are what the writer's encoder and outlier index produced. Stages,
  /// chunk_elements, shape, type and outlier_count must be set first.
  EBAC_HOST_DEVICE void set_sections(std::uint64_t codebook, std::uint64_t payload, std::uint64_t outlier_index) noexcept {
    std::uint64_t n = 1;
    for (int i = 0; i < shape.rank; ++i) n *= shape.dims[i];
    section_bytes[section_params] = params_bytes();
    section_bytes[section_codebook] = codebook;
    section_bytes[section_chunk_table] = chunk_elements ? 4 * ((n + chunk_elements - 1) / chunk_elements) : 0;
    section_bytes[section_payload] = payload;
    section_bytes[section_outlier_index] = outlier_index;
    section_bytes[section_outlier_value] = outlier_count * size_of(type);
  }
  /// Writes the stage-parameter section (params_bytes() bytes) at p.
  EBAC_HOST_DEVICE void write_params(std::byte* p) const noexcept {
    if (is_stored()) return;
    if (quantizer == quantizer_id::levels) palette.serialize(p, size_of(type));
    else if (quantizer == quantizer_id::pool_window) pool.serialize(p);
  }

  EBAC_HOST_DEVICE void write(std::byte* p) const noexcept {
    using detail::store_le;
    p[0] = std::byte{'E'};
    p[1] = std::byte{'B'};
    p[2] = std::byte{'A'};
    p[3] = std::byte{'C'};
    store_le<std::uint16_t>(p + 4, EBAC_FORMAT_VERSION);
    store_le<std::uint16_t>(p + 6, static_cast<std::uint16_t>(header_bytes()));
    p[8] = static_cast<std::byte>(type);
    p[9] = static_cast<std::byte>(is_floating(type) ? static_cast<std::uint8_t>(mode) : bound_mode_none);
    p[10] = static_cast<std::byte>(flags);
    p[11] = static_cast<std::byte>(shape.rank);
    p[12] = static_cast<std::byte>(predictor);
    p[13] = static_cast<std::byte>(predictor == predictor_id::lorenzo ? lorenzo_params.dims : 0);
    p[14] = static_cast<std::byte>(is_stored() ? 0 : static_cast<std::uint8_t>(quantizer));
    p[15] = static_cast<std::byte>(is_stored() ? 0 : static_cast<std::uint8_t>(encoder));
    for (int k = 0; k < 3; ++k) {
      const bool used = predictor == predictor_id::lorenzo && k < lorenzo_params.dims;
      p[16 + k] = static_cast<std::byte>(used ? lorenzo_params.axis[k] : 0);
      store_le<std::uint32_t>(p + 20 + 4 * k, used ? lorenzo_params.tile[k] : 0);
    }
    p[19] = std::byte{0};
    store_le<std::uint64_t>(p + 32, detail::double_bits(is_floating(type) ? eb_requested : 0.0));
    store_le<std::uint64_t>(p + 40, detail::double_bits(is_floating(type) ? eb_abs : 0.0));
    store_le<std::uint32_t>(p + 48, chunk_elements);
    store_le<std::uint32_t>(p + 52, detail::float_bits(top));
    store_le<std::uint64_t>(p + 56, outlier_count);
    for (int s = 0; s < section_count; ++s) store_le<std::uint64_t>(p + 64 + 8 * s, section_bytes[s]);
    for (int i = 0; i < shape.rank; ++i) store_le<std::uint64_t>(p + stream_fixed_header_bytes + 8 * i, shape.dims[i]);
  }
};

/// Bytes the element data of a stream decompresses to (validated header).
inline std::uint64_t element_count(const stream_header& h) noexcept {
  std::uint64_t n = 0;
  (void)h.shape.count(n);
  return n;
}

/// Like read_stream_header, but reads only the bytes p[0, available) of a
/// stream of `size` bytes and does not verify the checksum (for a stream in
/// device memory, whose checksum the device checks). `available` must cover
/// the header and the stage-parameter section: max_stream_prefix_bytes (or
/// the whole stream, if shorter) always does.
[[nodiscard]] inline status read_stream_header_fields(const std::byte* p, std::size_t available, std::size_t size,
                                                      stream_header& h, const char** what = nullptr) noexcept {
  using detail::load_le;
  auto bad = [&](status s, const char* w) {
    if (what) *what = w;
    return s;
  };
  if (available > size) available = size;
  if (available < 8) return bad(status::truncated_stream, "stream shorter than its magic and version");
  if (p[0] != std::byte{'E'} || p[1] != std::byte{'B'} || p[2] != std::byte{'A'} || p[3] != std::byte{'C'})
    return bad(status::corrupt_stream, "not an ebac stream (bad magic)");
  if (load_le<std::uint16_t>(p + 4) != EBAC_FORMAT_VERSION) return bad(status::unsupported, "unsupported stream format version");
  if (available < stream_fixed_header_bytes) return bad(status::truncated_stream, "stream shorter than its header");
  const auto t = static_cast<std::uint8_t>(p[8]);
  if (t < dtype_id_min || t > dtype_id_max) return bad(status::corrupt_stream, "unknown dtype id");
  h = stream_header{};
  h.type = static_cast<dtype>(t);
  const bool floating = is_floating(h.type);
  const auto m = static_cast<std::uint8_t>(p[9]);
  if (floating) {
    if (m < 1 || m > 2) return bad(status::corrupt_stream, "unknown bound mode");
    h.mode = static_cast<bound_mode>(m);
  } else if (m != bound_mode_none) {
    return bad(status::corrupt_stream, "bound mode on an integer stream (integers are coded losslessly)");
  }
  h.flags = static_cast<std::uint8_t>(p[10]);
  if (h.flags & ~(stream_flag_checksum | stream_flag_stored)) return bad(status::corrupt_stream, "unknown flag bits");
  const int rank = static_cast<int>(p[11]);
  if (rank < 1 || rank > max_rank) return bad(status::corrupt_stream, "rank out of range");
  h.shape = extents{};
  h.shape.rank = rank;
  if (load_le<std::uint16_t>(p + 6) != h.header_bytes()) return bad(status::corrupt_stream, "header size mismatch");
  if (available < h.header_bytes()) return bad(status::truncated_stream, "stream shorter than its header");
  for (int i = 0; i < rank; ++i) h.shape.dims[i] = load_le<std::uint64_t>(p + stream_fixed_header_bytes + 8 * i);
  std::uint64_t n = 0;
  if (h.shape.count(n) != status::ok) return bad(status::corrupt_stream, "element count overflows");
  if (n > max_stream_elements) return bad(status::corrupt_stream, "element count implausibly large");

  const auto pid = static_cast<std::uint8_t>(p[12]);
  const auto pdims = static_cast<std::uint8_t>(p[13]);
  if (pid == static_cast<std::uint8_t>(predictor_id::none)) {
    h.predictor = predictor_id::none;
    if (pdims != 0) return bad(status::corrupt_stream, "predictor dims for no prediction");
  } else if (pid == static_cast<std::uint8_t>(predictor_id::lorenzo) && !h.is_stored()) {
    h.predictor = predictor_id::lorenzo;
    h.lorenzo_params.dims = pdims;
    for (int k = 0; k < 3; ++k) {
      h.lorenzo_params.axis[k] = static_cast<std::uint8_t>(p[16 + k]);
      h.lorenzo_params.tile[k] = load_le<std::uint32_t>(p + 20 + 4 * k);
    }
    if (h.lorenzo_params.validate(h.shape) != status::ok) return bad(status::corrupt_stream, "invalid Lorenzo parameters");
  } else {
    return bad(status::corrupt_stream, h.is_stored() ? "a stored stream names a predictor" : "unknown predictor id");
  }
  // Unused predictor fields and the reserved bytes are written as zero; a
  // reader that let them vary would accept streams no writer produced (and
  // leave no room to give those bytes a meaning later).
  for (int k = 0; k < 3; ++k) {
    const bool used = h.predictor == predictor_id::lorenzo && k < pdims;
    if (!used && (p[16 + k] != std::byte{0} || load_le<std::uint32_t>(p + 20 + 4 * k) != 0))
      return bad(status::corrupt_stream, "unused predictor axis/tile fields are not zero");
  }
  if (p[19] != std::byte{0}) return bad(status::corrupt_stream, "reserved header bytes are not zero");
  const auto qid = static_cast<std::uint8_t>(p[14]);
  const auto eid = static_cast<std::uint8_t>(p[15]);
  if (h.is_stored()) {
    if (qid != 0 || eid != 0) return bad(status::corrupt_stream, "a stored stream names a quantizer or an encoder");
  } else {
    if (qid < 1 || qid > quantizer_id_max) return bad(status::corrupt_stream, "unknown quantizer id");
    h.quantizer = static_cast<quantizer_id>(qid);
    if (!quantizer_fits_dtype(h.quantizer, h.type)) return bad(status::corrupt_stream, "quantizer does not fit the dtype");
    if (!encoder_registered(eid)) return bad(status::corrupt_stream, "unknown encoder id");
    h.encoder = static_cast<encoder_id>(eid);
  }

  h.eb_requested = detail::bits_double(load_le<std::uint64_t>(p + 32));
  h.eb_abs = detail::bits_double(load_le<std::uint64_t>(p + 40));
  if (floating) {
    if (!(h.eb_requested > 0) || !std::isfinite(h.eb_requested)) return bad(status::corrupt_stream, "invalid requested bound");
    if (!(h.eb_abs >= 0) || !std::isfinite(h.eb_abs)) return bad(status::corrupt_stream, "invalid absolute bound");
  } else if (load_le<std::uint64_t>(p + 32) != 0 || load_le<std::uint64_t>(p + 40) != 0) {
    return bad(status::corrupt_stream, "bound fields on an integer stream are not zero");
  }
  // The top level: 0, or (a float quantizer of a 16-bit stream) a positive
  // finite value of the stream's dtype (a value of the tensor: its largest magnitude).
  h.top = detail::bits_float(load_le<std::uint32_t>(p + 52));
  if (load_le<std::uint32_t>(p + 52) != 0) {
    const bool float_quantizer =
        !h.is_stored() && (h.quantizer == quantizer_id::linear || h.quantizer == quantizer_id::sign_preserving);
    const bool representable = (h.type == dtype::f16 && to_float(from_float<float16>(h.top)) == h.top) ||
                               (h.type == dtype::bf16 && to_float(from_float<bfloat16>(h.top)) == h.top);
    if (!float_quantizer || !(h.top > 0.0f) || !detail::is_finite_float(h.top) || !representable)
      return bad(status::corrupt_stream, "invalid quantizer top level");
  }
  h.chunk_elements = load_le<std::uint32_t>(p + 48);
  if (!valid_chunk_elements(h.chunk_elements)) return bad(status::corrupt_stream, "invalid chunk size");
  h.outlier_count = load_le<std::uint64_t>(p + 56);
  if (h.outlier_count > n) return bad(status::corrupt_stream, "more outliers than elements");

  std::uint64_t total = h.header_bytes();
  for (int s = 0; s < section_count; ++s) {
    h.section_bytes[s] = load_le<std::uint64_t>(p + 64 + 8 * s);
    if (h.section_bytes[s] > size) return bad(status::truncated_stream, "section larger than the stream");
    total += h.section_bytes[s];
  }
  if (h.has_checksum()) total += 8;
  if (total > size) return bad(status::truncated_stream, "stream shorter than its sections");
  if (total < size) return bad(status::corrupt_stream, "trailing bytes after the stream");

  if (h.is_stored()) {
    for (int s = 0; s < section_count; ++s)
      if (s != section_payload && h.section_bytes[s] != 0)
        return bad(status::corrupt_stream, "a stored stream has sections besides its payload");
    if (h.outlier_count != 0) return bad(status::corrupt_stream, "a stored stream has outliers");
    if (h.section_bytes[section_payload] != n * size_of(h.type))
      return bad(status::corrupt_stream, "stored payload size does not match the element count");
    return status::ok;
  }

  const std::uint64_t chunks = (n + h.chunk_elements - 1) / h.chunk_elements;
  if (h.section_bytes[section_chunk_table] != 4 * chunks) return bad(status::corrupt_stream, "chunk table size mismatch");
  // A stream claiming more elements than its encoder's least payload can
  // hold is not genuine (bit-packing spends a byte on every 32 codes);
  // checking it here keeps a forged header from making a decoder allocate
  // for elements that are not there.
  if (h.section_bytes[section_payload] < encoder_min_payload_bytes(h.encoder, n))
    return bad(status::corrupt_stream, "payload too small for the element count (bit-packing needs a byte per 32 elements)");
  if (h.section_bytes[section_outlier_value] != h.outlier_count * size_of(h.type))
    return bad(status::corrupt_stream, "outlier value section size mismatch");
  if (encoder_needs_codebook(h.encoder) != (h.section_bytes[section_codebook] > 0))
    return bad(status::corrupt_stream, "codebook presence does not match the encoder");

  // Stage parameters: right after the header, so `available` holds them.
  const std::uint64_t pb = h.section_bytes[section_params];
  const bool has_params = h.quantizer == quantizer_id::levels || h.quantizer == quantizer_id::pool_window;
  if (!has_params && pb != 0) return bad(status::corrupt_stream, "stage parameters for stages that take none");
  if (has_params) {
    if (pb > max_parameter_bytes) return bad(status::corrupt_stream, "stage parameter section too large");
    if (available < h.header_bytes() + pb) return bad(status::truncated_stream, "stream shorter than its stage parameters");
    const std::byte* q = p + h.header_bytes();
    if (h.quantizer == quantizer_id::levels) {
      if (level_palette::deserialize(q, static_cast<std::size_t>(pb), size_of(h.type), h.palette) != status::ok)
        return bad(status::corrupt_stream, "invalid level palette");
    } else if (pool_geometry::deserialize(q, static_cast<std::size_t>(pb), h.shape, h.pool) != status::ok) {
      return bad(status::corrupt_stream, "invalid pooling geometry");
    }
  }
  return status::ok;
}

/// Parses and validates a header against the stream's total size, and the
/// checksum when the stream has one. On success every section lies inside
/// the stream and every id is known. `what` names the failing field.
[[nodiscard]] inline status read_stream_header(const std::byte* p, std::size_t size, stream_header& h,
                                               const char** what = nullptr) noexcept {
  const status s = read_stream_header_fields(p, size, size, h, what);
  if (s != status::ok) return s;
  if (h.has_checksum()) {
    const std::size_t body = size - 8;
    if (detail::checksum64(p, body) != detail::load_le<std::uint64_t>(p + body)) {
      if (what) *what = "stream checksum does not match (corrupted or truncated)";
      return status::checksum_mismatch;
    }
  }
  return status::ok;
}

EBAC_NAMESPACE_END
