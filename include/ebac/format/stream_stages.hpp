// ebac/format/stream_stages.hpp - the stage objects a stream's header names.
//
// A validated header (format/stream_header.hpp: read_stream_header) says
// which predictor, quantizer and encoder coded the stream and with which
// parameters; this turns those ids back into the policy objects, once, for
// every backend: the host decoder (host/decompress.hpp) and the CUDA one
// (cuda/device_codec.cuh) run whatever it hands them. Writers record their
// stages with set_stream_stages.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/encoder/encoder_id.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/status.hpp>

#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace detail {

/// Writes the ids of the stages a writer codes with (and the predictor's
/// parameters) into its header: the inverse of with_stream_stages.
/// Quantizer parameters (palette, pooling geometry, bound, top level) are
/// the caller's: they depend on the tensor, not only on the stage.
template <class E, class P, class Q>
EBAC_HOST_DEVICE void set_stream_stages(stream_header& h, const P& pred, const Q&) noexcept {
  h.predictor = P::id;
  if constexpr (std::is_same_v<P, lorenzo>) h.lorenzo_params = pred;
  else h.lorenzo_params = lorenzo{};
  h.quantizer = Q::id;
  h.encoder = E::id;
}

/// Calls f(predictor, quantizer, std::type_identity<encoder>) for the stages
/// the validated header `h` of a (not stored) stream of T names; throws
/// status::corrupt_stream for ids that do not fit T (a caller's own header).
template <element T, class F>
void with_stream_stages(const stream_header& h, F&& f) {
  auto with_encoder = [&](const auto& pred, const auto& q) {
    if (!encoder_registered(static_cast<std::uint8_t>(h.encoder))) fail(status::corrupt_stream, "unknown encoder id");
    visit_encoder(h.encoder, [&](auto encoder_tag) { f(pred, q, encoder_tag); });
  };
  auto with_quantizer = [&](const auto& pred) {
    if (h.quantizer == quantizer_id::levels) return with_encoder(pred, level_quantizer{h.palette});
    if constexpr (floating_element<T>) {
      if (h.quantizer == quantizer_id::linear) return with_encoder(pred, linear_quantizer::make(h.eb_abs).with_top(h.top));
      if (h.quantizer == quantizer_id::sign_preserving)
        return with_encoder(pred, sign_preserving_quantizer::make(h.eb_abs).with_top(h.top));
    } else {
      if (h.quantizer == quantizer_id::exact) return with_encoder(pred, exact_quantizer{});
      if (h.quantizer == quantizer_id::pool_window) return with_encoder(pred, pool_window_quantizer::make(h.pool, h.shape));
    }
    fail(status::corrupt_stream, "quantizer does not fit the dtype");
  };
  if (h.predictor == predictor_id::none) with_quantizer(no_prediction{});
  else with_quantizer(h.lorenzo_params);
}

}  // namespace detail
EBAC_NAMESPACE_END
