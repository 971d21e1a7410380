// apps/cli/host_isa.hpp - which build of the host codec the CLI runs.
//
// The CLI carries two builds of the codec for floating-point tensors: the
// one compiled with the program's flags (baseline x86-64 unless the build
// said otherwise), and one compiled for x86-64-v3 (x86_64_v3_codec.cpp,
// AVX2/FMA/BMI2: 1.15-1.6x faster, the same streams). It takes the second
// where the CPU has x86-64-v3, unless EBAC_HOST_ISA=baseline says not to.
// Nothing here names an ebac type: the x86-64-v3 build's ebac types live in
// another namespace, so what crosses is standard types and object bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ebac_cli::host_isa {

/// What the x86-64-v3 build returns instead of throwing its own ebac::error
/// (a type of its namespace, not the program's).
struct failure {
  bool failed = false;
  int status = 0;    ///< ebac::status, as int
  std::string what;  ///< the error's what()
};

/// The x86-64-v3 build's entry points. `extents`, `spec` and `options` point
/// at the caller's ebac::extents, ebac::pipeline_spec and
/// ebac::compress_options; both builds compile these trivially copyable
/// types from the same headers, and `object_sizes` lets the caller check
/// that they agree before passing any.
struct codec {
  /// 1 << int(ebac::dtype) for each element type this build codes.
  std::uint32_t dtypes = 0;
  std::size_t object_sizes[3] = {};  ///< sizeof extents, pipeline_spec, compress_options
  std::vector<std::byte> (*compress)(const void* in, int dtype, const void* extents, const void* spec, const void* options,
                                     failure& f) = nullptr;
  void (*decompress)(const std::byte* stream, std::size_t size, int dtype, void* out, std::uint64_t count, int threads,
                     std::uint64_t max_output, failure& f) = nullptr;
};

/// Defined where the CLI is built with its x86-64-v3 unit (EBAC_CLI_X86_64_V3).
codec x86_64_v3_codec();

}  // namespace ebac_cli::host_isa
