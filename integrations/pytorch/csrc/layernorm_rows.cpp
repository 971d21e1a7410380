// layernorm_rows.cpp - a LayerNorm input's rows in LayerNorm's units
// (codec_api.hpp, normalize_rows), for hooks._row_normalized and
// derived.layernorm_rows_bound on CPU tensors.
//
// Done with torch's ops these are eight passes over the tensor (its range,
// the row variances, the division, the row means of the result, the
// shifted copy, its column range, its magnitude), most of them reductions
// over short rows: 18-23 ms for a LayerNorm input of a 12-block ViT (256 x
// 50 tokens of 96) on one core, 4-6 ms here, where each row is read once
// from memory and everything else works on it in cache (the ViT's pack
// time beyond the codec fell from 0.52 to 0.20 s a step). Like
// host_codec.cpp, it includes no torch header.
#include "codec_api.hpp"

#include <cmath>
#include <cstdint>

namespace ebac_torch {
namespace {

/// Sum of n floats in double, in four independent lanes (the order of the
/// additions differs from a serial loop by rounding only, far below float's).
double sum_of(const float* v, std::int64_t n) {
  double a[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) a[k] += v[i + k];
  for (; i < n; ++i) a[0] += v[i];
  return (a[0] + a[1]) + (a[2] + a[3]);
}

/// Sum of (v - mean)^2 in double, four lanes.
double squares_about(const float* v, std::int64_t n, double mean) {
  double a[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) {
      const double e = v[i + k] - mean;
      a[k] += e * e;
    }
  for (; i < n; ++i) {
    const double e = v[i] - mean;
    a[0] += e * e;
  }
  return (a[0] + a[1]) + (a[2] + a[3]);
}

}  // namespace

row_normalization normalize_rows(const float* x, std::int64_t n_rows, std::int64_t d, double eps, float* rows, float* sigma,
                                 float* shift, float* col_lo, float* col_hi) {
  row_normalization out;
  if (n_rows <= 0 || d <= 0) return out;
  for (std::int64_t i = 0; i < d; ++i) {
    col_lo[i] = INFINITY;
    col_hi[i] = -INFINITY;
  }
  float lo = INFINITY, hi = -INFINITY, sigma_max = 0, rows_max = 0, shift_max = 0;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * d;
    float* yr = rows + r * d;
    // Range and finiteness in one read of the row: a NaN compares false and
    // would hide from the extremes, so each element is tested. A row holding
    // a NaN or an infinity ends the work (the caller then stores the tensor
    // as any other).
    float rlo = xr[0], rhi = xr[0];
    bool finite = true;
    for (std::int64_t i = 0; i < d; ++i) {
      const float v = xr[i];
      finite = finite && std::isfinite(v);
      rlo = v < rlo ? v : rlo;
      rhi = v > rhi ? v : rhi;
    }
    if (!finite) {
      out.finite = false;
      return out;
    }
    lo = rlo < lo ? rlo : lo;
    hi = rhi > hi ? rhi : hi;
    const double mean = sum_of(xr, d) / static_cast<double>(d);
    const float s = static_cast<float>(std::sqrt(squares_about(xr, d, mean) / static_cast<double>(d) + eps));
    sigma[r] = s;
    sigma_max = s > sigma_max ? s : sigma_max;
    for (std::int64_t i = 0; i < d; ++i) yr[i] = xr[i] / s;
    const float sh = static_cast<float>(sum_of(yr, d) / static_cast<double>(d));
    shift[r] = sh;
    shift_max = std::fabs(sh) > shift_max ? std::fabs(sh) : shift_max;
    for (std::int64_t i = 0; i < d; ++i) {
      const float y = yr[i];
      rows_max = std::fabs(y) > rows_max ? std::fabs(y) : rows_max;
      const float z = y - sh;
      col_lo[i] = z < col_lo[i] ? z : col_lo[i];
      col_hi[i] = z > col_hi[i] ? z : col_hi[i];
    }
  }
  out.lo = lo;
  out.hi = hi;
  out.sigma_max = sigma_max;
  out.rows_max_abs = rows_max;
  out.shift_max_abs = shift_max;
  return out;
}

}  // namespace ebac_torch
