// ebac/adapt/batch_planner.hpp - turn freed activation memory into batch size.
//
// The peak memory of a training step at batch B is modelled as
//
//   peak(B) = static + B * (saved + working)
//
// static: what does not grow with the batch (weights, optimizer state,
// gradients, workspace). saved: every saved tensor's bytes per sample
// divided by the compression ratio measured for it (the controller reports
// those), plus whatever is saved uncompressed. working: the transients alive
// beside the saved bytes at the peak, per sample - in backward the
// decompressed input of the running node, grad_output, grad_input and the
// op's temporaries; at the end of forward the last layers' raw outputs. The
// saved bytes alone miss it, and with compression it dominates: a 10x ratio
// leaves saved at a tenth of the raw bytes while the working set stays a few
// layer-sized tensors (docs/pytorch.md "Where ebac's peak is").
//
// working is the larger of two estimates:
//  * a probe step, when there is one (working_from_probe): the peak rise of
//    one step at a small batch, minus its static part and its saved bytes,
//    per sample. It captures whatever the network's backward really holds,
//    recomputation included (a checkpointed block rebuilds its saved tensors
//    raw). A small probe can under-count: blocks under the allocator's mmap
//    threshold (glibc: 128 KiB) are carved from memory the process already
//    holds, so the compressed bytes of a small batch barely raise the RSS
//    (vit12 at batch 32 read 0.84 MB per sample, at 150 0.99);
//  * working_set_tensors x the largest saved tensor's raw bytes per sample
//    x (1 - saved / raw): 3.5 by default, from the peaks measured on a
//    ResNet-20 and a 12-block ViT (studies/batch_budget.py). The last factor
//    is what backward has already released by the time it runs: saved
//    tensors of about the working set's size, worth their full size when
//    stored raw (plain training, whose peak rise is its saved bytes) and a
//    1/ratio share of it when compressed. Alone it does not cover
//    recomputation.
// Set working_set_tensors to 0 to take a probe's figure as it is.
// The planner keeps a safety margin of the budget free - ratios move during
// training, and the allocator fragments - and returns the largest batch that
// fits. When a target global batch does not fit, it falls back to gradient
// accumulation: the fewest micro-steps whose micro-batch fits.
//
// Learning rate: the global batch sets it, by linear scaling (Goyal et al.,
// 2017: lr ~ B, with a warm-up) or square-root scaling (lr ~ sqrt(B), the
// rule that keeps the gradient-noise scale for adaptive optimizers). The
// warm-up is given in samples so that it covers the same data whatever the
// batch. The target gradient error scales too: SGD noise shrinks as
// 1/sqrt(B), so keeping compression error a fixed share of it means
// tau(B) = tau_ref sqrt(B_ref / B).
//
// plan_batch() is constexpr arithmetic over a span of layers; describe()
// (host) renders the numbers into the error or warning message.
#pragma once

#include <ebac/adapt/bound_update.hpp>
#include <ebac/config.hpp>
#include <ebac/error_model/constexpr_math.hpp>
#include <ebac/status.hpp>

#include <cstdint>
#include <span>
#include <string>

