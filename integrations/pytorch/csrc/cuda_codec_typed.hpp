// cuda_codec_typed.hpp - the CUDA backend for one element type, declared.
//
// cuda_codec.cu turns a request's element code into a type and calls these;
// their definitions (cuda_codec_typed.cuh) are instantiated one element type
// per unit, in units _ext.py writes (cuda_codec_units: one per entry of
// ebac's element list), so nvcc compiles them side by side: as one unit
// (9 element types x 16 pipelines) it took 147 s of CPU (nvcc 13, sm_90,
// 2-core dev VM), each unit now 37-40 s, which is what the build waits for
// on a machine with a core per unit (tools/gpu-check.sh's torch-build).
// Includes no torch header and no CUDA header.
#pragma once

#include "codec_api.hpp"

#include <ebac/pipeline.hpp>

#include <cstddef>
#include <cstdint>

namespace ebac_torch {

/// cuda_compress for elements of type T (the spec already parsed).
template <class T>
void cuda_compress_typed(const compress_request& r, const ebac::pipeline_spec& spec, void* stream, const device_allocator& a,
                         const blob_sink& sink);

/// cuda_decompress for elements of type T.
template <class T>
void cuda_decompress_typed(const std::byte* data, std::size_t size, void* out, std::uint64_t count, void* stream,
                           const device_allocator& a, cuda_kernels kernels);

}  // namespace ebac_torch
