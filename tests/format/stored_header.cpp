// tests/format/stored_header.cpp - the tests of include/ebac/format/stored_header.hpp.
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

TEST_CASE("device stored form: stored_header is the host's stored header, chosen exactly when the host stores") {
  using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  std::mt19937 rng(17);
  auto check = [&](const auto& x, const ebac::extents& e, const ebac::compress_options& base) {
    using T = std::remove_cvref_t<decltype(x[0])>;
    std::uint64_t n = x.size();
    for (bool checksum : {false, true}) {
      CAPTURE(checksum);
      ebac::compress_options opt = base;
      opt.checksum = checksum;
      opt.store_when_larger = false;
      const auto coded = ebac::host::compress(x.data(), e, pipe_t{}, opt);
      opt.store_when_larger = true;
      const auto stream = ebac::host::compress(x.data(), e, pipe_t{}, opt);
      const auto hc = ebac::host::inspect(coded.data(), coded.size());
      // header_kernel's test: the coded size without a checksum against header + raw.
      const bool device_stores = coded.size() - (checksum ? 8 : 0) > hc.header_bytes() + n * sizeof(T);
      const auto hs = ebac::host::inspect(stream.data(), stream.size());
      CHECK(hs.is_stored() == device_stores);
      if (!device_stores) continue;
      std::vector<std::byte> head(hc.header_bytes());
      ebac::stored_header(hc, n, checksum).write(head.data());
      CHECK(std::memcmp(head.data(), stream.data(), head.size()) == 0);
      CHECK(stream.size() == hc.header_bytes() + n * sizeof(T) + (checksum ? 8 : 0));
    }
  };
  // Random float16 bits at a tiny bound: nearly every element an outlier.
  std::vector<ebac::float16> noise(20000);
  for (auto& v : noise) v.bits = static_cast<std::uint16_t>(rng());
  ebac::compress_options tiny;
  tiny.bound = {1e-7, ebac::bound_mode::absolute};
  check(noise, ebac::extents{20000}, tiny);
  check(noise, ebac::extents{100, 200}, tiny);
  // At 1e-2 the finite values all fit the code range (22-bit codes, wider
  // than the raw 16 bits): stored, from a coded header with a top level.
  ebac::compress_options wide;
  wide.bound = {1e-2, ebac::bound_mode::absolute};
  {
    const auto coded = ebac::host::compress(noise.data(), ebac::extents{20000}, pipe_t{}, [&] {
      ebac::compress_options o = wide;
      o.store_when_larger = false;
      return o;
    }());
    REQUIRE(ebac::host::inspect(coded.data(), coded.size()).top > 0.0f);
  }
  check(noise, ebac::extents{20000}, wide);
  // Random bytes (uint8, under Lorenzo residuals: wider than 8 bits).
  std::vector<std::uint8_t> bytes(20000);
  for (auto& v : bytes) v = static_cast<std::uint8_t>(rng());
  check(bytes, ebac::extents{20000}, ebac::compress_options{});
  // Smooth data that codes well: not stored.
  std::vector<float> smooth(20000);
  for (std::size_t i = 0; i < smooth.size(); ++i) smooth[i] = std::sin(0.001f * static_cast<float>(i));
  ebac::compress_options rel;
  rel.bound = {1e-3, ebac::bound_mode::relative};
  check(smooth, ebac::extents{20000}, rel);
}
