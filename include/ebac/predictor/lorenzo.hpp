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
#pragma once

#include <ebac/config.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/status.hpp>

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

  std::uint8_t dims = 1;                               // 1, 2 or 3
  std::uint8_t axis[3] = {lorenzo_flat_axis, 0, 0};    // strictly increasing tensor axes
  std::uint32_t tile[3] = {default_flat_tile, 0, 0};   // restart prediction every tile steps

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
  EBAC_HOST_DEVICE static std::uint32_t inverse(std::uint32_t residual, std::uint32_t prev) noexcept {
    return residual + prev;
  }
};

EBAC_NAMESPACE_END
