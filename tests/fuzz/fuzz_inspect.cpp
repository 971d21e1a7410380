// libFuzzer target: the stream header reader alone, on arbitrary bytes.
//   - host::inspect throws ebac::error exactly when read_stream_header fails;
//   - a header it accepts is written back byte for byte by stream_header::write
//     (no field is read loosely) and its sections add up to the stream;
//   - read_stream_header_fields on the header bytes alone (the CUDA layer's
//     read_header) agrees with the full reader, checksum aside.
#include <ebac/ebac.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

[[noreturn]] void violation(const char* what) {
  std::fprintf(stderr, "fuzz_inspect: %s\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(bytes);
  ebac::stream_header full;
  const ebac::status s = ebac::read_stream_header(p, size, full);
  bool threw = false;
  try {
    (void)ebac::host::inspect(p, size);
  } catch (const ebac::error& e) {
    threw = true;
    if (e.code() != s) violation("inspect threw a status other than the reader's");
  }
  if (threw != (s != ebac::status::ok)) violation("inspect and read_stream_header disagree");

  const std::size_t head = std::min(size, ebac::stream_fixed_header_bytes + 8 * ebac::max_rank);
  ebac::stream_header fields;
  const ebac::status f = ebac::read_stream_header_fields(p, head, size, fields);
  if (s == ebac::status::ok && f != ebac::status::ok) violation("the fields reader refuses a stream the full reader accepts");
  if (f == ebac::status::ok && s != ebac::status::ok && s != ebac::status::checksum_mismatch)
    violation("the full reader refuses, for a reason other than the checksum, a header the fields reader accepts");
  if (f != ebac::status::ok) return 0;

  std::vector<std::byte> again(fields.header_bytes());
  fields.write(again.data());
  if (again.size() > size || std::memcmp(again.data(), p, again.size()) != 0)
    violation("an accepted header is not written back as read");
  if (fields.section_offset(ebac::section_count) + (fields.has_checksum() ? 8 : 0) != size)
    violation("an accepted header's sections do not add up to the stream");
  return 0;
}
