// tests/format/max_compressed_bytes.cpp - the tests of include/ebac/format/max_compressed_bytes.hpp.
//
// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#include "../host/test_support.hpp"

#include <ebac/format/outlier_index.hpp>

#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#endif

using namespace ebac_test;

TEST_CASE("stream: max_compressed_bytes is 0 for what compress refuses, and never wraps") {
  using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  const std::uint64_t limit = ebac::max_stream_elements;
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{limit}, fast_t{}) > 4 * limit);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{limit + 1}, fast_t{}) == 0);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{std::uint64_t{1} << 62}, fast_t{}) == 0);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{}, fast_t{}) == 0);
  fast_t odd;
  odd.chunk_elements = 48;
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{100}, odd) == 0);
}
