// error_model.cpp - ebac's gradient-error model (include/ebac/error_model)
// for one Conv2d/Linear layer, from tensors the trainer already has, and the
// BatchNorm propagation term (error_model/batchnorm_propagation.hpp) and the
// elementwise one (error_model/elementwise_model.hpp).
// Like host_codec.cpp, it includes no torch header.
#include "codec_api.hpp"

#include <ebac/error_model/batchnorm_propagation.hpp>
#include <ebac/error_model/distinct_rows.hpp>
#include <ebac/error_model/elementwise_model.hpp>
#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/layer_geometry.hpp>
#include <ebac/error_model/weight_error_model.hpp>

#include <optional>
#include <stdexcept>
#include <vector>

namespace ebac_torch {

weight_error_estimate predict_weight_error(const layer_geometry& lg, const float* x, const float* y, const float* dy,
                                           double eb_abs, double weight_grad_rms) {
  namespace em = ebac::error_model;
  em::conv2d_geometry g;
  if (lg.linear) {
    g = em::conv2d_geometry::linear(lg.batch, lg.in_channels, lg.out_channels);
  } else {
    g.batch = lg.batch;
    g.in_channels = lg.in_channels;
    g.in_h = lg.in_h;
    g.in_w = lg.in_w;
    g.out_channels = lg.out_channels;
    g.kernel_h = lg.kernel_h;
    g.kernel_w = lg.kernel_w;
    g.stride_h = lg.stride_h;
    g.stride_w = lg.stride_w;
    g.pad_h = lg.pad_h;
    g.pad_w = lg.pad_w;
    g.dilation_h = lg.dilation_h;
    g.dilation_w = lg.dilation_w;
    g.groups = lg.groups;
  }
  if (g.validate() != ebac::status::ok) throw std::invalid_argument("ebac_torch: invalid layer geometry");
  // A Linear's identical input rows are merged first, as ebac grad-error does
  // (error_model/distinct_rows.hpp): their errors are identical and add up.
  std::optional<em::merged_rows<float, float>> rows_view;
  if (lg.linear) rows_view.emplace(g, x, dy);
  const em::conv2d_geometry& gm = rows_view ? rows_view->geometry() : g;
  const float* const xm = rows_view ? rows_view->input() : x;
  std::vector<float> y_rows;
  const float* const ym = rows_view ? rows_view->rows_of(y, y_rows) : y;
  const em::flat_mask mask = em::find_flat_mask(gm, xm);
  em::output_gradient_statistics ds =
      em::collect_output_gradient_statistics(gm, rows_view ? rows_view->output_gradient() : dy, mask);
  ds.weight_grad_rms = weight_grad_rms > 0 ? weight_grad_rms : 0.0;
  const em::input_error_statistics es = em::collect_input_error_statistics(gm, xm, ym, mask, eb_abs);
  const em::weight_error_prediction p = em::weight_error_model{}(ds, es);
  if (p.state != ebac::status::ok) throw std::invalid_argument("ebac_torch: error model: inconsistent statistics");
  weight_error_estimate r;
  r.sigma = p.sigma;
  r.iid_sigma = p.iid_sigma;
  r.coherent_share = p.coherent_share;
  r.flat_share = mask.share();
  return r;
}

void batchnorm_input_grad_change(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* y,
                                 const float* dy, const float* gamma, double eps, double* out) {
  if (ebac::error_model::batchnorm_input_grad_change(n, c, plane, x, y, dy, gamma, eps, out) != ebac::status::ok)
    throw std::invalid_argument("ebac_torch: batchnorm_input_grad_change: empty tensor or negative eps");
}

void elementwise_input_grad_change(const std::string& fn, std::int64_t n, const float* x, const float* y, const float* dy,
                                   double* out) {
  namespace em = ebac::error_model;
  const auto f = em::parse_elementwise_function(fn);
  if (!f)
    throw std::invalid_argument("ebac_torch: elementwise_input_grad_change: unknown function '" + fn +
                                "' (gelu, silu, tanh, sigmoid)");
  for (std::int64_t i = 0; i < n; ++i) out[i] = em::elementwise_input_grad_change(*f, x[i], y[i], dy[i]);
}

}  // namespace ebac_torch
