// ebac/error_model/energy_pyramid.hpp - where in scale and place a field keeps
// its energy.
//
// Why: the weight-gradient error of one (output channel o, input channel c)
// pair is an inner product <dy_o, e_c> over (sample, position). If both
// fields were white, E[<dy, e>^2] = sum dy^2 e^2 / positions and the
// first-principles (i.i.d.) model would hold. Real fields are not white: flat
// image regions give errors that are identical over many positions, and the
// output gradient is smooth there too, so coarse scales carry far more of the
// product than an i.i.d. model credits (up to 3x in sigma on the corpus).
//
// The fix is to make the independence assumption in a better basis. Both
// fields are expanded in an orthonormal Haar-like basis over the output grid
// (block means over dyadic blocks, then the detail inside every parent block)
// and over the batch (the batch mean, and each sample's deviation from it).
// In that basis  <dy, e> = sum_i dy_i e_i  exactly, and the model assumes the
// products dy_i e_i are independent with random signs:
//     E[sum_{o,c} <dy_o, e_c>^2] ~= sum_i (sum_o dy_{o,i}^2) (sum_c e_{c,i}^2).
// A pyramid stores, per basis "cell" (a parent block, and a sample or the
// batch mean), the energy of the field's coefficients there and how many
// coefficients (degrees of freedom) share it; inner() pairs two pyramids
// cell by cell. Only channel-summed energies are kept: O(N H W / 3) numbers
// for a field of N C H W, built in one pass.
//
// Host-only (owns std::vector storage); the CUDA backend will build the same
// numbers with a block reduction per level.
#pragma once

#include <ebac/config.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// Energies of one scale of a field: the detail (within-parent) energy of each
/// parent block, for the batch-mean component and for each sample's deviation.
struct pyramid_level {
  std::int64_t grid_h = 0, grid_w = 0;  ///< parent blocks (1 x 1 at the top level)
  std::vector<double> mean_energy;      ///< [grid]: batch-mean coefficients
  std::vector<double> dev_energy;       ///< [batch][grid]: deviation coefficients
  std::vector<double> dof;              ///< [grid]: coefficients per parent block (per sample)
};

struct energy_pyramid {
  std::int64_t batch = 0, height = 0, width = 0;
  std::vector<pyramid_level> levels;  ///< finest first; the last is the whole grid

  [[nodiscard]] double total_energy() const noexcept {
    double s = 0;
    for (const auto& l : levels) {
      for (double v : l.mean_energy) s += v;
      for (double v : l.dev_energy) s += v;
    }
    return s;
  }
};

namespace detail {
/// Number of halvings until a grid of extent n is one block.
constexpr int pyramid_depth(std::int64_t n) noexcept {
  int l = 0;
  while ((std::int64_t{1} << l) < n) ++l;
  return l;
}
}  // namespace detail

