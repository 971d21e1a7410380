// Property tests: few-level tensors (dropout masks, one-hot rows, ternary
// values, saturated ReLU6 maps) under every pipeline, dtype, mode and bound
// from 1e-1 to 1e-4. They must round-trip within the bound like any tensor
// (check_roundtrip) and compress well: a value on an edge of the bound's
// grid is never stored raw merely because of where the edges fall, and no
// tensor grows.
#include "property_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace ebac_test;

namespace {

/// The level tensors of the issue, as floats (converted to T by the caller).
struct level_case {
  std::string name;
  ebac::extents shape;
  std::vector<float> x;
  bool mask_or_onehot;  // the `ratio` >= 12x target applies
};

std::vector<level_case> level_cases() {
  std::vector<level_case> v;
  std::mt19937 rng(20261201);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const ebac::extents act{8, 8, 28, 28};  // a conv activation's shape, 50176 elements
  const std::size_t n = 8 * 8 * 28 * 28;
  // Dropout masks as torch 1.13 saves them: float {0, 1/(1-p)}.
  for (int k = 1; k <= 9; ++k) {
    const float p = 0.1f * static_cast<float>(k);
    const float keep = 1.0f / (1.0f - p);
    level_case c{"dropout mask p=" + std::to_string(k) + "/10", act, std::vector<float>(n), true};
    for (float& e : c.x) e = u(rng) < p ? 0.0f : keep;
    v.push_back(std::move(c));
  }
  // One-hot rows: 2048 rows of 10 classes, and 50 rows of 1000.
  for (auto [rows, classes] : {std::pair<std::uint64_t, std::uint64_t>{2048, 10}, {50, 1000}}) {
    level_case c{"one-hot " + std::to_string(rows) + "x" + std::to_string(classes), ebac::extents{rows, classes},
                 std::vector<float>(rows * classes, 0.0f), true};
    for (std::uint64_t r = 0; r < rows; ++r) c.x[r * classes + rng() % classes] = 1.0f;
    v.push_back(std::move(c));
  }
  // Ternary {-c, 0, c}.
  {
    level_case c{"ternary", act, std::vector<float>(n), false};
    for (float& e : c.x) {
      const float r = u(rng);
      e = r < 0.3f ? -0.7f : (r < 0.7f ? 0.0f : 0.7f);
    }
    v.push_back(std::move(c));
  }
  // Saturated ReLU6 maps: relu6 of a smooth field scaled so that about a
  // third sits at 0, a third at 6, and the rest in between (continuous).
  {
    level_case c{"saturated relu6", act, std::vector<float>(n), false};
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t w = i % 28, h = (i / 28) % 28, ch = i / 784;
      const float f = 3.0f + 9.0f * std::sin(0.37f * static_cast<float>(w) + 0.11f * static_cast<float>(ch)) *
                                 std::cos(0.29f * static_cast<float>(h) + 0.05f * static_cast<float>(ch));
      c.x[i] = std::min(6.0f, std::max(0.0f, f + 0.3f * (u(rng) - 0.5f)));
    }
    v.push_back(std::move(c));
  }
  return v;
}

/// The indices of a stream's outliers, read from its outlier index section.
std::vector<std::uint64_t> outlier_indices(const std::vector<std::byte>& s) {
  const auto h = ebac::host::inspect(s.data(), s.size());
  const std::byte* p = s.data() + h.section_offset(ebac::section_outlier_index);
  const std::byte* end = p + h.section_bytes[ebac::section_outlier_index];
  std::vector<std::uint64_t> v;
  std::uint64_t gap = 0;
  while (p < end && ebac::detail::get_varint(p, end, gap)) v.push_back(v.empty() ? gap : v.back() + gap + 1);
  REQUIRE(v.size() == h.outlier_count);
  return v;
}

template <class T>
void sweep(std::uint64_t& cases) {
  const double bounds[] = {1e-1, 1e-2, 1e-3, 1e-4};
  for (const level_case& c : level_cases()) {
    const std::vector<T> x = convert<T>(c.x);
    std::uint64_t saturated = 0;
    if (c.name == "saturated relu6")
      for (const T& e : x) saturated += ebac::to_float(e) == 6.0f;
    for (const auto mode : {ebac::bound_mode::absolute, ebac::bound_mode::relative})
      for (double b : bounds) {
        if (sanitized_build && b != 1e-2 && b != 1e-4) continue;
        for (const std::string_view pipe : ebac::pipeline_names) {
          const ebac::error_bound eb{b, mode};
          const roundtrip_stats st = check_roundtrip(x, c.shape, std::string(pipe), eb, c.name);
          const double ratio = static_cast<double>(x.size() * sizeof(T)) / static_cast<double>(st.stream_bytes);
          INFO("case: ", c.name, " ", std::string(type_name<T>()), " ", std::string(pipe), " eb=", fmt(b), " ",
               std::string(ebac::to_string(mode)), " ratio=", fmt(ratio), " outliers=", st.outliers);
          if (c.name != "saturated relu6") {
            CHECK(ratio >= 2.0);  // the target: no pipeline below 2x on level data
            if (c.mask_or_onehot && pipe == "ratio") CHECK(ratio >= 12.0);
          } else {
            // The continuous third carries real information (log2(6 / 2eb)
            // bits: below 2x is no defect there); the saturated values must
            // not cost outliers: a saturated 6 sits on a multiple of 2 eb for
            // every bound here. (Some continuous float16/bfloat16 values
            // near a bin edge fail the bound after rounding to 16 bits and
            // are stored raw, up to 5% for bfloat16 at 1e-2: a limit of the
            // 16-bit quantizers, not of the level data.)
            const auto s = compress(x, c.shape, std::string(pipe), eb);
            std::uint64_t at_six = 0;
            for (std::uint64_t i : outlier_indices(s)) at_six += ebac::to_float(x[i]) == 6.0f;
            CHECK(at_six == 0);
            CHECK(st.outliers < x.size() / 10);
          }
          ++cases;
        }
      }
  }
}

}  // namespace

