// tests/quantizer/linear.cpp - the tests of include/ebac/quantizer/linear.hpp.
//
// Quantizers and the exact bound check they rely on.
#include "../host/test_support.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace ebac_test;

namespace {

constexpr float fmax_ = std::numeric_limits<float>::max();

constexpr float finf = std::numeric_limits<float>::infinity();

float up(float x) { return std::nextafter(x, finf); }

float down(float x) { return std::nextafter(x, -finf); }

/// For T = float16/bfloat16: every finite pattern; for float: a sample.
template <class T>
std::vector<T> all_finite_16bit() {
  std::vector<T> v;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const T t = ebac::from_raw_bits<T>(static_cast<std::uint16_t>(b));
    if (std::isfinite(ebac::to_float(t))) v.push_back(t);
  }
  return v;
}

/// Checks quantize_element's promise for one element: a non-outlier's
/// reconstruction (rounded to T, as the decoder does) is within eb and, for a
/// sign-preserving quantizer, keeps zero and sign. Returns false on violation.
template <class Q, class T>
bool element_ok(const Q& q, T x, bool& outlier) {
  const ebac::quantized r = ebac::quantize_element(q, x);
  outlier = r.outlier;
  const float xf = ebac::to_float(x);
  if (!std::isfinite(xf)) return r.outlier;  // NaN/Inf must be outliers
  if (r.outlier) return r.code == 0;
  const float yf = ebac::to_float(ebac::reconstruct_element<T>(q, r.code));
  if (!std::isfinite(yf) || !exact_within(xf, yf, q.eb)) return false;
  if constexpr (Q::preserves_zero_and_sign) {
    if ((xf == 0) != (yf == 0) || (xf < 0) != (yf < 0)) return false;
    if ((xf == 0) != (r.code == 0) || (xf < 0) != (r.code < 0)) return false;
  }
  return true;
}

