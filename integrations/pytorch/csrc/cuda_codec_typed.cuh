// cuda_codec_typed.cuh - the CUDA backend for one element type, defined:
// ebac::cuda's host layer on PyTorch's current stream, with memory from the
// allocator the torch translation unit passes in (PyTorch's caching
// allocator). A unit that includes this instantiates one element type with
// EBAC_TORCH_CUDA_CODEC_INSTANTIATE(T) (_ext.py's cuda_codec_units write
// them; see cuda_codec_typed.hpp). Includes no torch header.
#pragma once

#include "cuda_codec_typed.hpp"
#include "ebac_side.hpp"

#include <ebac/cuda/codec.cuh>
#include <ebac/ebac.hpp>

#include <string>

namespace ebac_torch {
namespace cuda_detail {

inline ebac::cuda::allocator adapt(const device_allocator& a) {
  ebac::cuda::allocator out;
  out.context = const_cast<device_allocator*>(&a);
  out.allocate = [](std::size_t bytes, cudaStream_t s, void* ctx) -> void* {
    const auto* d = static_cast<const device_allocator*>(ctx);
    return d->allocate(bytes, s, d->context);
  };
  out.deallocate = [](void* p, cudaStream_t s, void* ctx) {
    const auto* d = static_cast<const device_allocator*>(ctx);
    d->deallocate(p, s, d->context);
  };
  return out;
}

inline ebac::cuda::kernel_path path_of(cuda_kernels k) {
  switch (k) {
    case cuda_kernels::fused: return ebac::cuda::kernel_path::fused;
    case cuda_kernels::single_pass: return ebac::cuda::kernel_path::single_pass;
    case cuda_kernels::staged: break;
  }
  return ebac::cuda::kernel_path::staged;
}

inline void check(cudaError_t e, const char* what) { ebac::cuda::detail::check(e, what); }

/// The host layer synchronizes (size, header and status read-backs), which
/// would invalidate a CUDA graph being captured on `s`: say so instead.
inline void refuse_capture(cudaStream_t s, const char* what) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(s, &st), "querying the stream's capture status");
  if (st != cudaStreamCaptureStatusNone)
    throw ebac::error(ebac::status::invalid_argument,
                      std::string("ebac_torch: ") + what +
                          " cannot run while the current stream is capturing a CUDA graph (it reads sizes and status back); "
                          "keep compressed_activations outside torch.cuda.graph / cudagraph-compiled regions");
}

}  // namespace cuda_detail

template <class T>
void cuda_compress_typed(const compress_request& r, const ebac::pipeline_spec& spec, void* stream, const device_allocator& a,
                         const blob_sink& sink) {
  ebac::extents shape;
  shape.rank = r.rank;
  for (int i = 0; i < r.rank && i < ebac::max_rank; ++i) shape.dims[i] = r.dims[i];
  ebac::compress_options opt;
  opt.bound = {r.error_bound, r.relative ? ebac::bound_mode::relative : ebac::bound_mode::absolute};
  opt.checksum = false;         // device streams carry none
  opt.pooling = pooling_of(r);  // max-pool indices: offsets in their windows (as host_codec.cpp)
  const auto s = static_cast<cudaStream_t>(stream);
  cuda_detail::refuse_capture(s, "compression on the GPU");
  const ebac::cuda::allocator alloc = cuda_detail::adapt(a);
  ebac::with_pipeline(spec, shape, [&](auto p) {
    const ebac::cuda::device_stream ds =
        ebac::cuda::compress(static_cast<const T*>(r.data), shape, p, opt, s, alloc, true, cuda_detail::path_of(r.kernels));
    void* dst = sink.output(ds.bytes, sink.context);
    cuda_detail::check(cudaMemcpyAsync(dst, ds.data(), ds.bytes, cudaMemcpyDeviceToDevice, s), "copying the compressed stream");
    // ds's worst-case buffer (cuda::output_capacity) goes back to the allocator, ordered after the copy.
  });
}

template <class T>
void cuda_decompress_typed(const std::byte* data, std::size_t size, void* out, std::uint64_t count, void* stream,
                           const device_allocator& a, cuda_kernels kernels) {
  const auto s = static_cast<cudaStream_t>(stream);
  cuda_detail::refuse_capture(s, "decompression on the GPU");
  ebac::cuda::decompress<T>(data, size, static_cast<T*>(out), count, s, cuda_detail::adapt(a), cuda_detail::path_of(kernels));
}

}  // namespace ebac_torch

/// Both directions for element type T, in the unit that expands it.
#define EBAC_TORCH_CUDA_CODEC_INSTANTIATE(T)                                                                               \
  template void ebac_torch::cuda_compress_typed<T>(const ebac_torch::compress_request&, const ebac::pipeline_spec&, void*, \
                                                   const ebac_torch::device_allocator&, const ebac_torch::blob_sink&);     \
  template void ebac_torch::cuda_decompress_typed<T>(const std::byte*, std::size_t, void*, std::uint64_t, void*,           \
                                                     const ebac_torch::device_allocator&, ebac_torch::cuda_kernels);
