// tests/dtype.cpp - the tests of include/ebac/dtype.hpp.
//
// Element types: float16 / bfloat16 conversions against references computed
// here in double, exhaustively where the domain allows.
#include "host/test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace ebac_test;

namespace {

/// Value of a binary16 bit pattern, decoded from the IEEE layout in double.
double f16_value(std::uint16_t b) {
  const int e = (b >> 10) & 0x1f;
  const int m = b & 0x3ff;
  double v;
  if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  return (b & 0x8000) ? -v : v;
}

/// Value of a bfloat16 bit pattern (sign, 8-bit exponent, 7-bit mantissa).
double bf16_value(std::uint16_t b) {
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  double v;
  if (e == 0) v = std::ldexp(static_cast<double>(m), -133);
  else if (e == 255) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(128 + m), e - 134);
  return (b & 0x8000) ? -v : v;
}

/// Reference round-to-nearest-even into a 16-bit format whose non-negative
/// finite values are table[0..inf_code-1] (increasing) and whose infinity is
/// inf_code. `table[inf_code]` holds the value the next code would have, the
/// overflow threshold's upper neighbour: above the midpoint we get infinity.
struct rne_reference {
  std::vector<double> table;  // size inf_code + 1
  std::uint16_t inf_code;

  std::uint16_t operator()(float x) const {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (std::isinf(a) || a >= table[inf_code]) return sign | inf_code;
    const auto it = std::upper_bound(table.begin(), table.end(), a);
    const auto lo = static_cast<std::uint16_t>((it - table.begin()) - 1);
    if (table[lo] == a) return sign | lo;
    const auto hi = static_cast<std::uint16_t>(lo + 1);
    const double twice = 2 * a;                // exact
    const double mid = table[lo] + table[hi];  // exact: adjacent values of a 16-bit format
    if (twice < mid) return sign | lo;
    if (twice > mid) return sign | hi;
    return sign | ((lo & 1) ? hi : lo);  // tie: even mantissa
  }
};

rne_reference f16_reference() {
  rne_reference r;
  r.inf_code = 0x7c00;
  for (std::uint32_t b = 0; b < 0x7c00; ++b) r.table.push_back(f16_value(static_cast<std::uint16_t>(b)));
  r.table.push_back(65536.0);
  return r;
}

rne_reference bf16_reference() {
  rne_reference r;
  r.inf_code = 0x7f80;
  for (std::uint32_t b = 0; b < 0x7f80; ++b) r.table.push_back(bf16_value(static_cast<std::uint16_t>(b)));
  r.table.push_back(std::ldexp(1.0, 128));
  return r;
}

