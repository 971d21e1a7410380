// ebac/error_model/weight_error_model.hpp - forward map: compressor error
// statistics + output-gradient statistics -> predicted RMS of the
// weight-gradient error of a linear or 2-D convolution layer.
//
// Decomposition (docs/error-model.md has the derivation). For input channel c
// the error field is split as
//     e = u_c [flat] + r_c [not flat] + residual,
// u_c and r_c the mean errors over the flat region and over the rest. The
// first two terms are one number each, repeated over many positions, so their
// contribution is coherent: with the centre-tap sums of dy over the flat
// region (F_o) and the rest (R_o), the entry (o, c, k) gets
//     u_c F_o + r_c R_o,
// the same for every tap k. The residual is modelled as independent in the
// energy-pyramid basis. In total, for the weight count P,
//     sigma^2 = (1/P) sum_groups [ K sum_{o,c} (u_c F_o + r_c R_o)^2 + K inner(dy, residual) ],
// with K the taps that read inside the input (layer_geometry::effective_taps).
// The residual is split by support into structured elements and the rest
// (error_statistics.hpp): first-bin elements (x != 0 with |y| <= eb), whose
// error is a linear function of the input (eb - x for the sign-preserving
// quantizer, -x for the linear one), and elements whose exact value repeats
// (8-bit image data), whose error repeats with it. Such errors follow the
// input's structure rather than behaving like noise, and carry the
// gradient's own coherence. That coherence is measured from cheap statistics:
//     kappa = |G|^2 / (K inner(dy, x)) = P rms(G)^2 / (K inner(dy, x)),
// the gradient's energy over what a random-sign sum of the same terms would
// have (about 1 for noise-like gradients; 0.4-2.4 on the corpus, and below 1
// is treated as 1), and the structured term is scaled by it:
//     sigma^2 = (1/P) sum_g [ coherent + K inner(dy, rest) + kappa K inner(dy, structured) ].
// The coherent term matters for early layers (flat image backgrounds), the
// kappa term for coarse bounds on post-ReLU inputs and for image inputs.
// Without both the model is the pyramid alone, and without the pyramid the
// i.i.d. model of iid_model.hpp.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/energy_pyramid.hpp>
#include <ebac/error_model/error_statistics.hpp>
#include <ebac/error_model/gradient_statistics.hpp>
#include <ebac/error_model/iid_model.hpp>
#include <ebac/error_model/sampling.hpp>
#include <ebac/status.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// The coherent contribution of one group, from sums the caller has formed:
/// K * sum_{o,c} (u_c F_o + r_c R_o)^2 expanded so it costs O(O + C):
///   K * (U2 FF + 2 UR FR + R2 RR),
/// U2 = sum u_c^2, UR = sum u_c r_c, R2 = sum r_c^2 over the group's inputs,
/// FF = sum F_o^2, FR = sum F_o R_o, RR = sum R_o^2 over its outputs.
struct coherent_term {
  double taps = 1;
  EBAC_HOST_DEVICE constexpr double operator()(double U2, double UR, double R2, double FF, double FR, double RR) const noexcept {
    const double v = taps * (U2 * FF + 2 * UR * FR + R2 * RR);
    return v > 0 ? v : 0.0;
  }
};

/// Mean square per weight from the expected sum of squared errors (sigma^2).
EBAC_HOST_DEVICE constexpr double mean_square_per_weight(double sum_squares, double weights) noexcept {
  return weights > 0 && sum_squares > 0 ? sum_squares / weights : 0.0;
}

struct weight_error_prediction {
  status state = status::ok;
  double sigma = 0;             ///< predicted RMS of the weight-gradient error
  double coherent_share = 0;    ///< share of sigma^2 from the flat/mean (coherent) term
  double structured_share = 0;  ///< share of sigma^2 from structured errors (after kappa)
  double kappa = 1;             ///< coherence factor applied to the structured term
  double repeated_share = 0;    ///< share of the non-zero inputs whose exact value repeats in its channel
  double margin = 1;            ///< conservative factor applied to sigma (level_data_margin on level data, else 1)
  /// Degrees of freedom of a measured sigma^2 around this prediction
  /// (Satterthwaite): the coherent term varies only with the output channel
  /// (it is shared by every input channel and tap), dof = O; the others are
  /// sums over all P entries, dof = P. sampling.hpp turns it into an interval.
  double effective_dof = 0;
  double iid_sigma = 0;                   ///< the i.i.d. baseline (iid_model.hpp) with the measured E[e^2]
  std::vector<double> group_sum_squares;  ///< expected sum of squared errors per channel group
};

/// Host functor: forward map of the model. Its only state is the level-data
/// margin below; the struct exists so
/// that a caller can pass the model around like the other policies.
struct weight_error_model {
  /// Level data (an input batch of 8-bit images, or anything else whose
  /// non-zero values nearly all repeat exactly in their channel: at least
  /// `level_data_share` of them) makes every error a deterministic function of
  /// a few hundred levels. The errors then correlate with each other and with
  /// dy through the image content itself, and the model's magnitude is right
  /// only on average: predicted/measured scatters 0.64..2.4 per
  /// (layer, bound) on image-input convolutions (docs/error-model.md, sections
  /// 8-9). There the prediction is made conservative by `level_data_margin`:
  /// on the development sets (c0, c1, h3, bundled corpus; 60 image-input
  /// pairs) log(predicted/measured) has mean 0.01 and SD 0.22, whose fitted
  /// 1st percentile is a ratio of 0.60-0.61; 1.1 lifts that percentile to
  /// about 0.67.
  /// The held-out sets (h6, m4) were checked with it afterwards. Set it to 1
  /// for the plain estimate.
  double level_data_margin = 1.1;
  double level_data_share = 0.9;

