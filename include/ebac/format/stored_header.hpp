// ebac/format/stored_header.hpp - the header of a tensor's stored form.
//
// A writer stores the raw elements when coding would give a larger stream
// (docs/format.md, "stored streams"). The host writes that form directly
// (host::detail::write_stored); the CUDA backend learns the coded size only
// on the device, so a kernel turns the coded header into the stored one
// there. Both keep the same fields; tests/format/stored_header.cpp
// checks this function's header against the host's stored streams.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/predictor_id.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// The stored form's header, from the header `h` the tensor's coded form
/// has (or would have): dtype, bound mode, shape, requested bound and chunk
/// size stay; the stored flag, no stages, no outliers, eb_abs and top 0, and
/// one section, the n elements' raw bytes.
[[nodiscard]] EBAC_HOST_DEVICE stream_header stored_header(stream_header h, std::uint64_t n, bool checksum) noexcept {
  h.flags = static_cast<std::uint8_t>(stream_flag_stored | (checksum ? stream_flag_checksum : 0));
  h.predictor = predictor_id::none;
  h.lorenzo_params = lorenzo{};
  h.eb_abs = 0;
  h.top = 0;
  h.outlier_count = 0;
  for (int s = 0; s < section_count; ++s) h.section_bytes[s] = 0;
  h.section_bytes[section_payload] = n * size_of(h.type);
  return h;
}

EBAC_NAMESPACE_END
