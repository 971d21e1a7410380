// tests/predictor/lorenzo.cpp - the tests of include/ebac/predictor/lorenzo.hpp.
//
// Predictors (Lorenzo axis passes, no prediction) and run-time pipeline choice.
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
#include <type_traits>
#include <vector>

using namespace ebac_test;

namespace {

bool same_pass(const ebac::axis_pass& a, std::uint64_t outer, std::uint64_t extent, std::uint64_t inner, std::uint64_t tile) {
  return a.outer == outer && a.extent == extent && a.inner == inner && a.tile == tile;
}

/// Reference D-dimensional Lorenzo residual computed from its definition:
/// sum over subsets S of the chosen axes of (-1)^|S| f[i - e_S], where a
/// neighbour that leaves the tensor or crosses a tile start counts as 0.
std::vector<std::uint32_t> reference_residual(const std::vector<std::uint32_t>& f, const ebac::extents& e,
                                              const ebac::lorenzo& l) {
  const std::uint64_t n = f.size();
  std::vector<std::uint32_t> r(n);
  std::vector<std::uint64_t> idx(static_cast<std::size_t>(e.rank));
  for (std::uint64_t lin = 0; lin < n; ++lin) {
    std::uint64_t t = lin;
    for (int a = e.rank - 1; a >= 0; --a) {
      idx[static_cast<std::size_t>(a)] = t % e.dims[a];
      t /= e.dims[a];
    }
    std::uint32_t acc = 0;
    for (int mask = 0; mask < (1 << l.dims); ++mask) {
      bool inside = true;
      std::uint64_t off = lin;
      for (int k = 0; k < l.dims; ++k) {
        if (!(mask & (1 << k))) continue;
        if (l.axis[k] == ebac::lorenzo_flat_axis) {
          if (lin % l.tile[k] == 0) inside = false;
          else off -= 1;
        } else {
          const int a = l.axis[k];
          if (idx[static_cast<std::size_t>(a)] % l.tile[k] == 0) inside = false;
          else off -= e.stride(a);
        }
      }
      if (!inside) continue;
      const bool odd = __builtin_popcount(static_cast<unsigned>(mask)) & 1;
      acc = odd ? acc - f[off] : acc + f[off];
    }
    r[lin] = acc;
  }
  return r;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("lorenzo: axis passes describe the right lines") {
    const ebac::extents e{2, 3, 5, 7};
    const auto flat = ebac::lorenzo::flat(100);
    REQUIRE(flat.validate(e) == ebac::status::ok);
    CHECK(flat.passes() == 1);
    CHECK(same_pass(flat.pass(e, 0), 1, 210, 1, 100));

    const auto l2 = ebac::lorenzo::along_last(2, 4, 64);
    REQUIRE(l2.validate(e) == ebac::status::ok);
    CHECK(l2.passes() == 2);
    CHECK(same_pass(l2.pass(e, 0), 6, 5, 7, 64));
    CHECK(same_pass(l2.pass(e, 1), 30, 7, 1, 64));

    const auto l3 = ebac::lorenzo::along_last(3, 4, 16);
    REQUIRE(l3.validate(e) == ebac::status::ok);
    CHECK(same_pass(l3.pass(e, 0), 2, 3, 35, 16));
    CHECK(same_pass(l3.pass(e, 1), 6, 5, 7, 16));
    CHECK(same_pass(l3.pass(e, 2), 30, 7, 1, 16));

    const auto la = ebac::lorenzo::along({0, 2}, 4);
    REQUIRE(la.validate(e) == ebac::status::ok);
    CHECK(same_pass(la.pass(e, 0), 1, 2, 105, 4));
    CHECK(same_pass(la.pass(e, 1), 6, 5, 7, 4));

    // Zero-sized and unit dims give empty or trivial passes.
    const ebac::extents z{3, 0, 5};
    const auto lz = ebac::lorenzo::along_last(2, 3, 64);
    REQUIRE(lz.validate(z) == ebac::status::ok);
    CHECK(same_pass(lz.pass(z, 0), 3, 0, 5, 64));
    CHECK(same_pass(lz.pass(z, 1), 0, 5, 1, 64));
  }

  TEST_CASE("lorenzo: validate rejects bad axes, dims and tiles") {
    const ebac::extents e{4, 5, 6};
    CHECK(ebac::lorenzo::along({0, 1, 2}, 8).validate(e) == ebac::status::ok);
    CHECK(ebac::lorenzo::along({0, 1, 2, 2}, 8).validate(e) != ebac::status::ok);  // 4 axes
    CHECK(ebac::lorenzo::along({1, 0}, 8).validate(e) != ebac::status::ok);        // not increasing
    CHECK(ebac::lorenzo::along({1, 1}, 8).validate(e) != ebac::status::ok);
    CHECK(ebac::lorenzo::along({3}, 8).validate(e) != ebac::status::ok);  // axis >= rank
    CHECK(ebac::lorenzo::along({0}, 0).validate(e) != ebac::status::ok);  // tile 0
    CHECK(ebac::lorenzo::flat(0).validate(e) != ebac::status::ok);
    CHECK(ebac::lorenzo::flat(1).validate(e) == ebac::status::ok);
    ebac::lorenzo none = ebac::lorenzo::flat();
    none.dims = 0;
    CHECK(none.validate(e) != ebac::status::ok);
    CHECK(ebac::lorenzo::along_last(3, 2, 16).validate(ebac::extents{4, 5}) != ebac::status::ok);
    CHECK(ebac::no_prediction{}.validate(e) == ebac::status::ok);
    CHECK(ebac::no_prediction{}.passes() == 0);
  }

  TEST_CASE("lorenzo: forward/inverse are exact inverses in wrapping arithmetic") {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 100000; ++i) {
      const auto a = static_cast<std::uint32_t>(rng()), b = static_cast<std::uint32_t>(rng());
      REQUIRE(ebac::lorenzo::inverse(ebac::lorenzo::forward(a, b), b) == a);
    }
    CHECK(ebac::lorenzo::forward(0u, 0xffffffffu) == 1u);
    CHECK(ebac::lorenzo::inverse(1u, 0xffffffffu) == 0u);
  }

