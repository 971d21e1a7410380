// apps/cli/grad_error.cpp - `ebac grad-error`: the error model checked
// against measured weight gradients.
//
//   ebac grad-error --activation A --grad-output D --layer linear|conv2d|batchnorm2d|layernorm|matmul|gelu|silu|tanh|sigmoid
//                   --input-shape N,C[,H,W] [--weight-shape O,C/G[,KH,KW]]   (layernorm: N,...,D and D;
//                                                                             matmul: ...,M,K and K,N;
//                                                                             gelu, silu, tanh, sigmoid: any shape, no weight)
//                   [--stride S[,S]] [--padding P[,P]] [--dilation D[,D]] [--groups G]
//                   (--eb X [--mode abs|rel] | --target-rel T | --target-sigma S)
//                   [--pipeline NAME] [--trials K] [--dtype f32|f16|bf16] [--gamma F] [--json]
//                   [--producer-input X --producer-features I]   (gelu, silu, tanh, sigmoid)
//
// Compresses the activation with the real pipeline, decompresses it, and
// computes the exact weight gradient (double, reference_gradient.hpp) with
// the original and with the decompressed activation: their RMS difference is
// measured_sigma. predicted_sigma comes from the model, fed only with the
// statistics a trainer collects cheaply (output-gradient sums and energies,
// the compressor's error statistics) - never from the gradients themselves.
// For linear and layernorm, identical input rows are merged first (each
// group's output gradient summed; distinct_rows.hpp): their errors are
// identical and add coherently. JSON distinct_rows counts what the model read.
//
// batchnorm2d and layernorm report the gamma gradient as the weight gradient
// (beta's gradient does not read the saved input) and, besides, the error the
// layer hands to the layer before it through its input gradient.
// matmul is a parameter-free product C = A B per slice of the leading
// extents with A saved (--activation, [..., M, K]; --grad-output is dC,
// [..., M, N]): the gradient checked is the other operand's, dB = A^T dC
// (matmul_model.hpp).
// gelu, silu, tanh and sigmoid have no weight: their sigmas are the input
// gradient's (elementwise_model.hpp), and --activation is what the function
// saves (the input of gelu and silu, the output of tanh and sigmoid). With
// --producer-input X --producer-features I (X: the input of the linear layer
// that computed the pre-activation) the change is also carried into that
// layer's weight gradient.
//
// A trial is one compression at a bound spread log-evenly over [eb/1.1,
// eb*1.1] (K = 1: exactly eb). Repeated values (flat image regions) make the
// measured error depend on where the bound's bin edges fall; trials show that
// spread. With --target-rel T the inverse map picks the bound for a target
// sigma of T x the gradient RMS (or --target-sigma S), and the output says how
// close the measured error lands.
//
#include "command_line.hpp"
#include "commands.hpp"

#include <ebac/dtype_dispatch.hpp>
#include <ebac/error_model/batchnorm_model.hpp>
#include <ebac/error_model/batchnorm_propagation.hpp>
#include <ebac/error_model/distinct_rows.hpp>
#include <ebac/error_model/elementwise_model.hpp>
#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/flat_mask.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/iid_model.hpp>
#include <ebac/error_model/inverse.hpp>
#include <ebac/error_model/layernorm_model.hpp>
#include <ebac/error_model/matmul_model.hpp>
#include <ebac/error_model/quantizer_error.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/error_model/sampling.hpp>
#include <ebac/error_model/weight_error_model.hpp>

#include <initializer_list>
#include <optional>
#include <type_traits>