  weight_error_prediction operator()(const output_gradient_statistics& dy, const input_error_statistics& err) const {
    weight_error_prediction r;
    const conv2d_geometry& g = dy.geometry;
    const conv2d_geometry& ge = err.geometry;
    if (g.validate() != status::ok || ge.batch != g.batch || ge.in_channels != g.in_channels || ge.in_h != g.in_h ||
        ge.in_w != g.in_w || ge.out_h() != g.out_h() || ge.out_w() != g.out_w() || ge.groups != g.groups ||
        dy.pyramids.size() != static_cast<std::size_t>(g.groups) || err.pyramids.size() != static_cast<std::size_t>(g.groups) ||
        err.structured_pyramids.size() != err.pyramids.size() || err.input_pyramids.size() != err.pyramids.size()) {
      r.state = status::invalid_argument;
      return r;
    }
    // Taps reading the zero padding carry no error: count only the valid ones.
    const double K = g.effective_taps(), P = static_cast<double>(g.weight_count());
    const std::int64_t Og = g.out_channels_per_group(), Cg = g.in_channels_per_group();
    const double per_channel = static_cast<double>(g.batch * g.in_h * g.in_w);
    double coherent = 0, rest = 0, first = 0, input = 0, iid = 0;
    r.group_sum_squares.assign(static_cast<std::size_t>(g.groups), 0.0);
    std::vector<double> group_first(static_cast<std::size_t>(g.groups), 0.0);
    for (std::int64_t grp = 0; grp < g.groups; ++grp) {
      const auto gi = static_cast<std::size_t>(grp);
      double U2 = 0, UR = 0, R2 = 0, E2 = 0;
      for (std::int64_t c = grp * Cg; c < (grp + 1) * Cg; ++c) {
        const double u = err.flat_mean[static_cast<std::size_t>(c)], q = err.rest_mean[static_cast<std::size_t>(c)];
        U2 += u * u;
        UR += u * q;
        R2 += q * q;
        E2 += err.sum_squares[static_cast<std::size_t>(c)] / per_channel;
      }
      double FF = 0, FR = 0, RR = 0, S2 = 0;
      for (std::int64_t o = grp * Og; o < (grp + 1) * Og; ++o) {
        const double f = dy.flat_sum[static_cast<std::size_t>(o)], other = dy.sum[static_cast<std::size_t>(o)] - f;
        FF += f * f;
        FR += f * other;
        RR += other * other;
        S2 += dy.sum_squares[static_cast<std::size_t>(o)];
      }
      const double coh = coherent_term{K}(U2, UR, R2, FF, FR, RR);
      const double in_rest = pyramid_inner(dy.pyramids[gi], err.pyramids[gi]);
      const double in_first = pyramid_inner(dy.pyramids[gi], err.structured_pyramids[gi]);
      const double in_x = pyramid_inner(dy.pyramids[gi], err.input_pyramids[gi]);
      if (in_rest < 0 || in_first < 0 || in_x < 0) {
        r.state = status::invalid_argument;
        return r;
      }
      r.group_sum_squares[gi] = coh + K * in_rest;
      group_first[gi] = K * in_first;
      coherent += coh;
      rest += K * in_rest;
      first += K * in_first;
      input += K * in_x;
      iid += K * S2 * E2;
    }
    // kappa: the gradient's energy over its random-sign estimate (>= 1: a
    // gradient less coherent than noise is treated as noise).
    const double G2 = dy.weight_grad_rms * dy.weight_grad_rms * P;
    r.kappa = (G2 > 0 && input > 0 && G2 > input) ? G2 / input : 1.0;
    for (std::size_t gi = 0; gi < group_first.size(); ++gi) r.group_sum_squares[gi] += r.kappa * group_first[gi];
    const double total = coherent + rest + r.kappa * first;
    std::int64_t nonzero = 0;
    for (auto v : err.nonzero) nonzero += v;
    r.repeated_share = nonzero > 0 ? static_cast<double>(err.repeated) / static_cast<double>(nonzero) : 0.0;
    r.margin = r.repeated_share >= level_data_share ? level_data_margin : 1.0;
    r.sigma = r.margin * std::sqrt(mean_square_per_weight(total, P));
    r.coherent_share = total > 0 ? coherent / total : 0.0;
    r.structured_share = total > 0 ? r.kappa * first / total : 0.0;
    const double parts[2] = {coherent, rest + r.kappa * first};
    const double dofs[2] = {static_cast<double>(g.out_channels), P};
    r.effective_dof = satterthwaite_dof(parts, dofs, 2);
    r.iid_sigma = std::sqrt(mean_square_per_weight(iid, P));
    return r;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
