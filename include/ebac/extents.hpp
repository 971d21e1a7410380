// ebac/extents.hpp - the shape of a tensor, outermost dimension first.
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>

EBAC_NAMESPACE_BEGIN

inline constexpr int max_rank = 8;

/// Row-major extents (C order): dims[0] is the outermost, dims[rank-1] the
/// innermost, contiguous dimension. Trivially copyable so kernels take it by value.
struct extents {
  std::uint64_t dims[max_rank]{};
  int rank = 0;

  constexpr extents() = default;
  constexpr extents(std::initializer_list<std::uint64_t> d) {
    for (std::uint64_t v : d) {
      if (rank < max_rank) dims[rank] = v;
      ++rank;
    }
  }

  [[nodiscard]] constexpr std::uint64_t operator[](int i) const noexcept { return dims[i]; }

  /// Number of elements, or status::size_overflow / invalid_argument.
  /// Host and device: the writer's chunk size (format/chunking.hpp) is
  /// computed on both.
  [[nodiscard]] EBAC_HOST_DEVICE constexpr status count(std::uint64_t& out) const noexcept {
    if (rank < 1 || rank > max_rank) return status::invalid_argument;
    std::uint64_t n = 1;
    for (int i = 0; i < rank; ++i) {
      if (dims[i] != 0 && n > ~std::uint64_t{0} / dims[i]) return status::size_overflow;
      n *= dims[i];
    }
    out = n;
    return status::ok;
  }

  /// Elements per step along dimension `axis` (product of the inner dims).
  [[nodiscard]] constexpr std::uint64_t stride(int axis) const noexcept {
    std::uint64_t s = 1;
    for (int i = axis + 1; i < rank; ++i) s *= dims[i];
    return s;
  }

  friend constexpr bool operator==(const extents& a, const extents& b) noexcept {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (a.dims[i] != b.dims[i]) return false;
    return true;
  }
};

EBAC_NAMESPACE_END