namespace ebac_cli {

namespace {

namespace em = ebac::error_model;

/// "S" or "S1,S2" -> two integers >= lo.
std::pair<long, long> ge_parse_pair(const args& a, const std::string& key, long def, long lo) {
  if (!a.has(key)) return {def, def};
  const std::string& s = a.opt.at(key);
  const auto comma = s.find(',');
  if (comma == std::string::npos) {
    const long v = parse_int(s, ("--" + key).c_str(), lo, 1L << 30);
    return {v, v};
  }
  return {parse_int(s.substr(0, comma), ("--" + key).c_str(), lo, 1L << 30),
          parse_int(s.substr(comma + 1), ("--" + key).c_str(), lo, 1L << 30)};
}

struct ge_trial {
  double eb_requested = 0, eb_abs = 0, predicted = 0, measured = 0, iid = 0, coherent_share = 0, structured_share = 0, kappa = 1,
         dof = 0, ratio_bytes = 0, margin = 1, repeated_share = 0;
  double input_predicted = 0, input_measured = 0;        // batchnorm2d, layernorm and the elementwise kinds
  double producer_predicted = 0, producer_measured = 0;  // elementwise with --producer-input
};

struct ge_report {
  std::string layer, pipeline, mode;
  double eb = 0;  // as requested (or chosen by the inverse map, in --mode units)
  std::int64_t weights = 0;
  double grad_rms = 0, input_grad_rms = 0, flat_share = 0;
  std::int64_t distinct_rows = 0;  ///< linear, layernorm: the input's distinct rows (the model merges repeats)
  double target_sigma = 0;         // > 0 in target mode
  double producer_grad_rms = -1;   // >= 0: the producing linear layer's weight gradient was checked too
  int solver_evaluations = 0;
  double solver_predicted = 0;
  std::vector<ge_trial> trials;
};

double ge_quadratic_mean(const std::vector<ge_trial>& t, double ge_trial::*f) {
  double s = 0;
  for (const auto& x : t) s += (x.*f) * (x.*f);
  return t.empty() ? 0.0 : std::sqrt(s / static_cast<double>(t.size()));
}

std::vector<float> ge_read_f32(const std::string& path, std::uint64_t expect, const char* what) {
  ebac_cli::input_file in(path);
  const auto raw = in.read_exactly(expect * 4, std::string("the shapes of ") + what + " (f32) need");
  std::vector<float> v(static_cast<std::size_t>(expect));
  std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

/// Bounds of the trials: eb itself for K = 1, else log-evenly over [eb/1.1, eb*1.1].
std::vector<double> ge_trial_bounds(double eb, int k) {
  std::vector<double> v;
  for (int i = 0; i < k; ++i) v.push_back(k == 1 ? eb : eb * std::pow(1.1, 2.0 * i / (k - 1) - 1.0));
  return v;
}

/// The options every kind reads: --pipeline (default fast, also named in
/// rep), --threads, --trials.
struct ge_options {
  ebac::pipeline_spec spec;
  int threads = 0;
  int trials = 1;
};

ge_options ge_parse_options(const args& a, ge_report& rep) {
  ge_options o;
  rep.pipeline = a.has("pipeline") ? a.opt.at("pipeline") : "fast";
  o.spec = parse_pipeline_arg(rep.pipeline);
  o.threads = threads_arg(a, 0);
  o.trials = a.has("trials") ? static_cast<int>(parse_int(a.opt.at("trials"), "--trials", 1, 1000)) : 1;
  return o;
}

/// Compresses the saved tensor with the real pipeline at `bound` and
/// decompresses it: the trial's bound, absolute bound and ratio are filled
/// in, the reconstruction (same element type and layout) is returned.
std::vector<std::byte> ge_round_trip(const std::vector<std::byte>& raw, ebac::dtype t, const ebac::extents& shape,
                                     const ebac::pipeline_spec& spec, const ebac::error_bound& bound, int threads,
                                     ge_trial& trial) {
  ebac::compress_options opt;
  opt.bound = bound;
  opt.threads = threads;
  opt.checksum = false;
  const auto stream = compress_any(raw, t, shape, spec, opt);
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  trial.eb_requested = bound.value;
  trial.eb_abs = h.eb_abs;
  trial.ratio_bytes = static_cast<double>(raw.size()) / static_cast<double>(stream.size());
  return decompress_any(stream, threads);
}

/// --target-rel T / --target-sigma S: sets rep.target_sigma (T relative to
/// rep.grad_rms, the RMS of the `what` gradient) and rep.mode; returns the mode.
ebac::bound_mode ge_parse_target(const args& a, ge_report& rep, int trials, const char* what) {
  if (a.has("eb")) throw usage_error("--eb and --target-rel/--target-sigma exclude each other");
  if (a.has("target-rel") && a.has("target-sigma")) throw usage_error("give --target-rel or --target-sigma, not both");
  if (trials != 1) throw usage_error("--trials applies to --eb, not to a target");
  if (a.has("target-rel")) {
    const double t = parse_double(a.opt.at("target-rel"), "--target-rel");
    if (!(t > 0) || !std::isfinite(t)) throw usage_error("--target-rel must be > 0");
    rep.target_sigma = t * rep.grad_rms;
  } else {
    rep.target_sigma = parse_double(a.opt.at("target-sigma"), "--target-sigma");
    if (!(rep.target_sigma > 0) || !std::isfinite(rep.target_sigma)) throw usage_error("--target-sigma must be > 0");
  }
  if (!(rep.grad_rms > 0))
    throw input_error(std::string("the ") + what + " gradient is zero: no target relative to it can be met or missed");
  rep.mode = a.has("mode") ? a.opt.at("mode") : "abs";
  ebac::bound_mode mode = ebac::bound_mode::absolute;
  if (!ebac::parse_bound_mode(rep.mode, mode)) throw usage_error("unknown --mode '" + rep.mode + "' (expected abs or rel)");
  return mode;
}

template <class T>
ebac::value_range ge_value_range(const T* x, std::size_t n) {
  ebac::value_range range;
  std::vector<float> xf(n);
  for (std::size_t i = 0; i < n; ++i) xf[i] = ebac::to_float(x[i]);
  range.add_block(xf.data(), xf.size());
  return range;
}

/// The inverse map: solves sigma_of(eb) = rep.target_sigma from `guess`, then
/// compresses once at the chosen bound, stated in `mode`.
template <class SigmaOf, class RunOnce>
void ge_solve_and_run(ge_report& rep, const ebac::value_range& range, ebac::bound_mode mode, double guess, SigmaOf&& sigma_of,
                      RunOnce&& run_once) {
  if (!(guess > 0) || !std::isfinite(guess)) guess = 1e-3 * std::max(1e-12, range.span());
  em::bound_solver solver;
  solver.eb_max = range.span() > 0 ? range.span() : 0.0;
  const em::bound_solution sol = solver(rep.target_sigma, guess, sigma_of);
  if (sol.state != ebac::status::ok) throw input_error("the inverse map found no bound for this target");
  rep.solver_evaluations = sol.evaluations;
  rep.solver_predicted = sol.predicted_sigma;
  ebac::error_bound b{sol.eb, ebac::bound_mode::absolute};
  if (mode == ebac::bound_mode::relative) {
    if (!(range.span() > 0)) throw input_error("relative mode needs a non-constant activation");
    b = {sol.eb / range.span(), ebac::bound_mode::relative};
  }
  rep.eb = b.value;
  ge_trial t;
  run_once(b, t);
  rep.trials.push_back(t);
}

/// --eb: K trials at bounds around it (ge_trial_bounds).
template <class RunOnce>
void ge_forward_trials(const args& a, ge_report& rep, int trials, RunOnce&& run_once) {
  const ebac::error_bound bound = parse_bound(a);
  rep.mode = std::string(ebac::to_string(bound.mode));
  rep.eb = bound.value;
  for (double eb : ge_trial_bounds(bound.value, trials)) {
    ge_trial t;
    run_once({eb, bound.mode}, t);
    rep.trials.push_back(t);
  }
}

/// LayerNorm (g is layernorm_gamma_geometry: rows x features): the row
/// statistics the forward pass saves, and gamma per feature (--gamma, else 1).
struct ge_layernorm {
  std::vector<double> mean, inv_std;
  std::vector<float> gamma;

  /// The gamma- and input-gradient sigmas from the model's prediction p
  /// (the depthwise sums already carry 1/s, dy scaled) and, row by row, from
  /// x and its reconstruction y.
  template <class T>
  void predict(ge_trial& t, const em::weight_error_prediction& p, std::int64_t rows, std::int64_t features, const T* x,
               const T* y, const std::vector<float>& dy) const {
    double sg = 0;
    for (std::int64_t d = 0; d < features; ++d) sg += p.group_sum_squares[static_cast<std::size_t>(d)];
    const double sx = em::layernorm_input_grad_mean_square(rows, features, x, y, mean, inv_std, dy.data(), gamma.data());
    t.predicted = std::sqrt(sg / static_cast<double>(features));
    t.input_predicted = std::sqrt(sx);
  }
};

template <class T>
ge_layernorm ge_read_layernorm(const args& a, const T* x, std::int64_t rows, std::int64_t features) {
  ge_layernorm ln;
  const double eps = a.has("eps") ? parse_double(a.opt.at("eps"), "--eps") : 1e-5;
  if (!(eps >= 0) || !std::isfinite(eps)) throw usage_error("--eps must be >= 0");
  ln.mean.resize(static_cast<std::size_t>(rows));
  ln.inv_std.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    em::layernorm_saved_statistics(features, x + r * features, eps, ln.mean[static_cast<std::size_t>(r)],
                                   ln.inv_std[static_cast<std::size_t>(r)]);
  ln.gamma = a.has("gamma") ? ge_read_f32(a.opt.at("gamma"), static_cast<std::uint64_t>(features), "--gamma")
                            : std::vector<float>(static_cast<std::size_t>(features), 1.0f);
  return ln;
}

/// BatchNorm2d in training mode: gamma per channel (--gamma, else 1) and the
/// statistics the forward pass saves (mean, 1/s), and its backward.
struct ge_batchnorm {
  em::conv2d_geometry g;
  std::vector<double> gamma, mean, inv_std;

  /// Training-mode BN backward of `in` with the saved (exact) mean and 1/s.
  template <class X>
  void backward(const X* in, const std::vector<float>& dy, std::vector<double>& dgamma, std::vector<double>& dx) const {
    const std::int64_t C = g.in_channels, plane = g.in_h * g.in_w, M = g.batch * plane;
    dgamma.assign(static_cast<std::size_t>(C), 0.0);
    dx.assign(static_cast<std::size_t>(g.batch * C * plane), 0.0);
    for (std::int64_t c = 0; c < C; ++c) {
      double sdy = 0, sdyx = 0;
      for (std::int64_t n = 0; n < g.batch; ++n)
        for (std::int64_t i = 0; i < plane; ++i) {
          const std::int64_t j = (n * C + c) * plane + i;
          const double xh =
              (em::detail::as_double(in[j]) - mean[static_cast<std::size_t>(c)]) * inv_std[static_cast<std::size_t>(c)];
          sdy += dy[static_cast<std::size_t>(j)];
          sdyx += dy[static_cast<std::size_t>(j)] * xh;
        }
      dgamma[static_cast<std::size_t>(c)] = sdyx;
      const double k = gamma[static_cast<std::size_t>(c)] * inv_std[static_cast<std::size_t>(c)], mdy = sdy / M, m1 = sdyx / M;
      for (std::int64_t n = 0; n < g.batch; ++n)
        for (std::int64_t i = 0; i < plane; ++i) {
          const std::int64_t j = (n * C + c) * plane + i;
          const double xh =
              (em::detail::as_double(in[j]) - mean[static_cast<std::size_t>(c)]) * inv_std[static_cast<std::size_t>(c)];
          dx[static_cast<std::size_t>(j)] = k * (dy[static_cast<std::size_t>(j)] - mdy - xh * m1);
        }
    }
  }

  /// The gamma- and input-gradient sigmas: the model's per-channel
  /// (depthwise 1x1) sums in p scaled by the saved 1/s, with m1 = dgamma / M
  /// as the trainer computes it from the reconstruction y.
  template <class X>
  void predict(ge_trial& t, const em::weight_error_prediction& p, const em::input_error_statistics& es, const X* y,
               const std::vector<float>& dy) const {
    const std::int64_t C = g.in_channels, plane = g.in_h * g.in_w, M = g.batch * plane;
    std::vector<double> dg1, dx1;
    backward(y, dy, dg1, dx1);
    double sg = 0, sx = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const em::batchnorm_channel_error b{gamma[static_cast<std::size_t>(c)], inv_std[static_cast<std::size_t>(c)],
                                          static_cast<double>(M), dg1[static_cast<std::size_t>(c)] / M,
                                          es.sum_squares[static_cast<std::size_t>(c)] / M};
      sg += b.gamma_grad_square(p.group_sum_squares[static_cast<std::size_t>(c)]);
      sx += b.input_grad_square(p.group_sum_squares[static_cast<std::size_t>(c)]);
    }
    t.predicted = std::sqrt(sg / C);
    t.input_predicted = std::sqrt(sx / C);
  }
};

template <class T>
ge_batchnorm ge_read_batchnorm(const args& a, const em::conv2d_geometry& g, const T* x) {
  ge_batchnorm bn;
  bn.g = g;
  const std::int64_t C = g.in_channels, plane = g.in_h * g.in_w;
  bn.gamma.assign(static_cast<std::size_t>(C), 1.0);
  if (a.has("gamma")) {
    const auto gv = ge_read_f32(a.opt.at("gamma"), static_cast<std::uint64_t>(C), "--gamma");
    for (std::int64_t c = 0; c < C; ++c) bn.gamma[static_cast<std::size_t>(c)] = gv[static_cast<std::size_t>(c)];
  }
  const double eps = a.has("eps") ? parse_double(a.opt.at("eps"), "--eps") : 1e-5;
  bn.mean.assign(static_cast<std::size_t>(C), 0.0);
  bn.inv_std.assign(static_cast<std::size_t>(C), 0.0);
  for (std::int64_t c = 0; c < C; ++c)
    em::batchnorm_saved_statistics(g.batch, C, plane, x, eps, c, bn.mean[static_cast<std::size_t>(c)],
                                   bn.inv_std[static_cast<std::size_t>(c)]);
  return bn;
}

/// The gradients with the original input: w0 the weight's (gamma's for the
/// normalizations), dx0 the input's (the normalizations only).
struct ge_exact {
  std::vector<double> w0, dx0;
};

template <class T>
ge_exact ge_batchnorm_exact(const ge_batchnorm& bnorm, const T* x, const std::vector<float>& dy) {
  ge_exact e;
  bnorm.backward(x, dy, e.w0, e.dx0);
  return e;
}

template <class T>
ge_exact ge_layernorm_exact(const ge_layernorm& lnorm, std::int64_t rows, std::int64_t features, const T* x,
                            const std::vector<float>& dy) {
  ge_exact e;
  if (em::layernorm_backward(rows, features, x, lnorm.mean, lnorm.inv_std, dy.data(), lnorm.gamma.data(), e.w0, e.dx0) !=
      ebac::status::ok)
    throw usage_error("invalid layernorm shape");
  return e;
}

template <class T>
ge_exact ge_weight_exact(const em::conv2d_geometry& g, const T* x, const std::vector<float>& dy) {
  ge_exact e;
  e.w0.assign(static_cast<std::size_t>(g.weight_count()), 0.0);
  if (em::weight_gradient(g, x, dy.data(), e.w0.data()) != ebac::status::ok) throw usage_error("invalid layer geometry");
  return e;
}

/// The inverse map's first guess at the bound: the i.i.d. closed form with a
/// uniform error (for the normalizations, a fraction of the range scaled by
/// target / gradient RMS).
template <class T>
double ge_first_guess(const ge_report& rep, const em::conv2d_geometry& g, const em::output_gradient_statistics& dstats, bool norm,
                      const T* x, std::size_t n_in, const ebac::value_range& range) {
  em::iid_weight_error iid;
  iid.taps = static_cast<double>(norm ? 1 : g.taps());
  iid.sum_dy2 = dstats.total_sum_squares();
  iid.in_channels_per_group = static_cast<double>(norm ? 1 : g.in_channels_per_group());
  std::size_t nz = 0;
  for (std::size_t i = 0; i < n_in; ++i) nz += (ebac::to_float(x[i]) != 0.0f);
  iid.nonzero_share = n_in ? static_cast<double>(nz) / static_cast<double>(n_in) : 0.0;
  iid.weights = static_cast<double>(rep.weights);
  double guess = iid.inverse(rep.target_sigma);
  if (norm) guess = rep.target_sigma / std::max(1e-300, rep.grad_rms) * std::max(1e-12, range.span()) * 0.1;
  return guess;
}

template <class T>
ge_report ge_run(const args& a, const std::vector<std::byte>& raw, const ebac::extents& shape, const em::conv2d_geometry& g,
                 const std::vector<float>& dy, const std::string& layer) {
  const T* x = reinterpret_cast<const T*>(raw.data());
  const std::size_t n_in = raw.size() / sizeof(T);
  // A matmul's saved operand is compressed as saved ([slices, M, K]) and
  // read by the model with the slices side by side (matmul_model.hpp).
  const bool mm = (layer == "matmul");
  auto to_geometry = [&](const T* saved) { return em::matmul_rows_layout(saved, g.groups, g.batch, g.in_channels_per_group()); };
  std::vector<T> x_rows;
  if (mm) {
    x_rows = to_geometry(x);
    x = x_rows.data();
  }
  ge_report rep;
  rep.layer = layer;
  const ge_options o = ge_parse_options(a, rep);
  const ebac::pipeline_spec& spec = o.spec;
  const int threads = o.threads, K = o.trials;
  const bool bn = (layer == "batchnorm2d"), ln = (layer == "layernorm");
  const bool norm = bn || ln;  // gamma gradient as a depthwise 1x1 weight gradient, plus the input gradient

  // LayerNorm: rows x D (g is layernorm_gamma_geometry), statistics per row
  // saved by the forward pass, gamma per feature.
  const std::int64_t rows = g.batch, features = g.in_channels;
  const ge_layernorm lnorm = ln ? ge_read_layernorm(a, x, rows, features) : ge_layernorm{};
  const std::vector<double>& ln_mean = lnorm.mean;
  const std::vector<double>& ln_inv_std = lnorm.inv_std;
  const std::vector<float>& ln_gamma = lnorm.gamma;

  // The model's inputs that do not depend on the bound. LayerNorm's gamma
  // gradient sees dy scaled row by row by the saved 1/s. A Linear's or a
  // LayerNorm's identical input rows have identical errors: the model reads
  // them merged, each group's output gradient summed (distinct_rows.hpp);
  // gm and xm (and rows_view's gradient) are the layer it reads: g, x and dy
  // themselves for other kinds or when no row repeats.
  const bool merge_rows = layer == "linear" || ln;
  std::optional<em::merged_rows<T, double>> rows_view;
  std::vector<double> dy_model;  // what rows_view merges: dy, scaled for LayerNorm
  if (merge_rows) {
    dy_model = ln ? em::layernorm_scaled_output_gradient(rows, features, dy.data(), ln_inv_std)
                  : std::vector<double>(dy.begin(), dy.end());
    rows_view.emplace(g, x, dy_model.data());
  }
  const em::conv2d_geometry& gm = rows_view ? rows_view->geometry() : g;
  const T* const xm = rows_view ? rows_view->input() : x;
  rep.distinct_rows = rows_view ? rows_view->distinct_rows() : 0;
  const em::flat_mask mask = em::find_flat_mask(gm, xm);
  rep.flat_share = mask.share();
  em::output_gradient_statistics dstats = rows_view
                                              ? em::collect_output_gradient_statistics(gm, rows_view->output_gradient(), mask)
                                              : em::collect_output_gradient_statistics(gm, dy.data(), mask);
  rep.weights = norm ? g.in_channels : g.weight_count();

  // Exact reference with the original input.
  const ge_batchnorm bnorm = bn ? ge_read_batchnorm(a, g, x) : ge_batchnorm{};
  auto bn_backward = [&](const auto* in, std::vector<double>& dgamma, std::vector<double>& dx) {
    bnorm.backward(in, dy, dgamma, dx);
  };
  const ge_exact exact = bn   ? ge_batchnorm_exact(bnorm, x, dy)
                         : ln ? ge_layernorm_exact(lnorm, rows, features, x, dy)
                              : ge_weight_exact(g, x, dy);
  const std::vector<double>& w0 = exact.w0;
  const std::vector<double>& dx0 = exact.dx0;
  if (norm) rep.input_grad_rms = em::rms(dx0.data(), dx0.size());
  rep.grad_rms = em::rms(w0.data(), w0.size());
  // The gradient RMS is one of the trainer's cheap statistics (the model
  // uses it, never the gradient entries, to gauge the gradient's coherence).
  // The forward check (--eb) gives the model the RMS of the gradient computed
  // with the reconstruction, which is what the trainer has; the inverse map
  // (--target-rel) uses the exact one as the stand-in for the previous step's.
  // The normalizations' depthwise view has no such statistic wired: kappa stays 1.
  dstats.weight_grad_rms = norm ? 0.0 : rep.grad_rms;

  const em::weight_error_model model;
  // Prediction from (x, its reconstruction y): the compressor's statistics and the trainer's.
  // trainer_grad_rms < 0: keep dstats' (the exact gradient's RMS, used by the
  // inverse map as the stand-in for the previous step's gradient RMS).
  auto predict = [&](const T* y, double eb_abs, ge_trial& t, double trainer_grad_rms = -1) {
    std::vector<T> y_rows;
    const em::input_error_statistics es =
        em::collect_input_error_statistics(gm, xm, rows_view ? rows_view->rows_of(y, y_rows) : y, mask, eb_abs);
    em::output_gradient_statistics ds = dstats;
    if (trainer_grad_rms >= 0 && !norm) ds.weight_grad_rms = trainer_grad_rms;
    const em::weight_error_prediction p = model(ds, es);
    if (p.state != ebac::status::ok) throw input_error("error model: inconsistent statistics");
    t.structured_share = p.structured_share;
    t.kappa = p.kappa;
    t.dof = p.effective_dof;
    t.margin = p.margin;
    t.repeated_share = p.repeated_share;
    if (!norm) {
      t.predicted = p.sigma;
      t.iid = p.iid_sigma;
      t.coherent_share = p.coherent_share;
      return;
    }
    t.iid = p.iid_sigma;
    t.coherent_share = p.coherent_share;
    if (ln) lnorm.predict(t, p, rows, features, x, y, dy);
    else bnorm.predict(t, p, es, y, dy);
  };
  // Returns the RMS of the weight gradient computed with the reconstruction:
  // the gradient the trainer actually has when it compresses.
  auto measure = [&](const T* y, ge_trial& t) -> double {
    if (bn) {
      std::vector<double> dg1, dx1;
      bn_backward(y, dg1, dx1);
      t.measured = em::rms_difference(dg1.data(), w0.data(), w0.size());
      t.input_measured = em::rms_difference(dx1.data(), dx0.data(), dx0.size());
      return 0.0;
    }
    if (ln) {
      std::vector<double> dg1, dx1;
      (void)em::layernorm_backward(rows, features, y, ln_mean, ln_inv_std, dy.data(), ln_gamma.data(), dg1, dx1);
      t.measured = em::rms_difference(dg1.data(), w0.data(), w0.size());
      t.input_measured = em::rms_difference(dx1.data(), dx0.data(), dx0.size());
      return 0.0;
    }
    std::vector<double> w1(w0.size());
    (void)em::weight_gradient(g, y, dy.data(), w1.data());
    t.measured = em::rms_difference(w1.data(), w0.data(), w0.size());
    return em::rms(w1.data(), w1.size());
  };
  auto run_once = [&](const ebac::error_bound& bound, ge_trial& t) {
    const auto back = ge_round_trip(raw, ebac::dtype_of<T>::value, shape, spec, bound, threads, t);
    const T* y = reinterpret_cast<const T*>(back.data());
    std::vector<T> y_rows;
    if (mm) {
      y_rows = to_geometry(y);
      y = y_rows.data();
    }
    const double trainer_rms = measure(y, t);
    predict(y, t.eb_abs, t, trainer_rms);
  };

  if (a.has("target-rel") || a.has("target-sigma")) {
    const ebac::bound_mode mode = ge_parse_target(a, rep, K, "weight");
    const ebac::value_range range = ge_value_range(x, n_in);
    // Forward map at a candidate bound: reconstruct as the decoder would (no stream needed).
    std::vector<T> ybuf(n_in);
    auto sigma_of = [&](double eb_abs) {
      if (spec.quantizer == ebac::quantizer_id::linear)
        em::reconstruct_like_decoder(ebac::linear_quantizer::make(eb_abs), x, n_in, ybuf.data());
      else em::reconstruct_like_decoder(ebac::sign_preserving_quantizer::make(eb_abs), x, n_in, ybuf.data());
      ge_trial t;
      predict(ybuf.data(), eb_abs, t);
      return t.predicted;
    };
    const double guess = ge_first_guess(rep, g, dstats, norm, x, n_in, range);
    ge_solve_and_run(rep, range, mode, guess, sigma_of, run_once);
    return rep;
  }
  ge_forward_trials(a, rep, K, run_once);
  return rep;
}

/// An elementwise nonlinearity (gelu, silu, tanh, sigmoid): no weight, so
/// the gradient checked is the input gradient dx = dy g(s), s the saved
/// tensor. predicted_sigma comes from the dy^2-weighted histogram of what
/// backward holds (the reconstruction); the inverse map reads the histogram of
/// the exact tensor, the stand-in for the previous step's.
/// --producer-input: the input X (rows x I) of the linear layer whose output
/// an elementwise function read; its weight gradient dW = (dy g(s))^T X gets
/// the change too. Empty (xin) without the option.
struct ge_producer {
  std::int64_t out_features = 1, rows = 0, in_features = 0;
  std::vector<float> xin;