EBAC_NAMESPACE_BEGIN
namespace adapt {

struct layer_memory {
  double bytes_per_sample = 0;   ///< the saved tensor's uncompressed bytes for one sample
  double compression_ratio = 1;  ///< measured bytes in / bytes out (1: stored raw)
};

enum class lr_scaling : std::uint8_t { linear, square_root };

struct planner_config {
  double budget_bytes = 0;                   ///< device memory the trainer may use
  double static_bytes = 0;                   ///< weights + optimizer state + workspace
  double uncompressed_bytes_per_sample = 0;  ///< inputs, labels, masks and other tensors kept raw
  double safety_margin = 0.1;                ///< share of the budget kept free
  std::int64_t target_global_batch = 0;      ///< 0: the largest batch that fits
  std::int64_t max_batch = std::int64_t{1} << 24;
  std::int64_t reference_batch = 16;  ///< the batch the reference lr / tau were tuned at
  double reference_lr = 0.1;
  lr_scaling scaling = lr_scaling::linear;
  double warmup_samples = 0;  ///< linear warm-up length in samples (0: none)
  double reference_tau = default_target_relative_error;
  /// Measured transient bytes per sample at the peak (working_from_probe); negative: not measured.
  double working_bytes_per_sample = -1;
  /// The working set's floor (its value without a measurement), in units of the largest saved tensor's
  /// raw bytes per sample, times 1 - saved / raw.
  double working_set_tensors = 3.5;
  /// The whole cost of a sample, measured as the slope of the line through two probe steps (probe_line);
  /// negative: not measured. When set it replaces saved + working: working is reported as its difference from
  /// the saved bytes, negative when the statistics count more than the step holds (a tensor two ops saved once).
  double measured_bytes_per_sample = -1;
};

/// One training step measured at a small batch: its peak rise over the memory
/// before it, and the part of that rise that does not grow with the batch
/// (e.g. the gradients allocated by backward after zero_grad(set_to_none=True)).
struct probe_step {
  double peak_rise_bytes = 0;
  std::int64_t batch = 0;
  double static_bytes = 0;
};

enum class plan_state : std::uint8_t {
  ok = 0,
  invalid_config,       ///< a size, ratio or margin that is negative, zero or not finite
  static_too_large,     ///< static memory alone exceeds the budget (after the margin)
  batch_one_too_large,  ///< not even one sample fits next to the static memory
  accumulating,         ///< ok, but the target batch needs gradient accumulation
  rounded_up,           ///< ok with accumulation; the global batch is rounded up to micro x steps
};

struct batch_plan {
  plan_state state = plan_state::ok;
  std::int64_t max_micro_batch = 0;     ///< the largest batch that fits
  std::int64_t micro_batch = 0;         ///< batch per forward/backward
  std::int64_t accumulation_steps = 0;  ///< micro-steps per optimizer step
  std::int64_t global_batch = 0;        ///< micro_batch x accumulation_steps
  double bytes_per_sample = 0;          ///< saved + working bytes per sample
  double saved_bytes_per_sample = 0;    ///< saved tensors (compressed ones at their ratio) per sample
  double working_bytes_per_sample = 0;  ///< transients at the peak per sample (measured or derived)
  double usable_bytes = 0;              ///< budget x (1 - margin) - static
  double peak_bytes = 0;                ///< static + micro_batch x bytes_per_sample
  double learning_rate = 0;
  std::int64_t warmup_steps = 0;     ///< optimizer steps of linear warm-up
  double target_relative_error = 0;  ///< tau for the global batch

