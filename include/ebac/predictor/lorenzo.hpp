// ebac/predictor/lorenzo.hpp - Lorenzo prediction on pre-quantized integers.
//
// The quantizer first maps every value to an integer code ("dual
// quantization", as in cuSZ), and Lorenzo runs on those integers, so the
// prediction is exact and needs no decoded neighbours: every residual can be
// computed in parallel. The D-dimensional Lorenzo residual equals D successive
// backward differences, one per chosen axis (with zero outside the tensor and
// at tile boundaries); its inverse is D prefix sums. Backends run these as
// axis passes with the element operations below, in wrapping uint32
// arithmetic so a corrupt stream cannot cause signed overflow.
//
// This header is Lorenzo's one home: every backend runs the pieces below
// and writes no Lorenzo arithmetic of its own.
//   pass_unit      one tile of one line group of an axis pass, forward or
//                  inverse (the host's passes; the CUDA inverse pass kernel
//                  runs it on one inner index per thread)
//   predict_chunk  zigzagged residuals of a chunk of whole blocks, and
//   unpredict_chunk its inverse (the host's chunk-local paths)
//   residual       one element's residual computed directly, by
//                  inclusion-exclusion over the axes with a predecessor in
//                  its tile (the CUDA residual and fused kernels); in
//                  wrapping arithmetic it equals the passes' result.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/detail/host_avx2.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

EBAC_NAMESPACE_BEGIN

/// Axis value meaning "the whole tensor as one flat 1-D array".
inline constexpr std::uint8_t lorenzo_flat_axis = 0xff;

struct lorenzo {
  static constexpr predictor_id id = predictor_id::lorenzo;
  static constexpr std::uint32_t default_flat_tile = 4096;
  static constexpr std::uint32_t default_tile_2d = 64;
  static constexpr std::uint32_t default_tile_3d = 16;

  std::uint8_t dims = 1;                              // 1, 2 or 3
  std::uint8_t axis[3] = {lorenzo_flat_axis, 0, 0};   // strictly increasing tensor axes
  std::uint32_t tile[3] = {default_flat_tile, 0, 0};  // restart prediction every tile steps

  /// 1-D over the flattened tensor.
  static constexpr lorenzo flat(std::uint32_t tile = default_flat_tile) noexcept {
    lorenzo p;
    p.dims = 1;
    p.axis[0] = lorenzo_flat_axis;
    p.tile[0] = tile;
    return p;
  }

  /// D-dimensional over the last D axes of a rank-`rank` tensor.
  static constexpr lorenzo along_last(int d, int rank, std::uint32_t tile) noexcept {
    lorenzo p;
    p.dims = static_cast<std::uint8_t>(d);
    // Only 3 axes fit; a larger d is kept in `dims` for validate() to refuse.
    for (int k = 0; k < d && k < 3; ++k) {
      p.axis[k] = static_cast<std::uint8_t>(rank - d + k);
      p.tile[k] = tile;
    }
    return p;
  }

  /// Along explicitly chosen axes (strictly increasing).
  static constexpr lorenzo along(std::initializer_list<int> axes, std::uint32_t tile) noexcept {
    lorenzo p;
    p.dims = 0;
    for (int a : axes) {
      if (p.dims < 3) {
        p.axis[p.dims] = static_cast<std::uint8_t>(a);
        p.tile[p.dims] = tile;
      }
      ++p.dims;
    }
    return p;
  }

  [[nodiscard]] constexpr int passes() const noexcept { return dims; }

  [[nodiscard]] status validate(const extents& e) const noexcept {
    if (dims < 1 || dims > 3) return status::invalid_argument;
    if (dims == 1 && axis[0] == lorenzo_flat_axis) return tile[0] >= 1 ? status::ok : status::invalid_argument;
    for (int k = 0; k < dims; ++k) {
      if (axis[k] >= e.rank || tile[k] < 1) return status::invalid_argument;
      if (k > 0 && axis[k] <= axis[k - 1]) return status::invalid_argument;
    }
    return status::ok;
  }

  /// The k-th pass over a tensor of extents e (validated).
  [[nodiscard]] EBAC_HOST_DEVICE axis_pass pass(const extents& e, int k) const noexcept {
    axis_pass p;
    p.tile = tile[k];
    if (axis[k] == lorenzo_flat_axis) {
      std::uint64_t n = 1;
      for (int i = 0; i < e.rank; ++i) n *= e.dims[i];
      p.extent = n;
      return p;
    }
    const int a = axis[k];
    for (int i = 0; i < a; ++i) p.outer *= e.dims[i];
    p.extent = e.dims[a];
    for (int i = a + 1; i < e.rank; ++i) p.inner *= e.dims[i];
    return p;
  }

