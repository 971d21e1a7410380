// tests/property/property_inputs.hpp - pipelines, shapes and input generators
// shared by the property tests.
#pragma once

#include "../host/test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ebac_test {

/// True in sanitizer builds (10-30x slower): the biggest property sweeps
/// subsample there; memory errors show on small and multi-chunk cases alike.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

/// Every named pipeline and every explicit predictor:quantizer:encoder triple.
inline std::vector<std::string> all_pipelines() {
  std::vector<std::string> v(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
  for (const char* p : {"none", "lorenzo", "lorenzo1", "lorenzo2", "lorenzo3"})
    for (const char* q : {"sign", "linear"})
      for (const char* e : {"bitpack", "rle", "huffman", "striped"}) v.push_back(std::string(p) + ":" + q + ":" + e);
  return v;
}

/// Sizes 0, 1, odd sizes, 2-D/3-D/4-D shapes incl. dims smaller than the
/// Lorenzo tiles (64 for 2-D, 16 for 3-D), and shapes spanning several chunks.
inline std::vector<ebac::extents> property_shapes() {
  return {
      ebac::extents{0},
      ebac::extents{3, 0, 5},
      ebac::extents{1},
      ebac::extents{2},
      ebac::extents{31},
      ebac::extents{33},
      ebac::extents{1025},
      ebac::extents{7, 13},
      ebac::extents{3, 5, 7},
      ebac::extents{2, 3, 4, 5},
      ebac::extents{3, 1, 17, 19},
      ebac::extents{1, 1, 1, 1},
      ebac::extents{2, 1, 3, 1, 2, 1, 5, 7},
      ebac::extents{50, 1},
      ebac::extents{4, 8, 33, 35},
      ebac::extents{40001},
  };
}

enum class kind { uniform, relu, smooth, mixed };
inline const char* kind_name(kind k) {
  switch (k) {
    case kind::uniform: return "uniform";
    case kind::relu: return "relu";
    case kind::smooth: return "smooth";
    case kind::mixed: return "mixed-specials";
  }
  return "?";
}

/// Special float values: signed zeros, subnormals, extremes, infinities and
/// NaNs with payloads (quiet and signalling, both signs).
inline std::vector<float> special_floats() {
  const float dmin = std::numeric_limits<float>::denorm_min();
  const float fmax = std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  return {0.0f,
          -0.0f,
          dmin,
          -dmin,
          1e-40f,
          -3.5e-42f,
          std::numeric_limits<float>::min(),
          -std::numeric_limits<float>::min(),
          fmax,
          -fmax,
          std::nextafter(fmax, 0.0f),
          inf,
          -inf,
          bits_to_float(0x7fc00000u),
          bits_to_float(0xffc00000u),
          bits_to_float(0x7f800001u),
          bits_to_float(0xff812345u),
          bits_to_float(0x7fffffffu),
          bits_to_float(0x7fc0beefu),
          65504.0f,
          65520.0f,
          -65519.99f,
          6.1e-5f,
          5.96e-8f,
          1e30f,
          -1e20f,
          1.0f,
          -1.0f};
}

/// Float values of a tensor of n elements whose innermost extent is `inner`.
inline std::vector<float> make_floats(std::size_t n, std::size_t inner, kind k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  if (inner == 0) inner = 1;
  const auto specials = special_floats();
  for (std::size_t i = 0; i < n; ++i) {
    const float r = static_cast<float>(i / inner), c = static_cast<float>(i % inner);
    const float smooth =
        2.0f * std::sin(0.11f * c + 0.3f) * std::cos(0.07f * r) + 0.5f * std::sin(0.013f * static_cast<float>(i));
    switch (k) {
      case kind::uniform: v[i] = u(rng); break;
      case kind::relu: {
        const float a = smooth + 0.3f * g(rng);
        v[i] = a > 0 ? a : 0.0f;
        break;
      }
      case kind::smooth: v[i] = 100.0f * smooth + 0.01f * u(rng); break;
      case kind::mixed: v[i] = (rng() % 10 == 0) ? specials[rng() % specials.size()] : smooth + 0.05f * g(rng); break;
    }
  }
  return v;
}

/// 16-bit NaN patterns with payloads, used to salt f16/bf16 tensors directly
/// (a float NaN would lose its low payload bits in conversion).
template <class T>
inline std::vector<std::uint16_t> special_bits();
template <>
inline std::vector<std::uint16_t> special_bits<ebac::float16>() {
  return {0x7c01, 0xfc01, 0x7e00, 0xfe00, 0x7fff, 0x7d55, 0x7c00, 0xfc00, 0x0001, 0x8001, 0x03ff, 0x7bff, 0xfbff, 0x8000};
}
template <>
inline std::vector<std::uint16_t> special_bits<ebac::bfloat16>() {
  return {0x7f81, 0xff81, 0x7fc0, 0xffc0, 0x7fff, 0x7fa5, 0x7f80, 0xff80, 0x0001, 0x8001, 0x007f, 0x7f7f, 0xff7f, 0x8000};
}

/// Element tensor for a kind; f16/bf16 mixed tensors also get 16-bit NaN payloads.
template <class T>
std::vector<T> make_tensor(const ebac::extents& e, kind k, std::uint64_t seed) {
  const std::uint64_t n = count_of(e);
  const std::size_t inner = e.rank ? static_cast<std::size_t>(e.dims[e.rank - 1]) : 1;
  auto v = convert<T>(make_floats(static_cast<std::size_t>(n), inner, k, seed));
  if constexpr (!std::is_same_v<T, float>) {
    if (k == kind::mixed) {
      std::mt19937_64 rng(seed ^ 0x5a5a);
      const auto sb = special_bits<T>();
      for (std::size_t i = 0; i < v.size(); ++i)
        if (rng() % 17 == 0) v[i] = ebac::from_raw_bits<T>(sb[rng() % sb.size()]);
    }
  }
  return v;
}

}  // namespace ebac_test
