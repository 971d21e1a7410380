// Property test on one tensor with more than 2^26 elements: 64-bit indexing
// through the whole-tensor path (2-D Lorenzo across many chunks), outliers
// far into the tensor, and the bound on every element. Kept to one pipeline
// and one dtype so the suite (and its sanitizer build) stays fast.
#include "property_inputs.hpp"

#include <cstdint>
#include <vector>

using namespace ebac_test;

TEST_SUITE("property") {
  TEST_CASE("large: a 1 x 8193 x 8193 float tensor (> 2^26 elements) round-trips") {
    const ebac::extents e{1, 8193, 8193};
    const std::uint64_t n = count_of(e);
    REQUIRE(n > (std::uint64_t{1} << 26));
    std::vector<float> x(static_cast<std::size_t>(n));
    // Cheap ReLU-like data: a hashed ramp with half the values zero, plus
    // non-finite values and huge outliers sprinkled across the whole range.
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto h = static_cast<std::uint32_t>(i * 2654435761u);
      const float v = static_cast<float>(static_cast<std::int32_t>(h >> 20) - 2048) * 1e-3f;
      x[i] = v > 0 ? v : 0.0f;
    }
    const std::uint64_t step = n / 1000 + 7;
    for (std::uint64_t i = 3; i < n; i += step) x[i] = (i % 2) ? NAN : 3e35f;
    x[n - 1] = -INFINITY;

    const ebac::error_bound eb{1e-3, ebac::bound_mode::absolute};
    ebac::compress_options o;
    o.bound = eb;
    o.threads = 0;  // all cores: this test is about size, not threading
    const auto spec = spec_of("lorenzo2:sign:bitpack");
    const auto s = compress(x.data(), e, spec, o);
    const auto h = ebac::host::inspect(s.data(), s.size());
    CHECK(h.shape == e);
    CHECK(h.lorenzo_params.dims == 2);
    CHECK(h.outlier_count >= 1000);
    std::vector<float> y(static_cast<std::size_t>(n));
    ebac::host::decompress(s.data(), s.size(), y.data(), n, 0);

    std::uint64_t bad = 0, first = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const float a = x[i], b = y[i];
      bool ok;
      if (!is_finite_bits(a)) ok = float_to_bits(a) == float_to_bits(b);
      else ok = exact_within(a, b, eb.value) && (a == 0) == (b == 0) && (a < 0) == (b < 0);  // the bound asked for
      if (!ok && bad++ == 0) first = i;
    }
    CHECK_MESSAGE(bad == 0, bad, " bad elements, first at ", first);
  }

}  // TEST_SUITE