/// The bound whose quantizer has half step (sign-preserving) or step / 2
/// (linear) exactly h: bins are narrowed by quantizer_bin_margin, so the
/// bound is h / (1 - margin), nudged up so float_at_most lands on h.
double bound_for_half_step(double h) { return h / (1.0 - ebac::quantizer_bin_margin) * (1.0 + 0x1p-40); }

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("within_bound: exact decisions where the double difference ties the bound") {
    using ebac::detail::within_bound;
    const float one_ulp = 1.0f + std::ldexp(1.0f, -23);
    const double eb = static_cast<double>(one_ulp);
    const float tiny = std::ldexp(1.0f, -60);
    // x - y rounds to exactly eb in double; the sign of the lost remainder decides.
    CHECK_FALSE(within_bound(one_ulp, -tiny, eb));  // 1 + 2^-23 + 2^-60 > eb
    CHECK(within_bound(one_ulp, tiny, eb));         // 1 + 2^-23 - 2^-60 < eb
    CHECK_FALSE(within_bound(-one_ulp, tiny, eb));  // |-(1 + 2^-23) - 2^-60| > eb
    CHECK(within_bound(-one_ulp, -tiny, eb));
    CHECK_FALSE(within_bound(tiny, -one_ulp, eb));
    CHECK(within_bound(-tiny, -one_ulp, eb));
    // The same ties through the test's independent checker.
    CHECK_FALSE(exact_within(one_ulp, -tiny, eb));
    CHECK(exact_within(one_ulp, tiny, eb));
    CHECK_FALSE(exact_within(-one_ulp, tiny, eb));
    CHECK(exact_within(-one_ulp, -tiny, eb));
    // Exact ties: |x - y| == eb holds.
    CHECK(within_bound(3.0f, 1.0f, 2.0));
    CHECK_FALSE(within_bound(3.0f, 1.0f, std::nextafter(2.0, 0.0)));
    CHECK(within_bound(fmax_, -fmax_, 2.0 * fmax_));
    CHECK_FALSE(within_bound(fmax_, -fmax_, std::nextafter(2.0 * fmax_, 0.0)));
    const float dmin = std::numeric_limits<float>::denorm_min();
    CHECK(within_bound(dmin, 0.0f, static_cast<double>(dmin)));
    CHECK_FALSE(within_bound(dmin, 0.0f, std::nextafter(static_cast<double>(dmin), 0.0)));
    CHECK_FALSE(within_bound(dmin, -dmin, static_cast<double>(dmin)));
    CHECK(within_bound(0.0f, -0.0f, 0.0));
    CHECK(within_bound(5.0f, 5.0f, 0.0));
    CHECK_FALSE(within_bound(5.0f, up(5.0f), 0.0));
    // Differences the double cannot hold at all (2^127 vs 2^-149).
    const float big = std::ldexp(1.0f, 100);
    CHECK_FALSE(within_bound(big, -dmin, static_cast<double>(big)));
    CHECK(within_bound(big, dmin, static_cast<double>(big)));
  }

  TEST_CASE("within_bound agrees with exact long double arithmetic on random near-ties") {
    if (LDBL_MANT_DIG < 64) return;  // the reference needs a 64-bit significand
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int> ed(-40, 40), sd(0, 38);
    int checked = 0, failures = 0;
    for (int i = 0; i < 200000; ++i) {
      const float x = std::ldexp(static_cast<float>(rng() & 0xffffff) / 16777216.0f + 0.5f, ed(rng)) * ((rng() & 1) ? -1.f : 1.f);
      const float y = x + std::ldexp(static_cast<float>(static_cast<std::int64_t>(rng() % 2001) - 1000), ed(rng) - sd(rng));
      const long double lx = x, ly = -static_cast<long double>(y);
      const long double exact = lx + ly;
      // Only where the long double difference is itself exact (TwoSum remainder 0).
      const long double bv = exact - lx, av = exact - bv;
      if ((lx - av) + (ly - bv) != 0) continue;
      const long double mag = exact < 0 ? -exact : exact;
      const double d = static_cast<double>(mag);
      for (double eb : {d, std::nextafter(d, 0.0), std::nextafter(d, 1e300)}) {
        const bool want = mag <= static_cast<long double>(eb);
        const bool got = ebac::detail::within_bound(x, y, eb);
        const bool mine = exact_within(x, y, eb);
        ++checked;
        if ((got != want || mine != want) && failures++ < 5)
          FAIL_CHECK("x=", fmt(x), " y=", fmt(y), " eb=", fmt(eb), " want ", want, " got ", got, " test checker ", mine);
      }
    }
    CHECK(checked > 100000);
    CHECK(failures == 0);
  }

  TEST_CASE("sign-preserving quantizer: zero, sign and bins from 2h(q-1) excluded to 2h q included, h = eb (1 - 2^-10)") {
    const double eb = bound_for_half_step(0.125);
    const auto q = ebac::sign_preserving_quantizer::make(eb);  // exact: half_step 1/8, 1/(2 half_step) = 4
    CHECK(q.eb == eb);
    REQUIRE(q.half_step == 0.125f);
    CHECK(ebac::sign_preserving_quantizer::make(0.125).half_step == ebac::detail::float_at_most(0.125 * (1 - 0x1p-10)));
    std::int32_t c = 99;
    REQUIRE(q.try_quantize(0.0f, c));
    CHECK(c == 0);
    REQUIRE(q.try_quantize(-0.0f, c));
    CHECK(c == 0);
    CHECK(float_to_bits(q.reconstruct(0)) == 0u);  // exactly +0
    CHECK(q.reconstruct(1) == 0.125f);
    CHECK(q.reconstruct(-1) == -0.125f);
    const float dmin = std::numeric_limits<float>::denorm_min();
    REQUIRE(q.try_quantize(dmin, c));
    CHECK(c == 1);
    REQUIRE(q.try_quantize(-dmin, c));
    CHECK(c == -1);
    for (std::int32_t k = 1; k <= 4000; ++k) {
      CAPTURE(k);
      const float edge = 0.25f * static_cast<float>(k);  // 2 h k: upper end of bin k
      const float prev = 0.25f * static_cast<float>(k - 1);
      REQUIRE(q.try_quantize(edge, c));
      CHECK(c == k);
      REQUIRE(q.try_quantize(up(edge), c));
      CHECK(c == k + 1);
      REQUIRE(q.try_quantize(up(prev), c));
      CHECK(c == k);
      REQUIRE(q.try_quantize(-edge, c));
      CHECK(c == -k);
      REQUIRE(q.try_quantize(-up(prev), c));
      CHECK(c == -k);
      CHECK(q.reconstruct(k) == 0.125f * static_cast<float>(2 * k - 1));  // bin centre (2k-1) h
      CHECK(q.reconstruct(-k) == -0.125f * static_cast<float>(2 * k - 1));
      for (float x : {edge, up(prev), -edge, -up(prev), 0.25f * (static_cast<float>(k) - 0.5f)}) {
        bool outlier = true;
        CHECK(element_ok(q, x, outlier));
        CHECK_FALSE(outlier);  // power-of-two bound: every bin is exact
      }
    }
  }

  TEST_CASE("sign-preserving quantizer: code range, non-finite values and degenerate bounds") {
    const auto q = ebac::sign_preserving_quantizer::make(bound_for_half_step(0.125));
    REQUIRE(q.half_step == 0.125f);
    std::int32_t c = 0;
    const float lim = 0.25f * static_cast<float>(ebac::quantizer_code_limit);
    CHECK_FALSE(q.try_quantize(lim, c));
    CHECK_FALSE(q.try_quantize(-lim, c));
    CHECK_FALSE(q.try_quantize(0.25f * static_cast<float>(ebac::quantizer_code_limit - 1), c));
    REQUIRE(q.try_quantize(0.25f * static_cast<float>(ebac::quantizer_code_limit - 2), c));
    CHECK(c == ebac::quantizer_code_limit - 2);
    for (float x : {finf, -finf, std::numeric_limits<float>::quiet_NaN(), fmax_, -fmax_}) {
      CAPTURE(x);
      CHECK_FALSE(q.try_quantize(x, c));
      CHECK(ebac::quantize_element(q, x).outlier);
    }
    // eb == 0 (a constant tensor under a relative bound): nothing but 0 quantizes.
    const auto z = ebac::sign_preserving_quantizer::make(0.0);
    for (float x : {1.0f, -1e-30f, std::numeric_limits<float>::denorm_min(), fmax_}) CHECK(ebac::quantize_element(z, x).outlier);
    for (float x : {0.0f, -0.0f}) {
      const auto r = ebac::quantize_element(z, x);
      if (!r.outlier) CHECK(z.reconstruct(r.code) == 0.0f);
    }
    // Bounds below the smallest float and above the largest stay safe.
    for (double eb : {1e-46, 1e-45, 1e-44, 1e-40, 1e-38, 1e30, 1e38, 1e39, 1e300}) {
      CAPTURE(eb);
      const auto s = ebac::sign_preserving_quantizer::make(eb);
      for (float x : {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::denorm_min(), -1e-40f, 1e-30f, 3e38f, -fmax_, fmax_,
                      finf, -finf, std::numeric_limits<float>::quiet_NaN()}) {
        CAPTURE(x);
        bool o;
        CHECK(element_ok(s, x, o));
        CHECK(element_ok(s, ebac::from_float<ebac::float16>(x), o));
        CHECK(element_ok(s, ebac::from_float<ebac::bfloat16>(x), o));
      }
    }
  }

  TEST_CASE("linear quantizer: round to nearest bin, ties away from zero, codes and range") {
    const auto q = ebac::linear_quantizer::make(bound_for_half_step(0.125));  // step 1/4
    REQUIRE(q.step == 0.25f);
    CHECK(ebac::linear_quantizer::make(0.125).step == ebac::detail::float_at_most(0.25 * (1 - 0x1p-10)));
    std::int32_t c = 0;
    for (std::int32_t k = -3000; k <= 3000; ++k) {
      CAPTURE(k);
      const float centre = 0.25f * static_cast<float>(k);
      REQUIRE(q.try_quantize(centre, c));
      CHECK(c == k);
      CHECK(q.reconstruct(k) == centre);
      const float tie = 0.25f * (static_cast<float>(k) + 0.5f);  // between k and k+1
      REQUIRE(q.try_quantize(tie, c));
      CHECK(c == (k >= 0 ? k + 1 : k));  // half rounds away from zero
      REQUIRE(q.try_quantize(std::nextafter(tie, centre), c));
      CHECK(c == k);
      for (float x : {centre, tie, up(tie), down(tie)}) {
        bool outlier = true;
        CHECK(element_ok(q, x, outlier));
        CHECK_FALSE(outlier);
      }
    }
    // |x| < eb quantizes to 0: the linear quantizer does not keep signs.
    REQUIRE(q.try_quantize(-0.1f, c));
    CHECK(c == 0);
    REQUIRE(q.try_quantize(0.0f, c));
    CHECK(c == 0);
    CHECK_FALSE(q.try_quantize(0.25f * static_cast<float>(ebac::quantizer_code_limit - 1), c));
    REQUIRE(q.try_quantize(0.25f * static_cast<float>(ebac::quantizer_code_limit - 2), c));
    CHECK(c == ebac::quantizer_code_limit - 2);
    for (float x : {finf, -finf, std::numeric_limits<float>::quiet_NaN(), fmax_}) {
      CHECK_FALSE(q.try_quantize(x, c));
      CHECK(ebac::quantize_element(q, x).outlier);
    }
    CHECK_FALSE(ebac::linear_quantizer::preserves_zero_and_sign);
    CHECK(ebac::sign_preserving_quantizer::preserves_zero_and_sign);
  }

  TEST_CASE("quantizers: float32 values on an edge of the un-narrowed grid are never outliers") {
    // The end of a value range (a dropout mask's 1/(1-p), a saturated ReLU6's
    // 6, a one-hot 1) under a relative bound, and integers under round
    // absolute bounds, sit exactly on a multiple of 2 eb: without the bin
    // margin float rounding pushed them past the bound (issue: every non-zero
    // of a dropout mask stored raw). The margin keeps them inside a bin for
    // codes below 2^13 (relative bounds down to 1e-4 have codes below 5001).
    std::vector<float> levels = {1.0f, 6.0f, 3.0f, 0.5f, 3.14159274f, 255.0f};
    for (int p = 1; p <= 9; ++p) levels.push_back(1.0f / (1.0f - 0.1f * static_cast<float>(p)));
    int checked = 0;
    for (float x : levels)
      for (double rel : {1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4}) {
        // range [0, x] (post-ReLU, mask), [-x, x] (ternary, hardtanh), and absolute bounds
        for (double eb : {rel * x, rel * 2.0 * x, rel}) {
          if (x / (2 * eb) >= 8192) continue;  // beyond the codes the margin covers (255 at absolute 1e-4)
          CAPTURE(x);
          CAPTURE(eb);
          for (float v : {x, -x}) {
            bool o = true;
            CHECK(element_ok(ebac::sign_preserving_quantizer::make(eb), v, o));
            CHECK_FALSE(o);
            CHECK(element_ok(ebac::linear_quantizer::make(eb), v, o));
            CHECK_FALSE(o);
            ++checked;
          }
        }
      }
    CHECK(checked > 15 * 7 * 2 * 2);
  }

  TEST_CASE("quantize_element: random floats under awkward bounds never break the bound") {
    std::mt19937_64 rng(3);
    for (double eb : {0.1, 1e-3, 1.0 / 3.0, 7e-5, 1e-6, 1e-30, 2.5e-39, 12345.678}) {
      CAPTURE(eb);
      const auto qs = ebac::sign_preserving_quantizer::make(eb);
      const auto ql = ebac::linear_quantizer::make(eb);
      // Codes up to ~1.5e6 (near the 2^22 code limit float spacing approaches eb).
      std::uniform_real_distribution<double> u(-2.0 * eb * 1.5e6, 2.0 * eb * 1.5e6);
      std::uniform_real_distribution<double> small(-2.0 * eb * 1e4, 2.0 * eb * 1e4);
      std::uint64_t outs = 0, outl = 0, outs_small = 0, outl_small = 0, bad = 0;
      const int n = 200000;
      for (int i = 0; i < n; ++i) {
        const auto x = static_cast<float>(u(rng));
        bool o;
        if (!element_ok(qs, x, o) && bad++ < 3) FAIL_CHECK("sign: x=", fmt(x));
        outs += o;
        if (!element_ok(ql, x, o) && bad++ < 3) FAIL_CHECK("linear: x=", fmt(x));
        outl += o;
        // Codes below 1e4: float resolution is ample, verification failures must be rare.
        const auto xs = static_cast<float>(small(rng));
        if (!element_ok(qs, xs, o) && bad++ < 3) FAIL_CHECK("sign: x=", fmt(xs));
        outs_small += o;
        if (!element_ok(ql, xs, o) && bad++ < 3) FAIL_CHECK("linear: x=", fmt(xs));
        outl_small += o;
      }
      CHECK(bad == 0);
      CHECK(outs_small < n / 500);
      CHECK(outl_small < n / 500);
      // Near the code limit verification failures are common (a few %), which
      // costs ratio, not correctness: only the bound is checked there.
      CHECK(outs < n / 5);
      CHECK(outl < n / 5);
    }
  }

  TEST_CASE("quantize_element: every finite float16 and bfloat16 value, rounding to storage counted") {
    const auto h = all_finite_16bit<ebac::float16>();
    const auto b = all_finite_16bit<ebac::bfloat16>();
    for (double eb : {0.1, 1e-3, 0.7, 3e-5, 1e-7, 100.0, 1e-30, 1e-40}) {
      CAPTURE(eb);
      const auto qs = ebac::sign_preserving_quantizer::make(eb);
      const auto ql = ebac::linear_quantizer::make(eb);
      std::uint64_t bad = 0, kept = 0;
      auto run = [&](auto x) {
        bool o;
        if (!element_ok(qs, x, o) && bad++ < 3) FAIL_CHECK("sign: bits ", hex(ebac::raw_bits(x)));
        kept += !o;
        if (!element_ok(ql, x, o) && bad++ < 3) FAIL_CHECK("linear: bits ", hex(ebac::raw_bits(x)));
      };
      for (auto x : h) run(x);
      for (auto x : b) run(x);
      CHECK(bad == 0);
      if (eb >= 1e-7 && eb <= 1.0) CHECK(kept > 10000);
    }
  }

  TEST_CASE("quantize_element_fast: whatever it settles, quantize_element decides the same way") {
    // The host codec trusts the vectorized first pass for every element it
    // marks settled; only the rest take the exact path. A settled element must
    // therefore carry exactly the code the exact path would choose.
    std::mt19937_64 rng(4);
    std::vector<float> xs;
    for (int i = 0; i < 100000; ++i) xs.push_back(bits_to_float(static_cast<std::uint32_t>(rng())));
    std::uniform_real_distribution<float> u(-5.0f, 5.0f);
    for (int i = 0; i < 100000; ++i) xs.push_back(u(rng));
    for (float f : {0.0f, -0.0f, finf, -finf, std::numeric_limits<float>::quiet_NaN(), fmax_, -fmax_,
                    std::numeric_limits<float>::denorm_min()})
      xs.push_back(f);
    const auto h = all_finite_16bit<ebac::float16>();
    const auto b = all_finite_16bit<ebac::bfloat16>();
    std::uint64_t bad = 0, settled = 0;
    auto agree = [&](const auto& q, auto x) {
      const ebac::quantized f = ebac::quantize_element_fast(q, x);
      const ebac::quantized e = ebac::quantize_element(q, x);
      if (f.outlier) {
        if (f.code != 0 && bad++ < 5) FAIL_CHECK("unsettled element with a non-zero code, bits ", hex(ebac::raw_bits(x)));
        return;
      }
      ++settled;
      if ((e.outlier || e.code != f.code) && bad++ < 5)
        FAIL_CHECK("eb ", fmt(q.eb), " bits ", hex(ebac::raw_bits(x)), ": fast settled code ", f.code, ", exact path says ",
                   e.outlier ? std::string("outlier") : std::to_string(e.code));
      if (!std::isfinite(ebac::to_float(x)) && bad++ < 5) FAIL_CHECK("non-finite value settled, bits ", hex(ebac::raw_bits(x)));
    };
    for (double eb : {0.0, 1e-45, 1e-40, 1e-30, 1e-7, 3e-5, 1e-3, 0.1, 1.0 / 3.0, 0.7, 100.0, 1e30, 1e39, 1e300}) {
      CAPTURE(eb);
      const auto qs = ebac::sign_preserving_quantizer::make(eb);
      const auto ql = ebac::linear_quantizer::make(eb);
      for (float x : xs) {
        agree(qs, x);
        agree(ql, x);
      }
      for (auto x : h) {
        agree(qs, x);
        agree(ql, x);
      }
      for (auto x : b) {
        agree(qs, x);
        agree(ql, x);
      }
    }
    CHECK(bad == 0);
    CHECK(settled > 1000000);
  }

}  // TEST_SUITE