  /// The RMS of d(dW)[o, i] = sum_n c[n, o] X[n, i] for a per-element change c (rows x O).
  double change_rms(const std::vector<double>& c) const {
    std::vector<double> dw(static_cast<std::size_t>(out_features * in_features), 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t o = 0; o < out_features; ++o) {
        const double cv = c[static_cast<std::size_t>(r * out_features + o)];
        if (cv == 0) continue;
        double* row = dw.data() + o * in_features;
        const float* xr = xin.data() + r * in_features;
        for (std::int64_t i = 0; i < in_features; ++i) row[i] += cv * xr[i];
      }
    return em::rms(dw.data(), dw.size());
  }
};

ge_producer ge_read_producer(const args& a, const ebac::extents& shape, std::size_t n) {
  ge_producer p;
  p.out_features = shape.rank > 0 ? static_cast<std::int64_t>(shape.dims[shape.rank - 1]) : 1;
  p.rows = p.out_features > 0 ? static_cast<std::int64_t>(n) / p.out_features : 0;
  if (a.has("producer-input") != a.has("producer-features"))
    throw usage_error("--producer-input and --producer-features go together");
  if (a.has("producer-input")) {
    if (shape.rank < 2) throw usage_error("--producer-input needs an --input-shape of rank 2 or more (rows x features)");
    p.in_features = parse_int(a.opt.at("producer-features"), "--producer-features", 1, 1L << 30);
    p.xin = ge_read_f32(a.opt.at("producer-input"), static_cast<std::uint64_t>(p.rows * p.in_features), "--producer-input");
  }
  return p;
}

template <class T>
ge_report ge_run_elementwise(const args& a, const std::vector<std::byte>& raw, const ebac::extents& shape,
                             const std::vector<float>& dy, const std::string& layer, em::elementwise_function f) {
  const T* s = reinterpret_cast<const T*>(raw.data());
  const std::size_t n = raw.size() / sizeof(T);
  ge_report rep;
  rep.layer = layer;
  const ge_options o = ge_parse_options(a, rep);
  const ebac::pipeline_spec& spec = o.spec;
  const int threads = o.threads, K = o.trials;
  const em::saved_domain dom = em::domain_of(f);
  double sum_dx2 = 0, sum_dy2 = 0, sum_dy4 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = em::detail::as_double(s[i]);
    if (std::isfinite(v) && (v < dom.lo || v > dom.hi))
      throw input_error("--activation holds " + std::to_string(v) + ", outside what " + layer + " saves (its output lies in [" +
                        std::to_string(dom.lo) + ", " + std::to_string(dom.hi) + "])");
    const double d = dy[i], dx = d * em::backward_factor(f, v);
    sum_dx2 += std::isfinite(dx) ? dx * dx : 0.0;
    sum_dy2 += d * d;
    sum_dy4 += d * d * d * d;
  }
  rep.grad_rms = n ? std::sqrt(sum_dx2 / static_cast<double>(n)) : 0.0;
  rep.input_grad_rms = rep.grad_rms;
  // Every element's squared change is its own term: the dy-weighted count of them.
  const double dof = sum_dy4 > 0 ? sum_dy2 * sum_dy2 / sum_dy4 : 0.0;
  const ge_producer producer = ge_read_producer(a, shape, n);
  const std::int64_t out_features = producer.out_features, rows = producer.rows, in_features = producer.in_features;
  const std::vector<float>& xin = producer.xin;
  auto producer_rms = [&](const std::vector<double>& c) { return producer.change_rms(c); };
  if (!xin.empty()) {
    std::vector<double> dx(n);
    for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * em::backward_factor(f, em::detail::as_double(s[i]));
    rep.producer_grad_rms = producer_rms(dx);
  }
  auto run_once = [&](const ebac::error_bound& bound, ge_trial& t) {
    const auto back = ge_round_trip(raw, ebac::dtype_of<T>::value, shape, spec, bound, threads, t);
    const T* y = reinterpret_cast<const T*>(back.data());
    const double eb_abs = t.eb_abs;
    t.measured = std::sqrt(em::elementwise_input_grad_change_mean_square(f, s, y, dy.data(), n));
    const em::elementwise_statistics st = em::collect_elementwise_statistics(y, dy.data(), n);  // what backward holds
    t.predicted = std::sqrt(em::elementwise_input_grad_mean_square(f, st, eb_abs));
    t.input_measured = t.measured;
    t.input_predicted = t.predicted;
    t.dof = dof;
    if (!xin.empty()) {
      t.producer_predicted = std::sqrt(em::elementwise_propagated_weight_grad_mean_square(f, st, eb_abs, y, dy.data(), rows,
                                                                                          out_features, xin.data(), in_features));
      std::vector<double> change(n);
      for (std::size_t i = 0; i < n; ++i)
        change[i] = em::elementwise_input_grad_change(f, em::detail::as_double(s[i]), em::detail::as_double(y[i]), dy[i]);
      t.producer_measured = producer_rms(change);
    }
  };
  if (a.has("target-rel") || a.has("target-sigma")) {
    const ebac::bound_mode mode = ge_parse_target(a, rep, K, "input");
    const ebac::value_range range = ge_value_range(s, n);
    const em::elementwise_statistics st = em::collect_elementwise_statistics(s, dy.data(), n);
    auto sigma_of = [&](double eb_abs) { return std::sqrt(em::elementwise_input_grad_mean_square(f, st, eb_abs)); };
    // First guess: sigma grows about linearly with the bound, slope sigma(1e-3 span) / (1e-3 span).
    const double span = std::max(1e-12, range.span()), probe = 1e-3 * span, at_probe = sigma_of(probe);
    ge_solve_and_run(rep, range, mode, at_probe > 0 ? probe * rep.target_sigma / at_probe : probe, sigma_of, run_once);
    return rep;
  }
  ge_forward_trials(a, rep, K, run_once);
  return rep;
}

/// What ge_print reports over a report's trials: quadratic means of the
/// sigmas, the per-trial ratio's range, the averaged shares and the least
/// degrees of freedom (with their sampling interval).
struct ge_summary {
  double pred, meas, iid, ratio, rmin, rmax, coh, bytes, first, kappa, dof, margin, repeated, ipred, imeas, eb_abs;
  bool norm, elementwise;
  em::sigma_ratio_interval iv;
};

ge_summary ge_summarize(const ge_report& r) {
  const double pred = ge_quadratic_mean(r.trials, &ge_trial::predicted);
  const double meas = ge_quadratic_mean(r.trials, &ge_trial::measured);
  const double iid = ge_quadratic_mean(r.trials, &ge_trial::iid);
  const double ratio = meas > 0 ? pred / meas : (pred == 0 ? 1.0 : INFINITY);
  double rmin = INFINITY, rmax = -INFINITY, coh = 0, bytes = 0, first = 0, kappa = 0, dof = INFINITY, margin = 1, repeated = 0;
  for (const auto& t : r.trials) {
    const double q = t.measured > 0 ? t.predicted / t.measured : (t.predicted == 0 ? 1.0 : INFINITY);
    rmin = std::min(rmin, q);
    rmax = std::max(rmax, q);
    coh += t.coherent_share / static_cast<double>(r.trials.size());
    first += t.structured_share / static_cast<double>(r.trials.size());
    kappa += t.kappa / static_cast<double>(r.trials.size());
    dof = std::min(dof, t.dof);
    margin = std::max(margin, t.margin);
    repeated += t.repeated_share / static_cast<double>(r.trials.size());
    bytes += t.ratio_bytes / static_cast<double>(r.trials.size());
  }
  const bool norm = r.layer == "batchnorm2d" || r.layer == "layernorm";
  const bool elementwise = em::parse_elementwise_function(r.layer).has_value();  // the sigmas are the input gradient's
  const double ipred = ge_quadratic_mean(r.trials, &ge_trial::input_predicted);
  const double imeas = ge_quadratic_mean(r.trials, &ge_trial::input_measured);
  const double eb_abs = r.trials.empty() ? 0 : r.trials[r.trials.size() / 2].eb_abs;
  // How far measured may fall from a correct prediction by chance (99.9%).
  const em::sigma_ratio_interval iv = em::sampling_interval(dof);
  return {pred, meas,   iid,      ratio, rmin,  rmax,   coh,  bytes,       first, kappa,
          dof,  margin, repeated, ipred, imeas, eb_abs, norm, elementwise, iv};
}

/// The report as one JSON line.
void ge_print_json(const ge_report& r, const ge_summary& s) {
  nlohmann::ordered_json j;
  j["layer"] = r.layer;
  j["gradient"] = s.elementwise ? "input" : s.norm ? "gamma" : r.layer == "matmul" ? "other_operand" : "weight";
  j["pipeline"] = r.pipeline;
  j["mode"] = r.mode;
  j["eb"] = json_number(r.eb);
  j["eb_abs"] = json_number(s.eb_abs);
  j["trials"] = r.trials.size();
  j["predicted_sigma"] = json_number(s.pred);
  j["measured_sigma"] = json_number(s.meas);
  j["ratio"] = json_number(s.ratio);
  j["ratio_min"] = json_number(s.rmin);
  j["ratio_max"] = json_number(s.rmax);
  j["grad_rms"] = json_number(r.grad_rms);
  j["relative_error"] = json_number(r.grad_rms > 0 ? s.meas / r.grad_rms : NAN);
  j["iid_sigma"] = json_number(s.iid);
  j["coherent_share"] = json_number(s.coh);
  j["structured_share"] = json_number(s.first);
  j["kappa"] = json_number(s.kappa);
  j["effective_dof"] = json_number(s.dof);
  j["sampling_interval"] = {json_number(s.iv.low), json_number(s.iv.high)};
  j["flat_share"] = json_number(r.flat_share);
  if (r.layer == "linear" || r.layer == "layernorm") j["distinct_rows"] = r.distinct_rows;
  j["compression_ratio"] = json_number(s.bytes);
  j["weights"] = static_cast<long long>(r.weights);
  j["repeated_share"] = json_number(s.repeated);
  j["margin"] = json_number(s.margin);
  if (s.norm) {
    j["input_grad_predicted_sigma"] = json_number(s.ipred);
    j["input_grad_measured_sigma"] = json_number(s.imeas);
    j["input_grad_ratio"] = json_number(s.imeas > 0 ? s.ipred / s.imeas : NAN);
    j["input_grad_rms"] = json_number(r.input_grad_rms);
  }
  if (r.producer_grad_rms >= 0) {
    const double pp = ge_quadratic_mean(r.trials, &ge_trial::producer_predicted);
    const double pm = ge_quadratic_mean(r.trials, &ge_trial::producer_measured);
    j["producer_weight_grad_predicted_sigma"] = json_number(pp);
    j["producer_weight_grad_measured_sigma"] = json_number(pm);
    j["producer_weight_grad_ratio"] = json_number(pm > 0 ? pp / pm : NAN);
    j["producer_weight_grad_rms"] = json_number(r.producer_grad_rms);
  }
  if (r.target_sigma > 0) {
    j["target_sigma"] = json_number(r.target_sigma);
    j["measured_over_target"] = json_number(s.meas / r.target_sigma);
    j["solver_predicted_sigma"] = json_number(r.solver_predicted);
    j["solver_evaluations"] = r.solver_evaluations;
  }
  nlohmann::ordered_json per_trial = nlohmann::ordered_json::array();
  for (const auto& t : r.trials) {
    nlohmann::ordered_json o;
    o["eb"] = json_number(t.eb_requested);
    o["eb_abs"] = json_number(t.eb_abs);
    o["predicted_sigma"] = json_number(t.predicted);
    o["measured_sigma"] = json_number(t.measured);
    per_trial.push_back(std::move(o));
  }
  j["per_trial"] = std::move(per_trial);
  print_json_line(j);
}

/// The report as text.
void ge_print_text(const ge_report& r, const ge_summary& s) {
  std::printf("layer %s  pipeline %s  eb %.6g (%s)  eb_abs %.6g  trials %zu  weights %lld\n", r.layer.c_str(), r.pipeline.c_str(),
              r.eb, r.mode.c_str(), s.eb_abs, r.trials.size(), static_cast<long long>(r.weights));
  if (s.elementwise) std::printf("(no weight: the sigmas below are the input gradient's)\n");
  std::printf("predicted_sigma %.6g  measured_sigma %.6g  ratio %.4f", s.pred, s.meas, s.ratio);
  if (r.trials.size() > 1) std::printf(" (per trial %.4f .. %.4f)", s.rmin, s.rmax);
  std::printf("  [measured/true by chance: %.3f .. %.3f at %.0f dof]", s.iv.low, s.iv.high, s.dof);
  std::printf(
      "\ngrad_rms %.6g  relative_error %.4g  iid_sigma %.6g  coherent_share %.3f  structured_share %.3f  kappa %.3f  flat_share "
      "%.3f  compression_ratio %.2f\n",
      r.grad_rms, r.grad_rms > 0 ? s.meas / r.grad_rms : NAN, s.iid, s.coh, s.first, s.kappa, r.flat_share, s.bytes);
  if (s.margin != 1)
    std::printf("level data (%.0f%% of non-zero inputs repeat): predicted_sigma includes the conservative margin %.2f\n",
                100 * s.repeated, s.margin);
  if (s.norm)
    std::printf("input_grad_predicted_sigma %.6g  input_grad_measured_sigma %.6g  input_grad_ratio %.4f  input_grad_rms %.6g\n",
                s.ipred, s.imeas, s.imeas > 0 ? s.ipred / s.imeas : NAN, r.input_grad_rms);
  if (r.producer_grad_rms >= 0) {
    const double pp = ge_quadratic_mean(r.trials, &ge_trial::producer_predicted);
    const double pm = ge_quadratic_mean(r.trials, &ge_trial::producer_measured);
    std::printf("producer weight gradient: predicted_sigma %.6g  measured_sigma %.6g  ratio %.4f  grad_rms %.6g\n", pp, pm,
                pm > 0 ? pp / pm : NAN, r.producer_grad_rms);
  }
  if (r.target_sigma > 0)
    std::printf("target_sigma %.6g  measured_over_target %.4f  (inverse map: %d evaluations, predicted %.6g)\n", r.target_sigma,
                s.meas / r.target_sigma, r.solver_evaluations, r.solver_predicted);
}

void ge_print(const ge_report& r, bool json) {
  const ge_summary s = ge_summarize(r);
  if (json) ge_print_json(r, s);
  else ge_print_text(r, s);
}

/// Refuses any of `keys` with one error line: "--KEY <reason>".
void ge_refuse(const args& a, std::initializer_list<const char*> keys, const std::string& reason) {
  for (const char* k : keys)
    if (a.has(k)) throw usage_error(std::string("--") + k + " " + reason);
}

/// The product of every extent but the last `trailing` ones (rows, slices).
std::uint64_t ge_leading(const ebac::extents& shape, int trailing) {
  std::uint64_t p = 1;
  for (int i = 0; i + trailing < shape.rank; ++i) p *= shape.dims[i];
  return p;
}

/// --weight-shape of `rank` extents (usage: the form to name when it is not)
/// whose extent `at` must equal the input's last extent, called `name`.
ebac::extents ge_weight_shape(const args& a, const ebac::extents& in, int rank, int at, const std::string& usage,
                              const std::string& name, const std::string& whose) {
  const ebac::extents w = parse_dims(a.need("weight-shape"), "--weight-shape");
  if (w.rank != rank) throw usage_error("--weight-shape of " + usage);
  if (w.dims[at] != in.dims[in.rank - 1])
    throw usage_error("--weight-shape " + name + " (" + std::to_string(w.dims[at]) + ") must equal " + whose + " last extent (" +
                      std::to_string(in.dims[in.rank - 1]) + ")");
  return w;
}

/// grad-error of an elementwise layer (gelu, silu, tanh, sigmoid): the saved
/// tensor (gelu/silu: the input; tanh/sigmoid: the output) and dy share one shape.
int ge_command_elementwise(const args& a, const ebac::extents& in_shape, ebac::dtype t, const std::string& layer,
                           em::elementwise_function function) {
  // The saved tensor (gelu/silu: the input; tanh/sigmoid: the output) and dy share one shape.
  ge_refuse(a, {"weight-shape", "stride", "padding", "dilation", "groups", "gamma", "eps"},
            "does not apply to an elementwise layer (" + layer + ")");
  ebac_cli::start_threads(threads_arg(a, 0));
  const auto raw = read_array(a.need("activation"), in_shape, t, "--input-shape");
  std::uint64_t count = 0;
  if (in_shape.count(count) != ebac::status::ok) throw usage_error("--input-shape: the element count overflows");
  const std::vector<float> dy = ge_read_f32(a.need("grad-output"), count, "--grad-output");
  const ge_report r = ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) -> ge_report {
    if constexpr (ebac::floating_element<T>) return ge_run_elementwise<T>(a, raw, in_shape, dy, layer, function);
    else throw usage_error("grad-error: --dtype must be f32, f16 or bf16");
  });
  ge_print(r, a.json);
  return 0;
}

