// ebac/error_model/elementwise_model.hpp - elementwise nonlinearities whose
// backward reads a saved tensor: GELU and SiLU (their input), tanh and
// sigmoid (their output, which is what PyTorch saves for them).
//
// Backward is dx = dy * g(s), s the saved value and g the derivative written
// in terms of it: GELU'(x), SiLU'(x), 1 - t^2 for t = tanh(x), p (1 - p) for
// p = sigmoid(x). With s replaced by its reconstruction s^ the change is
//     d(dx) = dy (g(s^) - g(s)),
// element by element, nothing summed: no cancellation and no coherence to
// model, only how far g moves across the quantizer's bin at s. So
//     E[mean d(dx)^2] = (1/N) sum_i dy_i^2 q(s_i),   q(s) = E[(g(s^) - g(s))^2],
// and the statistic a trainer needs is the histogram of the saved values
// weighted by dy^2 (one pass over what backward reads: s^ and dy). It does
// not depend on the bound, so the inverse map can try bounds on it.
//
// The histogram is of the reconstruction y, since that is what backward
// holds, so q is an expectation over the exact values that reconstruct to y:
// every quantizer bin is [y - h, y + h] around its reconstruction (h = eb up
// to the bin margin), including the sign-preserving quantizer's first bin
// (0, 2h] -> h, so q(y) = E_u[(g(y + u) - g(y))^2] with u uniform over
// [-h, h] when x spreads evenly over the bin; the model tilts that by the
// density's slope, read from the neighbouring bins' counts. Assumptions: the
// density is linear across one quantizer bin, and dy^2 does not depend on
// where in the bin x falls. Exact zeros come back
// exactly and are left out; under the linear quantizer a reconstructed 0 may
// also stand for |x| < h, which the model then counts as exact.
// The change reaches the weight gradient of the linear layer that produced
// a GELU's or SiLU's input (elementwise_propagated_weight_grad_mean_square).
// docs/error-model.md section 6.3 has the measured tables.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/reference_gradient.hpp>
#include <ebac/quantizer/linear.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// An elementwise nonlinearity, named by what its backward reads.
enum class elementwise_function : std::uint8_t {
  gelu,     ///< x Phi(x) (the erf form, PyTorch's default); saves its input
  silu,     ///< x sigmoid(x); saves its input
  tanh,     ///< saves its output t; g(t) = 1 - t^2
  sigmoid,  ///< saves its output p; g(p) = p (1 - p)
};

[[nodiscard]] inline std::optional<elementwise_function> parse_elementwise_function(std::string_view s) noexcept {
  if (s == "gelu") return elementwise_function::gelu;
  if (s == "silu") return elementwise_function::silu;
  if (s == "tanh") return elementwise_function::tanh;
  if (s == "sigmoid") return elementwise_function::sigmoid;
  return std::nullopt;
}

/// True when backward reads the function's output (tanh, sigmoid), false
/// when it reads the input (GELU, SiLU).
[[nodiscard]] constexpr bool saves_output(elementwise_function f) noexcept {
  return f == elementwise_function::tanh || f == elementwise_function::sigmoid;
}

/// The values the saved tensor can take: tanh's output lies in [-1, 1],
/// sigmoid's in [0, 1], an input anywhere. A quantizer bin that reaches past
/// the edge holds values only on this side of it.
struct saved_domain {
  double lo, hi;
};
[[nodiscard]] constexpr saved_domain domain_of(elementwise_function f) noexcept {
  if (f == elementwise_function::tanh) return {-1.0, 1.0};
  if (f == elementwise_function::sigmoid) return {0.0, 1.0};
  return {-1e308, 1e308};
}

/// g(s): the factor backward multiplies dy by, from the saved value s.
[[nodiscard]] inline double backward_factor(elementwise_function f, double s) noexcept {
  switch (f) {
    case elementwise_function::gelu: {
      constexpr double inv_sqrt2 = 0.70710678118654752440, inv_sqrt_2pi = 0.39894228040143267794;
      return 0.5 * std::erfc(-s * inv_sqrt2) + s * inv_sqrt_2pi * std::exp(-0.5 * s * s);
    }
    case elementwise_function::silu: {
      const double p = 1.0 / (1.0 + std::exp(-s));
      return p * (1.0 + s * (1.0 - p));
    }
    case elementwise_function::tanh: return 1.0 - s * s;
    case elementwise_function::sigmoid: return s * (1.0 - s);
  }
  return 0.0;
}

