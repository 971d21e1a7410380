// cuda_codec.cu - the CUDA backend of the extension: ebac::cuda's host layer
// on PyTorch's current stream, with memory from the allocator the torch
// translation unit passes in (PyTorch's caching allocator). Includes no torch
// header (see codec_api.hpp). Built only when EBAC_TORCH_WITH_CUDA is set.
//
// Every dtype the host backend takes (floats under the bound, integers and
// bool losslessly, max-pool indices with their pooling geometry): the
// stages are chosen on the device as the host chooses them, so a CUDA blob
// is the host's stream without its checksum.
//
// Synchronization per tensor: compression reads the stream's size back once
// (Huffman codebooks are built on the device); decompression reads
// the header with its stage parameters, a Huffman codebook and the
// decoder's status. Keeping the
// worst-case buffer instead would avoid the size read-back but hold up to the
// raw size until the next synchronization, which defeats the purpose.
#include "codec_api.hpp"
#include "ebac_side.hpp"

#include <ebac/cuda/codec.cuh>
#include <ebac/ebac.hpp>

#include <string>
#include <type_traits>

namespace ebac_torch {
namespace {

ebac::cuda::allocator adapt(const device_allocator& a) {
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

ebac::cuda::kernel_path path_of(cuda_kernels k) {
  switch (k) {
    case cuda_kernels::fused: return ebac::cuda::kernel_path::fused;
    case cuda_kernels::single_pass: return ebac::cuda::kernel_path::single_pass;
    case cuda_kernels::staged: break;
  }
  return ebac::cuda::kernel_path::staged;
}

void check(cudaError_t e, const char* what) { ebac::cuda::detail::check(e, what); }

/// The host layer synchronizes (size, header and status read-backs), which
/// would invalidate a CUDA graph being captured on `s`: say so instead.
void refuse_capture(cudaStream_t s, const char* what) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(s, &st), "querying the stream's capture status");
  if (st != cudaStreamCaptureStatusNone)
    throw ebac::error(ebac::status::invalid_argument,
                      std::string("ebac_torch: ") + what +
                          " cannot run while the current stream is capturing a CUDA graph (it reads sizes and status back); "
                          "keep compressed_activations outside torch.cuda.graph / cudagraph-compiled regions");
}

}  // namespace

void cuda_compress(const compress_request& r, void* stream, const device_allocator& a, const blob_sink& sink) {
  const ebac::pipeline_spec spec = parse_or_throw(r.pipeline);
  ebac::extents shape;
  shape.rank = r.rank;
  for (int i = 0; i < r.rank && i < ebac::max_rank; ++i) shape.dims[i] = r.dims[i];
  ebac::compress_options opt;
  opt.bound = {r.error_bound, r.relative ? ebac::bound_mode::relative : ebac::bound_mode::absolute};
  opt.checksum = false;  // device streams carry none
  opt.pooling = pooling_of(r);  // max-pool indices: offsets in their windows (as host_codec.cpp)
  const auto s = static_cast<cudaStream_t>(stream);
  refuse_capture(s, "compression on the GPU");
  const ebac::cuda::allocator alloc = adapt(a);
  ebac::visit_dtype(to_dtype(r.type), [&]<class T>(std::type_identity<T>) {
    ebac::with_pipeline(spec, shape, [&](auto p) {
      const ebac::cuda::device_stream ds = ebac::cuda::compress(static_cast<const T*>(r.data), shape, p, opt, s, alloc, true,
                                                                         path_of(r.kernels));
      void* dst = sink.output(ds.bytes, sink.context);
      check(cudaMemcpyAsync(dst, ds.data(), ds.bytes, cudaMemcpyDeviceToDevice, s), "copying the compressed stream");
      // ds's worst-case buffer (cuda::output_capacity) goes back to the allocator, ordered after the copy.
    });
  });
}

void cuda_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, void* stream,
                     const device_allocator& a, cuda_kernels kernels) {
  refuse_capture(static_cast<cudaStream_t>(stream), "decompression on the GPU");
  const ebac::cuda::allocator alloc = adapt(a);
  ebac::visit_dtype(to_dtype(type), [&]<class T>(std::type_identity<T>) {
    ebac::cuda::decompress<T>(data, size, static_cast<T*>(out), count, static_cast<cudaStream_t>(stream), alloc, path_of(kernels));
  });
}

}  // namespace ebac_torch
