// ebac/predictor/residual.hpp - one element's predictor residual, computed directly.
//
// The host backend applies Lorenzo as one backward-difference pass per axis
// over the whole field. A parallel backend (CUDA) instead computes each
// residual on its own: the product of the passes, expanded by
// inclusion-exclusion over the axes that have a predecessor in the same
// tile. In wrapping uint32 arithmetic both give the same bits; the host
// tests check that, so the device kernel runs tested logic.
#pragma once

#include <ebac/config.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>

#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

/// The residual at i, reading the quantized field through q_at(j) (an
/// array, or a function that quantizes element j on the spot: the fused CUDA
/// kernels, cuda/kernels/fused_bitpack.cuh, never store the field).
template <class P, class QAt>
EBAC_HOST_DEVICE std::uint32_t residual_with(const P& pred, const extents& shape, std::uint64_t i, QAt&& q_at) noexcept {
  if constexpr (std::is_same_v<P, no_prediction>) {
    (void)pred;
    (void)shape;
    return q_at(i);
  } else {
    std::uint64_t offset[3] = {0, 0, 0};
    int dims = 0;
    for (int k = 0; k < pred.dims; ++k) {
      const axis_pass ap = pred.pass(shape, k);
      const std::uint64_t coord = (i / ap.inner) % ap.extent;
      if (coord % ap.tile != 0) offset[dims++] = ap.inner;
    }
    std::uint32_t r = 0;
    for (int s = 0; s < (1 << dims); ++s) {  // subsets of the axes with a predecessor
      std::uint64_t back = 0;
      int parity = 0;
      for (int k = 0; k < dims; ++k)
        if (s & (1 << k)) {
          back += offset[k];
          parity ^= 1;
        }
      const std::uint32_t v = q_at(i - back);
      r = parity ? r - v : r + v;
    }
    return r;
  }
}

template <class P>
EBAC_HOST_DEVICE std::uint32_t residual_at(const P& pred, const extents& shape, const std::uint32_t* q, std::uint64_t i) noexcept {
  return residual_with(pred, shape, i, [q](std::uint64_t j) { return q[j]; });
}

EBAC_NAMESPACE_END
