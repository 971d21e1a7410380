// ebac/adapt/bound_update.hpp - one layer's bound update from a window of
// statistics: the arithmetic of the adaptive controller, as a constexpr
// functor (host or device; no allocation, no state of its own).
//
// Why this rule: the forward map is close to proportional in the bound
// (sigma ~= k eb, error_model/inverse.hpp), so the bound that meets a target
// sigma* is sigma* / k, with k = predicted sigma / eb measured over the last
// window. Two things keep it from chasing noise: the step is smoothed in log
// space (a geometric moving average: a bound is a scale, and halving and
// doubling should be symmetric), and it is limited to a factor per update so
// one odd window (a loss spike, a learning-rate change) cannot swing the
// bound by orders of magnitude. The target itself is relative to the
// gradient RMS, so a gradient that shrinks during training pulls the bound
// down with it.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/constexpr_math.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace adapt {

/// The relative weight-gradient error the controller aims for by default:
/// sigma = 0.1 x gradient RMS. At batch 16 the minibatch (SGD) noise of the
/// corpus layers is 0.8 to 3.1 x the gradient RMS (studies/grad_error_study.py
/// --sgd-noise, trained VGG and ResNet), so this adds at most (0.1 / 0.79)^2 =
/// 1.6% to the gradient variance training already has - about what dropping
/// one sample in 64 from the batch does. docs/error-model.md has the table. For a larger batch B the
/// SGD noise shrinks as 1/sqrt(B); batch_planner.hpp scales tau to match.
inline constexpr double default_target_relative_error = 0.1;

enum class bound_warning : std::uint8_t {
  none = 0,
  no_data,             ///< no valid observation in the window: bound kept
  no_gradient,         ///< the gradient RMS was 0: no relative target exists; bound kept
  target_unreachable,  ///< even eb_min is predicted to exceed the target: store this layer losslessly
  at_max_bound,        ///< the target allows more than eb_max: bound capped (not an error)
  step_limited,        ///< the bound moved by the largest step allowed, not all the way
  target_missed,       ///< the last window's predicted error exceeded the target by more than the tolerance
};

constexpr const char* to_string(bound_warning w) noexcept {
  switch (w) {
    case bound_warning::none: return "none";
    case bound_warning::no_data: return "no valid observation in the window; bound kept";
    case bound_warning::no_gradient: return "gradient RMS is zero; bound kept";
    case bound_warning::target_unreachable:
      return "target cannot be met even at the smallest allowed bound; store this layer losslessly";
    case bound_warning::at_max_bound: return "target allows a bound above eb_max; capped";
    case bound_warning::step_limited: return "bound change limited to max_step this update";
    case bound_warning::target_missed: return "the last window's predicted error exceeded the target";
  }
  return "unknown";
}

struct bound_update_config {
  double target_relative_error = default_target_relative_error;  ///< tau
  double smoothing = 0.5;   ///< share of the new log-bound taken per update (1: jump straight there)
  double max_step = 4.0;    ///< the bound changes by at most this factor per update
  double eb_min = 1e-7;     ///< smallest bound allowed (same unit as the bounds observed)
  double eb_max = 0.5;      ///< largest bound allowed
  double tolerance = 0.25;  ///< target_missed when achieved > target (1 + tolerance)

  [[nodiscard]] constexpr bool valid() const noexcept {
    return target_relative_error > 0 && smoothing > 0 && smoothing <= 1 && max_step > 1 && eb_min > 0 && eb_max >= eb_min &&
           tolerance >= 0;
  }
};

/// Summary of one layer over one window (what the controller accumulates).
struct window_summary {
  double sensitivity = 0;    ///< geometric mean of predicted sigma / eb
  double grad_rms = 0;       ///< quadratic mean of the gradient RMS
  double achieved = 0;       ///< quadratic mean of predicted sigma / gradient RMS
  std::int64_t samples = 0;  ///< valid observations
};

struct bound_update_result {
  double eb = 0;                       ///< the new bound
  double wanted_eb = 0;                ///< target sigma / sensitivity, before smoothing and clamps
  double target_sigma = 0;             ///< tau x gradient RMS
  double achieved_relative_error = 0;  ///< the window's predicted sigma / gradient RMS
  bound_warning warning = bound_warning::none;
};

struct bound_update {
  bound_update_config config{};

  [[nodiscard]] EBAC_HOST_DEVICE constexpr bound_update_result operator()(double eb, const window_summary& w) const noexcept {
    bound_update_result r;
    r.eb = eb;
    r.achieved_relative_error = w.achieved;
    if (w.samples <= 0 || !(w.sensitivity > 0)) {
      r.warning = bound_warning::no_data;
      return r;
    }
    if (!(w.grad_rms > 0)) {
      r.warning = bound_warning::no_gradient;
      return r;
    }
    r.target_sigma = config.target_relative_error * w.grad_rms;
    r.wanted_eb = r.target_sigma / w.sensitivity;
    bool limited = false;
    double next = r.wanted_eb;
    if (eb > 0) {  // log-space smoothing, eb (wanted / eb)^smoothing, then the step limit
      const double ratio = r.wanted_eb / eb;
      next = ratio >= 1 ? eb * error_model::constexpr_pow_unit(ratio, config.smoothing)
                        : eb / error_model::constexpr_pow_unit(1 / ratio, config.smoothing);
      if (next > eb * config.max_step) {
        next = eb * config.max_step;
        limited = true;
      }
      if (next < eb / config.max_step) {
        next = eb / config.max_step;
        limited = true;
      }
    }
    if (next < config.eb_min) next = config.eb_min;
    if (next > config.eb_max) next = config.eb_max;
    r.eb = next;
    if (r.wanted_eb < config.eb_min) r.warning = bound_warning::target_unreachable;
    else if (w.achieved > config.target_relative_error * (1 + config.tolerance)) r.warning = bound_warning::target_missed;
    else if (r.wanted_eb > config.eb_max) r.warning = bound_warning::at_max_bound;
    else if (limited) r.warning = bound_warning::step_limited;
    return r;
  }
};

}  // namespace adapt
EBAC_NAMESPACE_END
