// ebac/adapt/controller.hpp - the adaptive error-bound controller.
//
// Every iteration the trainer reports, per compressed layer, the bound it
// used, the model's predicted sigma for that bound (error_model/), the
// weight-gradient RMS and the compression ratio. Every `window` iterations
// the controller turns each layer's window into a new bound with
// bound_update (smoothed, step-limited, clamped) and publishes a report:
// the bound, the achieved relative error against the target, the achieved
// compression ratio, and a warning when something is off (a target that
// cannot be met even at the smallest bound, a window that missed its target,
// no data, a zero gradient). Nothing is silently ignored: an observation
// that is not finite and positive is rejected with status::invalid_argument
// and counted in the report.
//
// Every layer aims at the configuration's tau unless set_target gives it its
// own: a trainer that splits one gradient-error budget between two sources
// (a layer's own input and a BatchNorm input whose error reaches the same
// gradient, ebac_torch.LayerAwareCompression) gives each its share.
//
// Host-only (owns vectors); the per-layer arithmetic is bound_update.hpp.
#pragma once

#include <ebac/adapt/bound_update.hpp>
#include <ebac/config.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace adapt {

struct controller_config {
  bound_update_config update{};
  std::int64_t window = 100;  ///< iterations between bound updates (W)
  double initial_eb = 1e-3;   ///< every layer's bound before the first update
};

/// One layer, one iteration.
struct layer_observation {
  double eb = 0;                 ///< the bound the layer was compressed with
  double predicted_sigma = 0;    ///< the model's sigma at eb (from this iteration's statistics)
  double grad_rms = 0;           ///< RMS of the layer's weight gradient
  double compression_ratio = 0;  ///< bytes in / bytes out (0: not reported)
};

struct layer_report {
  double eb = 0;  ///< bound for the next window
  double previous_eb = 0;
  double target_relative_error = 0;    ///< tau
  double achieved_relative_error = 0;  ///< last window: predicted sigma / gradient RMS
  double compression_ratio = 0;        ///< last window, mean (0 if never reported)
  std::int64_t observations = 0;
  std::int64_t rejected = 0;
  bound_warning warning = bound_warning::none;
};

struct controller_report {
  std::int64_t iteration = 0;  ///< iterations completed when the report was made
  std::vector<layer_report> layers;
  [[nodiscard]] bool any_warning() const noexcept {
    for (const auto& l : layers)
      if (l.warning != bound_warning::none && l.warning != bound_warning::step_limited &&
          l.warning != bound_warning::at_max_bound)
        return true;
    return false;
  }
  /// One line per layer with a warning, for logs.
  [[nodiscard]] std::string warnings_text() const {
    std::string s;
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (layers[i].warning != bound_warning::none)
        s += "layer " + std::to_string(i) + ": " + to_string(layers[i].warning) + "\n";
    return s;
  }
};

class controller {
 public:
  /// Throws ebac::error for an invalid configuration (a controller that
  /// would silently do nothing is worse than one that refuses to start).
  controller(const controller_config& cfg, std::size_t layers)
      : cfg_(cfg), eb_(layers, cfg.initial_eb), tau_(layers, cfg.update.target_relative_error), acc_(layers) {
    if (!cfg.update.valid() || cfg.window < 1 || !(cfg.initial_eb > 0))
      ::ebac::detail::fail(
          status::invalid_argument,
          "controller: need tau > 0, 0 < smoothing <= 1, max_step > 1, 0 < eb_min <= eb_max, window >= 1, initial_eb > 0");
    for (double& e : eb_) e = clamp(e);
    report_.layers.resize(layers);
    for (std::size_t i = 0; i < layers; ++i) {
      report_.layers[i].eb = eb_[i];
      report_.layers[i].target_relative_error = cfg.update.target_relative_error;
    }
  }

