// ebac/host/stream_source.hpp - a stream's bytes read in order from a
// reader (a file, a pipe), each once, hashed for the checksum as they
// arrive, and its header and stage parameters read and validated from
// them: what host::decompress_stream reads (host/decompress_stream.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/checksum.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/stream_stages.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {

/// A reader: read(dst, n) puts up to n (> 0) next bytes of the stream at dst
/// and returns how many; 0 only where the input has ended. It may throw (an
/// I/O error): the exception goes through decompress_stream unchanged.
template <class R>
concept byte_reader = requires(R& r, std::byte* p, std::size_t n) {
  { r(p, n) } -> std::convertible_to<std::size_t>;
};

namespace detail {

/// The stream's bytes from a reader, in order, each once: a buffer the size
/// of the largest piece asked for, grown as bytes arrive (a header may claim
/// any size), and the checksum of the bytes before the stream's checksum.
template <byte_reader R>
class stream_source {
 public:
  explicit stream_source(R& read) : read_(read) {}

  /// Appends up to n bytes of the input to dst (grown as they arrive); the number appended.
  std::size_t append(std::vector<std::byte>& dst, std::uint64_t n) {
    const std::size_t start = dst.size();
    std::size_t have = start;
    const std::uint64_t want = start + n;
    while (have < want) {
      if (have == dst.size())
        dst.resize(
            static_cast<std::size_t>(std::min<std::uint64_t>(want, have + std::max<std::size_t>(have, std::size_t{1} << 20))));
      const std::size_t r = read_(dst.data() + have, dst.size() - have);
      if (r == 0) break;
      have += std::min(r, dst.size() - have);
    }
    dst.resize(have);
    if (sum_ && hashing_) sum_->update(dst.data() + start, have - start);
    position_ += have - start;
    return have - start;
  }
  /// Exactly n next bytes, valid until the next call, with 8 more bytes
  /// readable after them (decode_chunks reads ahead); status::truncated_stream
  /// when the input ends first.
  const std::byte* take(std::uint64_t n) {
    buffer_.clear();
    if (append(buffer_, n) < n) ::ebac::detail::fail(status::truncated_stream, "stream shorter than its sections");
    buffer_.resize(buffer_.size() + 8);
    return buffer_.data();
  }
  /// Exactly n next bytes, appended to dst.
  void take_into(std::vector<std::byte>& dst, std::uint64_t n) {
    if (append(dst, n) < n) ::ebac::detail::fail(status::truncated_stream, "stream shorter than its sections");
  }
  /// From here the bytes are hashed: `body` bytes before the checksum; the
  /// `bytes` at `seen` were read before.
  void start_checksum(std::uint64_t body, const std::byte* seen, std::size_t bytes) {
    sum_.emplace(body);
    sum_->update(seen, bytes);
    body_ = body;
  }
  /// Reads (and hashes) the stream up to its checksum, a megabyte at a time.
  void skip_to_checksum() {
    while (position_ < body_) take(std::min<std::uint64_t>(body_ - position_, std::uint64_t{1} << 20));
  }
  /// The checksum the stream ends with against its bytes (all read but it).
  void verify_checksum() {
    hashing_ = false;
    const std::uint64_t stored = ::ebac::detail::load_le<std::uint64_t>(take(8));
    if (sum_->finish() != stored)
      ::ebac::detail::fail(status::checksum_mismatch, "stream checksum does not match (corrupted or truncated)");
  }

 private:
  R& read_;
  std::vector<std::byte> buffer_;
  std::optional<::ebac::detail::checksum64_stream> sum_;
  std::uint64_t position_ = 0, body_ = 0;
  bool hashing_ = true;
};

/// Reads and validates a stream's header and stage parameters (the same
/// verdicts as read_stream_header_fields on the whole stream); the bytes
/// read are hashed into the checksum, and `total` is the stream's size.
template <class R>
stream_header read_stream_prefix(stream_source<R>& src, std::uint64_t& total) {
  std::vector<std::byte> p;
  stream_header h;
  const char* what = "invalid stream header";
  src.append(p, stream_fixed_header_bytes);
  // Too short for its fixed header: the reader names what is wrong (magic, version, a field).
  if (p.size() < stream_fixed_header_bytes) {
    const status s = read_stream_header_fields(p.data(), p.size(), p.size(), h, &what);
    ::ebac::detail::fail(s != status::ok ? s : status::truncated_stream,
                         s != status::ok ? what : "stream shorter than its header");
  }
  const int rank = std::clamp(static_cast<int>(p[11]), 1, max_rank);
  src.append(p, 8 * static_cast<std::size_t>(rank));
  constexpr std::uint64_t implausible = std::uint64_t{1} << 62;  // no stream's sections sum to this
  total = stream_fixed_header_bytes + 8 * static_cast<std::uint64_t>(rank);
  for (int k = 0; k < section_count; ++k)
    total = std::min(implausible, total + std::min(implausible, ::ebac::detail::load_le<std::uint64_t>(p.data() + 64 + 8 * k)));
  if (static_cast<std::uint8_t>(p[10]) & stream_flag_checksum) total += 8;
  if (total >= implausible) ::ebac::detail::fail(status::corrupt_stream, "section sizes overflow");
  if (p.size() < stream_fixed_header_bytes + 8 * static_cast<std::size_t>(rank)) {
    const status s = read_stream_header_fields(p.data(), p.size(), static_cast<std::size_t>(total), h, &what);
    ::ebac::detail::fail(s != status::ok ? s : status::truncated_stream,
                         s != status::ok ? what : "stream shorter than its header");
  }
  const std::uint64_t params = ::ebac::detail::load_le<std::uint64_t>(p.data() + 64);
  src.append(p, std::min<std::uint64_t>(params, max_parameter_bytes));
  const status s = read_stream_header_fields(p.data(), p.size(), static_cast<std::size_t>(total), h, &what);
  if (s != status::ok) ::ebac::detail::fail(s, what);
  if (h.has_checksum()) src.start_checksum(total - 8, p.data(), p.size());
  return h;
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