  TEST_CASE("lorenzo: host passes compute the D-dimensional residual and invert it") {
    std::mt19937_64 rng(9);
    struct c {
      ebac::extents e;
      ebac::lorenzo l;
    };
    const c cases[] = {
        {ebac::extents{37}, ebac::lorenzo::flat(8)},
        {ebac::extents{5, 9}, ebac::lorenzo::flat(7)},
        {ebac::extents{6, 9}, ebac::lorenzo::along_last(2, 2, 4)},
        {ebac::extents{6, 9}, ebac::lorenzo::along_last(2, 2, 64)},
        {ebac::extents{4, 5, 6}, ebac::lorenzo::along_last(3, 3, 3)},
        {ebac::extents{4, 5, 6}, ebac::lorenzo::along({0, 2}, 2)},
        {ebac::extents{3, 4, 5, 6}, ebac::lorenzo::along_last(3, 4, 16)},
        {ebac::extents{3, 4, 5, 6}, ebac::lorenzo::along({0, 1, 3}, 2)},
        {ebac::extents{2, 1, 7, 1}, ebac::lorenzo::along_last(2, 4, 1)},
        {ebac::extents{1, 1, 1}, ebac::lorenzo::along_last(2, 3, 16)},
        // Big enough that run_pass groups units into several tasks of
        // pass_task_elements, the last one ragged, and runs them in parallel.
        {ebac::extents{300, 37, 29}, ebac::lorenzo::along_last(2, 3, 16)},
        {ebac::extents{40, 33, 31, 17}, ebac::lorenzo::along_last(3, 4, 16)},
    };
    for (const auto& k : cases) {
      CAPTURE(shape_str(k.e));
      CAPTURE(int(k.l.dims));
      REQUIRE(k.l.validate(k.e) == ebac::status::ok);
      const std::uint64_t n = count_of(k.e);
      std::vector<std::uint32_t> f(n);
      for (auto& v : f) v = static_cast<std::uint32_t>(rng());
      const auto want = reference_residual(f, k.e, k.l);
      for (int threads : {1, 2, 3}) {
        auto g = f;
        for (int p = 0; p < k.l.passes(); ++p) ebac::host::detail::run_pass<true>(k.l, g.data(), k.l.pass(k.e, p), threads);
        CHECK(g == want);
        for (int p = k.l.passes() - 1; p >= 0; --p) ebac::host::detail::run_pass<false>(k.l, g.data(), k.l.pass(k.e, p), threads);
        CHECK(g == f);
      }
      // The chunk-local pieces (the whole tensor is a run of whole blocks):
      // zigzagged residuals, and back.
      {
        auto q = f;
        std::vector<std::uint32_t> codes(n);
        k.l.predict_chunk(k.e, q.data(), codes.data(), n);
        std::vector<std::uint32_t> want_codes(n);
        for (std::uint64_t i = 0; i < n; ++i) want_codes[i] = ebac::detail::zigzag(static_cast<std::int32_t>(want[i]));
        CHECK(codes == want_codes);
        for (auto& c : codes) c = static_cast<std::uint32_t>(ebac::detail::unzigzag(c));
        k.l.unpredict_chunk(k.e, codes.data(), n);
        CHECK(codes == f);
      }
    }
  }

}  // TEST_SUITE

namespace {

template <class P>
void check_direct_matches_passes(const P& pred, const ebac::extents& e, std::uint32_t seed) {
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  std::mt19937 rng(seed);
  std::vector<std::uint32_t> q(n), passes(n);
  for (auto& v : q) v = rng() % 7 == 0 ? rng() : rng() % 64;  // some huge values exercise wrapping
  passes = q;
  for (int k = 0; k < pred.passes(); ++k) ebac::host::detail::run_pass<true>(pred, passes.data(), pred.pass(e, k), 1);
  for (std::uint64_t i = 0; i < n; ++i) {
    CAPTURE(i);
    REQUIRE(pred.residual(e, i, [&](std::uint64_t j) { return q[j]; }) == passes[i]);
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

}  // TEST_SUITE
