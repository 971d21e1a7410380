// The CUDA backend computes each Lorenzo residual directly (residual_at);
// the host backend runs one pass per axis. They must agree bit for bit.
#include <ebac/ebac.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {
template <class P>
void check_direct_matches_passes(const P& pred, const ebac::extents& e, std::uint32_t seed) {
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> q(n), passes(n);
  for (auto& v : q) v = rng() % 7 == 0 ? rng() : rng() % 64;  // some huge values exercise wrapping
  passes = q;
  for (int k = 0; k < pred.passes(); ++k) ebac::host::detail::run_pass<true>(passes.data(), pred.pass(e, k), 1);
  for (std::uint64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    REQUIRE(ebac::residual_at(pred, e, q.data(), i) == passes[i]);
  }
}
}  // namespace

TEST_SUITE("host") {
TEST_CASE("direct Lorenzo residuals (CUDA kernel logic) equal the host's axis passes") {
  const ebac::extents shapes[] = {{1}, {37}, {5000}, {3, 7}, {4, 5, 6}, {2, 3, 17, 19}, {2, 65, 70}};
  std::uint32_t seed = 1;
  for (const auto& e : shapes) {
    CAPTURE(e.rank);
    check_direct_matches_passes(ebac::no_prediction{}, e, seed++);
    check_direct_matches_passes(ebac::lorenzo::flat(), e, seed++);
    check_direct_matches_passes(ebac::lorenzo::flat(8), e, seed++);
    for (int d = 1; d <= 3 && d <= e.rank; ++d) {
      check_direct_matches_passes(ebac::lorenzo::along_last(d, e.rank, 4), e, seed++);
      check_direct_matches_passes(ebac::lorenzo::along_last(d, e.rank, 64), e, seed++);
    }
    if (e.rank >= 3) check_direct_matches_passes(ebac::lorenzo::along({0, 2}, 3), e, seed++);
  }
}
}
