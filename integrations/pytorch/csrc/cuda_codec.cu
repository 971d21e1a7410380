// cuda_codec.cu - the CUDA backend of the extension: the element type of a
// request chosen here, the work done per type in cuda_codec_typed.cuh (whose
// instantiations live in units of their own, one per element type: see
// cuda_codec_typed.hpp). Includes no torch header (see codec_api.hpp).
// Built only when EBAC_TORCH_WITH_CUDA is set.
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
#include "cuda_codec_typed.hpp"
#include "ebac_side.hpp"

#include <type_traits>

namespace ebac_torch {

void cuda_compress(const compress_request& r, void* stream, const device_allocator& a, const blob_sink& sink) {
  const ebac::pipeline_spec spec = parse_or_throw(r.pipeline);
  ebac::visit_dtype(to_dtype(r.type), [&]<class T>(std::type_identity<T>) { cuda_compress_typed<T>(r, spec, stream, a, sink); });
}

void cuda_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, void* stream,
                     const device_allocator& a, cuda_kernels kernels) {
  ebac::visit_dtype(to_dtype(type), [&]<class T>(std::type_identity<T>) {
    cuda_decompress_typed<T>(data, size, out, count, stream, a, kernels);
  });
}

}  // namespace ebac_torch