  /// Elements of the smallest consecutive blocks that every residual stays
  /// inside (validated e): a flat tile, or, along axes, one index of
  /// everything before the outermost predicted axis (the product of the
  /// extents from that axis on). A chunk of whole blocks is coded on its own.
  [[nodiscard]] EBAC_HOST_DEVICE std::uint64_t independent_elements(const extents& e) const noexcept {
    if (axis[0] == lorenzo_flat_axis) return tile[0];
    std::uint64_t b = 1;
    for (int i = axis[0]; i < e.rank; ++i) b *= e.dims[i];
    return b;
  }

  /// This predictor on one block (independent_elements) or a run of whole
  /// blocks of `count` elements: the axes before the outermost predicted one
  /// fold into a leading extent. `sub` receives the block run's extents.
  [[nodiscard]] EBAC_HOST_DEVICE lorenzo on_blocks(const extents& e, std::uint64_t count, extents& sub) const noexcept {
    lorenzo p = *this;
    sub = extents{};
    if (axis[0] == lorenzo_flat_axis) {
      sub.rank = 1;
      sub.dims[0] = count;
      return p;
    }
    const int a0 = axis[0];
    sub.rank = e.rank - a0 + 1;
    const std::uint64_t block = independent_elements(e);
    sub.dims[0] = block ? count / block : 0;
    for (int i = a0; i < e.rank; ++i) sub.dims[i - a0 + 1] = e.dims[i];
    for (int k = 0; k < dims && k < 3; ++k) p.axis[k] = static_cast<std::uint8_t>(axis[k] - a0 + 1);
    return p;
  }

  /// Residual of one step along an axis; `prev` is 0 at a tile start.
  EBAC_HOST_DEVICE static std::uint32_t forward(std::uint32_t cur, std::uint32_t prev) noexcept { return cur - prev; }
  /// Inverse of forward, given the already reconstructed predecessor.
  EBAC_HOST_DEVICE static std::uint32_t inverse(std::uint32_t residual, std::uint32_t prev) noexcept { return residual + prev; }

  /// One unit of pass `p` over the field f, in place: tile t of outer index
  /// o, inner indices [k0, k1). Forward turns values into one-axis
  /// residuals (last step first, so each reads an unchanged predecessor);
  /// inverse is the prefix sum. Units are independent of each other.
  template <bool Forward>
  EBAC_HOST_DEVICE static void pass_unit(std::uint32_t* f, const axis_pass& p, std::uint64_t o, std::uint64_t t, std::uint64_t k0,
                                         std::uint64_t k1) noexcept {
    const std::uint64_t c0 = t * p.tile, c1 = c0 + p.tile < p.extent ? c0 + p.tile : p.extent;
    std::uint32_t* base = f + o * p.extent * p.inner;
    if (p.inner == 1 && k0 == 0 && k1 == 1) {
      // The last axis: one contiguous line, stepped without the inner loop,
      // whose setup for one index cost more than its add (the 2-D passes'
      // inverse on a CNN map spent most of its time there).
      if constexpr (Forward) {
        for (std::uint64_t c = c1 - 1; c > c0; --c) base[c] = forward(base[c], base[c - 1]);
      } else {
        inverse_line(base + c0, c1 - c0);
      }
      return;
    }
    // A row and the one before it do not overlap (k1 - k0 <= inner).
    if constexpr (Forward) {
      for (std::uint64_t c = c1 - 1; c > c0; --c) step_row<true>(base + c * p.inner + k0, base + (c - 1) * p.inner + k0, k1 - k0);
    } else {
      for (std::uint64_t c = c0 + 1; c < c1; ++c)
        step_row<false>(base + c * p.inner + k0, base + (c - 1) * p.inner + k0, k1 - k0);
    }
  }

  /// The inverse along one contiguous line of n elements, line[c] =
  /// inverse(line[c], line[c - 1]) for c >= 1: its inclusive prefix sum in
  /// wrapping arithmetic.
  EBAC_HOST_DEVICE static void inverse_line(std::uint32_t* line, std::uint64_t n) noexcept {
#if EBAC_HOST_AVX2
    prefix_sum_avx2(line, n);
#else
    for (std::uint64_t c = 1; c < n; ++c) line[c] = inverse(line[c], line[c - 1]);
#endif
  }

