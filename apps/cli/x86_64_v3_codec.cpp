// apps/cli/x86_64_v3_codec.cpp - the host codec for floating-point tensors
// compiled for x86-64-v3 (AVX2, FMA, BMI2), in a program otherwise built
// for the baseline; command_line.cpp calls it where the CPU has x86-64-v3
// (host_isa.hpp). Integer and bool tensors, coded losslessly, stay with the
// baseline build: each element type instantiates the whole codec again.
//
// The unit must not be compiled with EBAC_HOST_CODEC_PREBUILT (the prebuilt
// instances are the baseline build's) nor with -march= (CMakeLists.txt).
#include "host_isa.hpp"

#if defined(EBAC_HOST_CODEC_PREBUILT)
#  error "x86_64_v3_codec.cpp instantiates its own codec: compile it without EBAC_HOST_CODEC_PREBUILT"
#endif

#include <ebac/host/x86_64_v3_begin.hpp>
#include <ebac/ebac.hpp>

namespace ebac_cli::host_isa {
namespace {

// The dtypes this build codes, as visit_dtype hands them.
template <class T>
constexpr bool coded_here = std::is_same_v<T, float> || std::is_same_v<T, ebac::float16> || std::is_same_v<T, ebac::bfloat16>;

std::vector<std::byte> compress_v3(const void* in, int dtype, const void* extents, const void* spec, const void* options) {
  ebac::extents e;
  ebac::pipeline_spec s;
  ebac::compress_options o;
  std::memcpy(&e, extents, sizeof e);
  std::memcpy(&s, spec, sizeof s);
  std::memcpy(&o, options, sizeof o);
  return ebac::visit_dtype(static_cast<ebac::dtype>(dtype), [&]<class T>(std::type_identity<T>) -> std::vector<std::byte> {
    if constexpr (coded_here<T>) {
      return ebac::with_pipeline(s, e, [&](auto pipe) { return ebac::host::compress(static_cast<const T*>(in), e, pipe, o); });
    } else {
      ebac::detail::fail(ebac::status::invalid_argument, "the x86-64-v3 build does not code " + std::string(ebac::to_string(ebac::dtype_of<T>::value)));
    }
  });
}

void decompress_v3(const std::byte* stream, std::size_t size, int dtype, void* out, std::uint64_t count, int threads,
                   std::uint64_t max_output) {
  ebac::visit_dtype(static_cast<ebac::dtype>(dtype), [&]<class T>(std::type_identity<T>) {
    if constexpr (coded_here<T>) {
      ebac::host::decompress(stream, size, static_cast<T*>(out), count, threads, max_output);
    } else {
      ebac::detail::fail(ebac::status::invalid_argument, "the x86-64-v3 build does not code " + std::string(ebac::to_string(ebac::dtype_of<T>::value)));
    }
  });
}

constexpr std::uint32_t dtype_bit(ebac::dtype t) { return std::uint32_t{1} << static_cast<int>(t); }

}  // namespace
}  // namespace ebac_cli::host_isa

#include <ebac/host/x86_64_v3_end.hpp>

// Compiled with the unit's own flags again: these run on any CPU (the table
// below is built before the caller has checked the CPU).
namespace ebac_cli::host_isa {
namespace {

std::vector<std::byte> compress_entry(const void* in, int dtype, const void* extents, const void* spec, const void* options, failure& f) {
  try {
    return compress_v3(in, dtype, extents, spec, options);
  } catch (const ebac::error& e) {  // this build's ebac::error: handed over as status and text
    f = {true, static_cast<int>(e.code()), e.what()};
    return {};
  }
}

void decompress_entry(const std::byte* stream, std::size_t size, int dtype, void* out, std::uint64_t count, int threads,
                      std::uint64_t max_output, failure& f) {
  try {
    decompress_v3(stream, size, dtype, out, count, threads, max_output);
  } catch (const ebac::error& e) {
    f = {true, static_cast<int>(e.code()), e.what()};
  }
}

}  // namespace

codec x86_64_v3_codec() {
  codec c;
  c.dtypes = dtype_bit(ebac::dtype::f32) | dtype_bit(ebac::dtype::f16) | dtype_bit(ebac::dtype::bf16);
  c.object_sizes[0] = sizeof(ebac::extents);
  c.object_sizes[1] = sizeof(ebac::pipeline_spec);
  c.object_sizes[2] = sizeof(ebac::compress_options);
  c.compress = &compress_entry;
  c.decompress = &decompress_entry;
  return c;
}

}  // namespace ebac_cli::host_isa
