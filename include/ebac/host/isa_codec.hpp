// ebac/host/isa_codec.hpp - a second build of the host codec, compiled for
// x86-64-v3, that a program carries beside its own and calls where the CPU
// has it; and the choice between the two (EBAC_HOST_ISA).
//
// One unit of the program is the second build: its whole content is
//   #include <ebac/host/x86_64_v3_codec.ipp>
// (GCC on x86-64; compiled WITHOUT EBAC_HOST_CODEC_PREBUILT and without
// -march=). The rest of the program reaches it through isa::codec, a table
// of functions over standard types only: that build's ebac types live in
// another ABI namespace (x86_64_v3_begin.hpp says why) and are not the
// program's. ebac/host/isa_dispatch.hpp chooses the build once
// (chosen_codec) and calls the table with the program's own ebac types
// (compress_dynamic, decompress_dynamic).
//
// This header names no ebac type and is included on both sides, before the
// x86-64-v3 region opens; so its namespace, ebac::isa, is outside ebac's
// versioned ABI namespace: the same types in both builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

/// 1 where this compiler can build the x86-64-v3 unit (#pragma GCC target;
/// not nvcc, whose front end need not know __builtin_cpu_supports).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__)
#define EBAC_X86_64_V3_CODEC_BUILDABLE 1
#else
#define EBAC_X86_64_V3_CODEC_BUILDABLE 0
#endif

namespace ebac::isa {

/// What the x86-64-v3 build returns instead of throwing its own ebac::error
/// (a type of its namespace, which the program's catch clauses do not name).
struct failure {
  bool failed = false;
  int status = 0;    ///< ebac::status, as int
  std::string what;  ///< the error's what()
};

/// host::decompress_stream's reader and sink in standard types, for a call
/// into another build: read as a byte_reader, target/written as an
/// element_sink but in bytes (first byte, bytes).
struct stream_io {
  void* context = nullptr;
  std::size_t (*read)(void* context, std::byte* dst, std::size_t n) = nullptr;
  void* (*target)(void* context, std::uint64_t first_byte, std::size_t bytes) = nullptr;
  void (*written)(void* context, std::uint64_t first_byte, std::size_t bytes) = nullptr;
  std::uint64_t window_bytes = std::uint64_t{8} << 20;
};

/// A build's entry points. `extents`, `spec` and `options` point at the
/// caller's ebac::extents, ebac::pipeline_spec and ebac::compress_options:
/// both builds compile these trivially copyable types from the same headers,
/// and object_sizes lets the caller check that they agree.
struct codec {
  const char* name = "";
  std::uint32_t dtypes = 0;          ///< 1 << int(ebac::dtype) for each element type this build codes
  std::size_t object_sizes[3] = {};  ///< sizeof extents, pipeline_spec, compress_options
  std::vector<std::byte> (*compress)(const void* in, int dtype, const void* extents, const void* spec, const void* options,
                                     failure& f) = nullptr;
  void (*decompress)(const std::byte* stream, std::size_t size, int dtype, void* out, std::uint64_t count, int threads,
                     std::uint64_t max_output, failure& f) = nullptr;
  void (*decompress_stream)(const stream_io& io, int dtype, int threads, std::uint64_t max_output, failure& f) = nullptr;
};

/// Defined by the unit that includes <ebac/host/x86_64_v3_codec.ipp>: the
/// codec for f32, f16 and bf16 (integer and bool tensors, coded losslessly,
/// stay with the program's build: each element type compiles the whole
/// codec again).
codec x86_64_v3_codec();

/// True where the CPU (and the OS) runs x86-64-v3 code.
inline bool cpu_has_x86_64_v3() {
#if EBAC_X86_64_V3_CODEC_BUILDABLE
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;
#endif
}

/// The build to run, from the environment variable EBAC_HOST_ISA: unset or
/// "auto" takes `fast` (the x86-64-v3 codec, null where the program has none)
/// where the CPU runs it; "baseline" never does; "x86-64-v3" must get it.
/// Returns the codec, or null for the program's own build. Throws
/// std::invalid_argument naming EBAC_HOST_ISA for another value, or for
/// "x86-64-v3" where it cannot run (and says why).
inline const codec* choose(const codec* fast) {
  const char* env = std::getenv("EBAC_HOST_ISA");
  const std::string want = env ? env : "auto";
  if (want != "auto" && want != "baseline" && want != "x86-64-v3")
    throw std::invalid_argument("EBAC_HOST_ISA='" + want + "': expected auto, baseline or x86-64-v3");
  if (want == "baseline") return nullptr;
  if (fast && cpu_has_x86_64_v3()) return fast;
  if (want == "x86-64-v3")
    throw std::invalid_argument(
        std::string("EBAC_HOST_ISA=x86-64-v3: ") +
        (fast ? "this CPU lacks x86-64-v3 (AVX2, FMA, BMI2)" : "this program was built without ebac's x86-64-v3 codec"));
  return nullptr;
}

}  // namespace ebac::isa