namespace detail {

/// The grid of each level l <= L of blocks 2^l on a side over a height x
/// width field, and each block's cell count (edge blocks are partial).
struct pyramid_grid {
  std::vector<std::int64_t> gh, gw;
  std::vector<std::vector<double>> cells;
};
inline pyramid_grid make_pyramid_grid(int L, std::int64_t height, std::int64_t width) {
  pyramid_grid g{std::vector<std::int64_t>(L + 1), std::vector<std::int64_t>(L + 1), std::vector<std::vector<double>>(L + 1)};
  std::vector<std::int64_t>& gh = g.gh;
  std::vector<std::int64_t>& gw = g.gw;
  std::vector<std::vector<double>>& cells = g.cells;
  for (int l = 0; l <= L; ++l) {
    const std::int64_t b = std::int64_t{1} << l;
    gh[l] = (height + b - 1) / b;
    gw[l] = (width + b - 1) / b;
    cells[l].assign(static_cast<std::size_t>(gh[l] * gw[l]), 0.0);
    for (std::int64_t h = 0; h < height; ++h)
      for (std::int64_t w = 0; w < width; ++w) cells[l][static_cast<std::size_t>((h / b) * gw[l] + w / b)] += 1;
  }
  return g;
}

/// Projection energies per level (before differencing), summed over
/// channels: of the batch mean of each block (em) and of each sample's
/// deviation from it (ed).
struct pyramid_energies {
  std::vector<std::vector<double>> em, ed;
};
template <class Field>
pyramid_energies project_energies(const pyramid_grid& grid, int L, std::int64_t batch, std::int64_t channels, std::int64_t height,
                                  std::int64_t width, Field&& f) {
  const std::vector<std::int64_t>& gh = grid.gh;
  const std::vector<std::int64_t>& gw = grid.gw;
  const std::vector<std::vector<double>>& cells = grid.cells;
  const auto N = static_cast<std::size_t>(batch);
  pyramid_energies e{std::vector<std::vector<double>>(L + 1), std::vector<std::vector<double>>(L + 1)};
  std::vector<std::vector<double>>& em = e.em;
  std::vector<std::vector<double>>& ed = e.ed;
  for (int l = 0; l <= L; ++l) {
    em[l].assign(static_cast<std::size_t>(gh[l] * gw[l]), 0.0);
    ed[l].assign(N * static_cast<std::size_t>(gh[l] * gw[l]), 0.0);
  }
  std::vector<std::vector<double>> sums(L + 1);
  for (int l = 0; l <= L; ++l) sums[l].assign(N * static_cast<std::size_t>(gh[l] * gw[l]), 0.0);
  for (std::int64_t c = 0; c < channels; ++c) {
    for (auto& s : sums) std::fill(s.begin(), s.end(), 0.0);
    for (std::int64_t n = 0; n < batch; ++n) {
      double* s0 = sums[0].data() + static_cast<std::size_t>(n * gh[0] * gw[0]);
      for (std::int64_t h = 0; h < height; ++h)
        for (std::int64_t w = 0; w < width; ++w) s0[h * width + w] = static_cast<double>(f(n, c, h, w));
    }
    for (int l = 0; l <= L; ++l) {
      const std::size_t G = static_cast<std::size_t>(gh[l] * gw[l]);
      if (l > 0) {  // block sums from the children
        for (std::int64_t n = 0; n < batch; ++n) {
          const double* ch = sums[l - 1].data() + static_cast<std::size_t>(n) * gh[l - 1] * gw[l - 1];
          double* pa = sums[l].data() + static_cast<std::size_t>(n) * G;
          for (std::int64_t h = 0; h < gh[l - 1]; ++h)
            for (std::int64_t w = 0; w < gw[l - 1]; ++w) pa[(h / 2) * gw[l] + w / 2] += ch[h * gw[l - 1] + w];
        }
      }
      for (std::size_t b = 0; b < G; ++b) {
        const double inv = 1.0 / std::sqrt(cells[l][b]);
        double mean = 0;
        for (std::size_t n = 0; n < N; ++n) mean += sums[l][n * G + b] * inv;
        em[l][b] += mean * mean / static_cast<double>(N);
        mean /= static_cast<double>(N);
        for (std::size_t n = 0; n < N; ++n) {
          const double d = sums[l][n * G + b] * inv - mean;
          ed[l][n * G + b] += d * d;
        }
      }
    }
  }
  return e;
}

/// p's levels: the detail energy of each parent block, its children's
/// projection energy minus its own (the projections are nested, so this is
/// >= 0 up to rounding); the top level holds the block mean itself.
inline void difference_levels(energy_pyramid& p, const pyramid_grid& grid, const pyramid_energies& e, int L, std::size_t N) {
  const std::vector<std::int64_t>& gh = grid.gh;
  const std::vector<std::int64_t>& gw = grid.gw;
  const std::vector<std::vector<double>>& em = e.em;
  const std::vector<std::vector<double>>& ed = e.ed;
  p.levels.resize(static_cast<std::size_t>(L + 1));
  for (int l = 0; l <= L; ++l) {
    pyramid_level& out = p.levels[static_cast<std::size_t>(l)];
    const bool top = (l == L);
    out.grid_h = top ? 1 : gh[l + 1];
    out.grid_w = top ? 1 : gw[l + 1];
    const std::size_t P = static_cast<std::size_t>(out.grid_h * out.grid_w);
    out.mean_energy.assign(P, 0.0);
    out.dev_energy.assign(N * P, 0.0);
    out.dof.assign(P, top ? 1.0 : -1.0);  // top: the block mean itself; else children - 1
    if (top) {
      out.mean_energy[0] = em[l][0];
      for (std::size_t n = 0; n < N; ++n) out.dev_energy[n] = ed[l][n];
      continue;
    }
    const std::size_t Gc = static_cast<std::size_t>(gh[l] * gw[l]);
    for (std::int64_t h = 0; h < gh[l]; ++h)
      for (std::int64_t w = 0; w < gw[l]; ++w) {
        const std::size_t b = static_cast<std::size_t>(h * gw[l] + w), q = static_cast<std::size_t>((h / 2) * out.grid_w + w / 2);
        out.mean_energy[q] += em[l][b];
        out.dof[q] += 1.0;
        for (std::size_t n = 0; n < N; ++n) out.dev_energy[n * P + q] += ed[l][n * Gc + b];
      }
    for (std::size_t q = 0; q < P; ++q) {
      out.mean_energy[q] -= em[l + 1][q];
      if (out.mean_energy[q] < 0) out.mean_energy[q] = 0;
      for (std::size_t n = 0; n < N; ++n) {
        double& v = out.dev_energy[n * P + q];
        v -= ed[l + 1][n * P + q];
        if (v < 0) v = 0;
      }
    }
  }
}

}  // namespace detail

