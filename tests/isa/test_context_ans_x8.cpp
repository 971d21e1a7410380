// The eight-lane AVX2 decoder of context ANS chunks
// (ebac/encoder/context_ans_x8.hpp) against the codes that were encoded and
// against context_ans::decode_chunk, the one-chunk decoder: the same codes
// from valid chunks, and the same verdict, chunk by chunk, on damaged ones.
// Every context set (8, 4, 2 or 1 classes a neighbour, with and without the
// diagonal bit) is built here from the test's own counts, so each is
// exercised whatever learn() would pick. Compiled with -march=x86-64-v3 (the
// decoder exists only where AVX2 is compiled in).
#include <ebac/encoder/context_ans.hpp>
#include <ebac/encoder/context_ans_x8.hpp>

#include "context_ans_codebooks.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if !EBAC_HOST_AVX2
#error "test_context_ans_x8.cpp must be compiled with AVX2 (-march=x86-64-v3)"
#endif

namespace {

using model = ebac::detail::context_ans_model;
using context_ans_test::codebook_for;
using context_ans_test::make_codes;
constexpr int lanes = ebac::detail::context_ans_x8_lanes;

/// Memory whose first byte after `size` is a page the process may not read,
/// so a read past the end faults instead of passing unnoticed.
struct guarded_bytes {
  std::byte* data = nullptr;
  std::size_t size = 0;
#if defined(__linux__)
  void* map = nullptr;
  std::size_t map_bytes = 0;
  explicit guarded_bytes(std::size_t n) : size(n) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t body = (n + page - 1) / page * page;
    map_bytes = body + page;
    map = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    REQUIRE(mprotect(static_cast<std::byte*>(map) + body, page, PROT_NONE) == 0);
    data = static_cast<std::byte*>(map) + body - n;
  }
  ~guarded_bytes() { munmap(map, map_bytes); }
#else
  std::vector<std::byte> store;
  explicit guarded_bytes(std::size_t n) : store(n), size(n) { data = store.data(); }
#endif
  guarded_bytes(const guarded_bytes&) = delete;
  guarded_bytes& operator=(const guarded_bytes&) = delete;
};

/// One or two groups of eight chunks, back to back: chunk l at off[l].
struct coded_group {
  std::vector<std::byte> bytes;
  std::vector<std::uint32_t> off, len;
  [[nodiscard]] int groups() const { return static_cast<int>(off.size()) / lanes; }
};

coded_group encode_group(const ebac::context_ans& enc, const std::vector<std::vector<std::uint32_t>>& chunks) {
  coded_group g;
  for (const auto& codes : chunks) {
    std::vector<std::byte> chunk(enc.max_chunk_bytes(codes.size()));
    const std::size_t k = enc.encode_chunk(codes.data(), codes.size(), chunk.data());
    g.off.push_back(static_cast<std::uint32_t>(g.bytes.size()));
    g.len.push_back(static_cast<std::uint32_t>(k));
    g.bytes.insert(g.bytes.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return g;
}

/// Both decoders on the groups' bytes, placed so that exactly 8 readable
/// bytes follow the last chunk (the least decode_context_ans_x8 asks for) and
/// then a page that faults: one group with decode_context_ans_x8, two with
/// decode_context_ans_groups<2> (each into its own buffer). Returns the
/// number of lanes whose verdicts and codes agree; `valid` also checks the
/// codes against `want`.
int compare(const ebac::context_ans& enc, const coded_group& g, std::size_t n,
            const std::vector<std::vector<std::uint32_t>>* want, const std::string& label) {
  const int groups = g.groups();
  REQUIRE((groups == 1 || groups == 2));
  std::uint32_t end = 0;
  for (std::size_t l = 0; l < g.off.size(); ++l) end = std::max(end, g.off[l] + g.len[l]);
  guarded_bytes mem(std::size_t{end} + 8);
  std::memcpy(mem.data, g.bytes.data(), std::min<std::size_t>(g.bytes.size(), end));
  std::memset(mem.data + end, 0xa5, 8);
  std::vector<std::uint32_t> store[2] = {std::vector<std::uint32_t>(lanes * n + 8), std::vector<std::uint32_t>(lanes * n + 8)};
  std::uint32_t* outs[2];
  for (int h = 0; h < 2; ++h)
    outs[h] = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(store[h].data()) + 31) & ~std::uintptr_t{31});
  unsigned bad[2] = {0, 0};
  if (groups == 1) bad[0] = ebac::detail::decode_context_ans_x8(enc, mem.data, g.off.data(), g.len.data(), n, end, outs[0]);
  else ebac::detail::decode_context_ans_groups<2>(enc, mem.data, g.off.data(), g.len.data(), n, end, outs, bad);
  int agree = 0;
  for (int k = 0; k < lanes * groups; ++k) {
    const int l = k % lanes;
    const std::uint32_t* const out = outs[k / lanes];
    std::vector<std::uint32_t> one(n);
    const bool ok = enc.decode_chunk(mem.data + g.off[k], g.len[k], one.data(), n) == ebac::status::ok;
    const bool x8_ok = (bad[k / lanes] >> l & 1u) == 0;
    CHECK_MESSAGE(x8_ok == ok, label << ": chunk " << k << ": decode_chunk says " << (ok ? "valid" : "corrupt")
                                     << ", the x8 decoder " << (x8_ok ? "valid" : "corrupt"));
    bool same = x8_ok == ok;
    if (ok && x8_ok) {
      std::size_t diff = n;
      for (std::size_t i = 0; i < n && diff == n; ++i)
        if (out[lanes * i + l] != one[i]) diff = i;
      CHECK_MESSAGE(diff == n, label << ": chunk " << k << ": code " << diff << " differs from decode_chunk's");
      same = same && diff == n;
      if (want) {
        const bool right = (*want)[static_cast<std::size_t>(k)] == one;
        CHECK_MESSAGE(right, label << ": chunk " << k << ": decoded codes are not the encoded ones");
        same = same && right;
      }
    }
    agree += same;
  }
  return agree;
}

}  // namespace

