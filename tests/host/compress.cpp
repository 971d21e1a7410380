// tests/host/compress.cpp - the tests of include/ebac/host/compress.hpp.
//
// pipeline::choose_predictor (the `max` pipeline): the sample the candidates
// are tried on (host/predictor_sample.hpp), and the choice itself, checked
// against the three candidates' streams computed here one by one.
//
// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#include "test_support.hpp"

#include <ebac/format/outlier_index.hpp>
#include <ebac/host/predictor_sample.hpp>

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

namespace {

using ans_pipe = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::context_ans>;

using ans_none = ebac::pipeline<ebac::no_prediction, ebac::sign_preserving_quantizer, ebac::context_ans>;

constexpr std::uint32_t chunk = 1u << 16;  // max's chunk size

/// Sparse, uncorrelated post-ReLU values: prediction only adds noise.
std::vector<float> sparse(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) {
    const float a = g(rng) - 1.2f;
    v = a > 0 ? a : 0.f;
  }
  return x;
}

/// A smooth 2-D field per plane: 2-D Lorenzo residuals are near zero.
std::vector<float> smooth_planes(const ebac::extents& e) {
  const std::uint64_t H = e.dims[e.rank - 2], W = e.dims[e.rank - 1];
  std::vector<float> x(static_cast<std::size_t>(count_of(e)));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint64_t p = i / (H * W), r = (i / W) % H, c = i % W;
    x[i] = std::sin(0.11f * static_cast<float>(r) + 0.3f * static_cast<float>(p % 5)) * std::cos(0.07f * static_cast<float>(c));
  }
  return x;
}

/// A random walk along the flattened tensor: flat Lorenzo's residual is one
/// step, 2-D Lorenzo's the difference of two independent steps.
std::vector<float> walk(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 0.01f);
  std::vector<float> x(n);
  float v = 0.f;
  for (auto& y : x) y = v += g(rng);
  return x;
}

/// The stream of choose_predictor's candidate k, asked for explicitly:
/// 0 the 2-D Lorenzo of `max`, 1 flat 1-D Lorenzo, 2 no prediction.
std::vector<std::byte> candidate_stream(const std::vector<float>& x, const ebac::extents& e, int k,
                                        const ebac::compress_options& o) {
  if (k == 0)
    return ebac::host::compress(x.data(), e, ans_pipe{ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d), chunk}, o);
  if (k == 1) return ebac::host::compress(x.data(), e, ans_pipe{ebac::lorenzo::flat(), chunk}, o);
  return ebac::host::compress(x.data(), e, ans_none{{}, chunk}, o);
}

/// rel x (max - min) of x, computed here from the caller's request.
double relative_bound(const std::vector<float>& x, double rel) {
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
  return rel * (static_cast<double>(hi) - static_cast<double>(lo));
}

ebac::compress_options options(double rel, int threads = 1) {
  ebac::compress_options o;
  o.bound = {rel, ebac::bound_mode::relative};
  o.threads = threads;
  return o;
}

using ans_linear = ebac::pipeline<ebac::lorenzo, ebac::linear_quantizer, ebac::context_ans>;

/// Causal attention probabilities (b x h x 64 x 64): row i a softmax over
/// columns 0..i, exact zeros above the diagonal.
std::vector<float> attention(const ebac::extents& e, std::uint32_t seed) {
  const std::size_t L = static_cast<std::size_t>(e.dims[e.rank - 1]), rows = static_cast<std::size_t>(count_of(e)) / L;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 2.f);
  std::vector<float> x(rows * L, 0.f);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t i = r % L;
    float sum = 0;
    for (std::size_t j = 0; j <= i; ++j) sum += x[r * L + j] = std::exp(g(rng));
    for (std::size_t j = 0; j <= i; ++j) x[r * L + j] /= sum;
  }
  return x;
}

