// ebac/status.hpp - error reporting.
//
// Lower layers (policies, encoders, the stream parser, device code) return a
// `status` and never throw; the host convenience layer turns a failing status
// into `ebac::error`, whose message names what was wrong.
#pragma once

#include <ebac/config.hpp>

#include <stdexcept>
#include <string>

EBAC_NAMESPACE_BEGIN

enum class status : int {
  ok = 0,
  invalid_argument,   // a caller-supplied parameter is out of range
  unsupported,        // a valid request this build or version cannot serve
  truncated_stream,   // the stream ends before a section it announces
  corrupt_stream,     // a size, id or code in the stream is inconsistent
  checksum_mismatch,  // the stream's checksum does not match its bytes
  buffer_too_small,   // the caller's output buffer cannot hold the result
  size_overflow,      // a size computation would overflow 64 bits
  out_of_memory,      // an allocation the request needs failed
  device_error,       // a CUDA runtime call failed (no usable device, a failed launch, ...)
};

constexpr const char* to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::invalid_argument: return "invalid argument";
    case status::unsupported: return "unsupported";
    case status::truncated_stream: return "truncated stream";
    case status::corrupt_stream: return "corrupt stream";
    case status::checksum_mismatch: return "checksum mismatch";
    case status::buffer_too_small: return "buffer too small";
    case status::size_overflow: return "size overflow";
    case status::out_of_memory: return "out of memory";
    case status::device_error: return "device error";
  }
  return "unknown status";
}

/// Thrown by the host convenience layer. `code()` keeps the machine-readable
/// status; `what()` is one line saying what was wrong.
class error : public std::runtime_error {
 public:
  error(status code, const std::string& what) : std::runtime_error(what), code_(code) {}
  [[nodiscard]] status code() const noexcept { return code_; }

 private:
  status code_;
};

namespace detail {
[[noreturn]] inline void fail(status code, const std::string& what) {
  throw error(code, std::string(to_string(code)) + ": " + what);
}
}  // namespace detail

EBAC_NAMESPACE_END
