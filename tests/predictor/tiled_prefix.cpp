// tests/predictor/tiled_prefix.cpp - the tests of include/ebac/predictor/tiled_prefix.hpp.
//
// The CUDA backend computes each Lorenzo residual directly (the predictor's
// residual()); the host backend runs one pass per axis. They must agree bit
// for bit.
#include "../host/test_support.hpp"

#include <ebac/ebac.hpp>
#include <ebac/element_code.hpp>
#include <ebac/predictor/tiled_prefix.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <doctest/doctest.h>
#include <limits>
#include <random>
#include <vector>

TEST_SUITE("host") {
  // The fused decoder's bookkeeping (cuda/kernels/fused_bitpack_decode.cuh),
  // replayed on the host: rounds of W blocks, one warp's inclusive scan per
  // block plus tiled_prefix_rounds::before, must give the tile-restarting
  // prefix sum of the flat Lorenzo inverse.
  TEST_CASE("tiled_prefix_rounds: rounds of warp scans equal the flat Lorenzo inverse") {
    std::mt19937 rng(9);
    for (unsigned W : {1u, 3u, 8u, 32u}) {
      for (std::uint64_t tile_blocks : {1u, 2u, 5u, 8u, 128u}) {
        for (std::size_t n :
             {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{1000}, std::size_t{20000}}) {
          CAPTURE(W);
          CAPTURE(tile_blocks);
          CAPTURE(n);
          std::vector<std::uint32_t> r(n);
          for (auto& v : r) v = rng();
          std::vector<std::uint32_t> expect = r;  // the host backend's inverse pass over one flat axis
          ebac::host::detail::run_pass<false>(ebac::lorenzo{}, expect.data(), ebac::axis_pass{1, n, 1, 32 * tile_blocks}, 1);
          const ebac::tiled_prefix_rounds rounds{tile_blocks};
          const std::size_t nb = (n + 31) / 32;
          std::vector<std::uint32_t> got(n), totals(W);
          std::uint32_t carry = 0;
          for (std::size_t first = 0; first < nb; first += W) {
            const unsigned count = static_cast<unsigned>(nb - first < W ? nb - first : W);
            std::vector<std::uint32_t> scanned(32 * static_cast<std::size_t>(count), 0);
            for (unsigned w = 0; w < count; ++w) {  // each warp: inclusive scan of its block (0 past the end)
              std::uint32_t acc = 0;
              for (unsigned lane = 0; lane < 32; ++lane) {
                const std::size_t j = (first + w) * 32 + lane;
                acc += j < n ? r[j] : 0u;
                scanned[32 * w + lane] = acc;
              }
              totals[w] = acc;
            }
            for (unsigned w = 0; w < count; ++w)
              for (unsigned lane = 0; lane < 32; ++lane) {
                const std::size_t j = (first + w) * 32 + lane;
                if (j < n) got[j] = scanned[32 * w + lane] + rounds.before(first, totals.data(), w, carry);
              }
            carry = rounds.before(first, totals.data(), count, carry);
          }
          CHECK(got == expect);
        }
      }
    }
  }

}  // TEST_SUITE
