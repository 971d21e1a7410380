// tests/format/stream_cases.hpp - small streams of every pipeline and the
// helpers that probe them, shared by the stream-format and host codec tests.
//
// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#pragma once

#include "../host/test_support.hpp"

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

constexpr float qnan = std::numeric_limits<float>::quiet_NaN();

constexpr float finf = std::numeric_limits<float>::infinity();

/// A small tensor with smooth values, zeros, NaN/Inf and huge values, so that
/// every section of the stream (codebook, chunks, outliers) is non-empty.
inline std::vector<float> mixed_tensor(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float s = std::sin(0.05f * static_cast<float>(i)) + 0.1f * g(rng);
    v[i] = s > 0 ? s : 0.0f;
  }
  if (n > 10) {
    v[3] = qnan;
    v[n / 2] = -finf;
    v[n - 2] = 3e30f;
    v[7] = bits_to_float(0x7f812345u);  // signalling NaN with payload
  }
  return v;
}

struct stream_case {
  std::string pipeline;
  ebac::dtype type;
  ebac::extents shape;
  std::vector<std::byte> bytes;
};

template <class T>
stream_case make_case(const std::string& pipe, const ebac::extents& e, bool checksum, std::uint32_t chunk = 0,
                      std::uint64_t seed = 1) {
  const auto x = convert<T>(mixed_tensor(count_of(e), seed));
  ebac::compress_options o;
  o.bound = {1e-2, ebac::bound_mode::absolute};
  o.checksum = checksum;
  o.threads = 1;
  return {pipe, ebac::dtype_of<T>::value, e, compress(x.data(), e, spec_of(pipe, chunk), o)};
}

/// Decompresses into the stream's own dtype; returns "" or the error text.
/// Only ebac::error is acceptable; anything else fails the test.
inline std::string try_decompress(const std::byte* p, std::size_t n, ebac::dtype t, int threads = 1) {
  try {
    ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) { (void)ebac::host::decompress<T>(p, n, threads); });
    return "";
  } catch (const ebac::error& e) {
    std::string w = e.what();
    return w.empty() ? "(empty message)" : w;
  } catch (const std::exception& e) {
    FAIL_CHECK("decompress threw a non-ebac exception: ", e.what());
    return "other";
  }
}

inline std::unique_ptr<std::byte[]> exact_copy(const std::vector<std::byte>& v, std::size_t n) {
  std::unique_ptr<std::byte[]> b(new std::byte[n ? n : 1]);
  if (n) std::memcpy(b.get(), v.data(), n);
  return b;
}

inline ebac::status header_status(const std::vector<std::byte>& s, const char** what = nullptr) {
  auto c = exact_copy(s, s.size());
  ebac::stream_header h;
  return ebac::read_stream_header(c.get(), s.size(), h, what);
}

}  // namespace