/// Random floats: uniform bit patterns, and patterns with exponents near the
/// 16-bit formats' ranges (subnormal halves, the overflow edge).
std::vector<float> random_floats(std::uint64_t seed, std::size_t n, int exp_lo, int exp_hi) {
  std::mt19937_64 rng(seed);
  std::vector<float> v;
  v.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint32_t>(rng());
    const float f = bits_to_float(u);
    if (!std::isnan(f)) v.push_back(f);
  }
  std::uniform_int_distribution<int> ed(exp_lo, exp_hi);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t mant = static_cast<std::uint32_t>(rng()) & 0x7fffffu;
    const int e = ed(rng);  // unbiased exponent
    const std::uint32_t sign = (rng() & 1) ? 0x80000000u : 0u;
    std::uint32_t bits;
    if (e < -126) bits = sign | (mant >> std::min(23, -126 - e));  // float subnormal
    else bits = sign | (static_cast<std::uint32_t>(e + 127) << 23) | mant;
    v.push_back(bits_to_float(bits));
  }
  return v;
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("dtype: names, sizes and raw bits") {
    CHECK(ebac::size_of(ebac::dtype::f32) == 4);
    CHECK(ebac::size_of(ebac::dtype::f16) == 2);
    CHECK(ebac::size_of(ebac::dtype::bf16) == 2);
    ebac::dtype t{};
    CHECK((ebac::parse_dtype("f32", t) && t == ebac::dtype::f32));
    CHECK((ebac::parse_dtype("float16", t) && t == ebac::dtype::f16));
    CHECK((ebac::parse_dtype("bf16", t) && t == ebac::dtype::bf16));
    CHECK((ebac::parse_dtype("bfloat16", t) && t == ebac::dtype::bf16));
    CHECK_FALSE(ebac::parse_dtype("f64", t));
    CHECK_FALSE(ebac::parse_dtype("", t));
    CHECK_FALSE(ebac::parse_dtype("F32", t));
    for (auto d : {ebac::dtype::f32, ebac::dtype::f16, ebac::dtype::bf16}) {
      ebac::dtype back{};
      CHECK(ebac::parse_dtype(ebac::to_string(d), back));
      CHECK(back == d);
    }
    CHECK(ebac::raw_bits(ebac::from_raw_bits<float>(0x7fc12345u)) == 0x7fc12345u);
    CHECK(ebac::raw_bits(ebac::from_raw_bits<ebac::float16>(0x7c01)) == 0x7c01);
    CHECK(ebac::raw_bits(ebac::from_raw_bits<ebac::bfloat16>(0xff81)) == 0xff81);
  }

  TEST_CASE("float16: all 65536 patterns decode exactly and round-trip through float") {
    int failures = 0;
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      const float f = ebac::to_float(ebac::float16{h});
      const double ref = f16_value(h);
      const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
      const std::uint16_t back = ebac::from_float<ebac::float16>(f).bits;
      bool ok;
      if (nan) {
        // NaN stays NaN with its sign; the conversion may only set the quiet bit.
        ok = std::isnan(f) && std::signbit(f) == static_cast<bool>(h & 0x8000) && ((back >> 10) & 0x1f) == 0x1f &&
             (back & 0x3ff) != 0 && (back & 0x8000) == (h & 0x8000) && (back | 0x0200) == (h | 0x0200);
      } else {
        ok = static_cast<double>(f) == ref && std::signbit(f) == static_cast<bool>(h & 0x8000) && back == h;
      }
      if (!ok && failures++ < 5)
        FAIL_CHECK("float16 bits ", hex(h), ": to_float=", fmt(f), " ref=", fmt(ref), " back=", hex(back));
    }
    CHECK(failures == 0);
  }

  TEST_CASE("bfloat16: all 65536 patterns decode exactly and round-trip through float") {
    int failures = 0;
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      const float f = ebac::to_float(ebac::bfloat16{h});
      const double ref = bf16_value(h);
      const bool nan = ((h >> 7) & 0xff) == 0xff && (h & 0x7f);
      const std::uint16_t back = ebac::from_float<ebac::bfloat16>(f).bits;
      bool ok;
      if (nan) {
        ok = std::isnan(f) && float_to_bits(f) == (static_cast<std::uint32_t>(h) << 16) && ((back >> 7) & 0xff) == 0xff &&
             (back & 0x7f) != 0 && (back & 0x8000) == (h & 0x8000) && (back | 0x40) == (h | 0x40);
      } else {
        ok = static_cast<double>(f) == ref && float_to_bits(f) == (static_cast<std::uint32_t>(h) << 16) && back == h;
      }
      if (!ok && failures++ < 5)
        FAIL_CHECK("bfloat16 bits ", hex(h), ": to_float=", fmt(f), " ref=", fmt(ref), " back=", hex(back));
    }
    CHECK(failures == 0);
  }

  TEST_CASE("float16: from_float is round-to-nearest-even (boundaries)") {
    const auto ref = f16_reference();
    struct c {
      float x;
      std::uint16_t bits;
    };
    const float min_sub = std::ldexp(1.0f, -24);
    const c cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},
        {65519.99f, 0x7bff},  // the float nearest 65519.99 is below the midpoint 65520
        {std::nextafter(65520.0f, 0.0f), 0x7bff},
        {65520.0f, 0x7c00},  // midpoint between 65504 and 2^16: ties to even -> infinity
        {-65520.0f, 0xfc00},
        {65536.0f, 0x7c00},
        {std::numeric_limits<float>::max(), 0x7c00},
        {-std::numeric_limits<float>::max(), 0xfc00},
        {std::numeric_limits<float>::infinity(), 0x7c00},
        {-std::numeric_limits<float>::infinity(), 0xfc00},
        {min_sub, 0x0001},
        {-min_sub, 0x8001},
        {std::ldexp(1.0f, -25), 0x0000},  // half the smallest subnormal: tie to even (zero)
        {-std::ldexp(1.0f, -25), 0x8000},
        {std::nextafter(std::ldexp(1.0f, -25), 1.0f), 0x0001},
        {1.5f * min_sub, 0x0002},         // tie between 1 and 2 ulps: even
        {2.5f * min_sub, 0x0002},         // tie between 2 and 3 ulps: even
        {std::ldexp(1.0f, -14), 0x0400},  // smallest normal
        {std::nextafter(std::ldexp(1.0f, -14), 0.0f), 0x0400},
        {std::ldexp(1023.5f, -24), 0x0400},  // tie between largest subnormal and smallest normal
        {std::ldexp(1022.5f, -24), 0x03fe},
        {std::numeric_limits<float>::denorm_min(), 0x0000},
        {-std::numeric_limits<float>::denorm_min(), 0x8000},
        {std::numeric_limits<float>::min(), 0x0000},
        {1.0f + std::ldexp(1.0f, -11), 0x3c00},  // tie: even
        {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},
        {2048.0f + 1.0f, 0x6800},  // 2049 ties between 2048 and 2050
        {2048.0f + 3.0f, 0x6802},
    };
    for (const auto& k : cases) {
      INFO("x = ", fmt(k.x));
      CHECK(hex(ebac::from_float<ebac::float16>(k.x).bits) == hex(k.bits));
      CHECK(hex(ref(k.x)) == hex(k.bits));  // the reference agrees with the hand-made table
    }
  }

  TEST_CASE("float16: from_float matches a double reference on every tie and many random floats") {
    const auto ref = f16_reference();
    int failures = 0;
    auto check = [&](float x) {
      const std::uint16_t got = ebac::from_float<ebac::float16>(x).bits, want = ref(x);
      if (got != want && failures++ < 10)
        FAIL_CHECK("x=", fmt(x), " (", hex(float_to_bits(x)), ") got ", hex(got), " want ", hex(want));
    };
    // Every midpoint between adjacent halves (exact in float) and its neighbours.
    for (std::uint32_t b = 0; b < 0x7c00; ++b) {
      const double mid = (ref.table[b] + ref.table[b + 1]) / 2;
      const auto m = static_cast<float>(mid);
      REQUIRE(static_cast<double>(m) == mid);
      for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e30f), static_cast<float>(ref.table[b])}) {
        check(x);
        check(-x);
      }
    }
    for (float x : random_floats(0xf16, 1u << 20, -30, 17)) check(x);
    CHECK(failures == 0);
  }

  TEST_CASE("bfloat16: from_float matches a double reference on every tie and many random floats") {
    const auto ref = bf16_reference();
    int failures = 0;
    auto check = [&](float x) {
      const std::uint16_t got = ebac::from_float<ebac::bfloat16>(x).bits, want = ref(x);
      if (got != want && failures++ < 10)
        FAIL_CHECK("x=", fmt(x), " (", hex(float_to_bits(x)), ") got ", hex(got), " want ", hex(want));
    };
    for (std::uint32_t b = 0; b < 0x7f80; ++b) {
      const double mid = (ref.table[b] + ref.table[b + 1]) / 2;
      if (b == 0x7f7f) {  // the overflow midpoint (2 - 2^-8) 2^127 is a float
        const auto m = static_cast<float>(mid);
        REQUIRE(static_cast<double>(m) == mid);
        check(m);
        check(std::nextafter(m, 0.0f));
        check(std::numeric_limits<float>::max());
        continue;
      }
      const auto m = static_cast<float>(mid);
      REQUIRE(static_cast<double>(m) == mid);
      for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e30f), static_cast<float>(ref.table[b])}) {
        check(x);
        check(-x);
      }
    }
    for (float x : random_floats(0xbf16, 1u << 20, -150, 127)) check(x);
    CHECK(ebac::from_float<ebac::bfloat16>(std::numeric_limits<float>::max()).bits == 0x7f80);
    CHECK(ebac::from_float<ebac::bfloat16>(-std::numeric_limits<float>::infinity()).bits == 0xff80);
    CHECK(ebac::from_float<ebac::bfloat16>(-0.0f).bits == 0x8000);
    CHECK(failures == 0);
  }

  TEST_CASE("float16/bfloat16: every float NaN converts to a NaN of the same sign") {
    std::mt19937_64 rng(7);
    std::vector<std::uint32_t> nans = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
                                       0xffffffffu, 0x7fc12345u, 0x7f802000u, 0x7fa00000u};
    for (int i = 0; i < 100000; ++i) {
      std::uint32_t m = static_cast<std::uint32_t>(rng()) & 0x7fffffu;
      if (!m) m = 1;
      nans.push_back((static_cast<std::uint32_t>(rng()) & 0x80000000u) | 0x7f800000u | m);
    }
    int failures = 0;
    for (std::uint32_t u : nans) {
      const float f = bits_to_float(u);
      const std::uint16_t h = ebac::from_float<ebac::float16>(f).bits;
      const std::uint16_t b = ebac::from_float<ebac::bfloat16>(f).bits;
      const bool ok = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) && ((h & 0x8000) != 0) == ((u >> 31) != 0) &&
                      ((b >> 7) & 0xff) == 0xff && (b & 0x7f) && ((b & 0x8000) != 0) == ((u >> 31) != 0) &&
                      std::isnan(ebac::to_float(ebac::float16{h})) && std::isnan(ebac::to_float(ebac::bfloat16{b}));
      if (!ok && failures++ < 5) FAIL_CHECK("NaN ", hex(u), " -> f16 ", hex(h), " bf16 ", hex(b));
    }
    CHECK(failures == 0);
  }

}  // TEST_SUITE