TEST_SUITE("property") {
  TEST_CASE("levels: masks, one-hot rows, ternary and saturated maps compress well in every pipeline") {
    std::uint64_t cases = 0;
    sweep<float>(cases);
    sweep<ebac::float16>(cases);
    sweep<ebac::bfloat16>(cases);
    CHECK(cases >= (sanitized_build ? 3u * 13 * 2 * 2 * 5 : 3u * 13 * 2 * 4 * 5));
  }

  TEST_CASE("levels: a palette is the tensor's distinct values, most frequent first") {
    // 3 levels with counts 5, 3, 2 (ties impossible): codes follow frequency.
    const std::vector<float> x = {2.5f, 2.5f, -1.0f, 2.5f, 7.0f, -1.0f, 2.5f, 7.0f, -1.0f, 2.5f};
    const auto s = compress(x, ebac::extents{10}, "plain", {1e-3, ebac::bound_mode::absolute});
    const auto h = ebac::host::inspect(s.data(), s.size());
    REQUIRE(h.quantizer == ebac::quantizer_id::levels);
    CHECK(h.palette.count == 3);
    CHECK(h.palette.bits[0] == float_to_bits(2.5f));
    CHECK(h.palette.bits[1] == float_to_bits(-1.0f));
    CHECK(h.palette.bits[2] == float_to_bits(7.0f));
    CHECK(h.eb_abs == 0);  // lossless
    CHECK(h.predictor == ebac::predictor_id::none);
    CHECK(same_bits(ebac::host::decompress<float>(s.data(), s.size()), x));
    // -0.0 and NaN payloads are levels of their own, restored bit for bit.
    std::vector<float> z;
    for (int k = 0; k < 500; ++k)
      for (float v : {0.0f, -0.0f, bits_to_float(0x7fc00001u), 0.0f, bits_to_float(0xffc00123u), -0.0f}) z.push_back(v);
    const auto sz = compress(z, ebac::extents{3000}, "ratio", {1e-2, ebac::bound_mode::relative});
    const auto hz = ebac::host::inspect(sz.data(), sz.size());
    CHECK(hz.quantizer == ebac::quantizer_id::levels);
    CHECK(hz.palette.count == 4);
    CHECK(same_bits(ebac::host::decompress<float>(sz.data(), sz.size()), z));
  }

  TEST_CASE("levels: more than max_levels values, or max_levels = 0, use the bound's quantizer") {
    std::vector<float> x(1000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17);  // 17 levels
    ebac::compress_options o;
    o.bound = {1e-3, ebac::bound_mode::absolute};
    const auto p = spec_of("plain");
    auto h = [&](const std::vector<float>& v) {
      const auto s = compress(v.data(), ebac::extents{v.size()}, p, o);
      return ebac::host::inspect(s.data(), s.size());
    };
    CHECK(h(x).quantizer == ebac::quantizer_id::sign_preserving);
    for (float& e : x) e = std::fmod(e, 16.0f);  // 16 levels
    CHECK(h(x).quantizer == ebac::quantizer_id::levels);
    o.max_levels = 0;
    CHECK(h(x).quantizer == ebac::quantizer_id::sign_preserving);
    o.max_levels = 15;
    CHECK(h(x).quantizer == ebac::quantizer_id::sign_preserving);
    o.max_levels = 17;
    CHECK_THROWS_AS(h(x), ebac::error);
  }

  TEST_CASE("levels: a bound coarser than the levels' spacing keeps the bound's quantizer") {
    // 16 levels 0.01 apart under absolute 0.1: the bound merges them into
    // two or three codes, which carries less than the indices, so the bound's
    // quantizer codes the tensor (levels_pay).
    std::vector<float> x(4096);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>((i * 7) % 16);
    const auto s = compress(x, ebac::extents{4096}, "ratio", {1e-1, ebac::bound_mode::absolute});
    CHECK(ebac::host::inspect(s.data(), s.size()).quantizer == ebac::quantizer_id::sign_preserving);
    const auto s2 = compress(x, ebac::extents{4096}, "ratio", {1e-3, ebac::bound_mode::absolute});
    CHECK(ebac::host::inspect(s2.data(), s2.size()).quantizer == ebac::quantizer_id::levels);
  }

  TEST_CASE("stored streams: a tensor that coding would grow is stored raw, never larger than raw plus a header") {
    // Random float16 bits under a bound far below their spacing: nearly every
    // element is an outlier, and coding would take more than the raw bytes.
    std::mt19937 rng(5);
    std::vector<ebac::float16> x(100000);
    for (auto& e : x) e = ebac::float16{static_cast<std::uint16_t>(rng() & 0x7bffu)};  // finite halves
    const ebac::extents e{100000};
    for (const std::string_view pipe : ebac::pipeline_names) {
      CAPTURE(std::string(pipe));
      const auto st = check_roundtrip(x, e, std::string(pipe), {1e-30, ebac::bound_mode::absolute}, "random f16 bits");
      CHECK(st.stream_bytes == 112 + 8 + 2 * x.size() + 8);
      const auto s = compress(x, e, std::string(pipe), {1e-30, ebac::bound_mode::absolute});
      const auto h = ebac::host::inspect(s.data(), s.size());
      CHECK(h.is_stored());
      CHECK(h.section_bytes[ebac::section_payload] == 2 * x.size());
    }
  }

}  // TEST_SUITE
