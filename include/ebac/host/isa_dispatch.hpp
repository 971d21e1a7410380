// ebac/host/isa_dispatch.hpp - compressing a tensor whose element type is
// known at run time, through the build of the host codec the program chose
// (ebac/host/isa_codec.hpp) or its own: the one place that picks the
// build, the element type and the pipeline. Calls into another build cross
// as object bytes, and what comes back as an isa::failure is thrown again
// as the program's ebac::error.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/dtype_dispatch.hpp>
#include <ebac/extents.hpp>
#include <ebac/host/codec.hpp>
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

/// A set of element types (compress_typed, decompress_typed): `codes<T>`
/// whether T is in it, `mask` its isa::codec::dtypes (a constant, so a
/// build's table is filled without running any of that build's code).
template <class... Ts>
struct dtype_set {
  template <class T>
  static constexpr bool codes = (std::is_same_v<T, Ts> || ...);
  static constexpr std::uint32_t mask = ((std::uint32_t{1} << static_cast<int>(dtype_of<Ts>::value)) | ... | 0u);
};
/// Every element type.
struct every_dtype {
  template <class T>
  static constexpr bool codes = true;
};

/// The refusal of an element type outside a build's dtype_set.
[[noreturn]] inline void fail_not_coded(dtype t) {
  ::ebac::detail::fail(status::invalid_argument, "this build of the codec does not code " + std::string(to_string(t)));
}

/// host::compress of `in`, elements of the run-time type t, in this build;
/// a type outside Types is refused (invalid_argument), without compiling
/// the codec for it.
template <class Types = every_dtype>
std::vector<std::byte> compress_typed(const void* in, dtype t, const extents& e, const pipeline_spec& spec,
                                      const compress_options& opt) {
  return visit_dtype(t, [&]<class T>(std::type_identity<T>) -> std::vector<std::byte> {
    if constexpr (Types::template codes<T>) {
      return with_pipeline(spec, e, [&](auto pipe) { return host::compress(static_cast<const T*>(in), e, pipe, opt); });
    } else {
      fail_not_coded(t);
    }
  });
}

/// host::decompress of a stream of element type t into out, in this build; as compress_typed.
template <class Types = every_dtype>
void decompress_typed(const std::byte* stream, std::size_t size, dtype t, void* out, std::uint64_t count, int threads,
                      std::uint64_t max_output = unlimited_output) {
  visit_dtype(t, [&]<class T>(std::type_identity<T>) {
    if constexpr (Types::template codes<T>) {
      host::decompress(stream, size, static_cast<T*>(out), count, threads, max_output);
    } else {
      fail_not_coded(t);
    }
  });
}

namespace detail_isa {
/// An isa::stream_io's target and written as an element_sink of S.
template <class S>
struct io_sink {
  const isa::stream_io* io;
  S* target(std::uint64_t first, std::size_t count) const {
    return static_cast<S*>(io->target(io->context, first * sizeof(S), count * sizeof(S)));
  }
  void written(std::uint64_t first, std::size_t count) const { io->written(io->context, first * sizeof(S), count * sizeof(S)); }
};
}  // namespace detail_isa

/// host::decompress_stream of a stream of element type t through `io`, in
/// this build; as compress_typed.
template <class Types = every_dtype>
void decompress_stream_typed(const isa::stream_io& io, dtype t, int threads, std::uint64_t max_output = unlimited_output) {
  visit_dtype(t, [&]<class T>(std::type_identity<T>) {
    if constexpr (Types::template codes<T>) {
      detail_isa::io_sink<storage_t<T>> sink{&io};
      stream_decode_options o;
      o.threads = threads;
      o.max_output_bytes = max_output;
      o.window_bytes = io.window_bytes;
      host::decompress_stream<T>([&](std::byte* p, std::size_t n) { return io.read(io.context, p, n); }, sink, o);
    } else {
      fail_not_coded(t);
    }
  });
}

/// The build this program runs for the types it codes: isa::choose decided
/// once, offered the x86-64-v3 codec where the program links its unit
/// (`Linked`: the unit that includes x86_64_v3_codec.ipp is part of it);
/// null for this build. A codec compiled from other ebac headers (its
/// object sizes differ) is refused here, once, not at each call. Throws
/// what isa::choose throws (std::invalid_argument for an EBAC_HOST_ISA it
/// cannot honour) at each call until a choice is made.
template <bool Linked>
[[nodiscard]] const isa::codec* chosen_codec() {
  static const isa::codec* const chosen = [] {
    if constexpr (Linked) {
      static const isa::codec fast = isa::x86_64_v3_codec();
      const isa::codec* c = isa::choose(&fast);
      if (c != nullptr && (c->object_sizes[0] != sizeof(extents) || c->object_sizes[1] != sizeof(pipeline_spec) ||
                           c->object_sizes[2] != sizeof(compress_options)))
        ::ebac::detail::fail(status::invalid_argument,
                             std::string("the ") + c->name + " codec was compiled from other ebac headers (object sizes differ)");
      return c;
    } else {
      return isa::choose(nullptr);
    }
  }();
  return chosen;
}

/// The name of a build: its codec's, "baseline" for the program's own (null).
[[nodiscard]] inline const char* name_of(const isa::codec* c) noexcept { return c != nullptr ? c->name : "baseline"; }

namespace detail_isa {
inline void rethrow(const isa::failure& f) {
  if (f.failed) throw error(static_cast<status>(f.status), f.what);
}
}  // namespace detail_isa

/// host::compress of `in`, elements of the run-time type t: through `c`
/// (null, or from chosen_codec) where it codes t, else in this build. What
/// `c`'s build throws is thrown again as this build's ebac::error.
inline std::vector<std::byte> compress_dynamic(const isa::codec* c, const void* in, dtype t, const extents& e,
                                               const pipeline_spec& spec, const compress_options& opt) {
  if (!codes(c, t)) return compress_typed(in, t, e, spec, opt);
  isa::failure f;
  std::vector<std::byte> stream = c->compress(in, static_cast<int>(t), &e, &spec, &opt, f);
  detail_isa::rethrow(f);
  return stream;
}

/// host::decompress of a stream of element type t into out, as compress_dynamic.
inline void decompress_dynamic(const isa::codec* c, const std::byte* stream, std::size_t size, dtype t, void* out,
                               std::uint64_t count, int threads, std::uint64_t max_output = unlimited_output) {
  if (!codes(c, t)) return decompress_typed(stream, size, t, out, count, threads, max_output);
  isa::failure f;
  c->decompress(stream, size, static_cast<int>(t), out, count, threads, max_output, f);
  detail_isa::rethrow(f);
}

/// host::decompress_stream of a stream of element type t (the caller read
/// its header) through `io`, as compress_dynamic. (A template, so that only
/// a unit that calls it compiles the streaming decoder for every type.)
template <class Types = every_dtype>
void decompress_stream_dynamic(const isa::codec* c, const isa::stream_io& io, dtype t, int threads,
                               std::uint64_t max_output = unlimited_output) {
  if (!codes(c, t) || c->decompress_stream == nullptr) return decompress_stream_typed<Types>(io, t, threads, max_output);
  isa::failure f;
  c->decompress_stream(io, static_cast<int>(t), threads, max_output, f);
  detail_isa::rethrow(f);
}

}  // namespace host
EBAC_NAMESPACE_END
