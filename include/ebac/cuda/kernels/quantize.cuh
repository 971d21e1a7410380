// ebac/cuda/kernels/quantize.cuh - value range, quantize, reconstruct (the stages are chosen in levels.cuh).
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/kernels/levels.cuh>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// keys[0] = min key, keys[1] = max key over finite values (keys start at
/// INT_MAX / INT_MIN). Min and max are order-independent: deterministic.
template <class T>
EBAC_KERNEL void range_kernel(const T* in, std::uint64_t n, std::int32_t* keys) {
  std::int32_t lo = 0x7fffffff, hi = -0x7fffffff - 1;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const float x = to_float(in[i]);
    if ((::ebac::detail::float_bits(x) & 0x7f800000u) == 0x7f800000u) continue;
    const std::int32_t k = ::ebac::detail::float_order_key(x);  // value_range's keys
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  }
  for (int off = 16; off > 0; off >>= 1) {
    const std::int32_t l2 = __shfl_down_sync(0xffffffffu, lo, off), h2 = __shfl_down_sync(0xffffffffu, hi, off);
    lo = l2 < lo ? l2 : lo;
    hi = h2 > hi ? h2 : hi;
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMin(keys, lo);
    atomicMax(keys + 1, hi);
  }
}

// A template (never instantiated twice differently) so that two TUs including
// this header do not define the same kernel twice (CUB does the same).
template <int = 0>
EBAC_KERNEL void range_init_kernel(std::int32_t* keys) {
  keys[0] = 0x7fffffff;
  keys[1] = -0x7fffffff - 1;
}

/// codes[i] = quantizer code (0 for outliers), flags[i] = 1 for outliers,
/// by quantize_at (every quantizer; S is the element's storage type). Runs
/// only when its stage set was chosen (levels.cuh).
template <class Q, class S>
EBAC_KERNEL void quantize_kernel(stage_gate gate, const S* in, std::uint64_t n, const Q* qp, std::uint32_t* codes,
                                 std::uint8_t* flags) {
  if (gate.closed()) return;
  const Q q = *qp;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const quantized r = quantize_at(q, in[i], i);
    codes[i] = static_cast<std::uint32_t>(r.code);
    flags[i] = r.outlier;
  }
}

/// out[i] = reconstruction of code f[i]; writes every element. A lossless
/// quantizer's decoder checks every code (code_valid): one it cannot have
/// written marks the stream corrupt (the element still gets a defined value).
template <class Q, class S>
EBAC_KERNEL void reconstruct_kernel(const std::uint32_t* f, std::uint64_t n, Q q, S* out, int* status) {
  bool bad = false;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto code = static_cast<std::int32_t>(f[i]);
    if constexpr (is_lossless_quantizer<Q>) bad |= !code_valid<S>(q, code);
    out[i] = reconstruct_at<S>(q, code, i);
  }
  if (bad) detail::set_status(status, device_corrupt_code);
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
