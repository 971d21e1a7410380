// adapt.cpp - ebac's bound controller and batch planner (include/ebac/adapt)
// behind the plain interface of codec_api.hpp; no torch header here.
#include "codec_api.hpp"

#include <ebac/adapt/adapt.hpp>

#include <span>

namespace ebac_torch {

struct controller_handle::impl {
  ebac::adapt::controller c;
  impl(const ebac::adapt::controller_config& cfg, std::size_t n) : c(cfg, n) {}
};

controller_handle::controller_handle(const controller_settings& s, std::size_t layers) : p_(nullptr) {
  ebac::adapt::controller_config cfg;
  cfg.update.target_relative_error = s.target_relative_error;
  cfg.update.smoothing = s.smoothing;
  cfg.update.max_step = s.max_step;
  cfg.update.eb_min = s.eb_min;
  cfg.update.eb_max = s.eb_max;
  cfg.update.tolerance = s.tolerance;
  cfg.window = s.window;
  cfg.initial_eb = s.initial_eb;
  p_ = new impl(cfg, layers);
}
controller_handle::~controller_handle() { delete p_; }
std::size_t controller_handle::layers() const { return p_->c.layers(); }
double controller_handle::bound(std::size_t i) const { return p_->c.bound(i); }
double controller_handle::target(std::size_t i) const { return p_->c.target(i); }
bool controller_handle::set_target(std::size_t i, double t) { return p_->c.set_target(i, t) == ebac::status::ok; }
bool controller_handle::observe(std::size_t i, double eb, double predicted_sigma, double grad_rms, double ratio) {
  return p_->c.observe(i, ebac::adapt::layer_observation{eb, predicted_sigma, grad_rms, ratio}) == ebac::status::ok;
}
bool controller_handle::end_iteration() { return p_->c.end_iteration(); }
std::int64_t controller_handle::iteration() const { return p_->c.iteration(); }
std::int64_t controller_handle::report_iteration() const { return p_->c.last_report().iteration; }
std::vector<controller_layer_report> controller_handle::report() const {
  std::vector<controller_layer_report> out;
  for (const auto& l : p_->c.last_report().layers) {
    controller_layer_report r;
    r.eb = l.eb;
    r.previous_eb = l.previous_eb;
    r.target_relative_error = l.target_relative_error;
    r.achieved_relative_error = l.achieved_relative_error;
    r.compression_ratio = l.compression_ratio;
    r.observations = l.observations;
    r.rejected = l.rejected;
    if (l.warning != ebac::adapt::bound_warning::none) r.warning = ebac::adapt::to_string(l.warning);
    out.push_back(r);
  }
  return out;
}

planner_result plan_batch(const planner_request& r) {
  namespace A = ebac::adapt;
  A::planner_config c;
  c.budget_bytes = r.budget_bytes;
  c.static_bytes = r.static_bytes;
  c.uncompressed_bytes_per_sample = r.uncompressed_bytes_per_sample;
  c.safety_margin = r.safety_margin;
  c.target_global_batch = r.target_global_batch;
  c.max_batch = r.max_batch;
  c.reference_batch = r.reference_batch;
  c.reference_lr = r.reference_lr;
  c.scaling = r.sqrt_scaling ? A::lr_scaling::square_root : A::lr_scaling::linear;
  c.warmup_samples = r.warmup_samples;
  c.reference_tau = r.reference_tau;
  c.working_bytes_per_sample = r.working_bytes_per_sample;
  c.working_set_tensors = r.working_set_tensors;
  std::vector<A::layer_memory> layers;
  for (std::size_t i = 0; i < r.bytes_per_sample.size() && i < r.compression_ratio.size(); ++i)
    layers.push_back(A::layer_memory{r.bytes_per_sample[i], r.compression_ratio[i]});
  const std::span<const A::layer_memory> span(layers.data(), layers.size());
  planner_result o;
  if (r.probe_batch != 0) {  // the probe's saved tensors are these layers: same statistics, same batch
    A::probe_step probe{r.probe_rise_bytes, r.probe_batch, r.probe_static_bytes};
    if (r.second_probe_batch != 0) {
      probe = A::probe_line(probe, A::probe_step{r.second_probe_rise_bytes, r.second_probe_batch, r.probe_static_bytes});
      if (probe.batch == 0) {
        o.state = "invalid_config";
        o.description = "batch planner: two probe steps need different batches >= 1 and rises finite and >= 0: batches " +
                        std::to_string(r.probe_batch) + " and " + std::to_string(r.second_probe_batch);
        return o;
      }
      c.static_bytes += probe.static_bytes - r.probe_static_bytes;  // the line's intercept, where positive
      c.measured_bytes_per_sample = (probe.peak_rise_bytes - probe.static_bytes) / static_cast<double>(probe.batch);
    }
    c.working_bytes_per_sample = A::working_from_probe(probe, c, span);
    if (c.working_bytes_per_sample < 0) {
      o.state = "invalid_config";
      o.description =
          "batch planner: invalid probe step (batch >= 1, peak rise and static bytes finite and >= 0, sizes and ratios "
          "valid): batch " +
          std::to_string(r.probe_batch) + ", rise " + std::to_string(r.probe_rise_bytes) + ", static " +
          std::to_string(r.probe_static_bytes);
      return o;
    }
  }
  const A::batch_plan p = A::plan_batch(c, span);
  switch (p.state) {
    case A::plan_state::ok: o.state = "ok"; break;
    case A::plan_state::invalid_config: o.state = "invalid_config"; break;
    case A::plan_state::static_too_large: o.state = "static_too_large"; break;
    case A::plan_state::batch_one_too_large: o.state = "batch_one_too_large"; break;
    case A::plan_state::accumulating: o.state = "accumulating"; break;
    case A::plan_state::rounded_up: o.state = "rounded_up"; break;
  }
  o.ok = p.ok();
  o.description = A::describe(c, p);
  o.max_micro_batch = p.max_micro_batch;
  o.micro_batch = p.micro_batch;
  o.accumulation_steps = p.accumulation_steps;
  o.global_batch = p.global_batch;
  o.warmup_steps = p.warmup_steps;
  o.bytes_per_sample = p.bytes_per_sample;
  o.saved_bytes_per_sample = p.saved_bytes_per_sample;
  o.working_bytes_per_sample = p.working_bytes_per_sample;
  o.usable_bytes = p.usable_bytes;
  o.peak_bytes = p.peak_bytes;
  o.learning_rate = p.learning_rate;
  o.target_relative_error = p.target_relative_error;
  return o;
}

}  // namespace ebac_torch