  [[nodiscard]] constexpr bool ok() const noexcept {
    return state == plan_state::ok || state == plan_state::accumulating || state == plan_state::rounded_up;
  }
};

namespace detail {
constexpr bool finite_nonneg(double v) noexcept { return v >= 0 && v < 1.7976931348623157e308; }

/// Saved bytes per sample (uncompressed + each layer at its ratio), the same
/// uncompressed (raw), and the largest layer's raw bytes per sample; false on
/// a bad layer.
constexpr bool saved_per_sample(const planner_config& c, std::span<const layer_memory> layers, double& saved, double& raw,
                                double& largest) noexcept {
  saved = raw = c.uncompressed_bytes_per_sample;
  largest = 0;
  for (const layer_memory& l : layers) {
    if (!finite_nonneg(l.bytes_per_sample) || !(l.compression_ratio > 0) || !finite_nonneg(l.compression_ratio)) return false;
    saved += l.bytes_per_sample / l.compression_ratio;
    raw += l.bytes_per_sample;
    largest = l.bytes_per_sample > largest ? l.bytes_per_sample : largest;
  }
  return true;
}
}  // namespace detail

/// The working set per sample that a probe step implies: its rise less its
/// static part, per sample, less the saved bytes per sample of `layers` (the
/// probe's own saved tensors and ratios). Negative results (measurement noise
/// on a small probe) clamp to 0; a probe with batch < 1, a rise or static
/// part that is negative or not finite, or a bad layer gives -1.
constexpr double working_from_probe(const probe_step& probe, const planner_config& c,
                                    std::span<const layer_memory> layers) noexcept {
  double saved = 0, raw = 0, largest = 0;
  if (probe.batch < 1 || !detail::finite_nonneg(probe.peak_rise_bytes) || !detail::finite_nonneg(probe.static_bytes) ||
      !detail::finite_nonneg(c.uncompressed_bytes_per_sample) || !detail::saved_per_sample(c, layers, saved, raw, largest))
    return -1;
  const double w = (probe.peak_rise_bytes - probe.static_bytes) / static_cast<double>(probe.batch) - saved;
  return w > 0 ? w : 0;
}

/// Two probe steps at different batches read as the line through their rises
/// (each less its static part): the slope is what one more sample costs, the
/// intercept what does not grow with the batch. A positive intercept joins
/// the static part. A negative one is dropped: a small probe under-counts by a
/// fixed slack (glibc serves blocks under its mmap threshold from memory the
/// process already holds), so the slope alone is the per-sample cost; that is
/// why a line needs no working-set floor. The result is one probe at the
/// larger batch whose rise / batch, less its static part, is the slope: the
/// planner's measured_bytes_per_sample. When the rise falls with the batch (noise), the step
/// with the larger rise per sample stands alone. Batch 0 marks two steps that
/// are not valid or not at different batches.
constexpr probe_step probe_line(const probe_step& a, const probe_step& b) noexcept {
  using detail::finite_nonneg;
  if (a.batch < 1 || b.batch < 1 || a.batch == b.batch || !finite_nonneg(a.peak_rise_bytes) ||
      !finite_nonneg(b.peak_rise_bytes) || !finite_nonneg(a.static_bytes) || !finite_nonneg(b.static_bytes))
    return probe_step{};
  const probe_step& lo = a.batch < b.batch ? a : b;
  const probe_step& hi = a.batch < b.batch ? b : a;
  const double lo_rise = lo.peak_rise_bytes - lo.static_bytes;
  const double hi_rise = hi.peak_rise_bytes - hi.static_bytes;
  const double slope = (hi_rise - lo_rise) / static_cast<double>(hi.batch - lo.batch);
  if (!(slope > 0)) return lo_rise / static_cast<double>(lo.batch) > hi_rise / static_cast<double>(hi.batch) ? lo : hi;
  const double intercept = hi_rise - slope * static_cast<double>(hi.batch);
  probe_step line;
  line.batch = hi.batch;
  line.static_bytes = hi.static_bytes + (intercept > 0 ? intercept : 0);
  line.peak_rise_bytes = line.static_bytes + slope * static_cast<double>(hi.batch);
  return line;
}

constexpr batch_plan plan_batch(const planner_config& c, std::span<const layer_memory> layers) noexcept {
  batch_plan p;
  using detail::finite_nonneg;
  if (!(c.budget_bytes > 0) || !finite_nonneg(c.budget_bytes) || !finite_nonneg(c.static_bytes) ||
      !finite_nonneg(c.uncompressed_bytes_per_sample) || !(c.safety_margin >= 0 && c.safety_margin < 1) ||
      c.target_global_batch < 0 || c.max_batch < 1 || c.reference_batch < 1 || !(c.reference_lr > 0) ||
      !finite_nonneg(c.warmup_samples) || !(c.reference_tau > 0) || !(c.working_bytes_per_sample < 1.7976931348623157e308) ||
      !finite_nonneg(c.working_set_tensors) || !(c.measured_bytes_per_sample < 1.7976931348623157e308)) {
    p.state = plan_state::invalid_config;
    return p;
  }
  double saved = 0, raw = 0, largest = 0;
  if (!detail::saved_per_sample(c, layers, saved, raw, largest)) {
    p.state = plan_state::invalid_config;
    return p;
  }
  p.saved_bytes_per_sample = saved;
  const double floor = raw > 0 ? c.working_set_tensors * largest * (1 - saved / raw) : 0;
  p.working_bytes_per_sample = c.working_bytes_per_sample > floor ? c.working_bytes_per_sample : floor;
  if (c.measured_bytes_per_sample >= 0) p.working_bytes_per_sample = c.measured_bytes_per_sample - saved;
  const double per_sample = saved + p.working_bytes_per_sample;
  p.bytes_per_sample = per_sample;
  p.usable_bytes = c.budget_bytes * (1 - c.safety_margin) - c.static_bytes;
  if (!(p.usable_bytes > 0)) {
    p.state = plan_state::static_too_large;
    return p;
  }
  const double fit = per_sample > 0 ? p.usable_bytes / per_sample : static_cast<double>(c.max_batch);
  if (fit < 1) {
    p.state = plan_state::batch_one_too_large;
    return p;
  }
  p.max_micro_batch = fit >= static_cast<double>(c.max_batch) ? c.max_batch : static_cast<std::int64_t>(fit);
  if (c.target_global_batch == 0 || c.target_global_batch <= p.max_micro_batch) {
    p.micro_batch = c.target_global_batch ? c.target_global_batch : p.max_micro_batch;
    p.accumulation_steps = 1;
  } else {
    p.accumulation_steps = (c.target_global_batch + p.max_micro_batch - 1) / p.max_micro_batch;
    p.micro_batch = (c.target_global_batch + p.accumulation_steps - 1) / p.accumulation_steps;
    p.state = p.micro_batch * p.accumulation_steps == c.target_global_batch ? plan_state::accumulating : plan_state::rounded_up;
  }
  p.global_batch = p.micro_batch * p.accumulation_steps;
  p.peak_bytes = c.static_bytes + static_cast<double>(p.micro_batch) * per_sample;
  const double k = static_cast<double>(p.global_batch) / static_cast<double>(c.reference_batch);
  p.learning_rate = c.reference_lr * (c.scaling == lr_scaling::linear ? k : error_model::constexpr_sqrt(k));
  p.warmup_steps = c.warmup_samples > 0 ? static_cast<std::int64_t>((c.warmup_samples + static_cast<double>(p.global_batch) - 1) /
                                                                    static_cast<double>(p.global_batch))
                                        : 0;
  p.target_relative_error = c.reference_tau / error_model::constexpr_sqrt(k);
  return p;
}

/// One line that says what the plan is, or what is wrong and by how much.
inline std::string describe(const planner_config& c, const batch_plan& p) {
  // Whole MiB from 10 MiB up; below, two decimals (per-sample sizes are often a fraction of a MiB).
  auto mb = [](double b) {
    const double m = b / 1048576.0;
    if (m >= 10) return std::to_string(static_cast<long long>(m + 0.5)) + " MiB";
    const long long h = static_cast<long long>(m * 100 + 0.5);
    return std::to_string(h / 100) + "." + (h % 100 < 10 ? "0" : "") + std::to_string(h % 100) + " MiB";
  };
  switch (p.state) {
    case plan_state::invalid_config:
      return "batch planner: invalid configuration (budget must be > 0, sizes and working set finite and >= 0, ratios > 0, "
             "margin in [0, "
             "1), lr > 0)";
    case plan_state::static_too_large:
      return "batch planner: static memory " + mb(c.static_bytes) + " exceeds the budget " + mb(c.budget_bytes) + " minus its " +
             std::to_string(static_cast<int>(c.safety_margin * 100 + 0.5)) + "% safety margin";
    case plan_state::batch_one_too_large:
      return "batch planner: budget too small for batch 1: one sample needs " + mb(p.bytes_per_sample) + " (saved " +
             mb(p.saved_bytes_per_sample) + " + working set " + mb(p.working_bytes_per_sample) + ") but only " +
             mb(p.usable_bytes) + " remain after static memory and the safety margin";
    default: break;
  }
  std::string s = "batch planner: micro-batch " + std::to_string(p.micro_batch) + " x " + std::to_string(p.accumulation_steps) +
                  " step(s) = global batch " + std::to_string(p.global_batch) +
                  " (largest that fits: " + std::to_string(p.max_micro_batch) + "), peak " + mb(p.peak_bytes) +
                  " (per sample: saved " + mb(p.saved_bytes_per_sample) + " + working set " + mb(p.working_bytes_per_sample) +
                  "), lr " + std::to_string(p.learning_rate) + ", warm-up " + std::to_string(p.warmup_steps) + " steps, tau " +
                  std::to_string(p.target_relative_error);
  if (p.state == plan_state::accumulating) s += "; the target batch does not fit, so gradients are accumulated";
  if (p.state == plan_state::rounded_up)
    s += "; the target batch " + std::to_string(c.target_global_batch) + " does not split evenly, rounded up";
  if (p.accumulation_steps > 1) s += "; batch-norm statistics come from micro-batches of " + std::to_string(p.micro_batch);
  return s;
}

}  // namespace adapt
EBAC_NAMESPACE_END
