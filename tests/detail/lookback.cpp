// tests/detail/lookback.cpp - the tests of include/ebac/detail/lookback.hpp.
//
// The decoupled look-back protocol (detail/lookback.hpp) that the CUDA
// single-pass kernel runs, raced on the host: threads take tile numbers from
// an atomic counter, as the kernel's blocks do, and must get the serial
// exclusive prefix sum.
#include "../host/test_support.hpp"

#include <ebac/detail/lookback.hpp>

#include <atomic>
#include <cstdint>
#include <doctest/doctest.h>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace {

std::vector<std::uint64_t> race(const std::vector<std::uint64_t>& aggregates, int threads) {
  const std::size_t n = aggregates.size();
  auto words = std::make_unique<std::atomic<std::uint64_t>[]>(n);
  for (std::size_t i = 0; i < n; ++i) words[i].store(0);
  std::atomic<std::uint64_t> next{0};
  std::vector<std::uint64_t> exclusive(n, ~std::uint64_t{0});
  auto load = [&](std::uint64_t i) {
    const std::uint64_t w = words[i].load(std::memory_order_relaxed);
    if (ebac::detail::lookback_word::status(w) == ebac::detail::lookback_word::invalid) std::this_thread::yield();
    return w;
  };
  auto store = [&](std::uint64_t i, std::uint64_t w) { words[i].store(w, std::memory_order_relaxed); };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<std::uint32_t>(t));
      for (;;) {
        const std::uint64_t tile = next.fetch_add(1);
        if (tile >= n) return;
        if (rng() % 8 == 0) std::this_thread::yield();  // let later tiles overtake
        exclusive[tile] = ebac::detail::lookback_exclusive(tile, aggregates[tile], load, store);
      }
    });
  for (auto& th : pool) th.join();
  // Every word ends inclusive, holding the running sum.
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum += aggregates[i];
    const std::uint64_t w = words[i].load();
    CHECK(ebac::detail::lookback_word::status(w) == ebac::detail::lookback_word::inclusive);
    CHECK(ebac::detail::lookback_word::value(w) == sum);
  }
  return exclusive;
}

}  // namespace

TEST_CASE("decoupled look-back: racing tiles get the serial exclusive prefix sum") {
  std::mt19937_64 rng(17);
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{33}, std::size_t{1000}, std::size_t{20000}}) {
    for (int threads : {1, 3, 8}) {
      CAPTURE(n);
      CAPTURE(threads);
      std::vector<std::uint64_t> agg(n);
      for (auto& a : agg) a = rng() % 3 == 0 ? 0 : rng() % (1u << 20);  // empty tiles too
      std::vector<std::uint64_t> expect(n);
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i < n; ++i) {
        expect[i] = sum;
        sum += agg[i];
      }
      CHECK(race(agg, threads) == expect);
    }
  }
}

TEST_CASE("decoupled look-back: status and value share one word without overlap") {
  using W = ebac::detail::lookback_word;
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{12345}, W::max_value}) {
    for (std::uint64_t s : {W::invalid, W::partial, W::inclusive}) {
      const std::uint64_t w = W::make(s, v);
      CHECK(W::status(w) == s);
      CHECK(W::value(w) == v);
    }
  }
  CHECK(W::make(W::invalid, 0) == 0);  // zeroed memory reads as "not published"
}