/// Builds the pyramid of a field f(n, c, h, w) over `channels` channels on a
/// batch x height x width grid (the energies are summed over channels).
/// `f` is any callable returning a double; it is called once per element.
template <class Field>
energy_pyramid build_energy_pyramid(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                                    Field&& f) {
  energy_pyramid p;
  p.batch = batch;
  p.height = height;
  p.width = width;
  if (batch < 1 || channels < 1 || height < 1 || width < 1) return p;
  const int L = detail::pyramid_depth(height > width ? height : width);
  const detail::pyramid_grid grid = detail::make_pyramid_grid(L, height, width);
  const detail::pyramid_energies e = detail::project_energies(grid, L, batch, channels, height, width, f);
  detail::difference_levels(p, grid, e, L, static_cast<std::size_t>(batch));
  return p;
}

/// Model of E[sum_{o,c} <dy_o, e_c>^2] from two pyramids on the same grid:
/// cell by cell, (energy of dy) x (energy of e) / (coefficients in the cell).
/// A sample's deviation cell holds (N-1)/N coefficients on average (the N
/// deviations of a batch span N-1 dimensions). Returns -1 if the grids differ.
inline double pyramid_inner(const energy_pyramid& a, const energy_pyramid& b) noexcept {
  if (a.batch != b.batch || a.height != b.height || a.width != b.width || a.levels.size() != b.levels.size()) return -1;
  const auto N = static_cast<std::size_t>(a.batch);
  const double dev_share = a.batch > 1 ? static_cast<double>(a.batch - 1) / static_cast<double>(a.batch) : 0.0;
  double s = 0;
  for (std::size_t l = 0; l < a.levels.size(); ++l) {
    const pyramid_level& x = a.levels[l];
    const pyramid_level& y = b.levels[l];
    const std::size_t P = x.mean_energy.size();
    for (std::size_t q = 0; q < P; ++q) {
      const double dof = x.dof[q];
      if (!(dof > 0)) continue;
      s += x.mean_energy[q] * y.mean_energy[q] / dof;
      if (dev_share > 0)
        for (std::size_t n = 0; n < N; ++n) s += x.dev_energy[n * P + q] * y.dev_energy[n * P + q] / (dof * dev_share);
    }
  }
  return s;
}

}  // namespace error_model
EBAC_NAMESPACE_END
