// ebac_side.hpp - what the translation units that include ebac
// (host_codec.cpp, cuda_codec.cu) share: codec_api's element code to ebac's
// element type, and pipeline names to specs. The torch translation unit
// never includes it.
#pragma once

#include "codec_api.hpp"

#include <ebac/dtype.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/status.hpp>

#include <string>

namespace ebac_torch {

/// Calls f(T{}) with T = float, ebac::float16 or ebac::bfloat16.
template <class F>
decltype(auto) with_element(elem t, F&& f) {
  switch (t) {
    case elem::f16: return f(ebac::float16{});
    case elem::bf16: return f(ebac::bfloat16{});
    case elem::f32: break;
  }
  return f(float{});
}

/// The spec of a named pipeline or a triple; ebac::error naming the choices otherwise.
inline ebac::pipeline_spec parse_or_throw(const std::string& name) {
  ebac::pipeline_spec spec;
  if (!ebac::parse_pipeline(name, spec))
    throw ebac::error(ebac::status::invalid_argument,
                      "unknown pipeline '" + name + "' (fast, ratio, ratio-flat, rle, plain or PREDICTOR:QUANTIZER:ENCODER)");
  return spec;
}

}  // namespace ebac_torch
