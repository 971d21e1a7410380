// tests/format/outlier_index.cpp - the tests of include/ebac/format/outlier_index.hpp.
//
// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#include "../host/test_support.hpp"
#include "stream_cases.hpp"

#include <ebac/format/outlier_index.hpp>

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

/// The serial reader's verdict and indices (what host::decompress does).
bool serial_outlier_indices(const std::vector<std::byte>& sec, std::uint64_t n, std::uint64_t k,
                            std::vector<std::uint64_t>& idx) {
  const std::byte* p = sec.data();
  const std::byte* end = p + sec.size();
  idx.assign(k, 0);
  std::uint64_t at = 0;
  for (std::uint64_t j = 0; j < k; ++j) {
    std::uint64_t gap;
    if (!ebac::detail::get_varint(p, end, gap) || gap >= n) return false;
    at = j == 0 ? gap : at + gap + 1;
    if (at >= n) return false;
    idx[j] = at;
  }
  return p == end;
}

/// The CUDA decoder's way (format/outlier_index.hpp) with segments of
/// `seg` bytes: summaries, an exclusive scan, then each segment places its
/// varints. Returns the verdict; idx gets the placed indices.
bool segmented_outlier_indices(const std::vector<std::byte>& sec, std::uint64_t n, std::uint64_t k, std::uint64_t seg,
                               std::vector<std::uint64_t>& idx) {
  const ebac::outlier_index_reader r{sec.data(), sec.size(), n};
  const std::uint64_t segments = (sec.size() + seg - 1) / seg;
  std::vector<ebac::outlier_index_reader::summary> before(segments + 1);
  for (std::uint64_t s = 0; s < segments; ++s) before[s + 1] = r.op()(before[s], r.summarize(s * seg, (s + 1) * seg));
  idx.assign(k, ~std::uint64_t{0});
  bool ok = r.complete(before[segments], k);
  // Segments in reverse order: placement must not depend on order.
  for (std::uint64_t s = segments; s-- > 0;)
    ok = r.place(s * seg, (s + 1) * seg, before[s], k, [&](std::uint64_t j, std::uint64_t i) { idx[j] = i; }) && ok;
  return ok;
}

}  // namespace

TEST_CASE("stream: the outlier index section never exceeds one byte per element (the CUDA backend's output bound)") {
  // max_compressed_bytes (cuda/device_codec.cuh) reserves n bytes for the
  // varint gaps of k outliers among n elements. Worst case for a given k:
  // equal gaps (the sum of varint lengths is concave in the gaps).
  auto varint_bytes = [](std::uint64_t g) {
    std::byte tmp[10];
    return ebac::detail::put_varint(tmp, g);
  };
  for (std::uint64_t n : {1ull, 2ull, 127ull, 128ull, 129ull, 1000ull, 16384ull, 16385ull, 3000017ull, 1ull << 40}) {
    for (std::uint64_t k = 1; k <= n; k = k < 64 ? k + 1 : k * 3 / 2) {
      CAPTURE(n);
      CAPTURE(k);
      const std::uint64_t free_slots = n - k;                      // sum of the gaps
      const std::uint64_t q = free_slots / k, r = free_slots % k;  // r gaps of q + 1, k - r of q
      const std::uint64_t bytes = r * varint_bytes(q + 1) + (k - r) * varint_bytes(q);
      REQUIRE(bytes <= n);
    }
  }
  // And what the host codec writes for outlier-heavy tensors.
  std::mt19937 rng(3);
  for (double density : {1.0, 0.5, 0.01, 1e-4}) {
    CAPTURE(density);
    const std::size_t n = 200003;
    std::vector<float> x(n, 0.25f);
    std::bernoulli_distribution pick(density);
    for (auto& v : x)
      if (pick(rng)) v = qnan;
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    const auto s = ebac::host::compress(
        x.data(), ebac::extents{n}, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
    const auto h = ebac::host::inspect(s.data(), s.size());
    CHECK(h.section_bytes[ebac::section_outlier_index] <= n);
  }
}

TEST_CASE("outlier index: segments read what the serial reader reads, and reject what it rejects") {
  std::mt19937_64 rng(17);
  std::uint64_t accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::uint64_t n = trial % 5 == 0 ? (std::uint64_t{1} << 40) : 1 + rng() % 5000;
    // A valid section: k increasing indices below n (dense, sparse or huge gaps).
    std::vector<std::uint64_t> want;
    const double density = std::array<double, 4>{1.0, 0.3, 0.01, 1e-6}[trial % 4];
    if (n <= 5000) {
      for (std::uint64_t i = 0; i < n; ++i)
        if (std::uniform_real_distribution<double>(0, 1)(rng) < density) want.push_back(i);
    } else {
      std::uint64_t at = rng() % 1000;
      for (int j = 0; j < 200 && at < n; ++j, at += 1 + (rng() % (std::uint64_t{1} << (rng() % 40)))) want.push_back(at);
    }
    std::vector<std::byte> sec;
    for (std::size_t j = 0; j < want.size(); ++j) {
      std::byte tmp[10];
      const std::size_t len = ebac::detail::put_varint(tmp, j == 0 ? want[0] : want[j] - want[j - 1] - 1);
      sec.insert(sec.end(), tmp, tmp + len);
    }
    std::uint64_t k = want.size();
    // Damage: none, a byte changed, cut, extended, or a wrong count.
    switch (trial % 6) {
      case 1:
        if (!sec.empty()) sec[rng() % sec.size()] ^= static_cast<std::byte>(1 + rng() % 255);
        break;
      case 2:
        if (!sec.empty()) sec.resize(rng() % sec.size());
        break;
      case 3: sec.push_back(static_cast<std::byte>(rng() % 256)); break;
      case 4: k = k == 0 ? 1 : k + (rng() % 3) - 1; break;
      case 5:
        for (int b = 0; b < 11; ++b) sec.push_back(std::byte{0xff});
        break;  // an endless varint
      default: break;
    }
    CAPTURE(trial);
    std::vector<std::uint64_t> serial, segmented;
    const bool s_ok = serial_outlier_indices(sec, n, k, serial);
    if (trial % 6 == 0) REQUIRE(s_ok);
    for (std::uint64_t seg : {1ull, 3ull, 16ull, 4096ull}) {
      CAPTURE(seg);
      const bool p_ok = segmented_outlier_indices(sec, n, k, seg, segmented);
      REQUIRE(p_ok == s_ok);
      if (s_ok) CHECK(segmented == serial);
    }
    (s_ok ? accepted : rejected) += 1;
  }
  MESSAGE("outlier index sections: " << accepted << " accepted, " << rejected << " rejected");
  CHECK(accepted > 500);
  CHECK(rejected > 500);
  // Steps that would wrap 64 bits: gaps just below n = 2^62, many of them.
  const std::uint64_t n = std::uint64_t{1} << 62;
  std::vector<std::byte> sec;
  for (int j = 0; j < 8; ++j) {
    std::byte tmp[10];
    const std::size_t len = ebac::detail::put_varint(tmp, n - 1);
    sec.insert(sec.end(), tmp, tmp + len);
  }
  std::vector<std::uint64_t> a, b;
  CHECK_FALSE(serial_outlier_indices(sec, n, 8, a));
  CHECK_FALSE(segmented_outlier_indices(sec, n, 8, 3, b));
}

