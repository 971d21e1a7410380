// Test inputs for the AVX2 coders of context ANS (test_context_ans_x8.cpp,
// test_context_ans_encode_x8.cpp): codes shaped like quantized
// activations, and a codebook of any context set from their own counts.
#pragma once

#include <ebac/encoder/context_ans.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace context_ans_test {

using model = ebac::detail::context_ans_model;

/// Codes shaped like a quantized activation: runs of zeros (most of a
/// post-ReLU map), small codes whose size follows the neighbours', and a
/// share of large codes up to 2^bits (raw bits after the token).
inline std::vector<std::uint32_t> make_codes(std::size_t n, std::uint32_t row, double zeros, int bits, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t up = i >= row ? v[i - row] : 0, left = i > 0 ? v[i - 1] : 0;
    const double p_zero = (up == 0 && left == 0) ? zeros : zeros / 3;
    if (u(rng) < p_zero) continue;
    const int w = 1 + static_cast<int>(u(rng) * u(rng) * bits);  // mostly small
    v[i] = static_cast<std::uint32_t>(rng() & ((w >= 32 ? 0u : (1u << w)) - 1u));
  }
  return v;
}

/// Zeroes blocks of 1024 codes (the format's blocks of zeros, which a
/// chunk's bitmap flags) of chunk h of a group: pattern 1, every other block,
/// the other half in the next chunk (the chunks side by side never skip
/// together); pattern 2, block 1 of every chunk (all skip it together) and
/// block 3 of every other chunk; 0, none.
inline void zero_blocks(std::vector<std::uint32_t>& codes, int pattern, int h) {
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::size_t k = i / 1024;
    if ((pattern == 1 && (k + static_cast<std::size_t>(h)) % 2 == 0) || (pattern == 2 && (k == 1 || (k == 3 && h % 2 == 0))))
      codes[i] = 0;
  }
}

/// A codebook for context set (classes, diagonal) from the codes' own
/// counts, through the stream's serialized form (so deserialize checks it):
/// every (context, token) that occurs has a frequency of at least 1.
inline ebac::context_ans_codebook codebook_for(const std::vector<std::vector<std::uint32_t>>& chunks, std::uint32_t row,
                                               std::uint32_t classes, bool diagonal) {
  const std::uint32_t contexts = model::contexts(classes, diagonal);
  std::vector<std::uint64_t> counts(std::size_t{contexts} * model::tokens, 0);
  for (const auto& codes : chunks)
    for (std::size_t i = 0; i < codes.size(); ++i)
      ++counts[std::size_t{model::context(codes.data(), i, row, classes, diagonal)} * model::tokens + model::token(codes[i])];
  ebac::context_ans_codebook cb;
  cb.row = row;
  cb.classes = classes;
  cb.diagonal = diagonal;
  for (std::uint32_t c = 0; c < contexts; ++c) {
    std::uint64_t total = 0;
    for (std::uint32_t t = 0; t < model::tokens; ++t) total += counts[std::size_t{c} * model::tokens + t];
    if (total == 0) continue;
    std::uint16_t* f = cb.freq.data() + std::size_t{c} * model::tokens;
    std::uint32_t sum = 0, largest = 0;
    for (std::uint32_t t = 0; t < model::tokens; ++t) {
      const std::uint64_t k = counts[std::size_t{c} * model::tokens + t];
      f[t] = static_cast<std::uint16_t>(k == 0 ? 0 : std::max<std::uint64_t>(1, k * (model::scale - model::tokens) / total));
      sum += f[t];
      if (f[t] > f[largest]) largest = t;
    }
    f[largest] = static_cast<std::uint16_t>(f[largest] + model::scale - sum);
  }
  std::vector<std::byte> image;
  cb.serialize(image);
  ebac::context_ans_codebook out;
  REQUIRE(ebac::context_ans_codebook::deserialize(image.data(), image.size(), out) == ebac::status::ok);
  return out;
}

}  // namespace context_ans_test