  [[nodiscard]] std::size_t layers() const noexcept { return eb_.size(); }
  /// The bound to compress layer i with now.
  [[nodiscard]] double bound(std::size_t i) const noexcept { return i < eb_.size() ? eb_[i] : 0.0; }
  /// The relative gradient error layer i aims for (tau unless set_target changed it).
  [[nodiscard]] double target(std::size_t i) const noexcept { return i < tau_.size() ? tau_[i] : 0.0; }
  /// Gives layer i its own target (from the next update on); invalid_argument
  /// for an unknown layer or a target that is not finite and positive.
  status set_target(std::size_t i, double target_relative_error) {
    if (i >= tau_.size() || !(target_relative_error > 0) || !std::isfinite(target_relative_error))
      return status::invalid_argument;
    tau_[i] = target_relative_error;
    report_.layers[i].target_relative_error = target_relative_error;
    return status::ok;
  }
  [[nodiscard]] const controller_report& last_report() const noexcept { return report_; }
  [[nodiscard]] std::int64_t iteration() const noexcept { return iteration_; }

  /// Records one observation; invalid_argument (and a count in the next
  /// report) for an unknown layer or a non-finite / non-positive value.
  status observe(std::size_t layer, const layer_observation& o) {
    if (layer >= eb_.size()) return status::invalid_argument;
    accum& a = acc_[layer];
    const bool ok = o.eb > 0 && std::isfinite(o.eb) && o.predicted_sigma >= 0 && std::isfinite(o.predicted_sigma) &&
                    o.grad_rms >= 0 && std::isfinite(o.grad_rms) && o.compression_ratio >= 0 &&
                    std::isfinite(o.compression_ratio);
    if (!ok) {
      ++a.rejected;
      return status::invalid_argument;
    }
    ++a.n;
    if (o.predicted_sigma > 0) {
      a.log_sens += std::log(o.predicted_sigma / o.eb);
      ++a.n_sens;
    }
    a.grad2 += o.grad_rms * o.grad_rms;
    if (o.grad_rms > 0) {
      const double rel = o.predicted_sigma / o.grad_rms;
      a.rel2 += rel * rel;
      ++a.n_rel;
    }
    if (o.compression_ratio > 0) {
      a.ratio += o.compression_ratio;
      ++a.n_ratio;
    }
    return status::ok;
  }

  /// Ends an iteration; every `window` iterations updates all bounds and
  /// returns true (the new report is last_report()).
  bool end_iteration() {
    ++iteration_;
    if (iteration_ % cfg_.window != 0) return false;
    report_.iteration = iteration_;
    for (std::size_t i = 0; i < eb_.size(); ++i) {
      bound_update upd{cfg_.update};
      upd.config.target_relative_error = tau_[i];
      const accum& a = acc_[i];
      window_summary w;
      w.samples = a.n_sens;
      w.sensitivity = a.n_sens ? std::exp(a.log_sens / static_cast<double>(a.n_sens)) : 0.0;
      w.grad_rms = a.n ? std::sqrt(a.grad2 / static_cast<double>(a.n)) : 0.0;
      w.achieved = a.n_rel ? std::sqrt(a.rel2 / static_cast<double>(a.n_rel)) : 0.0;
      const bound_update_result r = upd(eb_[i], w);
      layer_report& lr = report_.layers[i];
      lr.previous_eb = eb_[i];
      lr.eb = r.eb;
      lr.target_relative_error = tau_[i];
      lr.achieved_relative_error = w.achieved;
      lr.compression_ratio = a.n_ratio ? a.ratio / static_cast<double>(a.n_ratio) : 0.0;
      lr.observations = a.n;
      lr.rejected = a.rejected;
      lr.warning = r.warning;
      eb_[i] = r.eb;
      acc_[i] = accum{};
    }
    return true;
  }

 private:
  struct accum {
    std::int64_t n = 0, n_sens = 0, n_rel = 0, n_ratio = 0, rejected = 0;
    double log_sens = 0, grad2 = 0, rel2 = 0, ratio = 0;
  };
  [[nodiscard]] double clamp(double e) const noexcept {
    return e < cfg_.update.eb_min ? cfg_.update.eb_min : (e > cfg_.update.eb_max ? cfg_.update.eb_max : e);
  }

  controller_config cfg_;
  std::vector<double> eb_;
  std::vector<double> tau_;  ///< per-layer target relative error
  std::vector<accum> acc_;
  controller_report report_;
  std::int64_t iteration_ = 0;
};

}  // namespace adapt
EBAC_NAMESPACE_END
