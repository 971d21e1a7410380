// The host codec compiled for AVX2 (-march=x86-64-v3) against the same
// source compiled with the project's flags, in one program: the streams
// must be byte for byte the same and decode to the same bits. The format is
// defined by integer and single IEEE float operations without contraction
// (-ffp-contract=off), so a wider ISA may change the speed, never a byte;
// this checks it on every named pipeline, both quantizers and encoders, at
// loose and tight bounds, on tensors sampled (max's predictor choice) and
// tried whole, and on values the quantizer cannot code (outliers, NaN, Inf).
#include "isa_codec.hpp"

#include "test_support.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace ebac_test;

namespace {

struct tensor {
  const char* name;
  std::vector<std::uint64_t> dims;
  std::vector<float> x;
};

std::vector<tensor> tensors() {
  std::vector<tensor> t;
  // 262,144 elements: above max's 2^17-element sample, so its predictor is chosen on a sample.
  t.push_back({"post-ReLU maps 4x16x64x64", {4, 16, 64, 64}, post_relu_maps({4, 16, 64, 64}, 21)});
  // Chunk counts whose AVX2 decoder takes a last group of four to seven
  // chunks with free lanes (host/codec.hpp: decode_chunks), besides a short
  // last chunk: 13.5 chunks of 2^14 codes (a group of 8, one of 5) and 4.5
  // of 2^16 (one of 4).
  t.push_back({"post-ReLU maps 3x8x96x96", {3, 8, 96, 96}, post_relu_maps({3, 8, 96, 96}, 25)});
  t.push_back({"post-ReLU maps 2x9x128x128", {2, 9, 128, 128}, post_relu_maps({2, 9, 128, 128}, 26)});
  // Small enough to be tried whole by max.
  t.push_back({"post-ReLU maps 2x3x24x40", {2, 3, 24, 40}, post_relu_maps({2, 3, 24, 40}, 22)});
  {
    std::mt19937 rng(23);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(8 * 32 * 256);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * std::sin(0.01f * static_cast<float>(i % 256)) + 0.2f * normal(rng);
    t.push_back({"dense 8x32x256", {8, 32, 256}, std::move(x)});
  }
  {
    // Outliers: a few huge values, NaN and Inf, which the quantizer stores raw.
    auto x = post_relu_maps({1, 4, 32, 64}, 24);
    x[17] = 3e30f;
    x[1000] = -7e29f;
    x[2049] = std::numeric_limits<float>::quiet_NaN();
    x[4097] = std::numeric_limits<float>::infinity();
    x[6000] = -std::numeric_limits<float>::infinity();
    t.push_back({"maps with outliers, NaN, Inf", {1, 4, 32, 64}, std::move(x)});
  }
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_SUITE("isa") {
  TEST_CASE("isa: the AVX2 build writes the baseline build's streams and decodes them to the same bits") {
    REQUIRE_MESSAGE(__builtin_cpu_supports("avx2"),
                    "this CPU has no AVX2: CMake builds this test only where /proc/cpuinfo lists it");
    const ebac_isa_test::codec_functions base = ebac_isa_test::baseline_codec(), avx2 = ebac_isa_test::avx2_codec();
    std::vector<std::string> pipelines(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
    for (const char* p : {"lorenzo:linear:huffman", "none:linear:ans", "lorenzo3:sign:ans", "lorenzo2:linear:rle"})
      pipelines.push_back(p);
    std::size_t compared = 0;
    for (const tensor& t : tensors()) {
      for (const std::string& pipeline : pipelines) {
        for (const auto& [eb, relative] :
             {std::pair{1e-1, true}, std::pair{1e-2, true}, std::pair{1e-4, true}, std::pair{1e-6, false}}) {
          INFO(t.name, ", ", pipeline, ", eb ", eb, relative ? " relative" : " absolute");
          const auto s = base.compress(t.x.data(), t.dims, pipeline, eb, relative);
          CHECK_MESSAGE(avx2.compress(t.x.data(), t.dims, pipeline, eb, relative) == s, "the AVX2 build wrote another stream");
          CHECK_MESSAGE(same_bits(avx2.decompress(s), base.decompress(s)), "the AVX2 build decoded the stream to other bits");
          ++compared;
        }
      }
    }
    CHECK(compared == 6 * 13 * 4);  // 6 tensors x (9 named pipelines + 4 triples) x 4 bounds
  }

}  // TEST_SUITE
