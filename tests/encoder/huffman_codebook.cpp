// tests/encoder/huffman_codebook.cpp - the tests of include/ebac/encoder/huffman_codebook.hpp.
//
// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
#include "../host/test_support.hpp"
#include "encoder_references.hpp"

#include <ebac/encoder/huffman_image.hpp>
#include <ebac/encoder/huffman_lanes.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/pipeline.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

using namespace ebac_test;
namespace A = ebac::huffman_alphabet;

namespace {

/// Optimal (unlimited) Huffman cost sum(freq * len), computed independently
/// as the sum of all merged weights.
std::uint64_t optimal_cost(const std::vector<std::uint64_t>& freq) {
  std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>> q;
  for (auto f : freq)
    if (f) q.push(f);
  if (q.size() == 1) return q.top();
  std::uint64_t cost = 0;
  while (q.size() > 1) {
    const auto a = q.top();
    q.pop();
    const auto b = q.top();
    q.pop();
    cost += a + b;
    q.push(a + b);
  }
  return cost;
}

/// The CUDA codebook kernel's way to run the shared steps (one thread for
/// the serial parts, symbols placed by rank), replayed on the host.
struct rank_exec {
  template <class F>
  void serial(F&& f) {
    f();
  }
  template <class F>
  void for_each(std::uint32_t n, F&& f) {  // in reverse: any order must do
    for (std::uint32_t i = n; i-- > 0;) f(i);
  }
  template <class F>
  std::uint64_t sum(std::uint32_t n, F&& f) {
    std::uint64_t total = 0;
    for (std::uint32_t i = n; i-- > 0;) total += f(i);
    return total;
  }
  void sort_used(ebac::detail::huffman_length_workspace& w, std::uint32_t n) {
    w.used = 0;
    for (std::uint32_t s = 0; s < n; ++s)
      if (w.freq[s]) {
        w.order[ebac::detail::huffman_used_rank(w.freq, n, s)] = s;
        ++w.used;
      }
  }
};

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("huffman: lengths are optimal when the limit does not bind") {
    std::mt19937_64 rng(24);
    for (int t = 0; t < 300; ++t) {
      std::vector<std::uint64_t> h(A::size, 0);
      const int used = 2 + static_cast<int>(rng() % 200);
      for (int i = 0; i < used; ++i) h[rng() % A::literals] += 1 + rng() % 1000;
      const auto cb = codebook_of(h, false);
      std::uint64_t cost = 0;
      bool covered = true;
      for (std::uint32_t s = 0; s < A::size; ++s) {
        cost += h[s] * cb.length[s];
        if (h[s] && !cb.length[s]) covered = false;
      }
      CHECK(covered);
      CHECK(cost == optimal_cost(h));
      std::uint64_t estimated = 0;  // what the stream's runs-or-literals choice weighs (no extra bits: literals only)
      for (std::uint32_t s = 0; s < A::size; ++s) estimated += ebac::detail::huffman_symbol_cost_bits(s, h[s], cb.length[s]);
      CHECK(cost == estimated);
    }
  }

  TEST_CASE("huffman: length limit <= 24 on highly skewed (Fibonacci) histograms") {
    std::mt19937_64 rng(25);
    for (int nsym : {26, 40, 60, 90}) {
      for (bool runs : {false, true}) {
        CAPTURE(nsym);
        CAPTURE(runs);
        std::vector<std::uint64_t> h(A::size, 0);
        // Symbols: literals, and with runs also run classes and the escape.
        std::vector<std::uint32_t> syms;
        for (int i = 0; i < nsym; ++i) syms.push_back(static_cast<std::uint32_t>(i * 37 % A::literals));
        if (runs) {
          syms.push_back(A::run_base);
          syms.push_back(A::run_base + 4);
        }
        syms.push_back(A::escape);
        std::uint64_t a = 1, b = 1;
        for (auto s : syms) {
          h[s] = a;  // Fibonacci weights: an unlimited Huffman tree would be a chain
          const auto c = a + b;
          a = b;
          b = std::min<std::uint64_t>(c, std::uint64_t{1} << 40);  // realistic counts: no overflow in sums
        }
        const auto cb = codebook_of(h, runs);
        int longest = 0;
        for (auto s : syms) {
          CHECK(cb.length[s] >= 1);
          longest = std::max<int>(longest, cb.length[s]);
        }
        CHECK(longest <= A::max_code_length);
        if (syms.size() > 30) CHECK(longest >= 13);  // the long-code walk is exercised
        CHECK(kraft_units(cb.length) <= (std::uint64_t{1} << A::max_code_length));
        // Every symbol (incl. the longest codes) encodes and decodes.
        code_set cs{"fibonacci", {}};
        for (int rep = 0; rep < 3; ++rep)
          for (auto s : syms) {
            if (s < A::literals) cs.codes.push_back(s);
            else if (s == A::escape) cs.codes.push_back(0x12345678u + static_cast<std::uint32_t>(rep));
            else if (runs) {  // a run of class k, closed by a non-zero literal so runs never merge
              const std::size_t k = s - A::run_base + 1;
              cs.codes.insert(cs.codes.end(), (std::size_t{1} << k) + static_cast<std::size_t>(rep) % (std::size_t{1} << k), 0u);
              cs.codes.push_back(syms[1]);
            }
          }
        // Tokenize with the same run setting: only symbols in `syms` may appear.
        const auto hist = histogram(cs.codes, runs);
        bool subset = true;
        for (std::uint32_t s = 0; s < A::size; ++s)
          if (hist[s] && !h[s]) subset = false;
        REQUIRE(subset);
        check_encoder(ebac::huffman::bind(cb), cs, rng);
      }
    }
  }

