// The host codec built for one ISA, behind an interface of standard types
// only: each build lives in its own ABI namespace (EBAC_ABI_TAG), so its
// ebac types are not the other build's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ebac_isa_test {

struct codec_functions {
  /// The stream of n = prod(dims) floats under `pipeline` at bound `eb` (relative or absolute), one thread.
  std::vector<std::byte> (*compress)(const float* x, const std::vector<std::uint64_t>& dims, const std::string& pipeline,
                                     double eb, bool relative);
  /// The stream decoded, one thread.
  std::vector<float> (*decompress)(const std::vector<std::byte>& stream);
};

codec_functions baseline_codec();  // built with the project's flags
codec_functions avx2_codec();      // the same source, built with -march=x86-64-v3

}  // namespace ebac_isa_test
