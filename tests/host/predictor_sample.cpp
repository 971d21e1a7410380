// tests/host/predictor_sample.cpp - the tests of include/ebac/host/predictor_sample.hpp.
//
// pipeline::choose_predictor (the `max` pipeline): the sample the candidates
// are tried on (host/predictor_sample.hpp), and the choice itself, checked
// against the three candidates' streams computed here one by one.
#include "test_support.hpp"

#include <ebac/host/predictor_sample.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace ebac_test;

TEST_SUITE("host") {
  TEST_CASE("predictor sample: evenly spaced whole planes of the predicted axes, re-addressed for the sample's extents") {
    const ebac::extents e{80, 32, 28, 28};
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, 64);
    const auto s = ebac::host::detail::plan_predictor_sample(l2, e, count_of(e), 1u << 17);
    REQUIRE_FALSE(s.whole);
    // 2560 planes of 28 x 28; 2^17 / 784 = 167 of them, each whole.
    CHECK(s.total_blocks == 2560);
    CHECK(s.blocks == 167);
    CHECK(s.taken_elements == 784);
    CHECK(s.shape.rank == 3);
    CHECK(s.shape.dims[0] == 167);
    CHECK(s.shape.dims[1] == 28);
    CHECK(s.shape.dims[2] == 28);
    CHECK(s.pred.dims == 2);
    CHECK(s.pred.axis[0] == 1);
    CHECK(s.pred.axis[1] == 2);
    CHECK(s.pred.validate(s.shape) == ebac::status::ok);
    // Spread over the batch: first plane, last sampled plane in the last 1/167 of the tensor.
    CHECK(s.block_start(0) == 0);
    CHECK(s.block_start(166) == (166 * 2560 / 167) * 784);
    CHECK(s.block_start(166) >= count_of(e) - 2 * 2560 / 167 * 784);

    // Planes larger than the sample: 8 of them at most, their first rows.
    const ebac::extents big{16, 1024, 1024};
    const auto b = ebac::host::detail::plan_predictor_sample(ebac::lorenzo::along_last(2, 3, 64), big, count_of(big), 1u << 17);
    REQUIRE_FALSE(b.whole);
    CHECK(b.blocks == 8);
    CHECK(b.taken_elements == 16 * 1024);  // 2^17 / 8 = 16 rows of 1024
    CHECK(b.shape.rank == 3);
    CHECK(b.shape.dims[0] == 8);
    CHECK(b.shape.dims[1] == 16);
    CHECK(b.shape.dims[2] == 1024);
    CHECK(b.block_start(1) == 2 * 1024 * 1024);

    // Flat: tiles of 4096; 300000 elements hold 73, of which 32 are taken.
    const ebac::extents flat{300000};
    const auto f = ebac::host::detail::plan_predictor_sample(ebac::lorenzo::flat(), flat, 300000, 1u << 17);
    REQUIRE_FALSE(f.whole);
    CHECK(f.blocks == 32);
    CHECK(f.shape.rank == 1);
    CHECK(f.shape.dims[0] == 32 * 4096);
    CHECK(f.block_start(31) == (31 * 73 / 32) * 4096);

    // Small tensors are tried whole.
    const ebac::extents small{4, 8, 32, 32};
    CHECK(ebac::host::detail::plan_predictor_sample(l2, small, count_of(small), 1u << 17).whole);
  }

  TEST_CASE("predictor sample: the gathered elements are the planned blocks' first elements, in order") {
    const ebac::extents e{10, 3, 40, 50};
    std::vector<std::uint32_t> x(static_cast<std::size_t>(count_of(e)));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint32_t>(i);
    const auto s = ebac::host::detail::plan_predictor_sample(ebac::lorenzo::along_last(2, 4, 64), e, count_of(e), 2000);
    REQUIRE_FALSE(s.whole);
    REQUIRE(s.blocks == 1);  // a plane is 2000 elements: one fits
    const auto t = ebac::host::detail::plan_predictor_sample(ebac::lorenzo::along_last(2, 4, 64), e, count_of(e), 9000);
    REQUIRE(t.blocks == 4);  // 30 planes, 4 taken: planes 0, 7, 15, 22
    std::vector<std::uint32_t> g(static_cast<std::size_t>(t.elements()));
    ebac::host::detail::gather_predictor_sample(x.data(), t, g.data());
    const std::uint32_t planes[] = {0, 7, 15, 22};
    for (std::size_t k = 0; k < 4; ++k)
      for (std::size_t j = 0; j < 2000; ++j) REQUIRE(g[k * 2000 + j] == planes[k] * 2000 + j);
  }

}  // TEST_SUITE
