// host::decompress_stream (host/decompress_stream.hpp), its outlier index:
// a section no larger than a bitmap of the elements is held, a larger one
// (many outliers, or varints padded with continuation bytes, as a forged
// stream may have them: nearly the size of the output) is decoded in order
// into that bitmap (host/stream_outliers.hpp). Both give host::decompress's
// elements and verdicts.
#include "test_support.hpp"

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using ebac::status;

/// A stream of n floats with an outlier (a NaN) every `every` elements,
/// bit-packed after no prediction, with a checksum.
std::vector<std::byte> outlier_stream(std::uint64_t n, std::uint64_t every) {
  std::vector<float> x(n);
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (std::uint64_t i = 0; i < n; ++i) x[i] = i % every == every - 1 ? std::numeric_limits<float>::quiet_NaN() : noise(rng);
  ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::block_bitpack> pipe;
  pipe.chunk_elements = 1024;
  ebac::compress_options opt;
  opt.bound = ebac::error_bound{1e-3, ebac::bound_mode::absolute};
  return ebac::host::compress(x.data(), ebac::extents{n}, pipe, opt);
}

/// The varints of an index section, each written with `pad` bytes more than
/// it needs (continuation bytes carrying zeros: the same value), up to 10.
std::vector<std::uint64_t> varints(const std::byte* p, std::uint64_t bytes) {
  std::vector<std::uint64_t> v;
  const std::byte* end = p + bytes;
  std::uint64_t x = 0;
  while (p < end) {
    REQUIRE(ebac::detail::get_varint(p, end, x));
    v.push_back(x);
  }
  return v;
}
void put_padded(std::vector<std::byte>& out, std::uint64_t v, int pad) {
  std::byte tmp[10];
  std::size_t k = ebac::detail::put_varint(tmp, v);
  for (int i = 0; i < pad && k < 10; ++i) {
    tmp[k - 1] |= std::byte{0x80};
    tmp[k++] = std::byte{0};
  }
  out.insert(out.end(), tmp, tmp + k);
}

/// The stream with its index section replaced by `index` (sizes and the
/// checksum rewritten).
std::vector<std::byte> with_index(const std::vector<std::byte>& s, const std::vector<std::byte>& index) {
  const ebac::stream_header h = ebac::host::inspect(s.data(), s.size());
  const std::uint64_t at = h.section_offset(ebac::section_outlier_index), old = h.section_bytes[ebac::section_outlier_index];
  std::vector<std::byte> t(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(at));
  t.insert(t.end(), index.begin(), index.end());
  t.insert(t.end(), s.begin() + static_cast<std::ptrdiff_t>(at + old), s.end());
  ebac::detail::store_le<std::uint64_t>(t.data() + 64 + 8 * ebac::section_outlier_index, index.size());
  REQUIRE(h.has_checksum());
  ebac::detail::store_le<std::uint64_t>(t.data() + t.size() - 8, ebac::detail::checksum64(t.data(), t.size() - 8));
  return t;
}

/// Decoded through decompress_stream in pieces of 5 bytes and windows of
/// 4 KiB (the elements, or the verdict).
status streamed(const std::vector<std::byte>& s, std::vector<float>& out) {
  const ebac::stream_header h = ebac::host::inspect(s.data(), s.size());
  out.assign(static_cast<std::size_t>(ebac::element_count(h)), 0.0f);
  ebac::host::memory_sink<float> sink{out.data()};
  std::size_t at = 0;
  ebac::host::stream_decode_options o;
  o.threads = 2;
  o.window_bytes = 4096;
  try {
    ebac::host::decompress_stream<float>(
        [&](std::byte* p, std::size_t k) {
          k = std::min<std::size_t>({k, s.size() - at, 5});
          if (k) std::memcpy(p, s.data() + at, k);
          at += k;
          return k;
        },
        sink, o);
  } catch (const ebac::error& e) { return e.code(); }
  return status::ok;
}

status whole(const std::vector<std::byte>& s, std::vector<float>& out) {
  try {
    out = ebac::host::decompress<float>(s.data(), s.size(), 1);
  } catch (const ebac::error& e) { return e.code(); }
  return status::ok;
}

/// Both decoders: the same verdict, and where they decode the same bits.
status same_verdict(const std::vector<std::byte>& s) {
  std::vector<float> a, b;
  const status sa = whole(s, a), sb = streamed(s, b);
  CHECK(sa == sb);
  if (sa == status::ok && sb == status::ok) {
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
  return sa;
}

}  // namespace

TEST_CASE("decompress_stream: an outlier index held or decoded into a bitmap, host::decompress's elements and verdicts") {
  const std::uint64_t n = 20000;
  for (std::uint64_t every : {std::uint64_t{4000}, std::uint64_t{7}, std::uint64_t{3}}) {
    CAPTURE(every);
    const auto s = outlier_stream(n, every);
    const ebac::stream_header h = ebac::host::inspect(s.data(), s.size());
    REQUIRE(h.outlier_count == n / every);
    const std::uint64_t at = h.section_offset(ebac::section_outlier_index);
    const auto v = varints(s.data() + at, h.section_bytes[ebac::section_outlier_index]);
    REQUIRE(v.size() == h.outlier_count);
    // every 4000: 5 bytes of index, held; every 7 and every element: more than n / 8 bytes, the bitmap.
    CHECK((h.section_bytes[ebac::section_outlier_index] > n / 8) == (every < 4000));
    CHECK(same_verdict(s) == status::ok);
    for (int pad : {1, 9}) {  // the same indices, padded: up to 10 bytes a varint (the bitmap)
      CAPTURE(pad);
      std::vector<std::byte> index;
      for (std::uint64_t g : v) put_padded(index, g, pad);
      CHECK(same_verdict(with_index(s, index)) == status::ok);
      std::vector<float> a, b;
      REQUIRE(whole(s, a) == status::ok);
      REQUIRE(streamed(with_index(s, index), b) == status::ok);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
    // Damaged: a varint of 11 bytes, one varint too many or too few, a gap past n, a last
    // varint cut short; each refused by both, as corrupt.
    std::vector<std::byte> eleven;
    put_padded(eleven, v[0], 9);
    eleven[9] |= std::byte{0x80};
    eleven.push_back(std::byte{0});
    for (std::size_t j = 1; j < v.size(); ++j) put_padded(eleven, v[j], 0);
    std::vector<std::byte> more, fewer, past, cut;
    for (std::uint64_t g : v) put_padded(more, g, 0);
    put_padded(more, 0, 0);
    for (std::size_t j = 0; j + 1 < v.size(); ++j) put_padded(fewer, v[j], 0);
    for (std::size_t j = 0; j < v.size(); ++j) put_padded(past, j + 1 == v.size() ? v[j] + n : v[j], 0);
    for (std::uint64_t g : v) put_padded(cut, g, 2);
    cut.back() = std::byte{0x80};
    for (const auto* bad : {&eleven, &more, &fewer, &past, &cut}) {
      CAPTURE(bad - &eleven);
      CHECK(same_verdict(with_index(s, *bad)) == status::corrupt_stream);
    }
  }
}
