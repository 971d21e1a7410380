// Property tests on adversarial inputs: specials, constants, alternating
// signs, bin edges, the code limit, denormals, tiny bounds against huge values.
#include "property_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace ebac_test;

namespace {

constexpr float fmax_ = std::numeric_limits<float>::max();

/// Runs one float tensor through every pipeline, as f32, f16 and bf16.
void all_pipelines_all_types(const std::vector<float>& xf, const ebac::extents& e, ebac::error_bound eb,
                             const std::string& label) {
  for (const auto& p : all_pipelines()) {
    check_roundtrip(xf, e, p, eb, label);
    check_roundtrip(convert<ebac::float16>(xf), e, p, eb, label);
    check_roundtrip(convert<ebac::bfloat16>(xf), e, p, eb, label);
  }
}

}  // namespace

TEST_SUITE("property") {
  TEST_CASE("adversarial: special values (NaN payloads, infinities, extremes, subnormals)") {
    std::mt19937_64 rng(101);
    auto sp = special_floats();
    std::vector<float> x;
    for (int r = 0; r < 12; ++r) x.insert(x.end(), sp.begin(), sp.end());
    std::shuffle(x.begin(), x.end(), rng);
    const ebac::extents e{3, static_cast<std::uint64_t>(x.size() / 3)};
    for (double b : {1e-3, 1e-30, 1e30}) all_pipelines_all_types(x, e, {b, ebac::bound_mode::absolute}, "specials");
    all_pipelines_all_types(x, e, {1e-3, ebac::bound_mode::relative}, "specials");
    // 16-bit NaN payloads placed directly.
    for (const auto& p : all_pipelines()) {
      std::vector<ebac::float16> h;
      std::vector<ebac::bfloat16> b;
      for (int r = 0; r < 5; ++r) {
        for (auto v : special_bits<ebac::float16>()) h.push_back({v});
        for (auto v : special_bits<ebac::bfloat16>()) b.push_back({v});
      }
      check_roundtrip(h, ebac::extents{h.size()}, p, {1e-2, ebac::bound_mode::absolute}, "f16 specials");
      check_roundtrip(b, ebac::extents{b.size()}, p, {1e-2, ebac::bound_mode::relative}, "bf16 specials");
    }
  }

  TEST_CASE("adversarial: all-NaN and all-infinite tensors") {
    for (float v : {bits_to_float(0x7fc00001u), -std::numeric_limits<float>::infinity()}) {
      const std::vector<float> x(300, v);
      all_pipelines_all_types(x, ebac::extents{300}, {1e-3, ebac::bound_mode::relative}, "all non-finite");
    }
  }

  TEST_CASE("adversarial: constant tensors (relative bound 0 -> exact)") {
    for (float c : {0.0f, -0.0f, 1.5f, -3.0f, 5e-39f, 1e-40f, fmax_, -65504.0f, 0.1f}) {
      CAPTURE(c);
      const std::vector<float> x(1000, c);
      for (const auto& p : all_pipelines()) {
        // By default a constant tensor is one level: coded losslessly as one
        // palette entry, far below its raw size.
        const auto lv = check_roundtrip(x, ebac::extents{10, 100}, p, {1e-2, ebac::bound_mode::relative}, "constant");
        CHECK(lv.eb_abs == 0.0);
        CHECK(lv.outliers == 0);
        CHECK(lv.stream_bytes < x.size() * sizeof(float) / 4);
        // Without level coding the quantizer codes it (quantizer_bound).
        const auto st = check_roundtrip(x, ebac::extents{10, 100}, p, {1e-2, ebac::bound_mode::relative}, "constant", 0, 0);
        if (c == 0.0f || c == 1e-40f) {
          // Zeros are codes 0. For 1e-40 the quantizer's 1 / step overflows
          // float (below 0.5 / FLT_MAX): no exact step, stored losslessly.
          CHECK(st.eb_abs == 0.0);
        } else {
          // quantizer_bound: a step that reconstructs c exactly, so no outliers
          // and a stream smaller than the raw tensor (it was 1.26x: all outliers).
          CHECK(st.eb_abs > 0.0);
          CHECK(st.outliers == 0);
          CHECK(st.stream_bytes < x.size() * sizeof(float));
        }
        // With a zero bound every value must come back equal (zeros may lose their sign bit only).
        const auto s = compress(x, ebac::extents{10, 100}, p, {1e-2, ebac::bound_mode::relative});
        const auto y = ebac::host::decompress<float>(s.data(), s.size());
        std::size_t diff = 0;
        for (std::size_t i = 0; i < x.size(); ++i) diff += !(y[i] == x[i]);
        CHECK(diff == 0);
        const auto h16 = convert<ebac::float16>(x);
        check_roundtrip(h16, ebac::extents{1000}, p, {1e-2, ebac::bound_mode::relative}, "constant f16");
        check_roundtrip(convert<ebac::bfloat16>(x), ebac::extents{1000}, p, {1e-5, ebac::bound_mode::absolute}, "constant bf16");
      }
    }
  }

  TEST_CASE("adversarial: a constant tensor under a relative bound compresses like an all-zero one") {
    const std::size_t n = 100000;
    // With a predictor the codes are all 0 but the first of each tile; without
    // one every code is 1 (plain, none:*: checked below a byte per element).
    for (const std::string p : {"fast", "ratio", "ratio-flat", "rle", "lorenzo2:linear:huffman", "plain", "none:sign:huffman",
                                "lorenzo2:sign:ans", "none:linear:ans"}) {
      CAPTURE(p);
      const bool predicted = p != "plain" && p.rfind("none:", 0) != 0;
      const ebac::extents e{10, 100, 100};
      // Level coding off: this is the quantizer's answer (quantizer_bound).
      const auto zero = check_roundtrip(std::vector<float>(n, 0.0f), e, p, {1e-3, ebac::bound_mode::relative}, "all zero", 0, 0);
      for (float c : {0.75f, -1234.5f, 3e38f}) {
        CAPTURE(c);
        const auto st = check_roundtrip(std::vector<float>(n, c), e, p, {1e-3, ebac::bound_mode::relative}, "constant", 0, 0);
        CHECK(st.outliers == 0);
        // A few codes differ from the all-zero tensor's (the first of each
        // Lorenzo tile); before quantizer_bound this was 5 bytes per element.
        if (predicted) CHECK(st.stream_bytes <= zero.stream_bytes + n / 100);
        else CHECK(st.stream_bytes < n);
        if (c == 0.75f) MESSAGE(p, ": 100,000 x 0.75f -> ", st.stream_bytes, " bytes (all zero: ", zero.stream_bytes, ")");
      }
      // With NaN and Inf mixed in, the range of the finite values is still 0.
      std::vector<float> x(n, 0.75f);
      for (std::size_t i = 0; i < n; i += 997) x[i] = i % 2 ? NAN : -INFINITY;
      const auto mixed = check_roundtrip(x, e, p, {1e-3, ebac::bound_mode::relative}, "constant + non-finite", 0, 0);
      CHECK(mixed.outliers == (n + 996) / 997);
      // Three levels (0.75, NaN, -Inf) by default: no outliers at all.
      CHECK(check_roundtrip(x, e, p, {1e-3, ebac::bound_mode::relative}, "constant + non-finite").outliers == 0);
    }
  }

  TEST_CASE("adversarial: alternating signs") {
    for (double eb : {1e-3, 0.1}) {
      for (double mag : {eb / 2, eb, 2 * eb, 1000 * eb, 1.0}) {
        std::vector<float> x(2000);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i % 2) ? -mag : mag);
        all_pipelines_all_types(x, ebac::extents{2, 1000}, {eb, ebac::bound_mode::absolute}, "alternating " + fmt(mag));
      }
      std::vector<float> x(2000);  // alternating zero / value: the ReLU mask pattern
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = (i % 2) ? 0.0f : static_cast<float>(eb * 0.25 * static_cast<double>(i % 7));
      all_pipelines_all_types(x, ebac::extents{2000}, {eb, ebac::bound_mode::absolute}, "zero/value");
    }
  }

  TEST_CASE("adversarial: values on and next to quantization bin edges") {
    for (double eb : {0.1, 1e-3, std::ldexp(1.0, -10), 1.0 / 3.0, 2.5e-5}) {
      CAPTURE(eb);
      std::vector<float> x;
      for (int k = -300; k <= 300; ++k) {
        for (double pos : {2.0 * k * eb, (2.0 * k - 1.0) * eb, (2.0 * k + 1.0) * eb, (k + 0.5) * 2.0 * eb}) {
          const auto f = static_cast<float>(pos);
          x.push_back(f);
          x.push_back(std::nextafter(f, INFINITY));
          x.push_back(std::nextafter(f, -INFINITY));
        }
      }
      // Near the code limit, where float spacing approaches the bound.
      for (int k = -3; k <= 3; ++k)
        for (double sgn : {1.0, -1.0}) {
          const auto f = static_cast<float>(sgn * 2.0 * eb * (ebac::quantizer_code_limit + k));
          x.push_back(f);
          x.push_back(std::nextafter(f, 0.0f));
        }
      const ebac::extents e{x.size()};
      all_pipelines_all_types(x, e, {eb, ebac::bound_mode::absolute}, "bin edges");
    }
  }

  TEST_CASE("adversarial: tiny bounds against huge values") {
    std::mt19937_64 rng(102);
    std::vector<float> x(4096);
    std::uniform_real_distribution<float> ex(20.0f, 38.0f);
    for (auto& v : x) v = std::pow(10.0f, ex(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    x[5] = fmax_;
    x[6] = -fmax_;
    x[7] = 0.0f;
    for (const auto& p : all_pipelines()) {
      for (double eb : {1e-6, 1e-30, 1e-45}) {
        const auto st = check_roundtrip(x, ebac::extents{64, 64}, p, {eb, ebac::bound_mode::absolute}, "huge values");
        // Nothing but the zero can be quantized: as outliers the values would
        // take more than their raw bytes, so the stream stores them raw.
        CHECK(st.stream_bytes == 112 + 8 * 2 + x.size() * sizeof(float) + 8);
      }
      check_roundtrip(x, ebac::extents{64, 64}, p, {1e-12, ebac::bound_mode::relative}, "huge values rel");
      check_roundtrip(convert<ebac::float16>(x), ebac::extents{4096}, p, {1e-6, ebac::bound_mode::absolute}, "huge values f16");
      check_roundtrip(convert<ebac::bfloat16>(x), ebac::extents{4096}, p, {1e-6, ebac::bound_mode::absolute}, "huge values bf16");
    }
  }

  TEST_CASE("adversarial: denormals with bounds around the subnormal range") {
    std::mt19937_64 rng(103);
    std::vector<float> x(3000);
    for (auto& v : x) {
      const std::uint32_t m = static_cast<std::uint32_t>(rng()) & 0x7fffffu;
      v = bits_to_float(((rng() & 1) ? 0x80000000u : 0u) | m);
      if (rng() % 10 == 0) v = 0.0f;
    }
    for (const auto& p : all_pipelines())
      for (double eb : {1e-46, 1e-45, 1e-44, 1e-42, 1e-39, 1e-38, 1e-3}) {
        check_roundtrip(x, ebac::extents{3, 1000}, p, {eb, ebac::bound_mode::absolute}, "float denormals");
        check_roundtrip(x, ebac::extents{3, 1000}, p, {eb * 1e3, ebac::bound_mode::relative}, "float denormals rel");
      }
    // Half-precision subnormals.
    std::vector<ebac::float16> h(3000);
    for (auto& v : h) v.bits = static_cast<std::uint16_t>((rng() & 0x83ff));
    for (const auto& p : all_pipelines())
      for (double eb : {1e-9, 5.96e-8, 1e-7, 3e-6, 1e-4})
        check_roundtrip(h, ebac::extents{3000}, p, {eb, ebac::bound_mode::absolute}, "f16 subnormals");
  }

  TEST_CASE("adversarial: NaN and Inf inside smooth data (prediction across outliers)") {
    const ebac::extents e{2, 4, 40, 40};
    auto x = make_floats(12800, 40, kind::smooth, 104);
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] = (i % 3 == 0) ? NAN : (i % 3 == 1 ? INFINITY : -INFINITY);
    for (std::size_t i = 50; i < x.size(); i += 131) x[i] = bits_to_float(0x7f800000u | static_cast<std::uint32_t>(i));
    for (const auto& p : all_pipelines())
      for (auto mode : {ebac::bound_mode::absolute, ebac::bound_mode::relative}) {
        check_roundtrip(x, e, p, {1e-3, mode}, "smooth + non-finite");
        check_roundtrip(convert<ebac::bfloat16>(x), e, p, {1e-3, mode}, "smooth + non-finite bf16");
      }
  }

  TEST_CASE("adversarial: relative bound over an extreme value range") {
    std::vector<float> x = make_floats(5000, 100, kind::uniform, 105);
    x[10] = fmax_;
    x[20] = -fmax_;
    for (const auto& p : all_pipelines())
      for (double eb : {1e-3, 1e-30, 0.5})
        check_roundtrip(x, ebac::extents{50, 100}, p, {eb, ebac::bound_mode::relative}, "range 2*FLT_MAX");
  }

  TEST_CASE("adversarial: streams built to approach max_compressed_bytes stay within it") {
    // The CUDA backend writes into a buffer of max_compressed_bytes and has no
    // other guard. check_roundtrip checks every stream against it; these
    // inputs push both terms at once: codes as wide as the quantizer allows
    // (a +-checkerboard just inside the code limit, so Lorenzo residuals sum
    // up to 8 of them) and dense outliers (NaN), on 1-element chunks tables of
    // 32 and default chunks.
    double worst = 0, worst_payload = 0;
    std::string worst_case;
    auto run = [&](const auto& x, const ebac::extents& e, const std::string& p, double eb, std::uint32_t chunk,
                   const std::string& label) {
      using T = typename std::decay_t<decltype(x)>::value_type;
      check_roundtrip(x, e, p, {eb, ebac::bound_mode::absolute}, label, chunk, 0);
      // The coded stream itself (no palette, never stored: these inputs would
      // be stored raw otherwise), against max_coded_bytes: what a writer that
      // assembles the coded stream before choosing (the CUDA backend) needs.
      ebac::compress_options o;
      o.bound = {eb, ebac::bound_mode::absolute};
      o.max_levels = 0;
      o.store_when_larger = false;
      const auto stream = compress(x.data(), e, spec_of(p, chunk), o);
      const auto h = ebac::host::inspect(stream.data(), stream.size());
      REQUIRE_FALSE(h.is_stored());
      const std::size_t coded_cap =
          ebac::with_pipeline(spec_of(p, chunk), e, [&](auto pp) { return ebac::max_coded_bytes<decltype(pp), T>(e, pp); });
      CHECK(stream.size() <= coded_cap);
      const auto y = ebac::host::decompress<T>(stream.data(), stream.size());
      CHECK(y.size() == x.size());
      const double frac = static_cast<double>(stream.size()) / static_cast<double>(coded_cap);
      if (frac > worst) {
        worst = frac;
        worst_case = p + " " + type_name<T>() + " " + label + " chunk " + std::to_string(chunk);
      }
      // Each term on its own, so that slack in one cannot hide a wrong other:
      // the payload against chunks x the encoder's bound (bit-packing: blocks
      // of at most max_code_bits), the outlier sections against n (1 + sizeof T).
      const std::uint64_t n = count_of(e), chunks = (n + h.chunk_elements - 1) / h.chunk_elements;
      const std::uint64_t per_chunk = ebac::with_pipeline(spec_of(p, chunk), e, [&](auto pipe) -> std::uint64_t {
        using E = typename decltype(pipe)::encoder_type;
        if constexpr (std::is_same_v<E, ebac::block_bitpack>)
          return E{}.max_chunk_bytes(h.chunk_elements, ebac::max_code_bits(pipe.predictor));
        else return E{}.max_chunk_bytes(h.chunk_elements);
      });
      INFO(p, " ", type_name<T>(), " ", label, " chunk ", chunk);
      CHECK(h.section_bytes[ebac::section_payload] <= chunks * per_chunk);
      CHECK(h.section_bytes[ebac::section_outlier_index] + h.section_bytes[ebac::section_outlier_value] <= n * (1 + sizeof(T)));
      if (p.find("bitpack") != std::string::npos || p == "fast" || p == "plain")
        worst_payload = std::max(
            worst_payload, static_cast<double>(h.section_bytes[ebac::section_payload]) / static_cast<double>(chunks * per_chunk));
    };
    const ebac::extents shapes[] = {ebac::extents{6, 10, 33}, ebac::extents{4001}};
    std::mt19937_64 rng(106);
    for (const auto& e : shapes)
      for (double density : {0.0, 0.25, 0.5, 0.9}) {
        const std::uint64_t n = count_of(e);
        // (2q - 1) * eb with q just below the code limit, sign by checkerboard parity.
        const double eb = 1.0;
        const float a = static_cast<float>((2.0 * (ebac::quantizer_code_limit - 2) - 1) * eb);
        std::vector<float> x(static_cast<std::size_t>(n));
        std::bernoulli_distribution nan(density);
        for (std::uint64_t i = 0; i < n; ++i) {
          std::uint64_t parity = 0, rest = i;
          for (int d = e.rank - 1; d >= 0; --d) {
            parity += rest % e.dims[d];
            rest /= e.dims[d];
          }
          x[i] = nan(rng) ? bits_to_float(0x7fc00000u | static_cast<std::uint32_t>(i & 0xffff)) : (parity % 2 ? -a : a);
        }
        const std::string label = "checkerboard at the code limit, NaN density " + fmt(density);
        // f16/bf16 cannot hold 8.4e6: scale the bound so their largest values sit near the limit too.
        auto scaled = [&](float s) {
          std::vector<float> y = x;
          for (auto& v : y) v *= s;
          return y;
        };
        for (const auto& p : all_pipelines())
          for (std::uint32_t chunk : {32u, 0u}) {
            run(x, e, p, eb, chunk, label);
            run(convert<ebac::float16>(scaled(6e4f / a)), e, p, eb * 6e4 / a, chunk, label);
            run(convert<ebac::bfloat16>(x), e, p, eb, chunk, label);
          }
      }
    MESSAGE("largest coded stream / max_coded_bytes: ", fmt(worst), " (", worst_case,
            "); largest bit-packed payload / its term: ", fmt(worst_payload));
    // The bound may not be loose beyond use either: it sizes device buffers.
    CHECK(worst > 0.5);
  }

}  // TEST_SUITE
