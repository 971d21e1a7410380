// ebac/cuda/kernels/quantize.cuh - value range, quantizer set-up, quantize, reconstruct.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace kernels {

/// keys[0] = min key, keys[1] = max key over finite values (keys start at
/// INT_MAX / INT_MIN). Min and max are order-independent: deterministic.
template <class T>
EBAC_KERNEL void range_kernel(const T* in, std::uint64_t n, std::int32_t* keys) {
  std::int32_t lo = 0x7fffffff, hi = -0x7fffffff - 1;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
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

/// Builds the quantizer from the bound (and the range, relative mode) on the
/// device, so no value travels back to the host.
template <class Q, class T>
EBAC_KERNEL void make_quantizer_kernel(error_bound bound, const std::int32_t* keys, Q* q, double* eb_abs, int* status) {
  const double eb = quantizer_bound<Q, T>(bound, value_range::from_keys(keys[0], keys[1]));  // the host's rule
  if (!(eb >= 0) || !(eb - eb == 0)) detail::set_status(status, device_bad_bound);
  *eb_abs = eb;
  *q = Q::make(eb);
}

/// codes[i] = quantizer code (0 for outliers), flags[i] = 1 for outliers.
template <class Q, class T>
EBAC_KERNEL void quantize_kernel(const T* in, std::uint64_t n, const Q* qp, std::uint32_t* codes, std::uint8_t* flags) {
  const Q q = *qp;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x) {
    const quantized r = quantize_element(q, in[i]);
    codes[i] = static_cast<std::uint32_t>(r.code);
    flags[i] = r.outlier;
  }
}

/// out[i] = reconstruction of code q[i]; writes every element.
template <class Q, class T>
EBAC_KERNEL void reconstruct_kernel(const std::uint32_t* f, std::uint64_t n, Q q, T* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n; i += std::uint64_t{gridDim.x} * blockDim.x)
    out[i] = reconstruct_element<T>(q, static_cast<std::int32_t>(f[i]));
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