/// The layer --layer, --input-shape, --weight-shape, --stride, --padding,
/// --dilation and --groups describe (not an elementwise one), checked.
em::conv2d_geometry ge_layer_geometry(const args& a, const std::string& layer, const ebac::extents& in_shape) {
  em::conv2d_geometry g;
  if (layer == "linear") {
    // Rows x features; leading dimensions (batch, tokens, ...) are rows.
    if (in_shape.rank < 2) throw usage_error("--input-shape of a linear layer is N,C (or N,...,C)");
    const ebac::extents w = ge_weight_shape(a, in_shape, 2, 1, "a linear layer is O,C", "C", "the input's");
    const std::uint64_t rows = ge_leading(in_shape, 1);
    g = em::conv2d_geometry::linear(static_cast<std::int64_t>(rows), static_cast<std::int64_t>(w.dims[1]),
                                    static_cast<std::int64_t>(w.dims[0]));
    ge_refuse(a, {"stride", "padding", "dilation", "groups", "gamma", "eps"}, "does not apply to a linear layer");
  } else if (layer == "conv2d") {
    if (in_shape.rank != 4) throw usage_error("--input-shape of a conv2d layer is N,C,H,W");
    const ebac::extents w = parse_dims(a.need("weight-shape"), "--weight-shape");
    if (w.rank != 4) throw usage_error("--weight-shape of a conv2d layer is O,C/G,KH,KW");
    g.batch = static_cast<std::int64_t>(in_shape.dims[0]);
    g.in_channels = static_cast<std::int64_t>(in_shape.dims[1]);
    g.in_h = static_cast<std::int64_t>(in_shape.dims[2]);
    g.in_w = static_cast<std::int64_t>(in_shape.dims[3]);
    g.out_channels = static_cast<std::int64_t>(w.dims[0]);
    g.kernel_h = static_cast<std::int64_t>(w.dims[2]);
    g.kernel_w = static_cast<std::int64_t>(w.dims[3]);
    std::tie(g.stride_h, g.stride_w) = ge_parse_pair(a, "stride", 1, 1);
    std::tie(g.pad_h, g.pad_w) = ge_parse_pair(a, "padding", 0, 0);
    std::tie(g.dilation_h, g.dilation_w) = ge_parse_pair(a, "dilation", 1, 1);
    g.groups = a.has("groups") ? parse_int(a.opt.at("groups"), "--groups", 1, 1L << 30) : 1;
    if (g.in_channels % g.groups != 0 || static_cast<std::int64_t>(w.dims[1]) * g.groups != g.in_channels)
      throw usage_error("--weight-shape C/G (" + std::to_string(w.dims[1]) + ") times --groups must equal the input channels (" +
                        std::to_string(g.in_channels) + ")");
    ge_refuse(a, {"gamma", "eps"}, "applies to batchnorm2d and layernorm only");
  } else if (layer == "matmul") {
    // C = A B per slice of the leading extents, A saved: [..., M, K] with the other operand K,N.
    if (in_shape.rank < 2) throw usage_error("--input-shape of a matmul is [...,]M,K (the saved operand)");
    const ebac::extents w = ge_weight_shape(
        a, in_shape, 2, 0, "a matmul is K,N (the other operand, whose gradient reads the saved one)", "K", "the saved operand's");
    ge_refuse(a, {"stride", "padding", "dilation", "groups", "gamma", "eps"}, "does not apply to a matmul");
    const std::uint64_t slices = ge_leading(in_shape, 2);
    g = em::matmul_geometry(static_cast<std::int64_t>(slices), static_cast<std::int64_t>(in_shape.dims[in_shape.rank - 2]),
                            static_cast<std::int64_t>(w.dims[0]), static_cast<std::int64_t>(w.dims[1]));
  } else if (layer == "layernorm") {
    // Normalized over the last extent D; every leading extent (batch, tokens, ...) is a row.
    if (in_shape.rank < 2) throw usage_error("--input-shape of a layernorm layer is N,D (or N,...,D)");
    const ebac::extents w = ge_weight_shape(a, in_shape, 1, 0, "a layernorm layer is D (its gamma)", "D", "the input's");
    ge_refuse(a, {"stride", "padding", "dilation", "groups"}, "does not apply to a layernorm layer");
    const std::uint64_t rows = ge_leading(in_shape, 1);
    g = em::layernorm_gamma_geometry(static_cast<std::int64_t>(rows), static_cast<std::int64_t>(w.dims[0]));
  } else {
    if (in_shape.rank != 4) throw usage_error("--input-shape of a batchnorm2d layer is N,C,H,W");
    if (a.has("weight-shape") || a.has("stride") || a.has("padding") || a.has("dilation") || a.has("groups"))
      throw usage_error("batchnorm2d takes no --weight-shape/--stride/--padding/--dilation/--groups");
    // BN's gamma gradient is a depthwise 1x1 convolution's weight gradient.
    g.batch = static_cast<std::int64_t>(in_shape.dims[0]);
    g.in_channels = g.out_channels = g.groups = static_cast<std::int64_t>(in_shape.dims[1]);
    g.in_h = static_cast<std::int64_t>(in_shape.dims[2]);
    g.in_w = static_cast<std::int64_t>(in_shape.dims[3]);
  }
  if (g.validate() != ebac::status::ok)
    throw usage_error("the layer's shapes, stride, padding, dilation and groups do not describe a valid layer");
  return g;
}

}  // namespace

