// ebac/quantizer/chosen_stages.hpp - a tensor's stages, decided where the data is.
//
// host::detail::compress_to decides per tensor which quantizer codes it
// (quantizer/stage_choice.hpp: palette indices, the pipeline's float
// quantizer with its bound and top level, exact integers, max-pool
// offsets). The CUDA backend must decide the same on the device, from a
// palette and a value range it found there, without a host round trip: one
// thread calls these functions (cuda/kernels/levels.cuh) and writes the
// result to temp memory, where every later kernel reads it. The steps are
// the host's, in the host's order, with the host's functions;
// tests/host/test_device_levels.cpp checks the decision and the header it
// gives against the host's streams.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/quantizer/stage_choice.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// The two stage sets a tensor can get: its palette's (level quantizer, no
/// prediction) or its main one (MainQ under the pipeline's predictor, or
/// for max-pool indices pool_window_quantizer without prediction; which one
/// is known before the data is read).
template <class MainQ>
struct chosen_stages {
  std::uint32_t levels = 0;     ///< 1: coded as palette indices (lq); 0: by q
  /// 1: the bound is not finite on this tensor (device_bad_bound). Never for
  /// a bound compress_argument_error accepts (host/codec.hpp says why).
  std::uint32_t bad_bound = 0;
  double eb_abs = 0;            ///< the header's absolute bound (0 for lossless coding)
  float top = 0;                ///< the header's top level (float quantizers of 16-bit tensors)
  level_quantizer lq;
  MainQ q;
};

/// A floating-point tensor's stages: `scanned` is its finite value range (a
/// pass over the data; only read for a relative bound or a 16-bit dtype,
/// and replaced by the palette's range when there is a palette, as on the
/// host), `palette` its levels (count 0: none or level coding off).
template <floating_element T, class Q>
EBAC_HOST_DEVICE chosen_stages<Q> choose_float_stages(const error_bound& bound, const value_range& scanned,
                                                      const level_palette& palette) noexcept {
  constexpr bool wants_top = sizeof(T) == 2;
  value_range range;
  if (bound.mode == bound_mode::relative || wants_top) range = palette.count > 0 ? palette_range<T>(palette) : scanned;
  const double eb = quantizer_bound<Q, T>(bound, range);
  chosen_stages<Q> s;
  s.bad_bound = (eb >= 0 && eb - eb == 0) ? 0u : 1u;  // not finite
  s.q = Q::make(eb).with_top(wants_top ? top_level_of(range) : 0.0f);
  s.lq = level_quantizer{palette};
  s.levels = (palette.count > 0 && levels_pay<T>(palette, s.q)) ? 1u : 0u;
  s.eb_abs = s.levels ? 0.0 : eb;
  s.top = s.levels ? 0.0f : s.q.top.value;
  return s;
}

/// An integer or bool tensor's stages: its palette's when it has one, else
/// `main` (exact_quantizer, or pool_window_quantizer for max-pool indices).
template <class MainQ>
EBAC_HOST_DEVICE chosen_stages<MainQ> choose_integer_stages(const level_palette& palette, const MainQ& main) noexcept {
  chosen_stages<MainQ> s;
  s.lq = level_quantizer{palette};
  s.q = main;
  s.levels = palette.count > 0 ? 1u : 0u;
  return s;
}

/// The chunk size the writer cuts a tensor into under the predictor a
/// header names (format/chunking.hpp; the host's compress_to asks
/// stream_chunk_elements of the predictor it codes with), from the
/// pipeline's `requested` size.
[[nodiscard]] EBAC_HOST_DEVICE std::uint32_t chunk_elements_for(const stream_header& h, std::uint32_t requested) noexcept {
  return h.predictor == predictor_id::lorenzo ? stream_chunk_elements(h.lorenzo_params, h.shape, requested)
                                              : stream_chunk_elements(no_prediction{}, h.shape, requested);
}

/// Turns the header of the main stages (predictor, quantizer id, pooling
/// geometry filled in by the writer, chunk_elements the pipeline's
/// requested size) into the header of the chosen ones: the palette's
/// stages, or the main ones with their bound and top level; the chunk size
/// of the chosen predictor and the chunk table's size with it.
template <class MainQ>
EBAC_HOST_DEVICE void apply_stages(stream_header& h, const chosen_stages<MainQ>& s) noexcept {
  if (s.levels) {
    h.predictor = predictor_id::none;
    h.lorenzo_params = lorenzo{};
    h.quantizer = quantizer_id::levels;
    h.palette = s.lq.palette;
    h.eb_abs = 0;
    h.top = 0;
  } else {
    h.eb_abs = s.eb_abs;
    h.top = s.top;
  }
  h.chunk_elements = chunk_elements_for(h, h.chunk_elements);
  std::uint64_t n = 0;
  (void)h.shape.count(n);
  h.section_bytes[section_chunk_table] = 4 * ((n + h.chunk_elements - 1) / h.chunk_elements);
  h.section_bytes[section_params] = h.params_bytes();
}

EBAC_NAMESPACE_END
