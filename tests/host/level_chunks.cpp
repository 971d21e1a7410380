// host/encode_chunks.hpp's passes over few-level tensors: find_levels (whole
// blocks of values already seen counted at once) against a plain count of
// the distinct bit patterns, and quantize_chunk's level_quantizer branch
// (whole blocks compared with every level at once) against
// level_quantizer::quantize element by element, outliers included.
#include "test_support.hpp"

#include <ebac/host/encode_chunks.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace {

/// The palette written out by hand: each distinct bit pattern with its
/// count, most frequent first, ties by pattern; none when there are more than
/// `capacity` patterns.
template <class S>
std::vector<std::uint64_t> expected_palette(const std::vector<S>& x, std::uint32_t capacity) {
  std::map<std::uint64_t, std::uint64_t> counts;
  for (const S& v : x) ++counts[static_cast<std::uint64_t>(ebac::raw_bits(v))];
  if (counts.size() > capacity || counts.empty()) return {};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> by(counts.begin(), counts.end());
  std::stable_sort(by.begin(), by.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::uint64_t> out;
  for (const auto& [bits, count] : by) out.push_back(bits);
  return out;
}

template <class S>
void check_find_levels(const std::vector<S>& x, const char* label) {
  INFO("data: ", label, ", n = ", x.size());
  for (std::uint32_t chunk : {300u, 4096u, 65536u})
    for (std::uint32_t capacity : {1u, 2u, 3u, 16u}) {
      CAPTURE(chunk);
      CAPTURE(capacity);
      const ebac::level_palette p = ebac::host::detail::find_levels(x.data(), x.size(), chunk, capacity, 1);
      const std::vector<std::uint64_t> want = expected_palette(x, capacity);
      REQUIRE(p.count == want.size());
      for (std::uint32_t k = 0; k < p.count; ++k) CHECK(p.bits[k] == want[k]);
    }
}

/// quantize_chunk with a level quantizer over chunks cut at every offset
/// tried: the element-by-element codes, and the outliers' indices in order.
template <class S>
void check_level_codes(const std::vector<S>& x, const ebac::level_quantizer& q, const char* label) {
  INFO("data: ", label, ", n = ", x.size());
  for (std::size_t first : {std::size_t{0}, std::size_t{1}, std::size_t{513}})
    for (std::size_t m : {std::size_t{0}, std::size_t{511}, std::size_t{512}, std::size_t{1500}, x.size() - 513}) {
      if (first + m > x.size()) continue;
      CAPTURE(first);
      CAPTURE(m);
      std::vector<std::uint32_t> codes(m + 1, 0xdeadbeefu);
      std::vector<std::uint64_t> outliers;
      ebac::host::detail::quantize_chunk(q, x.data() + first, m, 1000 + first, codes.data(), outliers);
      std::vector<std::uint64_t> want_outliers;
      for (std::size_t i = 0; i < m; ++i) {
        const ebac::quantized r = q.quantize(x[first + i]);
        CHECK(codes[i] == static_cast<std::uint32_t>(r.code));
        if (r.outlier) want_outliers.push_back(1000 + first + i);
      }
      CHECK(codes[m] == 0xdeadbeefu);  // nothing written past the chunk
      CHECK(outliers == want_outliers);
    }
}

}  // namespace

TEST_CASE("find_levels counts whole blocks of known values as a plain count does") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const std::size_t n = 70001;
  std::vector<float> mask(n);
  for (float& v : mask) v = u(rng) < 0.1f ? 0.0f : 1.0f / 0.9f;
  check_find_levels(mask, "dropout mask");
  // A third value first seen late, inside a block, and a fourth in the last elements.
  std::vector<float> late = mask;
  late[40000 + 17] = 2.0f;
  late[n - 2] = -1.0f;
  check_find_levels(late, "values first seen late");
  std::vector<float> levels(n);
  for (float& v : levels) v = static_cast<float>(rng() % 16) * 0.5f;
  check_find_levels(levels, "16 levels");
  levels[n / 2] = 100.0f;
  check_find_levels(levels, "17 levels");
  std::vector<ebac::float16> half(n);
  for (auto& v : half) v = ebac::from_float<ebac::float16>(u(rng) < 0.5f ? 0.0f : 2.0f);
  check_find_levels(half, "f16 mask");
  std::vector<std::uint8_t> bools(n);
  for (auto& b : bools) b = rng() % 3 == 0;
  check_find_levels(bools, "bool mask");
}

TEST_CASE("quantize_chunk with a level palette gives level_quantizer's codes and outliers") {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const std::size_t n = 5000;
  std::vector<float> x(n);
  for (float& v : x) {
    const float r = u(rng);
    v = r < 0.3f ? -0.7f : (r < 0.7f ? 0.0f : 0.7f);
  }
  const ebac::level_quantizer q{ebac::host::detail::find_levels(x.data(), n, 1024, ebac::max_levels, 1)};
  REQUIRE(q.palette.count == 3);
  check_level_codes(x, q, "ternary");
  // Values outside the palette (a caller's palette need not be the data's):
  // alone in a block, several in one, in the tail.
  for (std::size_t i : {std::size_t{5}, std::size_t{512}, std::size_t{600}, std::size_t{601}, std::size_t{1025}, n - 3})
    x[i] = 3.0f;  // 512 and 1025: the first of a block with chunks starting at 0 and 1
  check_level_codes(x, q, "ternary with values outside the palette");
  std::vector<ebac::bfloat16> b(n);
  for (auto& v : b) v = ebac::from_float<ebac::bfloat16>(static_cast<float>(rng() % 16) - 8.0f);
  const ebac::level_quantizer qb{ebac::host::detail::find_levels(b.data(), n, 4096, ebac::max_levels, 1)};
  REQUIRE(qb.palette.count == 16);
  check_level_codes(b, qb, "bf16, 16 levels");
  std::vector<std::int64_t> labels(n);
  for (auto& v : labels) v = static_cast<std::int64_t>(rng() % 10) - 4;
  const ebac::level_quantizer ql{ebac::host::detail::find_levels(labels.data(), n, 4096, ebac::max_levels, 1)};
  REQUIRE(ql.palette.count == 10);
  labels[700] = 99;
  check_level_codes(labels, ql, "int64 labels, one outside the palette");
}
