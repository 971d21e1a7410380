// tests/quantizer/device_palette.hpp - the CUDA backend's palette search run on the
// host, and its float test tensors, shared by the tests of level_search.hpp and
// chosen_stages.hpp.
//
// The CUDA backend's per-tensor decisions, run on the host with the same
// per-block functions its kernels call (cuda/kernels/levels.cuh and
// encode.cuh's header_kernel), against the host backend:
//  - the level palette: per-thread level_counters over a chunk, the block's
//    pairwise tree (level_tree_step), then the chunks' tree, with the early
//    exit once a chunk overflows, whatever order the blocks run in, give
//    host::detail::find_levels's palette;
//  - the stage choice (choose_float_stages / choose_integer_stages +
//    apply_stages) gives the host stream's quantizer, predictor, bound, top
//    level and parameter section;
//  - the stored form's header (stored_header) is the host's write_stored
//    header, and the device's test (coded > raw, no checksum) picks the
//    stored form exactly when the host does.
#pragma once

#include "../host/test_support.hpp"

#include <ebac/format/apply_stages.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/quantizer/level_search.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>


namespace {

/// What level_sets_kernel and level_merge_kernel compute, with the threads
/// and blocks run one after another: `threads` threads a block (the kernel
/// has 64; the palette must not depend on it), chunks taken in `order`
/// (blocks run in any order; a block that starts after a chunk overflowed
/// skips its reads).
template <class S>
ebac::level_palette device_palette(const S* in, std::uint64_t n, std::uint32_t chunk, std::uint32_t capacity,
                                   std::uint32_t threads, const std::vector<std::uint64_t>& order) {
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  if (capacity == 0 || n == 0) return {};  // compress_stages launches nothing then
  std::vector<ebac::level_set> sets(chunks);
  bool too_many = false;
  std::vector<ebac::level_set> part(threads);
  for (const std::uint64_t c : order) {
    const std::uint64_t first = c * chunk, m = std::min<std::uint64_t>(chunk, n - first);
    const bool skip = too_many;  // read once at the block's start
    for (std::uint32_t t = 0; t < threads; ++t) {
      ebac::level_counter counter(capacity);
      if (!skip) {
        for (std::uint64_t k = t; k < m && !counter.full(); k += threads)
          counter.add(static_cast<std::uint64_t>(ebac::raw_bits(in[first + k])));
      } else {
        counter.give_up();
      }
      part[t] = counter.finish();
    }
    for (std::uint64_t stride = 1; stride < threads; stride *= 2)
      for (std::uint64_t p = 0; p < ebac::level_tree_pairs(threads, stride); ++p)
        ebac::level_tree_step(part.data(), threads, stride, p);
    sets[c] = part[0];
    too_many = too_many || part[0].overflow;
  }
  if (too_many) {
    sets[0].overflow = true;
  } else {
    for (std::uint64_t stride = 1; stride < chunks; stride *= 2)
      for (std::uint64_t p = 0; p < ebac::level_tree_pairs(chunks, stride); ++p)
        ebac::level_tree_step(sets.data(), chunks, stride, p);
  }
  return ebac::palette_of(sets[0]);
}

inline std::vector<std::uint64_t> in_order(std::uint64_t chunks) {
  std::vector<std::uint64_t> v(chunks);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

inline bool same_palette(const ebac::level_palette& a, const ebac::level_palette& b) {
  if (a.count != b.count) return false;
  for (std::uint32_t i = 0; i < a.count; ++i)
    if (a.bits[i] != b.bits[i]) return false;
  return true;
}

template <class T>
std::vector<T> from_floats(const std::vector<float>& v) {
  return ebac_test::convert<T>(v);
}

/// Few-level float data: a dropout mask, one-hot rows, a ternary tensor,
/// values with counts that tie (order by bit pattern), 16 and 17 levels,
/// NaN among the levels, a constant, random normals (no palette).
inline std::vector<std::pair<std::string, std::vector<float>>> float_cases(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::pair<std::string, std::vector<float>>> v;
  const std::size_t n = 20011;  // not a multiple of any chunk
  {
    std::vector<float> x(n);
    for (float& e : x) e = u(rng) < 0.1f ? 0.0f : 1.0f / 0.9f;
    v.emplace_back("dropout mask", std::move(x));
  }
  {
    std::vector<float> x(n, 0.0f);
    for (std::size_t r = 0; r + 10 <= n; r += 10) x[r + rng() % 10] = 1.0f;
    v.emplace_back("one-hot", std::move(x));
  }
  {
    std::vector<float> x(n);
    for (float& e : x) {
      const float r = u(rng);
      e = r < 0.3f ? -0.7f : (r < 0.7f ? 0.0f : 0.7f);
    }
    v.emplace_back("ternary", std::move(x));
  }
  {
    std::vector<float> x(4 * 1000);  // four values, 1000 each: every count ties
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 4) - 1.5f;
    v.emplace_back("tied counts", std::move(x));
  }
  for (int levels : {16, 17}) {
    std::vector<float> x(n);
    for (float& e : x) e = static_cast<float>(rng() % static_cast<unsigned>(levels)) * 0.25f;
    x[0] = 0.0f;
    for (int k = 0; k < levels; ++k) x[1 + static_cast<std::size_t>(k)] = static_cast<float>(k) * 0.25f;  // every level present
    v.emplace_back(std::to_string(levels) + " levels", std::move(x));
  }
  {
    std::vector<float> x(n);
    for (float& e : x) e = u(rng) < 0.5f ? 0.0f : (u(rng) < 0.5f ? NAN : -INFINITY);
    v.emplace_back("NaN and -Inf among the levels", std::move(x));
  }
  v.emplace_back("constant", std::vector<float>(n, 0.75f));
  {
    std::vector<float> x(n);
    for (float& e : x) e = nd(rng);
    v.emplace_back("normals", std::move(x));
  }
  {
    std::vector<float> x(n, 0.0f);  // a palette in the first chunks, then a 17th value at the very end
    for (std::size_t i = 0; i + 1 < n; ++i) x[i] = static_cast<float>(i % 16);
    x[n - 1] = 100.0f;
    v.emplace_back("17th value in the last element", std::move(x));
  }
  return v;
}

}  // namespace
