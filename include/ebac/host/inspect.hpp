// ebac/host/inspect.hpp - host::inspect: a stream's header, parsed and
// validated (checksum included) by format/stream_header.hpp's one reader.
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>
#include <ebac/format/stream_header.hpp>

#include <cstddef>

EBAC_NAMESPACE_BEGIN
namespace host {

/// Parses and validates a stream's header (checksum included); throws ebac::error.
inline stream_header inspect(const std::byte* data, std::size_t size) {
  stream_header h;
  const char* what = "";
  const status s = read_stream_header(data, size, h, &what);
  if (s != status::ok) ::ebac::detail::fail(s, what);
  return h;
}

}  // namespace host
EBAC_NAMESPACE_END
