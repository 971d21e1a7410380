// ebac/cuda/kernels/predict.cuh - predictor residuals and their inverse on the device.
//
// Every residual is computed independently (the predictor's residual(),
// tested on the host against the host backend's axis passes), so the kernel
// needs no synchronization between passes; the inverse runs the
// predictor's pass_unit on one inner index per thread.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/levels.cuh>
#include <ebac/detail/bytes.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>

#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// codes[i] = zigzag(residual of q at i). Runs only when its stage set was
/// chosen (levels.cuh: a palette's indices have no prediction).
template <class P>
EBAC_KERNEL void residual_kernel(stage_gate gate, P pred, extents shape, const std::uint32_t* q, std::uint32_t* codes,
                                 std::uint64_t n) {
  if (gate.closed()) return;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    codes[i] = ::ebac::detail::zigzag(static_cast<std::int32_t>(pred.residual(shape, i, [q](std::uint64_t j) { return q[j]; })));
}

/// In place: zigzagged residuals -> residuals (first step of decoding).
// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void unzigzag_kernel(std::uint32_t* f, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    f[i] = static_cast<std::uint32_t>(::ebac::detail::unzigzag(f[i]));
}

/// One inverse pass of predictor P (prefix sums inside tiles along one
/// axis): one thread per line segment (P::pass_unit on one inner index),
/// consecutive threads on consecutive inner elements.
template <class P>
EBAC_KERNEL void inverse_pass_kernel(std::uint32_t* f, axis_pass p) {
  const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
  const std::uint64_t lines = p.outer * tiles * p.inner;
  for (std::uint64_t u = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; u < lines;
       u += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t k = u % p.inner;
    P::template pass_unit<false>(f, p, u / (p.inner * tiles), (u / p.inner) % tiles, k, k + 1);
  }
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