/// The dy^2-weighted histogram of the saved values: what the model reads.
struct elementwise_statistics {
  double lo = 0, hi = 0;       ///< range of the finite non-zero saved values
  std::vector<double> weight;  ///< [bins] sum of dy^2 over the values in each bin
  std::vector<double> count;   ///< [bins] how many values fall in each bin (the density)
  std::int64_t elements = 0;   ///< every element, zeros and non-finite ones included
  [[nodiscard]] double bin_width() const noexcept {
    return weight.empty() ? 0.0 : (hi - lo) / static_cast<double>(weight.size());
  }
};

/// The bin of the histogram a saved value falls in (values outside the range clamp).
[[nodiscard]] inline std::size_t elementwise_bin_of(const elementwise_statistics& st, double v) noexcept {
  const double w = st.bin_width();
  if (st.weight.empty() || !(w > 0) || !(v > st.lo)) return 0;
  return std::min(st.weight.size() - 1, static_cast<std::size_t>((v - st.lo) / w));
}

/// One pass over n saved values s and their output gradients dy. Zeros and
/// non-finite values come back exactly and are left out of the bins.
template <class S, class D>
elementwise_statistics collect_elementwise_statistics(const S* s, const D* dy, std::size_t n, std::size_t bins = 2048) {
  elementwise_statistics st;
  st.elements = static_cast<std::int64_t>(n);
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = detail::as_double(s[i]);
    if (v == 0 || !std::isfinite(v)) continue;
    st.lo = any ? std::min(st.lo, v) : v;
    st.hi = any ? std::max(st.hi, v) : v;
    any = true;
  }
  if (!any) return st;
  st.weight.assign(std::max<std::size_t>(bins, 1), 0.0);
  st.count.assign(st.weight.size(), 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = detail::as_double(s[i]);
    if (v == 0 || !std::isfinite(v)) continue;
    const double d = detail::as_double(dy[i]);
    const std::size_t b = elementwise_bin_of(st, v);
    st.weight[b] += d * d;
    st.count[b] += 1;
  }
  return st;
}

/// How many values lie in [a, b]: the histogram's cumulative count,
/// linear inside a bin.
[[nodiscard]] inline double elementwise_count_between(const elementwise_statistics& st, const std::vector<double>& cumulative,
                                                      double a, double b) noexcept {
  const double w = st.bin_width();
  auto cdf = [&](double z) {
    if (w <= 0) return z < st.lo ? 0.0 : cumulative.back();
    const double t = (z - st.lo) / w;
    if (t <= 0) return 0.0;
    if (t >= static_cast<double>(st.count.size())) return cumulative.back();
    const auto i = static_cast<std::size_t>(t);
    const double before = i == 0 ? 0.0 : cumulative[i - 1];
    return before + (t - static_cast<double>(i)) * st.count[i];
  };
  return cdf(b) - cdf(a);
}

/// q(y) of every histogram bin at absolute bound eb (0 for empty bins):
///     q(y) = E_x[(g(y) - g(x))^2],   x over the quantizer bin [y - h, y + h],
/// h = eb (1 - quantizer_bin_margin), by 8-point Gauss-Legendre at each
/// histogram bin's centre (q is smooth in y; the histogram is far finer than
/// g's curvature). The density of x across the bin is taken as linear, its
/// slope from the counts of the two neighbouring quantizer bins: at bounds
/// near the data's spread the density falls across a bin (most of all in the
/// first bins around a peak at 0), and a uniform x would under-predict.
[[nodiscard]] inline std::vector<double> elementwise_bin_change_square(elementwise_function f, const elementwise_statistics& st,
                                                                       double eb) {
  std::vector<double> q(st.weight.size(), 0.0);
  if (st.weight.empty() || !(eb > 0)) return q;
  static constexpr double node[4] = {0.18343464249564980, 0.52553240991632899, 0.79666647741362674, 0.96028985649753623};
  static constexpr double wgt[4] = {0.36268378337836198, 0.31370664587788729, 0.22238103445337447, 0.10122853629037626};
  const double h = eb * (1.0 - quantizer_bin_margin), w = st.bin_width();
  const saved_domain dom = domain_of(f);
  std::vector<double> cumulative(st.count.size());
  double run = 0;
  for (std::size_t b = 0; b < st.count.size(); ++b) cumulative[b] = run += st.count[b];
  for (std::size_t b = 0; b < st.weight.size(); ++b) {
    if (st.count[b] == 0) continue;
    const double y = st.lo + w * (static_cast<double>(b) + 0.5), gy = backward_factor(f, y);
    // p(x) proportional to 1 + slope (x - y) / h over the bin, |slope| <= 1.
    const double here = elementwise_count_between(st, cumulative, y - h, y + h);
    const double above = elementwise_count_between(st, cumulative, y + h, y + 3 * h);
    const double below = elementwise_count_between(st, cumulative, y - 3 * h, y - h);
    const double slope = here > 0 ? std::clamp((above - below) / (2 * here), -1.0, 1.0) : 0.0;
    // The bin, cut to the values the function can save.
    const double a = std::max(y - h, dom.lo), c = std::min(y + h, dom.hi), mid = (a + c) / 2, half = (c - a) / 2;
    if (!(half > 0)) continue;
    double sum = 0, mass = 0;
    for (int k = 0; k < 4; ++k)
      for (const double sign : {-1.0, 1.0}) {
        const double x = mid + sign * half * node[k], p = wgt[k] * (1 + slope * (x - y) / h);
        const double d = backward_factor(f, x) - gy;
        sum += p * d * d;
        mass += p;
      }
    q[b] = sum / mass;
  }
  return q;
}

