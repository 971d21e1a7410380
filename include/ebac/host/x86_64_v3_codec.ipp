// ebac/host/x86_64_v3_codec.ipp - the whole content of the one unit of a
// program that builds ebac's host codec for x86-64-v3 (ebac/host/isa_codec.hpp):
//
//   // my_x86_64_v3_codec.cpp, compiled without EBAC_HOST_CODEC_PREBUILT and -march=
//   #include <ebac/host/x86_64_v3_codec.ipp>
//
// It defines ebac::isa::x86_64_v3_codec() (f32, f16 and bf16); the rest of
// the program picks it with isa::choose() and calls it through
// ebac/host/isa_dispatch.hpp. Not a header to include anywhere else: it
// defines a function that is not inline.
#if defined(EBAC_HOST_CODEC_PREBUILT)
#  error "ebac/host/x86_64_v3_codec.ipp instantiates its own codec: compile its unit without EBAC_HOST_CODEC_PREBUILT"
#endif

#include <ebac/host/isa_codec.hpp>  // first: the table's types are the same in both builds

#include <cstring>

#include <ebac/host/x86_64_v3_begin.hpp>
#include <ebac/ebac.hpp>

namespace ebac::isa::x86_64_v3_detail {
namespace {

// The element types this build codes, as visit_dtype hands them.
template <class T>
constexpr bool coded_here = std::is_same_v<T, float> || std::is_same_v<T, ebac::float16> || std::is_same_v<T, ebac::bfloat16>;

[[noreturn]] void not_coded_here(ebac::dtype t) {
  ebac::detail::fail(ebac::status::invalid_argument, "the x86-64-v3 codec does not code " + std::string(ebac::to_string(t)));
}

std::vector<std::byte> compress(const void* in, int type, const void* extents, const void* spec, const void* options) {
  ebac::extents e;
  ebac::pipeline_spec s;
  ebac::compress_options o;
  std::memcpy(&e, extents, sizeof e);
  std::memcpy(&s, spec, sizeof s);
  std::memcpy(&o, options, sizeof o);
  return ebac::visit_dtype(static_cast<ebac::dtype>(type), [&]<class T>(std::type_identity<T>) -> std::vector<std::byte> {
    if constexpr (coded_here<T>) {
      return ebac::with_pipeline(s, e, [&](auto pipe) { return ebac::host::compress(static_cast<const T*>(in), e, pipe, o); });
    } else {
      not_coded_here(ebac::dtype_of<T>::value);
    }
  });
}

void decompress(const std::byte* stream, std::size_t size, int type, void* out, std::uint64_t count, int threads, std::uint64_t max_output) {
  ebac::visit_dtype(static_cast<ebac::dtype>(type), [&]<class T>(std::type_identity<T>) {
    if constexpr (coded_here<T>) {
      ebac::host::decompress(stream, size, static_cast<T*>(out), count, threads, max_output);
    } else {
      not_coded_here(ebac::dtype_of<T>::value);
    }
  });
}

constexpr std::uint32_t dtype_bit(ebac::dtype t) { return std::uint32_t{1} << static_cast<int>(t); }

}  // namespace
}  // namespace ebac::isa::x86_64_v3_detail

#include <ebac/host/x86_64_v3_end.hpp>

// The unit's own flags again: the table is built, and errors are caught,
// before and whether or not the caller has checked the CPU.
namespace ebac::isa {
namespace x86_64_v3_detail {
namespace {

std::vector<std::byte> compress_entry(const void* in, int type, const void* extents, const void* spec, const void* options, failure& f) {
  try {
    return compress(in, type, extents, spec, options);
  } catch (const ebac::error& e) {  // this build's ebac::error: handed over as status and text
    f = {true, static_cast<int>(e.code()), e.what()};
    return {};
  }
}

void decompress_entry(const std::byte* stream, std::size_t size, int type, void* out, std::uint64_t count, int threads,
                      std::uint64_t max_output, failure& f) {
  try {
    decompress(stream, size, type, out, count, threads, max_output);
  } catch (const ebac::error& e) {
    f = {true, static_cast<int>(e.code()), e.what()};
  }
}

}  // namespace
}  // namespace x86_64_v3_detail

codec x86_64_v3_codec() {
  using namespace x86_64_v3_detail;
  codec c;
  c.name = "x86-64-v3";
  c.dtypes = dtype_bit(ebac::dtype::f32) | dtype_bit(ebac::dtype::f16) | dtype_bit(ebac::dtype::bf16);
  c.object_sizes[0] = sizeof(ebac::extents);
  c.object_sizes[1] = sizeof(ebac::pipeline_spec);
  c.object_sizes[2] = sizeof(ebac::compress_options);
  c.compress = &compress_entry;
  c.decompress = &decompress_entry;
  return c;
}

}  // namespace ebac::isa