/// Checks |y - x| <= rel x range everywhere, and zeros and signs kept when
/// the header names the zero/sign-preserving quantizer.
void check_reconstruction(const std::vector<float>& x, const std::vector<std::byte>& s, double rel) {
  std::vector<float> y(x.size());
  ebac::host::decompress(s.data(), s.size(), y.data(), x.size());
  const double eb = relative_bound(x, rel);
  const bool keeps_signs = ebac::host::inspect(s.data(), s.size()).quantizer == ebac::quantizer_id::sign_preserving;
  for (std::size_t i = 0; i < x.size(); ++i) {
    REQUIRE(std::fabs(static_cast<double>(y[i]) - static_cast<double>(x[i])) <= eb);
    if (keeps_signs) REQUIRE(((x[i] > 0) - (x[i] < 0)) == ((y[i] > 0) - (y[i] < 0)));
  }
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE(
      "choose_predictor on a tensor tried whole: the stream is the smallest of the three candidates', and names its predictor") {
    const ebac::extents e{4, 6, 40, 64};  // 61440 elements: below the sample size
    const std::size_t n = static_cast<std::size_t>(count_of(e));
    struct data_case {
      const char* name;
      std::vector<float> x;
      double rel;
    };
    const data_case cases[] = {
        {"sparse, loose bound", sparse(n, 5), 1e-1},
        {"smooth planes", smooth_planes(e), 1e-4},
        {"flat random walk", walk(n, 9), 1e-3},
    };
    int winners[3] = {0, 0, 0};
    for (const auto& c : cases) {
      CAPTURE(c.name);
      const auto o = options(c.rel);
      const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
      const std::vector<std::byte> streams[3] = {candidate_stream(c.x, e, 0, o), candidate_stream(c.x, e, 1, o),
                                                 candidate_stream(c.x, e, 2, o)};
      const std::size_t sizes[3] = {streams[0].size(), streams[1].size(), streams[2].size()};
      int best = 0;
      for (int k = 1; k < 3; ++k)
        if (sizes[k] < sizes[best]) best = k;
      ++winners[best];

      const auto chosen = ebac::host::compress(c.x.data(), e, ans_pipe{l2, chunk, true}, o);
      CHECK(chosen.size() == sizes[best]);
      // Byte for byte the winner's own stream (the choice keeps the stream it
      // coded rather than coding the tensor again), with a checksum too.
      CHECK(chosen == streams[best]);
      auto oc = o;
      oc.checksum = true;
      const auto chosen_sum = ebac::host::compress(c.x.data(), e, ans_pipe{l2, chunk, true}, oc);
      CHECK(chosen_sum == candidate_stream(c.x, e, best, oc));
      REQUIRE_NOTHROW(ebac::host::inspect(chosen_sum.data(), chosen_sum.size()));
      CHECK(ebac::host::inspect(chosen_sum.data(), chosen_sum.size()).has_checksum());
      const auto h = ebac::host::inspect(chosen.data(), chosen.size());
      if (best == 2) {
        CHECK(h.predictor == ebac::predictor_id::none);
      } else {
        REQUIRE(h.predictor == ebac::predictor_id::lorenzo);
        CHECK(h.lorenzo_params.dims == (best == 0 ? 2 : 1));
      }
      // Within the bound the caller asked for, computed here.
      const double eb = relative_bound(c.x, c.rel);
      std::vector<float> y(n);
      ebac::host::decompress(chosen.data(), chosen.size(), y.data(), n);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(std::fabs(static_cast<double>(y[i]) - static_cast<double>(c.x[i])) <= eb);
    }
    // The three data kinds were built so that each candidate wins once.
    CHECK(winners[0] == 1);
    CHECK(winners[1] == 1);
    CHECK(winners[2] == 1);
  }

  TEST_CASE("choose_predictor on a tensor tried whole that does not compress: stored, as the chosen candidate's stream is") {
    // Uniform noise under a bound far below its spacing: every candidate's
    // coded stream is larger than the raw elements, so the stream is stored
    // (store_when_larger) and equals the stored stream of the candidate whose
    // coded stream is smallest; without storing, the coded one.
    const ebac::extents e{2, 3, 32, 32};
    const std::size_t n = static_cast<std::size_t>(count_of(e));
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> x(n);
    for (auto& v : x) v = u(rng);
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
    for (bool store : {true, false}) {
      CAPTURE(store);
      auto o = options(1e-9);
      o.store_when_larger = store;
      auto coded = options(1e-9);
      coded.store_when_larger = false;
      const std::vector<std::byte> unstored[3] = {candidate_stream(x, e, 0, coded), candidate_stream(x, e, 1, coded),
                                                  candidate_stream(x, e, 2, coded)};
      int best = 0;
      for (int k = 1; k < 3; ++k)
        if (unstored[k].size() < unstored[best].size()) best = k;
      REQUIRE(unstored[best].size() > n * sizeof(float));  // the premise: nothing compresses
      const auto want = candidate_stream(x, e, best, o);
      const auto chosen = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, o);
      CHECK(chosen == want);
      CHECK(ebac::host::inspect(chosen.data(), chosen.size()).is_stored() == store);
      std::vector<float> y(n);
      ebac::host::decompress(chosen.data(), chosen.size(), y.data(), n);
      const double eb = relative_bound(x, 1e-9);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(std::fabs(static_cast<double>(y[i]) - static_cast<double>(x[i])) <= eb);
    }
  }

  TEST_CASE(
      "choose_predictor on a sampled tensor: picks no prediction on sparse maps and 2-D Lorenzo on smooth ones, same bytes for "
      "any thread count") {
    const ebac::extents e{64, 8, 32, 32};  // 524288 elements: a sample of 2^17
    const std::size_t n = static_cast<std::size_t>(count_of(e));
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
    {
      const auto x = sparse(n, 11);
      const auto s = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, options(1e-1));
      CHECK(ebac::host::inspect(s.data(), s.size()).predictor == ebac::predictor_id::none);
      const auto l2_only = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk}, options(1e-1));
      CHECK(s.size() < l2_only.size());
      CHECK(ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, options(1e-1, 2)) == s);
    }
    {
      const auto x = smooth_planes(e);
      const auto s = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, options(1e-4));
      const auto h = ebac::host::inspect(s.data(), s.size());
      REQUIRE(h.predictor == ebac::predictor_id::lorenzo);
      CHECK(h.lorenzo_params.dims == 2);
      CHECK(s == ebac::host::compress(x.data(), e, ans_pipe{l2, chunk}, options(1e-4)));
      CHECK(ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, options(1e-4, 2)) == s);
    }
    {
      // A random walk along the flattened tensor: flat Lorenzo's stream is the
      // smallest of the three (checked here on the whole tensor, coded), and
      // the sample's estimate picks it.
      const auto x = walk(n, 13);
      const auto o = options(1e-3);
      const auto s = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, o);
      const auto flat = candidate_stream(x, e, 1, o);
      CHECK(flat.size() < candidate_stream(x, e, 0, o).size());
      CHECK(flat.size() < candidate_stream(x, e, 2, o).size());
      CHECK(s == flat);
    }
  }

  TEST_CASE("choose_quantizer on a tensor tried whole: the stream is the smaller of max's and max's with the linear quantizer") {
    // Each side is computed here with its quantizer fixed (every predictor
    // chosen, as both sides of max-bound do); each outcome must occur.
    const ebac::extents e{4, 8, 32, 32};  // 32768 elements: tried whole
    const std::size_t n = static_cast<std::size_t>(count_of(e));
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
    int linear_won = 0, signs_kept = 0;
    struct tensor_case {
      const char* name;
      std::vector<float> x;
    };
    std::vector<float> noisy = smooth_planes(e);
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.f, 0.05f);
    for (auto& v : noisy) v += g(rng);
    const tensor_case cases[] = {
        {"sparse", sparse(n, 3)}, {"smooth", smooth_planes(e)}, {"noisy", noisy}, {"attention", attention(e, 9)}};
    for (const auto& c : cases) {
      for (double rel : {1e-1, 1e-2, 1e-3}) {
        CAPTURE(c.name);
        CAPTURE(rel);
        const auto o = options(rel);
        const auto both = ebac::host::compress(c.x.data(), e, ans_pipe{l2, chunk, true, true}, o);
        const auto signs = ebac::host::compress(c.x.data(), e, ans_pipe{l2, chunk, true}, o);
        const auto linear = ebac::host::compress(c.x.data(), e, ans_linear{l2, chunk, true}, o);
        const bool take_linear = linear.size() < signs.size();
        CHECK(both == (take_linear ? linear : signs));
        CHECK(ebac::host::inspect(both.data(), both.size()).quantizer ==
              (take_linear ? ebac::quantizer_id::linear : ebac::quantizer_id::sign_preserving));
        (take_linear ? linear_won : signs_kept) += 1;
        check_reconstruction(c.x, both, rel);
        CHECK(ebac::host::compress(c.x.data(), e, ans_pipe{l2, chunk, true, true}, options(rel, 2)) == both);
      }
    }
    CHECK(linear_won > 0);
    CHECK(signs_kept > 0);
  }

  TEST_CASE(
      "choose_quantizer on a sampled tensor: the linear quantizer on a dense noisy map at a loose bound, signs kept on "
      "attention") {
    const ebac::extents e{64, 8, 32, 32};  // 524288 elements: a sample of 2^17
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
    {
      std::vector<float> x = smooth_planes(e);
      std::mt19937 rng(7);
      std::normal_distribution<float> g(0.f, 0.05f);
      for (auto& v : x) v += g(rng);
      const auto s = ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true, true}, options(1e-1));
      CHECK(ebac::host::inspect(s.data(), s.size()).quantizer == ebac::quantizer_id::linear);
      CHECK(s.size() < ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true}, options(1e-1)).size());
      check_reconstruction(x, s, 1e-1);
      CHECK(ebac::host::compress(x.data(), e, ans_pipe{l2, chunk, true, true}, options(1e-1, 2)) == s);
    }
    {
      const ebac::extents a{32, 4, 64, 64};
      const auto x = attention(a, 11);
      const auto s = ebac::host::compress(x.data(), a, ans_pipe{l2, chunk, true, true}, options(1e-2));
      CHECK(ebac::host::inspect(s.data(), s.size()).quantizer == ebac::quantizer_id::sign_preserving);
      CHECK(s == ebac::host::compress(x.data(), a, ans_pipe{l2, chunk, true}, options(1e-2)));
      check_reconstruction(x, s, 1e-2);
    }
  }

  TEST_CASE("choose_quantizer: ignored by a pipeline that does not keep signs, and by a tensor coded losslessly") {
    const ebac::extents e{4, 8, 32, 32};
    const auto x = smooth_planes(e);
    const ebac::lorenzo l2 = ebac::lorenzo::along_last(2, 4, ebac::lorenzo::default_tile_2d);
    CHECK(ebac::host::compress(x.data(), e, ans_linear{l2, chunk, true, true}, options(1e-2)) ==
          ebac::host::compress(x.data(), e, ans_linear{l2, chunk, true}, options(1e-2)));
    std::vector<float> mask(x.size());  // two levels: coded as a palette, no quantizer weighed
    for (std::size_t i = 0; i < x.size(); ++i) mask[i] = x[i] > 0 ? 1.f : 0.f;
    CHECK(ebac::host::compress(mask.data(), e, ans_pipe{l2, chunk, true, true}, options(1e-2)) ==
          ebac::host::compress(mask.data(), e, ans_pipe{l2, chunk, true}, options(1e-2)));
  }

  TEST_CASE("the max pipeline chooses, an explicit triple keeps its predictor") {
    ebac::pipeline_spec s;
    REQUIRE(ebac::parse_pipeline("max", s));
    CHECK(s.choose_predictor);
    REQUIRE(ebac::parse_pipeline("lorenzo2:sign:ans", s));
    CHECK_FALSE(s.choose_predictor);
    const ebac::extents e{64, 8, 32, 32};
    const auto x = sparse(static_cast<std::size_t>(count_of(e)), 11);
    const auto chosen = compress(x.data(), e, spec_of("max"), options(1e-1));
    CHECK(ebac::host::inspect(chosen.data(), chosen.size()).predictor == ebac::predictor_id::none);
    const auto kept = compress(x.data(), e, spec_of("lorenzo2:sign:ans"), options(1e-1));
    CHECK(ebac::host::inspect(kept.data(), kept.size()).predictor == ebac::predictor_id::lorenzo);
    // max-bound: max's stages and choice, and the quantizer's.
    REQUIRE(ebac::parse_pipeline("max-bound", s));
    CHECK(s.choose_predictor);
    CHECK(s.choose_quantizer);
    CHECK(s.encoder == ebac::encoder_id::context_ans);
    CHECK(s.quantizer == ebac::quantizer_id::sign_preserving);
    REQUIRE(ebac::parse_pipeline("max", s));
    CHECK_FALSE(s.choose_quantizer);
  }

}  // TEST_SUITE

