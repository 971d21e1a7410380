// tests/host/test_support.hpp - helpers shared by the host and property tests.
//
// Everything here judges the library from the outside: the bound is checked in
// the test's own double arithmetic, non-finite values by their raw bits, and
// determinism by comparing whole streams.
#pragma once

#include <ebac/ebac.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ebac_test {

template <class T>
inline const char* type_name();
template <>
inline const char* type_name<float>() {
  return "f32";
}
template <>
inline const char* type_name<ebac::float16>() {
  return "f16";
}
template <>
inline const char* type_name<ebac::bfloat16>() {
  return "bf16";
}

inline std::string shape_str(const ebac::extents& e) {
  std::string s = "{";
  for (int i = 0; i < e.rank; ++i) {
    if (i) s += ',';
    s += std::to_string(e.dims[i]);  // appended, not prepended: GCC 12 warns (-Wrestrict) on "," + string
  }
  return s + "}";
}

inline std::uint64_t count_of(const ebac::extents& e) {
  std::uint64_t n = 0;
  REQUIRE(e.count(n) == ebac::status::ok);
  return n;
}

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline std::string hex(std::uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

inline std::string fmt(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

/// |x - y| <= eb for finite floats x, y, decided exactly. The double
/// subtraction is correctly rounded and rounding is monotone, so the rounded
/// magnitude is only ambiguous when it equals eb; then the exact remainder of
/// the subtraction (Knuth's TwoSum, exact in double) decides.
inline bool exact_within(float x, float y, double eb) {
  const double a = static_cast<double>(x);
  const double b = -static_cast<double>(y);
  const double s = a + b;
  const double mag = std::fabs(s);
  if (mag != eb) return mag < eb;
  const double bv = s - a;
  const double av = s - bv;
  const double rem = (a - av) + (b - bv);  // (a + b) == s + rem exactly
  if (rem == 0) return true;
  return (rem > 0) != (s > 0);  // the remainder shrinks |s|
}

inline bool is_finite_bits(float f) { return (float_to_bits(f) & 0x7f800000u) != 0x7f800000u; }

inline ebac::pipeline_spec spec_of(const std::string& name, std::uint32_t chunk = 0) {
  ebac::pipeline_spec s;
  INFO("pipeline name: ", name);
  REQUIRE(ebac::parse_pipeline(name, s));
  if (chunk) s.chunk_elements = chunk;
  return s;
}

/// max_compressed_bytes for a pipeline given by name.
template <class T>
std::size_t max_bytes(const ebac::extents& e, const ebac::pipeline_spec& spec) {
  return ebac::with_pipeline(spec, e, [&](auto p) { return ebac::max_compressed_bytes<decltype(p), T>(e, p); });
}

template <class T>
std::vector<std::byte> compress(const T* x, const ebac::extents& e, const ebac::pipeline_spec& spec,
                                const ebac::compress_options& o) {
  return ebac::with_pipeline(spec, e, [&](auto p) { return ebac::host::compress(x, e, p, o); });
}

template <class T>
std::vector<std::byte> compress(const std::vector<T>& x, const ebac::extents& e, const std::string& pipe, ebac::error_bound eb,
                                bool checksum = true, int threads = 1) {
  ebac::compress_options o;
  o.bound = eb;
  o.checksum = checksum;
  o.threads = threads;
  return compress(x.data(), e, spec_of(pipe), o);
}

/// Converts floats to the element type (round to nearest even).
template <class T>
std::vector<T> convert(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = ebac::from_float<T>(v[i]);
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (ebac::raw_bits(a[i]) != ebac::raw_bits(b[i])) return false;
  return true;
}

/// The absolute bound the caller was promised, computed here in double.
template <class T>
double promised_bound(const std::vector<T>& x, ebac::error_bound eb) {
  if (eb.mode == ebac::bound_mode::absolute) return eb.value;
  bool any = false;
  double lo = 0, hi = 0;
  for (const T& v : x) {
    const float f = ebac::to_float(v);
    if (!std::isfinite(f)) continue;
    const double d = f;
    if (!any) {
      lo = hi = d;
      any = true;
    }
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  return any ? eb.value * (hi - lo) : 0.0;
}

/// True when every finite value of x is the same (and there is one).
template <class T>
bool constant_finite(const std::vector<T>& x) {
  bool any = false;
  float v = 0;
  for (const T& e : x) {
    const float f = ebac::to_float(e);
    if (!std::isfinite(f)) continue;
    if (any && !(f == v)) return false;
    v = f;
    any = true;
  }
  return any;
}

struct roundtrip_stats {
  std::uint64_t outliers = 0;
  std::size_t stream_bytes = 0;
  double eb_abs = 0;
};

/// Compresses x with `pipe`, decompresses, and checks every promise:
///  - the stream is deterministic (twice the same bytes, threads 1 == 2),
///    and the checksum-less stream decodes to the same values;
///  - the header describes the input (dtype, extents, mode, bound) and its
///    absolute bound does not exceed the one promised;
///  - decompression with 1 and 2 threads gives identical bits;
///  - every finite x has a finite y with |x - y| <= eb_abs (exactly);
///  - NaN and +-Inf come back bit-exactly;
///  - with the sign-preserving quantizer: x == 0 -> y == 0, sign(y) == sign(x);
///  - the stream fits max_compressed_bytes (the CUDA backend's output buffer).
template <class T>
roundtrip_stats check_roundtrip(const std::vector<T>& x, const ebac::extents& e, const std::string& pipe, ebac::error_bound eb,
                                const std::string& label, std::uint32_t chunk = 0, std::uint32_t max_levels = ebac::max_levels) {
  INFO("case: pipeline=", pipe, " dtype=", std::string(type_name<T>()), " shape=", shape_str(e), " eb=", fmt(eb.value),
       " mode=", std::string(ebac::to_string(eb.mode)), " data=", label, " chunk=", chunk);
  REQUIRE(x.size() == count_of(e));
  const ebac::pipeline_spec spec = spec_of(pipe, chunk);
  ebac::compress_options o;
  o.bound = eb;
  o.threads = 1;
  o.max_levels = max_levels;
  const auto s1 = compress(x.data(), e, spec, o);
  const auto s1b = compress(x.data(), e, spec, o);
  CHECK_MESSAGE(s1 == s1b, "compress is not deterministic");
  o.threads = 2;
  const auto s2 = compress(x.data(), e, spec, o);
  CHECK_MESSAGE(s1 == s2, "compress with 2 threads differs from 1 thread");
  o.threads = 1;
  o.checksum = false;
  const auto s_nock = compress(x.data(), e, spec, o);

  const ebac::stream_header h = ebac::host::inspect(s1.data(), s1.size());
  CHECK(h.type == ebac::dtype_of<T>::value);
  CHECK(h.shape == e);
  CHECK(h.mode == eb.mode);
  CHECK(h.eb_requested == eb.value);
  CHECK(h.has_checksum());
  // The writer may code the tensor as palette indices (few distinct values)
  // or store it raw (when coding would not shrink it); otherwise the stages
  // are the pipeline's (with choose_quantizer, the linear quantizer may
  // stand in for the zero/sign-preserving one).
  if (!h.is_stored()) {
    CHECK((h.quantizer == spec.quantizer || (max_levels > 0 && h.quantizer == ebac::quantizer_id::levels) ||
           (spec.choose_quantizer && h.quantizer == ebac::quantizer_id::linear)));
    CHECK(h.encoder == spec.encoder);
  }
  const double promised = promised_bound(x, eb);
  // The header's eb_abs is the quantizer's bound: the promised one, except a
  // constant tensor under a relative bound (promise 0), whose quantizer may
  // be made to reconstruct its value exactly (quantizer_bound). The values
  // are checked against the promise either way.
  CHECK_MESSAGE((h.eb_abs <= promised || (promised == 0 && eb.mode == ebac::bound_mode::relative && constant_finite(x))),
                "stream eb_abs ", fmt(h.eb_abs), " exceeds the promised ", fmt(promised));
  const double bound = std::min(h.eb_abs, promised);

  const ebac::stream_header hn = ebac::host::inspect(s_nock.data(), s_nock.size());
  CHECK(!hn.has_checksum());
  CHECK(s_nock.size() + 8 == s1.size());
  const std::size_t cap = max_bytes<T>(e, spec);
  CHECK_MESSAGE(s1.size() <= cap, "stream of ", s1.size(), " bytes exceeds max_compressed_bytes = ", cap);
  // No stream is larger than its header, the raw elements and the checksum
  // (computed here, not by the library).
  CHECK(s1.size() <= 112 + 8 * static_cast<std::size_t>(e.rank) + x.size() * sizeof(T) + 8);
  if (!h.is_stored()) {
    const std::size_t coded_cap =
        ebac::with_pipeline(spec, e, [&](auto p) { return ebac::max_coded_bytes<decltype(p), T>(e, p); });
    CHECK_MESSAGE(s1.size() <= coded_cap, "coded stream of ", s1.size(), " bytes exceeds max_coded_bytes = ", coded_cap);
  }
  {
    // Into a caller's buffer of max_compressed_bytes: the same bytes. One
    // byte too small: buffer_too_small, and the buffer is not touched.
    ebac::compress_options oc = o;
    oc.checksum = true;
    std::vector<std::byte> buf(cap, std::byte{0x5a});
    const std::size_t k =
        ebac::with_pipeline(spec, e, [&](auto p) { return ebac::host::compress(x.data(), e, p, oc, buf.data(), buf.size()); });
    CHECK(k == s1.size());
    CHECK_MESSAGE(std::equal(s1.begin(), s1.end(), buf.begin()), "compress into a buffer wrote other bytes");
    if (x.size() <= 5000) {
      std::vector<std::byte> small(s1.size() - 1, std::byte{0x5a});
      ebac::status code = ebac::status::ok;
      try {
        (void)ebac::with_pipeline(spec, e,
                                  [&](auto p) { return ebac::host::compress(x.data(), e, p, oc, small.data(), small.size()); });
      } catch (const ebac::error& err) { code = err.code(); }
      CHECK(code == ebac::status::buffer_too_small);
      CHECK_MESSAGE(std::all_of(small.begin(), small.end(), [](std::byte b) { return b == std::byte{0x5a}; }),
                    "a buffer too small was written to");
    }
  }

  const auto y1 = ebac::host::decompress<T>(s1.data(), s1.size(), 1);
  // Into a caller buffer pre-filled with NaN bits: every element must be written.
  std::vector<T> y2(x.size(), ebac::from_raw_bits<T>(static_cast<typename ebac::bits_of<T>::type>(~0u)));
  ebac::host::decompress(s1.data(), s1.size(), y2.data(), y2.size(), 2);
  const auto y3 = ebac::host::decompress<T>(s_nock.data(), s_nock.size(), 1);
  REQUIRE(y1.size() == x.size());
  CHECK_MESSAGE(same_bits(y1, y2), "decompress with 2 threads differs from 1 thread");
  CHECK_MESSAGE(same_bits(y1, y3), "checksum-less stream decodes differently");

  // Promised by the spec, or (choose_quantizer) by the quantizer the stream names.
  const bool sign_kept = spec.quantizer == ebac::quantizer_id::sign_preserving &&
                         (!spec.choose_quantizer || h.quantizer != ebac::quantizer_id::linear);
  std::uint64_t bad = 0;
  std::string first_bad;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float xf = ebac::to_float(x[i]);
    const float yf = ebac::to_float(y1[i]);
    const char* why = nullptr;
    if (!is_finite_bits(xf)) {
      if (ebac::raw_bits(x[i]) != ebac::raw_bits(y1[i])) why = "non-finite value not restored bit-exactly";
    } else if (!is_finite_bits(yf)) {
      why = "finite value reconstructed as non-finite";
    } else if (!exact_within(xf, yf, bound)) {
      why = "error bound violated";
    } else if (sign_kept && ((xf == 0.0f) != (yf == 0.0f) || (xf < 0.0f) != (yf < 0.0f))) {
      why = "zero or sign not preserved";
    }
    if (why && bad++ == 0) {
      first_bad = std::string(why) + " at index " + std::to_string(i) + ": x=" + fmt(xf) + " (" + hex(ebac::raw_bits(x[i])) +
                  ") y=" + fmt(yf) + " (" + hex(ebac::raw_bits(y1[i])) +
                  ") |x-y|=" + fmt(std::fabs(static_cast<double>(xf) - static_cast<double>(yf))) + " eb_abs=" + fmt(bound);
    }
  }
  CHECK_MESSAGE(bad == 0, bad, " bad elements; first: ", first_bad);
  return {h.outlier_count, s1.size(), h.eb_abs};
}

/// A batch of post-ReLU feature maps of shape e (N, C, H, W): smooth per
/// channel, about half zero, zeros in runs (what the ANS contexts model).
inline std::vector<float> post_relu_maps(const ebac::extents& e, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> noise(0.f, 0.08f);
  const std::uint64_t H = e.dims[2], W = e.dims[3];
  std::vector<float> x(static_cast<std::size_t>(count_of(e)));
  for (std::uint64_t p = 0; p < e.dims[0] * e.dims[1]; ++p) {
    const float a = 0.05f + 0.01f * static_cast<float>(p % 7), b = 0.03f * static_cast<float>(1 + p % 5);
    for (std::uint64_t i = 0; i < H; ++i)
      for (std::uint64_t j = 0; j < W; ++j) {
        const float v = std::sin(a * static_cast<float>(i) + b) * std::cos(0.09f * static_cast<float>(j)) + noise(rng);
        x[static_cast<std::size_t>((p * H + i) * W + j)] = v > 0 ? v : 0.f;
      }
  }
  return x;
}

}  // namespace ebac_test
