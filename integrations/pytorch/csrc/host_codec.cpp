// host_codec.cpp - the host backend of the extension: ebac::host on CPU memory.
//
// With the codec's units (its instantiations, one unit per element type,
// written by ebac_torch/_ext.py's codec_units and declared extern here by
// EBAC_HOST_CODEC_PREBUILT), the only translation
// units that instantiate ebac's host templates; they include no torch header
// (see codec_api.hpp).
#include "codec_api.hpp"
#include "ebac_side.hpp"

#include <ebac/ebac.hpp>
#include <ebac/host/isa_codec.hpp>
#include <ebac/host/isa_dispatch.hpp>

#include <string>
#include <type_traits>

namespace ebac_torch {
bool valid_pipeline(const std::string& name) {
  ebac::pipeline_spec spec;
  return ebac::parse_pipeline(name, spec);
}

namespace {
/// The x86-64-v3 build of the codec (host_codec_x86_64_v3.cpp, where this
/// compiler builds it) when it is the one chosen (EBAC_HOST_ISA, the CPU),
/// else null: this unit's build. Chosen on first use; an EBAC_HOST_ISA it
/// cannot honour throws std::invalid_argument (ValueError in Python) then,
/// and again each time.
const ebac::isa::codec* chosen_codec() { return ebac::host::chosen_codec<EBAC_X86_64_V3_CODEC_BUILDABLE != 0>(); }
}  // namespace

std::string host_isa_name() { return ebac::host::name_of(chosen_codec()); }

std::vector<std::byte> host_compress(const compress_request& r) {
  const ebac::pipeline_spec spec = parse_or_throw(r.pipeline);
  ebac::extents shape;
  shape.rank = r.rank;
  for (int i = 0; i < r.rank && i < ebac::max_rank; ++i) shape.dims[i] = r.dims[i];
  ebac::compress_options opt;
  opt.bound = {r.error_bound, r.relative ? ebac::bound_mode::relative : ebac::bound_mode::absolute};
  opt.checksum = r.checksum;
  opt.threads = r.threads;
  opt.pooling = pooling_of(r);
  return ebac::host::compress_dynamic(chosen_codec(), r.data, to_dtype(r.type), shape, spec, opt);
}

void host_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, int threads) {
  ebac::host::decompress_dynamic(chosen_codec(), data, size, to_dtype(type), out, count, threads);
}

namespace {
stream_info info_of(const ebac::stream_header& h, std::size_t size) {
  stream_info s;
  s.type = static_cast<elem>(h.type);
  for (int i = 0; i < h.shape.rank; ++i) s.dims.push_back(static_cast<std::int64_t>(h.shape.dims[i]));
  s.relative = h.mode == ebac::bound_mode::relative;
  s.eb_requested = h.eb_requested;
  s.eb_abs = h.eb_abs;
  s.outliers = h.outlier_count;
  s.bytes = size;
  s.predictor = static_cast<int>(h.predictor);
  s.quantizer = static_cast<int>(h.quantizer);
  s.encoder = static_cast<int>(h.encoder);
  s.checksum = h.has_checksum();
  s.stored = h.is_stored();
  s.lossless_dtype = !ebac::is_floating(h.type);
  s.pooled = !h.is_stored() && h.quantizer == ebac::quantizer_id::pool_window;
  return s;
}
}  // namespace

stream_info host_inspect(const std::byte* data, std::size_t size) { return info_of(ebac::host::inspect(data, size), size); }

stream_info inspect_header(const std::byte* head, std::size_t head_bytes, std::size_t total_bytes) {
  ebac::stream_header h;
  const char* what = "invalid stream header";
  const ebac::status st = ebac::read_stream_header_fields(head, head_bytes, total_bytes, h, &what);
  if (st != ebac::status::ok) throw ebac::error(st, what);
  return info_of(h, total_bytes);
}

std::string ebac_version() {
  return std::to_string(EBAC_VERSION_MAJOR) + "." + std::to_string(EBAC_VERSION_MINOR) + "." + std::to_string(EBAC_VERSION_PATCH);
}

}  // namespace ebac_torch