  TEST_CASE("huffman: the device's construction (two blocks, ranks, one serial thread) picks the host's codebook and image") {
    std::mt19937_64 rng(31);
    auto w = std::make_unique<ebac::detail::huffman_length_workspace[]>(2);
    for (int t = 0; t < 60; ++t) {
      CAPTURE(t);
      std::vector<std::uint64_t> runs(A::size, 0), lits(A::size, 0);
      const int kind = t % 4;
      if (kind == 3) {  // Fibonacci weights: the 24-bit limit binds and the histogram is flattened
        std::uint64_t a = 1, b = 1;
        for (int i = 0; i < 60; ++i) {
          lits[i * 7] = a;
          runs[i * 5] = a;
          const std::uint64_t c = a + b;
          a = b;
          b = c;
        }
      } else {
        const int used = kind == 0 ? 1 : 2 + static_cast<int>(rng() % 3000);  // one symbol .. most of the alphabet
        for (int i = 0; i < used; ++i) {
          const std::uint64_t f = kind == 2 ? 5 : 1 + rng() % 100000;  // kind 2: all ties, order by symbol
          runs[rng() % A::size] += f;
          lits[rng() % A::literals] += f;
        }
      }
      const auto host = ebac::huffman_codebook::choose(runs, lits);
      std::vector<std::uint8_t> lr(A::size), ll(A::size);
      rank_exec ex;
      // As the two blocks of the length kernel: one workspace per histogram,
      // each left with the garbage of device temp memory, then the choice.
      std::memset(static_cast<void*>(w.get()), 0xab, 2 * sizeof(ebac::detail::huffman_length_workspace));
      ebac::detail::huffman_histogram_lengths(ex, w[1], lits.data(), ll.data());  // either block may finish first
      ebac::detail::huffman_histogram_lengths(ex, w[0], runs.data(), lr.data());
      const bool use_runs = ebac::detail::huffman_prefer_runs(ex, runs.data(), lits.data(), lr.data(), ll.data());
      CHECK(use_runs == host.use_runs);
      CHECK((use_runs ? lr : ll) == host.length);
      // Device temp memory holds garbage: the image must not depend on what was there.
      using L = ebac::huffman_image_layout;
      std::vector<std::uint64_t> image((L::bytes + 7) / 8, 0xababababababababull);
      auto* base = reinterpret_cast<std::byte*>(image.data());
      const std::size_t ser = ebac::huffman_write_image(ex, use_runs ? lr.data() : ll.data(), use_runs, base);
      const auto packed = ebac::pack_huffman_image(host);
      REQUIRE(ser == packed.serialized_bytes);
      const std::size_t used = host.sorted.size();  // sorted[] past the used symbols is never read
      auto same = [&](std::size_t from, std::size_t to) {
        return std::memcmp(base + from, packed.data() + from, to - from) == 0;
      };
      CHECK(same(0, L::sorted));
      CHECK(same(L::sorted, L::sorted + 4 * used));
      CHECK(same(L::first_code, L::serialized + ser));
    }
  }

