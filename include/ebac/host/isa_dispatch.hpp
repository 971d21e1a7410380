// ebac/host/isa_dispatch.hpp - calling a build of the host codec behind an
// isa::codec table (ebac/host/isa_codec.hpp) with the program's own ebac
// types: what crosses is object bytes, and what comes back as an
// isa::failure is thrown again as the program's ebac::error.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/extents.hpp>
#include <ebac/host/isa_codec.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {

static_assert(std::is_trivially_copyable_v<extents> && std::is_trivially_copyable_v<pipeline_spec> &&
                  std::is_trivially_copyable_v<compress_options>,
              "isa::codec passes these as object bytes");

/// Whether `c` codes element type t (null: never).
[[nodiscard]] inline bool codes(const isa::codec* c, dtype t) noexcept {
  return c != nullptr && (c->dtypes >> static_cast<int>(t) & 1u) != 0;
}

namespace detail_isa {
inline void check_layout(const isa::codec& c) {
  if (c.object_sizes[0] != sizeof(extents) || c.object_sizes[1] != sizeof(pipeline_spec) || c.object_sizes[2] != sizeof(compress_options))
    ::ebac::detail::fail(status::invalid_argument, std::string("the ") + c.name + " codec was compiled from other ebac headers (object sizes differ)");
}
inline void rethrow(const isa::failure& f) {
  if (f.failed) throw error(static_cast<status>(f.status), f.what);
}
}  // namespace detail_isa

/// host::compress of `in` (elements of type t) through the build `c`; t must be one it codes.
inline std::vector<std::byte> compress_with(const isa::codec& c, const void* in, dtype t, const extents& e, const pipeline_spec& spec,
                                            const compress_options& opt) {
  detail_isa::check_layout(c);
  isa::failure f;
  std::vector<std::byte> stream = c.compress(in, static_cast<int>(t), &e, &spec, &opt, f);
  detail_isa::rethrow(f);
  return stream;
}

/// host::decompress of a stream of element type t into out, through the build `c`.
inline void decompress_with(const isa::codec& c, const std::byte* stream, std::size_t size, dtype t, void* out, std::uint64_t count,
                            int threads, std::uint64_t max_output = unlimited_output) {
  isa::failure f;
  c.decompress(stream, size, static_cast<int>(t), out, count, threads, max_output, f);
  detail_isa::rethrow(f);
}

}  // namespace host
EBAC_NAMESPACE_END
