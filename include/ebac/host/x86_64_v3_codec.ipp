// ebac/host/x86_64_v3_codec.ipp - the whole content of the one unit of a
// program that builds ebac's host codec for x86-64-v3 (ebac/host/isa_codec.hpp):
//
//   // my_x86_64_v3_codec.cpp, compiled without EBAC_HOST_CODEC_PREBUILT and -march=
//   #include <ebac/host/x86_64_v3_codec.ipp>
//
// It defines ebac::isa::x86_64_v3_codec() (f32, f16 and bf16); the rest of
// the program picks it with host::chosen_codec<true>() and calls it through
// host::compress_dynamic / decompress_dynamic (ebac/host/isa_dispatch.hpp). Not a header to include anywhere else: it
// defines a function that is not inline.
#if defined(EBAC_HOST_CODEC_PREBUILT)
#error "ebac/host/x86_64_v3_codec.ipp instantiates its own codec: compile its unit without EBAC_HOST_CODEC_PREBUILT"
#endif

#include <ebac/host/isa_codec.hpp>  // first: the table's types are the same in both builds

#include <cstring>

#include <ebac/host/x86_64_v3_begin.hpp>
#include <ebac/ebac.hpp>
#include <ebac/host/isa_dispatch.hpp>

namespace ebac::isa::x86_64_v3_detail {
namespace {

// The element types this build codes.
using coded_here = ebac::host::dtype_set<float, ebac::float16, ebac::bfloat16>;

std::vector<std::byte> compress(const void* in, int type, const void* extents, const void* spec, const void* options) {
  ebac::extents e;
  ebac::pipeline_spec s;
  ebac::compress_options o;
  std::memcpy(&e, extents, sizeof e);
  std::memcpy(&s, spec, sizeof s);
  std::memcpy(&o, options, sizeof o);
  return ebac::host::compress_typed<coded_here>(in, static_cast<ebac::dtype>(type), e, s, o);
}

void decompress(const std::byte* stream, std::size_t size, int type, void* out, std::uint64_t count, int threads,
                std::uint64_t max_output) {
  ebac::host::decompress_typed<coded_here>(stream, size, static_cast<ebac::dtype>(type), out, count, threads, max_output);
}

void decompress_stream(const stream_io& io, int type, int threads, std::uint64_t max_output) {
  ebac::host::decompress_stream_typed<coded_here>(io, static_cast<ebac::dtype>(type), threads, max_output);
}

}  // namespace
}  // namespace ebac::isa::x86_64_v3_detail

#include <ebac/host/x86_64_v3_end.hpp>

// The unit's own flags again: the table is built, and errors are caught,
// before and whether or not the caller has checked the CPU.
namespace ebac::isa {
namespace x86_64_v3_detail {
namespace {

std::vector<std::byte> compress_entry(const void* in, int type, const void* extents, const void* spec, const void* options,
                                      failure& f) {
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
  } catch (const ebac::error& e) { f = {true, static_cast<int>(e.code()), e.what()}; }
}

void decompress_stream_entry(const stream_io& io, int type, int threads, std::uint64_t max_output, failure& f) {
  try {
    decompress_stream(io, type, threads, max_output);
  } catch (const ebac::error& e) {  // the reader's and the sink's own exceptions pass through
    f = {true, static_cast<int>(e.code()), e.what()};
  }
}

}  // namespace
}  // namespace x86_64_v3_detail

codec x86_64_v3_codec() {
  using namespace x86_64_v3_detail;
  codec c;
  c.name = "x86-64-v3";
  c.dtypes = coded_here::mask;
  c.object_sizes[0] = sizeof(ebac::extents);
  c.object_sizes[1] = sizeof(ebac::pipeline_spec);
  c.object_sizes[2] = sizeof(ebac::compress_options);
  c.compress = &compress_entry;
  c.decompress = &decompress_entry;
  c.decompress_stream = &decompress_stream_entry;
  return c;
}

}  // namespace ebac::isa