  /// inverse_line, then prev[c] added to line[c] (prev: the row before,
  /// final): both inverses of a 2-D predictor on one row in one trip.
  static void inverse_line_and_add(std::uint32_t* EBAC_RESTRICT line, const std::uint32_t* EBAC_RESTRICT prev,
                                   std::uint64_t n) noexcept {
#if EBAC_HOST_AVX2
    prefix_sum_avx2<true>(line, n, prev);
#else
    std::uint32_t sum = 0;
    for (std::uint64_t c = 0; c < n; ++c) {
      sum = inverse(line[c], sum);
      line[c] = inverse(sum, prev[c]);
    }
#endif
  }

#if EBAC_HOST_AVX2
  /// inverse_line eight elements a step (with `AddPrev`, prev[c] added to
  /// each sum as it is stored: inverse_line_and_add). Why: one element at a
  /// time is a chain of dependent adds, and the last axis's pass was a tenth
  /// of decoding a CNN map. Within each 128-bit half by two shifted adds,
  /// then the low half's total into the high half, then the sum of the
  /// elements before. The same sums as the loop (tests/isa compares them).
  template <bool AddPrev = false>
  static void prefix_sum_avx2(std::uint32_t* EBAC_RESTRICT line, std::uint64_t n,
                              const std::uint32_t* EBAC_RESTRICT prev = nullptr) noexcept {
    const __m256i zero = _mm256_setzero_si256(), element_3 = _mm256_set1_epi32(3), element_7 = _mm256_set1_epi32(7);
    __m256i before = zero;  // the sum of the elements before, in every lane
    std::uint64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + c));
      v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));
      v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
      v = _mm256_add_epi32(v, _mm256_blend_epi32(zero, _mm256_permutevar8x32_epi32(v, element_3), 0xf0));
      v = _mm256_add_epi32(v, before);
      before = _mm256_permutevar8x32_epi32(v, element_7);
      if constexpr (AddPrev) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(prev + c)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(line + c), v);
    }
    auto sum = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(before)));
    for (; c < n; ++c) {
      sum = inverse(line[c], sum);
      line[c] = AddPrev ? inverse(sum, prev[c]) : sum;
    }
  }
