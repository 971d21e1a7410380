// ebac/host/codec.hpp - the host (CPU) reference backend, all of it.
//
// compress() and decompress() run the same policy functors the CUDA backend
// runs; only the loops and memory movement live here. Work is split into
// fixed chunks of the stream (never into per-thread pieces), so the serial
// and the OpenMP paths write identical bytes.
//
// Flow: [level palette] -> [value range] -> quantize every element
// (outliers recorded, their code set to 0) -> predictor passes on the
// integer field -> zigzag -> [histogram -> codebook] -> encode each chunk ->
// assemble the stream, or store the raw elements when that is smaller.
// Which quantizer codes a tensor is decided per tensor (choose_stages):
// a tensor of at most max_levels distinct values becomes palette indices,
// an integer tensor its own values (or, with a pooling geometry, offsets in
// its pooling windows), a floating-point tensor the pipeline's quantizer.
// When the predictor never looks outside a chunk (no prediction, flat 1-D
// Lorenzo whose tile divides the chunk) the steps run fused per chunk on a
// cache-resident scratch buffer; otherwise on a whole-tensor integer field.
//
// This header gathers the backend's parts, one job each:
//   host/compress.hpp       host::compress: the stage choice per tensor
//   host/encode_stream.hpp  one tensor coded with given stages into a stream
//   host/encode_chunks.hpp  per-chunk quantize / zigzag / encode, range and palette scans
//   host/inspect.hpp        host::inspect: a stream's header, validated
//   host/decompress.hpp     host::decompress
//   host/decompress_stream.hpp  host::decompress_stream: from a reader, window by window
//   host/decode_chunks.hpp  per-chunk decode / unzigzag / reconstruct
//   host/chunk_passes.hpp   what both share: chunk lengths, predictor passes
#pragma once

#include <ebac/host/compress.hpp>
#include <ebac/host/decompress.hpp>
#include <ebac/host/decompress_stream.hpp>
#include <ebac/host/inspect.hpp>

// A program that compiles the codec once (host/codec_instances.hpp) sees its
// instantiations declared here, so no unit instantiates them again.
#ifdef EBAC_HOST_CODEC_PREBUILT
#include <ebac/host/codec_instances.hpp>
#endif