TEST_SUITE("isa") {
  TEST_CASE(
      "isa: context ANS x8: eight chunks decoded side by side give the encoded codes, in every context set, one group or two") {
    struct shape {
      std::size_t n;
      std::uint32_t row;
      double zeros;
      int bits;
      int zero_blocks;  // context_ans_test::zero_blocks's pattern
    };
    // Rows of 1 (no upper neighbour, no diagonal), 2, a map's width, wider
    // than the chunk; sparse and dense; codes up to 2^30 (the longest raw
    // bits); blocks of zeros that lanes skip alone, together, or all of them.
    const shape shapes[] = {{4096, 28, 0.8, 6, 0},  {4096, 28, 0.2, 14, 0},   {1000, 1, 0.5, 8, 0},
                            {777, 2, 0.4, 20, 0},   {2048, 5000, 0.6, 10, 0}, {3001, 64, 0.05, 30, 0},
                            {4099, 28, 0.3, 12, 1}, {4100, 3, 0.5, 20, 2},    {3000, 28, 1.0, 6, 0}};
    constexpr int shape_count = sizeof shapes / sizeof shapes[0];
    int checked = 0;
    for (int groups : {1, 2})
      for (const shape& s : shapes)
        for (std::uint32_t classes : {8u, 4u, 2u, 1u})
          for (bool diagonal : {true, false}) {
            std::vector<std::vector<std::uint32_t>> chunks;
            for (int l = 0; l < lanes * groups; ++l) {
              chunks.push_back(make_codes(s.n, s.row, s.zeros, s.bits, 100u * checked + static_cast<std::uint32_t>(l)));
              context_ans_test::zero_blocks(chunks.back(), s.zero_blocks, l);
            }
            const ebac::context_ans_codebook cb = codebook_for(chunks, s.row, classes, diagonal);
            const ebac::context_ans enc = ebac::context_ans::bind(cb);
            const coded_group g = encode_group(enc, chunks);
            const std::string label = std::to_string(groups) + " group(s), n " + std::to_string(s.n) + " row " +
                                      std::to_string(s.row) + " classes " + std::to_string(classes) +
                                      (diagonal ? " diagonal" : "") + " zero blocks " + std::to_string(s.zero_blocks);
            checked += compare(enc, g, s.n, &chunks, label) == lanes * groups;
          }
    CHECK(checked == 2 * shape_count * 4 * 2);
  }

  TEST_CASE(
      "isa: context ANS x8: a damaged chunk gets decode_chunk's verdict, and its neighbours still decode, one group or two") {
    for (int groups : {1, 2}) {
      CAPTURE(groups);
      std::mt19937 rng(5);
      const std::size_t n = 2048;
      const std::uint32_t row = 32;
      const int chunk_count = lanes * groups;
      std::vector<std::vector<std::uint32_t>> chunks;
      for (int l = 0; l < chunk_count; ++l) {  // chunks 0, 2, 4, ... flag their block 1 (a bitmap byte after the byte count)
        chunks.push_back(make_codes(n, row, 0.5, 24, 900u + static_cast<std::uint32_t>(l)));
        context_ans_test::zero_blocks(chunks.back(), l % 2 == 0 ? 2 : 0, 0);
      }
      const ebac::context_ans_codebook cb = codebook_for(chunks, row, 8, true);
      const ebac::context_ans enc = ebac::context_ans::bind(cb);
      const coded_group clean = encode_group(enc, chunks);
      int refused = 0, trials = 0;
      for (int trial = 0; trial < 600; ++trial) {
        coded_group g = clean;
        const int l = static_cast<int>(rng() % static_cast<unsigned>(chunk_count));
        std::byte* chunk = g.bytes.data() + g.off[l];
        std::string what;
        switch (trial % 8) {
          case 0: {  // one byte anywhere in the chunk
            const std::size_t at = rng() % g.len[l];
            chunk[at] ^= static_cast<std::byte>(1 + rng() % 255);
            what = "byte " + std::to_string(at) + " flipped";
            break;
          }
          case 1: {  // the rANS byte count
            const std::uint32_t k = static_cast<std::uint32_t>(rng() % (g.len[l] + 40));
            std::memcpy(chunk, &k, 4);
            what = "rANS byte count " + std::to_string(k);
            break;
          }
          case 2: {  // an initial state
            const std::size_t at = 4 + 4 * (rng() % 4) + rng() % 4;
            chunk[at] ^= static_cast<std::byte>(1 + rng() % 255);
            what = "state byte " + std::to_string(at) + " flipped";
            break;
          }
          case 3:  // the chunk shorter than written
            g.len[l] = static_cast<std::uint32_t>(rng() % g.len[l]);
            what = "length " + std::to_string(g.len[l]);
            break;
          case 4:  // the chunk longer: the next chunk's bytes (or the tail) follow
            g.len[l] += 1 + static_cast<std::uint32_t>(rng() % 16);
            if (g.off[l] + g.len[l] > g.bytes.size()) g.len[l] = static_cast<std::uint32_t>(g.bytes.size() - g.off[l]);
            what = "length " + std::to_string(g.len[l]);
            break;
          case 5:  // the last byte's top bit: a raw bit (another code) or one past them (must be zero)
            chunk[g.len[l] - 1] ^= std::byte{0x80};
            what = "last byte's top bit flipped";
            break;
          case 6: {  // the bitmap flag, or a bit of the bitmap (a bit past the two blocks, or none left set)
            if (rng() % 2 == 0) {
              chunk[3] ^= std::byte{0x80};
              what = "bitmap flag flipped";
            } else {
              const unsigned bit = static_cast<unsigned>(rng() % 8);
              chunk[4] ^= static_cast<std::byte>(1u << bit);
              what = "byte 4's bit " + std::to_string(bit) + " flipped";
            }
            break;
          }
          default: {  // a run of bytes zeroed (raw bits or rANS bytes)
            const std::size_t at = rng() % g.len[l], k = std::min<std::size_t>(1 + rng() % 12, g.len[l] - at);
            std::memset(chunk + at, 0, k);
            what = std::to_string(k) + " bytes zeroed at " + std::to_string(at);
            break;
          }
        }
        const int agree =
            compare(enc, g, n, nullptr, "trial " + std::to_string(trial) + ", chunk " + std::to_string(l) + ": " + what);
        ++trials;
        refused +=
            enc.decode_chunk(g.bytes.data() + g.off[l], g.len[l], std::vector<std::uint32_t>(n).data(), n) != ebac::status::ok;
        if (agree != chunk_count) break;  // one report is enough
      }
      CHECK(trials == 600);
      CHECK(refused > 350);  // most damage is caught; what is not decodes alike
    }
  }

  TEST_CASE("isa: context ANS x8: the interleaved codes go to eight chunks, element i of lane l to chunk l's element i") {
    for (std::size_t n : {std::size_t{8}, std::size_t{32}, std::size_t{1000}}) {
      std::vector<std::uint32_t> storage(8 * n + 8);
      auto* lanes =
          reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 31) & ~std::uintptr_t{31});
      for (std::size_t k = 0; k < 8 * n; ++k) lanes[k] = static_cast<std::uint32_t>(k * 2654435761u);
      std::vector<std::vector<std::uint32_t>> chunk(8, std::vector<std::uint32_t>(n + 1, 0xdeadbeefu));  // one past: not written
      std::uint32_t* const to[8] = {chunk[0].data(), chunk[1].data(), chunk[2].data(), chunk[3].data(),
                                    chunk[4].data(), chunk[5].data(), chunk[6].data(), chunk[7].data()};
      ebac::detail::deinterleave_context_ans_x8(lanes, n, to);
      std::size_t wrong = 0;
      for (std::size_t l = 0; l < 8; ++l) {
        for (std::size_t i = 0; i < n; ++i) wrong += chunk[l][i] != static_cast<std::uint32_t>((8 * i + l) * 2654435761u);
        wrong += chunk[l][n] != 0xdeadbeefu;
      }
      CAPTURE(n);
      CHECK(wrong == 0);
    }
  }
}
