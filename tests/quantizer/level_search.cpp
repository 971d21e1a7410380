// tests/quantizer/level_search.cpp - the tests of include/ebac/quantizer/level_search.hpp.
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
#include "../host/test_support.hpp"
#include "device_palette.hpp"

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

std::string palette_str(const ebac::level_palette& p) {
  std::string s = std::to_string(p.count) + ":";
  for (std::uint32_t i = 0; i < p.count; ++i) {
    s += ' ';  // appended apart: gcc 12 warns (-Wrestrict, a false positive) on " " + std::string
    s += ebac_test::hex(p.bits[i]);
  }
  return s;
}

/// The device's palette equals the host's for every capacity, chunk size,
/// thread count and block order tried.
template <class S>
void check_palette(const std::vector<S>& x, const char* label, std::uint32_t seed) {
  INFO("data: ", label, ", n = ", x.size());
  std::mt19937 rng(seed);
  const std::uint64_t n = x.size();
  for (std::uint32_t chunk : {32u, 96u, 4096u, ebac::default_chunk_elements}) {
    const std::uint64_t chunks = (n + chunk - 1) / chunk;
    for (std::uint32_t capacity : {0u, 1u, 2u, 3u, 5u, 16u}) {
      CAPTURE(chunk);
      CAPTURE(capacity);
      const ebac::level_palette host = ebac::host::detail::find_levels(x.data(), n, chunk, capacity, 1);
      for (std::uint32_t threads : {64u, 1u, 7u}) {
        CAPTURE(threads);
        auto order = in_order(chunks);
        const ebac::level_palette dev = device_palette(x.data(), n, chunk, capacity, threads, order);
        CHECK_MESSAGE(same_palette(dev, host), "device ", palette_str(dev), " host ", palette_str(host));
        std::shuffle(order.begin(), order.end(), rng);
        const ebac::level_palette shuffled = device_palette(x.data(), n, chunk, capacity, threads, order);
        CHECK_MESSAGE(same_palette(shuffled, host), "device (blocks shuffled) ", palette_str(shuffled), " host ",
                      palette_str(host));
      }
    }
  }
}

}  // namespace

TEST_CASE("device level search: per-thread counters and the block and chunk trees give the host's palette") {
  std::uint32_t seed = 7;
  for (const auto& [name, xf] : float_cases(1)) {
    check_palette(xf, name.c_str(), seed++);
    check_palette(from_floats<ebac::float16>(xf), (name + " f16").c_str(), seed++);
  }
  // Integer and bool tensors (bool held as its byte).
  std::mt19937 rng(3);
  std::vector<std::uint8_t> mask(30011);
  for (auto& b : mask) b = rng() % 10 == 0 ? 0 : 1;
  check_palette(mask, "bool mask", seed++);
  std::vector<std::int64_t> labels(20011);
  for (auto& l : labels) l = static_cast<std::int64_t>(rng() % 16) - 3;
  check_palette(labels, "int64 labels of 16 classes", seed++);
  std::vector<std::int64_t> big(20011);
  for (auto& l : big) l = static_cast<std::int64_t>(rng()) << 20;
  check_palette(big, "int64 values, all distinct", seed++);
  std::vector<std::int8_t> runs(5000);
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i] = static_cast<std::int8_t>((i / 700) % 3);  // long runs: counted at once
  check_palette(runs, "int8 runs", seed++);
  check_palette(std::vector<std::int32_t>(1, 42), "one element", seed++);
}
