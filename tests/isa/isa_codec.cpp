// Compiled twice (CMakeLists.txt): EBAC_ISA_TEST_BUILD names the build
// (baseline or avx2) and EBAC_ABI_TAG gives it its own ABI namespace.
#include "isa_codec.hpp"

#include <ebac/ebac.hpp>

#include <stdexcept>

#define EBAC_ISA_TEST_CONCAT_(a, b) a##b
#define EBAC_ISA_TEST_CONCAT(a, b) EBAC_ISA_TEST_CONCAT_(a, b)

namespace ebac_isa_test {
namespace {

std::vector<std::byte> compress(const float* x, const std::vector<std::uint64_t>& dims, const std::string& pipeline, double eb,
                                bool relative) {
  ebac::extents e;
  e.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) e.dims[i] = dims[i];
  ebac::pipeline_spec spec;
  if (!ebac::parse_pipeline(pipeline, spec)) throw std::invalid_argument("unknown pipeline " + pipeline);
  ebac::compress_options o;
  o.bound = {eb, relative ? ebac::bound_mode::relative : ebac::bound_mode::absolute};
  o.threads = 1;
  return ebac::with_pipeline(spec, e, [&](auto p) { return ebac::host::compress(x, e, p, o); });
}

std::vector<float> decompress(const std::vector<std::byte>& s) { return ebac::host::decompress<float>(s.data(), s.size(), 1); }

}  // namespace

codec_functions EBAC_ISA_TEST_CONCAT(EBAC_ISA_TEST_BUILD, _codec)() { return {&compress, &decompress}; }

}  // namespace ebac_isa_test