TEST_CASE("outlier index: the tiled writer's offsets give the host codec's section byte for byte") {
  // What the CUDA writer does (cuda/kernels/encode.cuh): each thread sizes
  // its 4 varints with varint_size, a scan places threads and tiles, then
  // each writes with put_varint; replayed here in reverse order over
  // garbage. Compared with the section the host codec wrote.
  std::mt19937 rng(5);
  for (double density : {1.0, 0.6, 0.05, 1e-3}) {
    CAPTURE(density);
    const std::size_t n = 100003;
    std::vector<float> x(n);
    for (auto& v : x) v = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    for (std::size_t i = 0; i < n; ++i)
      if (std::uniform_real_distribution<double>(0, 1)(rng) < density) x[i] = i % 2 ? qnan : finf;
    x[n - 1] = qnan;  // at low density, far gaps: multi-byte varints
    std::vector<std::uint64_t> index;
    ebac::compress_options opt;
    opt.bound = {1e-3, ebac::bound_mode::absolute};
    opt.checksum = false;
    const auto s = ebac::host::compress(
        x.data(), ebac::extents{n}, ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, opt);
    const auto h = ebac::host::inspect(s.data(), s.size());
    // The codec's own outliers (the non-finite values, and any value its
    // quantizer could not code): read back with the serial reader.
    const std::byte* sec = s.data() + h.section_offset(ebac::section_outlier_index);
    REQUIRE(serial_outlier_indices(std::vector<std::byte>(sec, sec + h.section_bytes[ebac::section_outlier_index]), n,
                                   h.outlier_count, index));
    const std::uint64_t k = index.size(), per = 4;
    std::vector<std::uint64_t> thread_bytes((k + per - 1) / per, 0);
    for (std::uint64_t j = 0; j < k; ++j) thread_bytes[j / per] += ebac::detail::varint_size(ebac::outlier_gap(index.data(), j));
    std::vector<std::uint64_t> at(thread_bytes.size() + 1, 0);  // tiles in order: the scan over threads is the scan over tiles
    for (std::size_t t = 0; t < thread_bytes.size(); ++t) at[t + 1] = at[t] + thread_bytes[t];
    CHECK(at.back() == h.section_bytes[ebac::section_outlier_index]);
    std::vector<std::byte> section(at.back() + 16, std::byte{0xcd});
    for (std::size_t t = thread_bytes.size(); t-- > 0;) {
      std::byte* p = section.data() + at[t];
      for (std::uint64_t j = t * per; j < k && j < (t + 1) * per; ++j)
        p += ebac::detail::put_varint(p, ebac::outlier_gap(index.data(), j));
      CHECK(p == section.data() + at[t + 1]);
    }
    CHECK(std::memcmp(section.data(), s.data() + h.section_offset(ebac::section_outlier_index), at.back()) == 0);
  }
}
