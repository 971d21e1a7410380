// ebac_side.hpp - what the translation units that include ebac
// (host_codec.cpp, cuda_codec.cu) share: codec_api's element code to ebac's
// dtype (which ebac::visit_dtype turns into a type), and pipeline names to
// specs. The torch translation unit never includes it.
#pragma once

#include "codec_api.hpp"

#include <ebac/dtype.hpp>
#include <ebac/dtype_dispatch.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/status.hpp>

#include <string>

static_assert(ebac_torch::max_header_bytes == ebac::max_stream_prefix_bytes, "codec_api.hpp's max_header_bytes is stale");

namespace ebac_torch {

static_assert(static_cast<int>(elem::f32) == static_cast<int>(ebac::dtype::f32) &&
                  static_cast<int>(elem::bf16) == static_cast<int>(ebac::dtype::bf16) &&
                  static_cast<int>(elem::b8) == static_cast<int>(ebac::dtype::b8) &&
                  static_cast<int>(elem::i64) == static_cast<int>(ebac::dtype::i64),
              "codec_api's element codes are ebac's dtype ids");

/// ebac's dtype of an element code. A code that is no dtype id becomes
/// id 0, which ebac::visit_dtype refuses (a plain cast to the 8-bit dtype
/// would wrap 257 to f32).
inline ebac::dtype to_dtype(elem t) noexcept {
  const int code = static_cast<int>(t);
  return static_cast<ebac::dtype>(code >= ebac::dtype_id_min && code <= ebac::dtype_id_max ? code : 0);
}

/// The pooling geometry of a request (dims 0 when it has none).
inline ebac::pool_geometry pooling_of(const compress_request& r) {
  ebac::pool_geometry g;
  g.dims = static_cast<std::uint32_t>(r.pool_dims);
  for (int j = 0; j < r.pool_dims && j < 3; ++j) {
    auto u = [](std::int64_t v) {
      return v < 0 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(v);
    };  // negative: refused by validate
    g.input[j] = u(r.pool_input[j]);
    g.kernel[j] = u(r.pool_kernel[j]);
    g.stride[j] = u(r.pool_stride[j]);
    g.padding[j] = u(r.pool_padding[j]);
    g.dilation[j] = u(r.pool_dilation[j]);
  }
  return g;
}

/// The spec of a named pipeline or a triple; ebac::error naming the choices otherwise.
inline ebac::pipeline_spec parse_or_throw(const std::string& name) {
  ebac::pipeline_spec spec;
  if (!ebac::parse_pipeline(name, spec))
    throw ebac::error(
        ebac::status::invalid_argument,
        "unknown pipeline '" + name + "' (fast, ratio, ratio-flat, rle, plain, max or PREDICTOR:QUANTIZER:ENCODER)");
  return spec;
}

}  // namespace ebac_torch
