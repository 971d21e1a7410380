// tests/host/decode_chunks.cpp - the tests of include/ebac/host/decode_chunks.hpp.
//
// decode_lorenzo_windows (host/decode_chunks.hpp): a Lorenzo payload decoded
// window by window along the outermost predicted axis gives the elements
// host::decompress gives, whatever the window (its budget): windows of one
// and of three slabs, which start inside a tile (the outer axis's prefix sum
// carried from the slab before) and gather codes across chunk batches of one
// chunk; and a whole block at once.
#include "test_support.hpp"

#include <cstring>
#include <vector>

/// The stream's elements through decode_lorenzo_windows with this scratch budget.
std::vector<float> decode_windows(const std::vector<std::byte>& s, std::uint64_t budget, int threads) {
  using namespace ebac;
  const stream_header h = host::inspect(s.data(), s.size());
  const std::uint64_t n = element_count(h);
  const std::uint32_t C = h.chunk_elements;
  const std::uint64_t chunks = (n + C - 1) / C;
  const std::byte* table = s.data() + h.section_offset(section_chunk_table);
  std::vector<std::uint64_t> offsets(chunks + 1, 0);
  for (std::uint64_t c = 0; c < chunks; ++c) offsets[c + 1] = offsets[c] + detail::load_le<std::uint32_t>(table + 4 * c);
  std::vector<float> out(n, -1.0f);
  bool bad = false;
  detail::with_stream_stages<float>(h, [&](const auto& pred, const auto& q, auto enc_tag) {
    using E = typename decltype(enc_tag)::type;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(pred)>, lorenzo> && !E::needs_codebook) {
      host::detail::decode_lorenzo_windows<float>(E{}, pred, h.shape, q, s.data() + h.section_offset(section_payload), offsets, n,
                                                  C, threads, budget, out.data(), bad,
                                                  [](status) { FAIL("a chunk does not decode"); });
    } else {
      FAIL("expected a Lorenzo stream with an encoder without codebook");
    }
  });
  CHECK_FALSE(bad);
  return out;
}

namespace {

template <class Pipe>
std::vector<std::byte> compress_with_chunks(const std::vector<float>& x, const ebac::extents& e, Pipe pipe, std::uint32_t chunk) {
  pipe.chunk_elements = chunk;
  ebac::compress_options opt;
  opt.bound = ebac::error_bound{1e-3, ebac::bound_mode::absolute};
  return ebac::host::compress(x.data(), e, pipe, opt);
}

}  // namespace

TEST_CASE("decode windows: a Lorenzo payload window by window equals host::decompress, windows inside tiles included") {
  // [8, 40, 33], Lorenzo along the last two axes (tiles of 16): slabs of 33
  // codes, 40 a block (tile starts at 0, 16, 32), chunks of 5280 (4 blocks).
  const ebac::extents e{8, 40, 33};
  const std::uint64_t n = 8 * 40 * 33;
  std::vector<float> x(n);
  std::mt19937 rng(53);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (std::uint64_t i = 0; i < n; ++i) x[i] = std::sin(0.05f * static_cast<float>(i % 1320)) + noise(rng);
  using P = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length>;
  const auto s = compress_with_chunks(x, e, P{ebac::lorenzo::along_last(2, 3, 16)}, 32);
  const ebac::stream_header h = ebac::host::inspect(s.data(), s.size());
  REQUIRE(h.predictor == ebac::predictor_id::lorenzo);
  REQUIRE(h.chunk_elements < n);  // several chunks
  const auto want = ebac::host::decompress<float>(s.data(), s.size(), 1);
  // Budgets: one slab a window (and one chunk a batch), three slabs (windows
  // at 0, 3, ..., 39: most start inside a tile), and a block at once.
  for (std::uint64_t budget : {std::uint64_t{2 * 33 * 4 * 2}, std::uint64_t{4 * 33 * 4 * 2}, std::uint64_t{1} << 30}) {
    for (int threads : {1, 3}) {
      CAPTURE(budget);
      CAPTURE(threads);
      const auto got = decode_windows(s, budget, threads);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    }
  }
}
