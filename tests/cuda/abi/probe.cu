// One "extension" built against ebac (tests/cuda/abi): two copies of this
// file, built as two shared libraries against two ebac versions, are loaded
// into one process by two_builds.cpp. Each instantiates the CUDA and host
// codecs the way an extension would, and exports one C function.
#include <ebac/cuda/codec.cuh>
#include <ebac/cuda/statistics.cuh>
#include <ebac/ebac.hpp>

#include <cstdint>
#include <vector>

#ifndef EBAC_PROBE_NAME
#error "define EBAC_PROBE_NAME (the exported function's name)"
#endif

// What an inline function with a static variable anywhere in ebac would be:
// the static is one object per process (an STB_GNU_UNIQUE symbol) among all
// libraries that export the same name. In ebac's versioned namespace each
// build has its own; were the namespace not versioned, probe_b would read
// probe_a's object and report probe_a's version.
EBAC_NAMESPACE_BEGIN
namespace abi_probe {
inline int* build_version() {
  static int version = EBAC_VERSION;
  return &version;
}
}  // namespace abi_probe
EBAC_NAMESPACE_END

namespace {
using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
using ratio_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman>;
}  // namespace

/// Compresses a small tensor on the host (the stream's size goes to
/// *host_bytes) and tries the CUDA convenience layer on a device buffer;
/// returns the ebac::status of the CUDA attempt (0 when it worked), and the
/// library version it was built against in *version.
extern "C" __attribute__((visibility("default"))) int EBAC_PROBE_NAME(std::uint64_t* host_bytes, int* version) {
  *version = *ebac::abi_probe::build_version();  // through the exported static, not the macro
  std::vector<float> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.25f;
  ebac::compress_options opt;
  opt.bound = {1e-3, ebac::bound_mode::relative};
  const auto s = ebac::host::compress(x.data(), ebac::extents{4096}, fast_t{}, opt);
  *host_bytes = s.size();
  try {
    float* d = nullptr;
    if (cudaMalloc(&d, x.size() * sizeof(float)) != cudaSuccess) {
      (void)cudaGetLastError();
      // No device: the convenience layer must still report it as ebac::error.
      (void)ebac::cuda::compress(reinterpret_cast<const float*>(std::uintptr_t{0x1000}), ebac::extents{4096}, fast_t{}, opt);
      return 0;
    }
    (void)cudaMemcpy(d, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
    opt.checksum = false;
    const auto ds = ebac::cuda::compress(d, ebac::extents{4096}, fast_t{}, opt);
    const auto dr = ebac::cuda::compress(reinterpret_cast<const ebac::bfloat16*>(d), ebac::extents{8192}, ratio_t{}, opt);
    ebac::cuda::decompress(ds.data(), ds.bytes, d, x.size());
    // The per-channel statistics kernel, as ebac_torch instantiates it.
    ebac::error_model::channel_moments* m = nullptr;
    const bool moments_ok = cudaMalloc(&m, 4 * sizeof *m) == cudaSuccess &&
                            ebac::cuda::channel_moments(d, 2, 4, 512, m) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
    cudaFree(m);
    cudaFree(d);
    return moments_ok && ds.bytes + 8 == s.size() && dr.bytes > 0 ? 0 : -1;
  } catch (const ebac::error& e) { return static_cast<int>(e.code()); }
}
