// ebac/cuda/kernels/predict.cuh - predictor residuals and their inverse on the device.
//
// Every residual is computed independently (predictor/residual.hpp, tested
// on the host against the host backend's axis passes), so the kernel needs
// no synchronization between passes.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/levels.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/predictor/residual.hpp>

#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// codes[i] = zigzag(residual of q at i). Runs only when its stage set was
/// chosen (levels.cuh: a palette's indices have no prediction).
template <class P>
EBAC_KERNEL void residual_kernel(stage_gate gate, P pred, extents shape, const std::uint32_t* q, std::uint32_t* codes, std::uint64_t n) {
  if (gate.closed()) return;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    codes[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(residual_at(pred, shape, q, i)));
}

/// In place: zigzagged residuals -> residuals (first step of decoding).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void unzigzag_kernel(std::uint32_t* f, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    f[i] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(f[i]));
}

/// One inverse pass (prefix sums inside tiles along one axis); one thread per
/// line segment, consecutive threads on consecutive inner elements.
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void inverse_pass_kernel(std::uint32_t* f, axis_pass p) {
  const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
  const std::uint64_t lines = p.outer * tiles * p.inner;
  for (std::uint64_t u = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; u < lines; u += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t k = u % p.inner;
    const std::uint64_t t = (u / p.inner) % tiles;
    const std::uint64_t o = u / (p.inner * tiles);
    const std::uint64_t c0 = t * p.tile, c1 = (c0 + p.tile < p.extent) ? c0 + p.tile : p.extent;
    std::uint32_t* base = f + o * p.extent * p.inner + k;
    std::uint32_t prev = base[c0 * p.inner];
    for (std::uint64_t c = c0 + 1; c < c1; ++c) {
      prev = lorenzo::inverse(base[c * p.inner], prev);
      base[c * p.inner] = prev;
    }
  }
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
