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
// tests/quantizer/chosen_stages.cpp checks the decision and the header it
// gives against the host's streams. What the choice writes into a stream
// header (apply_stages) is the format's: format/apply_stages.hpp.
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
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
  std::uint32_t levels = 0;  ///< 1: coded as palette indices (lq); 0: by q
  /// 1: the bound is not finite on this tensor (device_bad_bound). Never for
  /// a bound compress_argument_error accepts (host/compress.hpp says why).
  std::uint32_t bad_bound = 0;
  double eb_abs = 0;  ///< the header's absolute bound (0 for lossless coding)
  float top = 0;      ///< the header's top level (float quantizers of 16-bit tensors)
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

EBAC_NAMESPACE_END