int cmd_grad_error(int argc, char** argv) {
  const args a = parse_command(
      argc, argv,
      {{"activation", "--activation", "the saved input (raw array)"},
       {"grad-output", "--grad-output", "the output gradient (raw f32)"},
       {"layer", "--layer", "linear, conv2d, batchnorm2d, layernorm, matmul, gelu, silu, tanh or sigmoid"},
       {"input-shape", "--input-shape", "N,C[,H,W]"},
       {"weight-shape", "--weight-shape", "O,C/G[,KH,KW]"},
       {"stride", "--stride", "S or S,S"},
       {"padding", "--padding", "P or P,P"},
       {"dilation", "--dilation", "D or D,D"},
       {"groups", "--groups", "G"},
       {"eb", "--eb", "error bound"},
       {"mode", "--mode", "abs (default) or rel"},
       {"pipeline", "--pipeline", "pipeline (default fast)"},
       {"trials", "--trials", "compressions at bounds around eb"},
       {"dtype", "--dtype", "element type of the activation"},
       {"gamma", "--gamma", "batchnorm2d, layernorm: per-channel / per-feature gamma (raw f32)"},
       {"eps", "--eps", "batchnorm2d, layernorm: epsilon"},
       {"target-rel", "--target-rel", "target sigma relative to the gradient RMS"},
       {"producer-input", "--producer-input",
        "gelu, silu, tanh, sigmoid: input of the linear layer that produced the pre-activation (raw f32, rows x I)"},
       {"producer-features", "--producer-features", "I, the producing linear layer's input features"},
       {"target-sigma", "--target-sigma", "target sigma"},
       threads_option},
      /*json_flag=*/true);
  const std::string layer = a.need("layer");
  const std::optional<em::elementwise_function> elementwise = em::parse_elementwise_function(layer);
  if (layer != "linear" && layer != "conv2d" && layer != "batchnorm2d" && layer != "layernorm" && layer != "matmul" &&
      !elementwise)
    throw usage_error("--layer must be linear, conv2d, batchnorm2d, layernorm, matmul, gelu, silu, tanh or sigmoid, got '" +
                      layer + "'");
  const ebac::extents in_shape = parse_dims(a.need("input-shape"), "--input-shape");
  const ebac::dtype t = a.has("dtype") ? parse_dtype_arg(a.opt.at("dtype")) : ebac::dtype::f32;
  if (!ebac::is_floating(t)) throw usage_error("grad-error: --dtype must be f32, f16 or bf16 (activations under a bound)");
  if (!elementwise) ge_refuse(a, {"producer-input", "producer-features"}, "applies to gelu, silu, tanh and sigmoid only");
  if (elementwise) return ge_command_elementwise(a, in_shape, t, layer, *elementwise);
  const em::conv2d_geometry g = ge_layer_geometry(a, layer, in_shape);
  const auto dy_count = static_cast<std::uint64_t>(g.output_count());
  ebac_cli::start_threads(threads_arg(a, 0));
  const auto raw = read_array(a.need("activation"), in_shape, t, "--input-shape");
  std::vector<float> dy = ge_read_f32(a.need("grad-output"), dy_count, "--grad-output");
  if (layer == "matmul")  // dC arrives as [slices, M, N]; the model reads it with the slices side by side
    dy = em::matmul_rows_layout(dy.data(), g.groups, g.batch, g.out_channels_per_group());
  const ge_report r = ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) -> ge_report {
    if constexpr (ebac::floating_element<T>) return ge_run<T>(a, raw, in_shape, g, dy, layer);
    else throw usage_error("grad-error: --dtype must be f32, f16 or bf16");
  });
  ge_print(r, a.json);
  return 0;
}

}  // namespace ebac_cli