  TEST_CASE("huffman: codebook deserialization rejects malformed input, and what it accepts is a usable prefix code") {
    std::vector<std::uint64_t> h(A::size, 0);
    for (std::uint32_t s = 0; s < 50; ++s) h[s * 3] = 1 + s * s;
    h[A::escape] = 7;
    const auto cb = codebook_of(h, true);
    std::vector<std::byte> ser;
    cb.serialize(ser);
    ebac::huffman_codebook out;
    // Every truncation fails.
    for (std::size_t l = 0; l < ser.size(); ++l) {
      auto t = exact_copy(ser.data(), l);
      CAPTURE(l);
      CHECK(ebac::huffman_codebook::deserialize(t.get(), l, out) != ebac::status::ok);
    }
    // Mutations that deserialize give a usable prefix code: Kraft holds, the
    // codes of its symbols round-trip, and garbage decodes as the format says.
    std::mt19937_64 rng(26);
    std::size_t usable = 0;
    for (std::size_t pos = 0; pos < ser.size(); ++pos)
      for (std::uint8_t x : {0x01, 0x02, 0x10, 0x80, 0xff}) {
        CAPTURE(pos);
        CAPTURE(int(x));
        auto t = exact_copy(ser.data(), ser.size());
        t[pos] ^= static_cast<std::byte>(x);
        if (ebac::huffman_codebook::deserialize(t.get(), ser.size(), out) == ebac::status::ok) {
          ++usable;
          CHECK(kraft_units(out.length) <= (std::uint64_t{1} << A::max_code_length));
          const auto enc = ebac::huffman::bind(out);
          const reference_huffman ref(out.length.data());
          // Codes whose tokens all have a code in this codebook (no zeros when
          // runs are on: they would become run tokens).
          std::vector<std::uint32_t> codes;
          for (std::uint32_t sym = out.use_runs ? 1 : 0; sym < A::literals; ++sym)
            if (out.length[sym]) codes.push_back(sym);
          if (out.length[A::escape]) codes.push_back(4096u + static_cast<std::uint32_t>(rng() % 1000000));
          for (std::size_t i = 0, m = codes.size(); i < 3 * m; ++i) codes.push_back(codes[rng() % m]);
          if (!codes.empty()) {
            std::vector<std::byte> buf(enc.max_chunk_bytes(codes.size()));
            buf.resize(enc.encode_chunk(codes.data(), codes.size(), buf.data()));
            auto bin = exact_copy(buf.data(), buf.size());
            std::vector<std::uint32_t> back(codes.size(), 0xdeadbeefu);
            CHECK(enc.decode_chunk(bin.get(), buf.size(), back.data(), back.size()) == ebac::status::ok);
            CHECK(back == codes);
            const ref_codes r = ref.decode(bin.get(), buf.size(), codes.size());
            CHECK((r && *r == codes));
          }
          std::vector<std::byte> garbage(64);
          for (auto& g : garbage) g = static_cast<std::byte>(rng());
          auto gin = exact_copy(garbage.data(), garbage.size());
          for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100}})
            check_against_reference(enc, gin.get(), garbage.size(), n, ref.decode(gin.get(), garbage.size(), n));
        }
      }
    CHECK(usable > 0);
    auto raw = [&](std::vector<std::uint8_t> b) {
      auto t = std::unique_ptr<std::byte[]>(new std::byte[b.size() ? b.size() : 1]);
      for (std::size_t i = 0; i < b.size(); ++i) t[i] = static_cast<std::byte>(b[i]);
      return ebac::huffman_codebook::deserialize(t.get(), b.size(), out);
    };
    CHECK(raw({0, 0}) == ebac::status::ok);                       // empty codebook
    CHECK(raw({0, 2, 5, 1, 0, 1}) == ebac::status::ok);           // symbols 5, 6 with length 1
    CHECK(raw({0, 3, 5, 1, 0, 1, 0, 1}) != ebac::status::ok);     // three codes of length 1: Kraft > 1
    CHECK(raw({0, 1, 5, 25}) != ebac::status::ok);                // length above 24
    CHECK(raw({0, 1, 5, 0}) != ebac::status::ok);                 // length 0 listed
    CHECK(raw({2, 0}) != ebac::status::ok);                       // unknown flag
    CHECK(raw({0, 1, 0xa0, 0x20, 1}) != ebac::status::ok);        // symbol 4128 >= alphabet size
    CHECK(raw({0, 2, 0x9f, 0x20, 1, 0, 1}) != ebac::status::ok);  // second symbol past the alphabet
    CHECK(raw({0, 1, 5, 1, 0}) != ebac::status::ok);              // trailing byte
    CHECK(raw({0, 0xff, 0xff, 0x03}) != ebac::status::ok);        // more symbols than the alphabet
  }

}  // TEST_SUITE
