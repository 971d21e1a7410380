// ebac/error_model/inverse.hpp - inverse map: target sigma -> error bound.
//
// Every term of the forward map scales with the bound (errors are at most eb,
// and their pattern repeats when eb changes), so sigma(eb) is close to
// proportional to eb; but repeated values make it a saw-tooth at fine scale
// (the error of one repeated value jumps as the bin edges move past it).
// The solver therefore works in log-log space: a secant step with the slope
// clamped to [1/4, 4] around the proportional guess; once it has bounds on
// both sides of the target it never steps outside them (it bisects instead),
// and it returns the best bound it evaluated rather than trusting the last.
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>

#include <cmath>

EBAC_NAMESPACE_BEGIN
namespace error_model {

struct bound_solution {
  status state = status::ok;
  double eb = 0;               ///< the bound chosen
  double predicted_sigma = 0;  ///< the forward map at eb
  int evaluations = 0;
  bool converged = false;  ///< |predicted / target - 1| <= tolerance
};

struct bound_solver {
  double tolerance = 0.02;  ///< relative, on sigma
  int max_evaluations = 12;
  double eb_min = 0;  ///< clamp (0: none)
  double eb_max = 0;  ///< clamp (0: none)

  /// sigma_of(eb) is the forward map (any callable double -> double).
  template <class F>
  bound_solution operator()(double target_sigma, double initial_eb, F&& sigma_of) const {
    bound_solution best;
    if (!(target_sigma > 0) || !(initial_eb > 0) || !std::isfinite(target_sigma) || !std::isfinite(initial_eb)) {
      best.state = status::invalid_argument;
      return best;
    }
    auto clamp = [&](double eb) {
      if (eb_min > 0 && eb < eb_min) eb = eb_min;
      if (eb_max > 0 && eb > eb_max) eb = eb_max;
      return eb;
    };
    double x0 = std::log(clamp(initial_eb)), y0 = 0;
    double best_gap = INFINITY;
    double slope = 1;  // d log sigma / d log eb
    double prev_x = x0;
    double lo = -INFINITY, hi = INFINITY;  // log bounds known to give sigma below / above the target
    for (int it = 0; it < max_evaluations; ++it) {
      const double eb = std::exp(x0);
      const double s = sigma_of(eb);
      ++best.evaluations;
      if (!(s > 0) || !std::isfinite(s)) {
        // sigma == 0: nothing in this layer feels the error; the largest allowed bound is as good as any.
        if (s == 0 && best.evaluations == 1) {
          best.eb = eb_max > 0 ? eb_max : eb;
          best.predicted_sigma = 0;
          best.converged = true;
          return best;
        }
        break;
      }
      const double y = std::log(s / target_sigma);
      const double gap = std::fabs(y);
      if (gap < best_gap) {
        best_gap = gap;
        best.eb = eb;
        best.predicted_sigma = s;
      }
      if (gap <= std::log1p(tolerance)) {
        best.converged = true;
        return best;
      }
      if (y < 0 && x0 > lo) lo = x0;
      if (y > 0 && x0 < hi) hi = x0;
      if (it > 0 && x0 != prev_x) {
        const double sl = (y - y0) / (x0 - prev_x);
        slope = sl < 0.25 ? 0.25 : (sl > 4 ? 4 : sl);
      }
      prev_x = x0;
      y0 = y;
      double next = std::log(clamp(std::exp(x0 - y / slope)));
      if (std::isfinite(lo) && std::isfinite(hi) && !(next > lo && next < hi)) next = 0.5 * (lo + hi);
      if (next == x0) break;  // clamped: cannot move further
      x0 = next;
    }
    if (best.eb == 0) best.state = status::invalid_argument;
    return best;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