/// The model's E[mean d(dx)^2] at absolute bound eb: (1/N) sum_b W_b q_b.
[[nodiscard]] inline double elementwise_input_grad_mean_square(elementwise_function f, const elementwise_statistics& st,
                                                               double eb) {
  if (st.weight.empty() || st.elements <= 0 || !(eb > 0)) return 0.0;
  const std::vector<double> q = elementwise_bin_change_square(f, st, eb);
  double sum = 0;
  for (std::size_t b = 0; b < q.size(); ++b) sum += st.weight[b] * q[b];
  return sum / static_cast<double>(st.elements);
}

/// The error carried on into the weight gradient of the linear layer that
/// produced the saved pre-activation (GELU(x W^T + b): W's gradient is
/// dW = (dy g(s))^T X, X its input, rows x in_features). d(dx) is
/// independent from element to element, so with
///     V_n = sum_o E[d(dx)_no^2] = sum_o dy_no^2 q(s^_no),   S_n = sum_i X_ni^2,
///     E[mean d(dW)^2] = (1 / (O I)) sum_n V_n S_n
/// over rows n, O = the saved tensor's last extent, I = in_features. s_hat
/// and dy are rows x O; x_in is rows x in_features.
template <class S, class D, class X>
double elementwise_propagated_weight_grad_mean_square(elementwise_function f, const elementwise_statistics& st, double eb,
                                                      const S* s_hat, const D* dy, std::int64_t rows, std::int64_t out_features,
                                                      const X* x_in, std::int64_t in_features) {
  if (rows <= 0 || out_features <= 0 || in_features <= 0 || !(eb > 0) || st.weight.empty()) return 0.0;
  const std::vector<double> q = elementwise_bin_change_square(f, st, eb);
  double sum = 0;
  for (std::int64_t n = 0; n < rows; ++n) {
    double v = 0, e = 0;
    for (std::int64_t o = 0; o < out_features; ++o) {
      const std::int64_t j = n * out_features + o;
      const double y = detail::as_double(s_hat[j]), d = detail::as_double(dy[j]);
      if (y != 0 && std::isfinite(y)) v += d * d * q[elementwise_bin_of(st, y)];
    }
    for (std::int64_t i = 0; i < in_features; ++i) {
      const double xv = detail::as_double(x_in[n * in_features + i]);
      e += xv * xv;
    }
    sum += v * e;
  }
  return sum / (static_cast<double>(out_features) * static_cast<double>(in_features));
}

/// The exact change of dx at one element whose saved value s comes back as
/// s_hat: dy (g(s_hat) - g(s)); 0 for a non-finite s (stored exactly).
[[nodiscard]] inline double elementwise_input_grad_change(elementwise_function f, double s, double s_hat, double dy) noexcept {
  return std::isfinite(s) ? dy * (backward_factor(f, s_hat) - backward_factor(f, s)) : 0.0;
}

/// Its mean square over n elements (the measurement the model predicts).
template <class S, class D>
double elementwise_input_grad_change_mean_square(elementwise_function f, const S* s, const S* s_hat, const D* dy, std::size_t n) {
  if (n == 0) return 0.0;
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d =
        elementwise_input_grad_change(f, detail::as_double(s[i]), detail::as_double(s_hat[i]), detail::as_double(dy[i]));
    sum += d * d;
  }
  return sum / static_cast<double>(n);
}

}  // namespace error_model
EBAC_NAMESPACE_END