#endif

  /// Elements the host's row and zigzag loops take at a time: a constant
  /// trip count, which GCC (12) needs at -O2 to vectorize a loop (its "very
  /// cheap" cost model allows no scalar remainder and no run-time overlap
  /// check; the pointers are restrict parameters for the latter). 8 is an
  /// AVX2 vector of codes; the rows of a CNN map are 7 to 56 long.
  static constexpr std::size_t run = 8;

  /// row[k] = forward or inverse of (row[k], prev[k]) for k < n.
  template <bool Forward>
  EBAC_HOST_DEVICE static void step_row(std::uint32_t* EBAC_RESTRICT row, const std::uint32_t* EBAC_RESTRICT prev,
                                        std::uint64_t n) noexcept {
    std::uint64_t k = 0;
    for (; k + 2 * run <= n; k += 2 * run)
      for (std::size_t j = 0; j < 2 * run; ++j)
        row[k + j] = Forward ? forward(row[k + j], prev[k + j]) : inverse(row[k + j], prev[k + j]);
    if (k + run <= n) {
      for (std::size_t j = 0; j < run; ++j)
        row[k + j] = Forward ? forward(row[k + j], prev[k + j]) : inverse(row[k + j], prev[k + j]);
      k += run;
    }
    for (; k < n; ++k) row[k] = Forward ? forward(row[k], prev[k]) : inverse(row[k], prev[k]);
  }

  /// Zigzagged residuals of one chunk's quantized values q (m elements of
  /// whole blocks: independent_elements, format/chunking.hpp) into codes;
  /// q is overwritten. `shape` is the whole tensor's.
  void predict_chunk(const extents& shape, std::uint32_t* q, std::uint32_t* codes, std::size_t m) const noexcept {
    if (axis[0] == lorenzo_flat_axis) {  // out of place, so the loop vectorizes
      for (std::size_t t0 = 0; t0 < m; t0 += tile[0]) {
        const std::size_t t1 = m - t0 < tile[0] ? m : t0 + tile[0];
        codes[t0] = detail::zigzag(static_cast<std::int32_t>(q[t0]));
        if (t1 - t0 > 1) zigzag_residuals(q + t0 + 1, q + t0, codes + t0 + 1, t1 - t0 - 1);
      }
      return;
    }
    extents sub;
    const lorenzo local = on_blocks(shape, m, sub);
    if (local.over_last_two_axes(sub)) {
      residuals_2d_by_rows(q, codes, local.pass(sub, 0), local.tile[1]);
      return;
    }
    for (int k = 0; k < local.passes(); ++k) local.for_each_unit<true>(q, local.pass(sub, k));
    zigzag_residuals(q, nullptr, codes, m);
  }

  /// predict_chunk for a 2-D predictor over the last two axes (`rows` the
  /// pass along the rows, its inner extent the row length), row by row in
  /// one trip, q unchanged: a residual is q[r][c] - q[r][c-1] - q[r-1][c] +
  /// q[r-1][c-1], the terms of a row or a column tile's start dropped, then
  /// zigzagged. The same codes as the two passes and the zigzag (wrapping
  /// arithmetic), which took three trips through the chunk.
  static void residuals_2d_by_rows(const std::uint32_t* EBAC_RESTRICT q, std::uint32_t* EBAC_RESTRICT codes,
                                   const axis_pass& rows, std::uint64_t column_tile) noexcept {
    const std::uint64_t W = rows.inner, H = rows.extent;
    for (std::uint64_t o = 0; o < rows.outer; ++o)
      for (std::uint64_t r = 0; r < H; ++r) {
        const std::uint64_t at = (o * H + r) * W;
        const std::uint32_t* const prev = r % rows.tile != 0 ? q + at - W : nullptr;  // none at a row tile's start
        for (std::uint64_t c0 = 0; c0 < W; c0 += column_tile) {
          const std::uint64_t c1 = W - c0 < column_tile ? W : c0 + column_tile;
          const std::uint32_t up = prev ? prev[c0] : 0u;
          codes[at + c0] = detail::zigzag(static_cast<std::int32_t>(forward(q[at + c0], up)));
          if (prev) residual_row(q + at + c0, prev + c0, codes + at + c0, c1 - c0);
          else zigzag_residuals(q + at + c0 + 1, q + at + c0, codes + at + c0 + 1, c1 - c0 - 1);
        }
      }
  }

  /// codes[c] = zigzag(row[c] - row[c-1] - prev[c] + prev[c-1]) for 1 <= c < n.
  static void residual_row(const std::uint32_t* EBAC_RESTRICT row, const std::uint32_t* EBAC_RESTRICT prev,
                           std::uint32_t* EBAC_RESTRICT codes, std::uint64_t n) noexcept {
    std::uint64_t c = 1;
#if EBAC_HOST_AVX2
    for (; c + 8 <= n; c += 8) {
      auto at = [](const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
      const __m256i d =
          _mm256_sub_epi32(_mm256_sub_epi32(at(row + c), at(row + c - 1)), _mm256_sub_epi32(at(prev + c), at(prev + c - 1)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + c),
                          _mm256_xor_si256(_mm256_slli_epi32(d, 1), _mm256_srai_epi32(d, 31)));  // zigzag
    }
#endif
    for (; c < n; ++c)
      codes[c] = detail::zigzag(static_cast<std::int32_t>(forward(forward(row[c], row[c - 1]), forward(prev[c], prev[c - 1]))));
  }

  /// zigzag_residuals' constant trip count: tiles and chunks are long, and
  /// with runs of 8 GCC 12 made the loop 7x slower at -O3 (a 64K chunk).
  static constexpr std::size_t zigzag_run = 64;

  /// codes[i] = zigzag(q[i] - prev[i]) for i < n, or zigzag(q[i]) with no prev.
  static void zigzag_residuals(const std::uint32_t* EBAC_RESTRICT q, const std::uint32_t* EBAC_RESTRICT prev,
                               std::uint32_t* EBAC_RESTRICT codes, std::size_t n) noexcept {
    const std::size_t full = n - n % zigzag_run;
    if (prev) {
      for (std::size_t i = 0; i < full; i += zigzag_run)
        for (std::size_t j = 0; j < zigzag_run; ++j)
          codes[i + j] = detail::zigzag(static_cast<std::int32_t>(forward(q[i + j], prev[i + j])));
      for (std::size_t i = full; i < n; ++i) codes[i] = detail::zigzag(static_cast<std::int32_t>(forward(q[i], prev[i])));
    } else {
      for (std::size_t i = 0; i < full; i += zigzag_run)
        for (std::size_t j = 0; j < zigzag_run; ++j) codes[i + j] = detail::zigzag(static_cast<std::int32_t>(q[i + j]));
      for (std::size_t i = full; i < n; ++i) codes[i] = detail::zigzag(static_cast<std::int32_t>(q[i]));
    }
  }

  /// The inverse of predict_chunk on decoded, unzigzagged residuals f, in place.
  void unpredict_chunk(const extents& shape, std::uint32_t* f, std::size_t m) const noexcept {
    if (axis[0] == lorenzo_flat_axis) {
      for (std::size_t t0 = 0; t0 < m; t0 += tile[0]) inverse_line(f + t0, (m - t0 < tile[0] ? m : t0 + tile[0]) - t0);
      return;
    }
    extents sub;
    const lorenzo local = on_blocks(shape, m, sub);
    if (local.over_last_two_axes(sub)) {
      inverse_2d_by_rows(f, local.pass(sub, 0), local.tile[1]);
      return;
    }
    for (int k = local.passes() - 1; k >= 0; --k) local.for_each_unit<false>(f, local.pass(sub, k));
  }

  /// The residual at element i of a tensor of extents `shape`, reading the
  /// quantized field through q_at(j) (an array, or a function that quantizes
  /// element j on the spot: the fused CUDA kernels never store the field).
  template <class QAt>
  EBAC_HOST_DEVICE std::uint32_t residual(const extents& shape, std::uint64_t i, QAt&& q_at) const noexcept {
    std::uint64_t offset[3] = {0, 0, 0};
    int with_predecessor = 0;
    for (int k = 0; k < dims; ++k) {
      const axis_pass ap = pass(shape, k);
      const std::uint64_t coord = (i / ap.inner) % ap.extent;
      if (coord % ap.tile != 0) offset[with_predecessor++] = ap.inner;
    }
    std::uint32_t r = 0;
    for (int s = 0; s < (1 << with_predecessor); ++s) {  // subsets of the axes with a predecessor
      std::uint64_t back = 0;
      int parity = 0;
      for (int k = 0; k < with_predecessor; ++k)
        if (s & (1 << k)) {
          back += offset[k];
          parity ^= 1;
        }
      const std::uint32_t v = q_at(i - back);
      r = parity ? r - v : r + v;
    }
    return r;
  }

 private:
  /// Whether this (a chunk's predictor, on_blocks) is 2-D over the last two
  /// axes of `sub`, the case predict_chunk and unpredict_chunk take row by
  /// row in one trip.
  [[nodiscard]] bool over_last_two_axes(const extents& sub) const noexcept {
    return dims == 2 && axis[1] == sub.rank - 1 && axis[0] + 1 == axis[1];
  }

  /// The inverse of the two passes of a 2-D predictor over the last two
  /// axes, `rows` the pass along the rows (its inner extent the row length),
  /// fused row by row: a row's prefix sums along its column tiles, then the
  /// row before it (already final) added as each sum is stored, unless the
  /// row starts a row tile.
  /// The same sums as the last axis's pass over every row and then the row
  /// pass (wrapping adds, each row's after its predecessor's), in one trip
  /// through the chunk instead of two (the two were 20-40% of a
  /// decompression on CNN maps: docs/benchmarks.md).
  static void inverse_2d_by_rows(std::uint32_t* f, const axis_pass& rows, std::uint64_t column_tile) noexcept {
    const std::uint64_t W = rows.inner, H = rows.extent;
    for (std::uint64_t o = 0; o < rows.outer; ++o)
      for (std::uint64_t r = 0; r < H; ++r) {
        std::uint32_t* const row = f + (o * H + r) * W;
        const bool first = r % rows.tile == 0;  // a row tile's first row: no row before it
        for (std::uint64_t c0 = 0; c0 < W; c0 += column_tile) {
          const std::uint64_t len = (W - c0 < column_tile ? W : c0 + column_tile) - c0;
          if (first) inverse_line(row + c0, len);
          else inverse_line_and_add(row + c0, row + c0 - W, len);
        }
      }
  }

  template <bool Forward>
  static void for_each_unit(std::uint32_t* f, const axis_pass& p) noexcept {
    const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
    for (std::uint64_t o = 0; o < p.outer; ++o)
      for (std::uint64_t t = 0; t < tiles; ++t) pass_unit<Forward>(f, p, o, t, 0, p.inner);
  }
};

EBAC_NAMESPACE_END