TEST_CASE("striped pipelines: chunks kept as tokens beside chunks coded again (codes of 2^16 or more, chunks over 2^16)") {
  // The statistics pass keeps a chunk's tokens only when its codes are below
  // 2^16 and it has at most 2^16 of them (striped_huffman::keeps); the others
  // are computed and tokenized again when coded. Mixed in one tensor: chunk 1
  // spans +-3e5 bounds (codes far above 2^16), the rest are small walks with
  // zero runs; and the same tensor in chunks of 2^17, none kept.
  const ebac::extents e{4, 3, 9000};  // 108000 elements: 6.6 chunks of 2^14
  const std::size_t n = static_cast<std::size_t>(count_of(e));
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n);
  float walk = 0;
  for (std::size_t i = 0; i < n; ++i) {
    walk += (i % 7 < 3) ? 0.f : 0.01f * u(rng);
    x[i] = (i >= 16384 && i < 2 * 16384) ? 3e3f * u(rng) : walk;
  }
  const ebac::error_bound eb{1e-2, ebac::bound_mode::absolute};
  for (const char* pipe : {"balanced", "balanced-bound", "lorenzo:linear:striped", "none:sign:striped"})
    for (std::uint32_t chunk : {0u, 1u << 17}) {
      CAPTURE(pipe);
      CAPTURE(chunk);
      check_roundtrip(x, e, pipe, eb, "one chunk of wide codes", chunk);
    }
}

TEST_CASE("host compress into a buffer: a null buffer is refused up front, the lorenzo factory never writes past its arrays") {
  using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  const std::vector<float> x(100, 1.25f);
  ebac::compress_options o;
  o.bound = {1e-3, ebac::bound_mode::absolute};
  ebac::status code = ebac::status::ok;
  try {
    (void)ebac::host::compress(x.data(), ebac::extents{100}, fast_t{}, o, nullptr, 1 << 20);
  } catch (const ebac::error& e) { code = e.code(); }
  CHECK(code == ebac::status::invalid_argument);
  // along_last with more than 3 dimensions (pipeline_spec::lorenzo_auto_dims
  // can ask for it on a rank >= 5 tensor): refused by validate, and, under
  // UBSan, no out-of-bounds write on the way.
  const ebac::lorenzo l = ebac::lorenzo::along_last(5, 6, 16);
  CHECK(l.validate(ebac::extents{2, 2, 2, 2, 2, 2}) != ebac::status::ok);
}
