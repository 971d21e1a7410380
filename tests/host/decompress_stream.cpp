// tests/host/decompress_stream.cpp - the tests of include/ebac/host/decompress_stream.hpp.
//
// host::decompress_stream (host/decompress_stream.hpp): a stream read in
// pieces of any size and decoded window by window gives host::decompress's
// elements and its verdicts (truncated, checksum, trailing bytes left
// unread, over the output cap before the body is read), whatever the
// window, the thread count, the predictor, the encoder and the outliers; and
// the incremental checksum equals the one-shot one.
#include "test_support.hpp"

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using ebac::status;

/// A reader over bytes that gives pieces of 1..max_piece bytes (random) and
/// counts what it gave.
struct piece_reader {
  const std::vector<std::byte>* bytes;
  std::size_t max_piece;
  std::mt19937 rng{53};
  std::size_t pos = 0;
  std::size_t operator()(std::byte* dst, std::size_t n) {
    const std::size_t left = bytes->size() - pos;
    std::size_t k = std::min({n, left, std::uniform_int_distribution<std::size_t>(1, max_piece)(rng)});
    if (k) std::memcpy(dst, bytes->data() + pos, k);  // an empty stream's data() may be null
    pos += k;
    return k;
  }
};

/// The n elements decompress_stream_to writes: each where it says, the
/// windows in order and covering [0, n), then outlier runs anywhere.
template <class T>
std::vector<ebac::storage_t<T>> stream_decode(const std::vector<std::byte>& s, std::uint64_t n, std::size_t piece,
                                              std::uint64_t window, int threads, std::size_t* consumed = nullptr) {
  using S = ebac::storage_t<T>;
  std::vector<S> out(n);
  std::vector<std::uint8_t> seen(n, 0);
  std::uint64_t next = 0;  // windows come in order and cover [0, n) once
  bool outliers = false;
  piece_reader r{&s, piece};
  ebac::host::stream_decode_options o;
  o.threads = threads;
  o.window_bytes = window;
  if (window == 1) o.scratch_bytes = 1;  // the least: Lorenzo windows of two slabs, batches of one chunk
  ebac::host::decompress_stream_to<T>(
      r,
      [&](std::uint64_t first, const S* p, std::size_t count) {
        REQUIRE(first + count <= n);
        if (!outliers && first != next) outliers = true;  // past the windows: outlier runs
        if (!outliers) next += count;
        for (std::size_t i = 0; i < count; ++i) {
          out[first + i] = p[i];
          seen[first + i] = 1;
        }
      },
      o);
  CHECK(std::count(seen.begin(), seen.end(), 0) == 0);
  if (consumed) *consumed = r.pos;
  return out;
}

template <class T, class Pipe>
std::vector<std::byte> make_stream(const std::vector<T>& x, const ebac::extents& e, Pipe pipe, std::uint32_t chunk, double eb) {
  pipe.chunk_elements = chunk;
  ebac::compress_options opt;
  opt.bound = ebac::error_bound{eb, ebac::bound_mode::absolute};
  return ebac::host::compress(x.data(), e, pipe, opt);
}

template <class T>
void check_equal(const std::vector<std::byte>& s, const char* what) {
  CAPTURE(what);
  const auto want = ebac::host::decompress<T>(s.data(), s.size(), 1);
  for (std::uint64_t window : {std::uint64_t{1}, std::uint64_t{3000}, std::uint64_t{1} << 30})
    for (std::size_t piece : {std::size_t{1} << 20, std::size_t{7}})
      for (int threads : {1, 3}) {
        CAPTURE(window);
        CAPTURE(piece);
        CAPTURE(threads);
        std::size_t consumed = 0;
        const auto got = stream_decode<T>(s, want.size(), piece, window, threads, &consumed);
        REQUIRE(got.size() == want.size());
        CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(got[0])) == 0);
        CHECK(consumed == s.size());
      }
}

std::vector<float> wave(std::uint64_t n, bool specials) {
  std::vector<float> x(n);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  for (std::uint64_t i = 0; i < n; ++i) x[i] = std::sin(0.05f * static_cast<float>(i % 1320)) + noise(rng);
  if (specials)  // outliers: non-finite values, single and in runs
    for (std::uint64_t i : {std::uint64_t{3}, std::uint64_t{4}, std::uint64_t{5}, std::uint64_t{977}, n - 1})
      x[i] = i % 2 ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  return x;
}

}  // namespace

TEST_CASE("decompress_stream: checksum64_stream over any pieces equals checksum64") {
  std::mt19937 rng(5);
  std::vector<std::byte> b(300);
  for (auto& v : b) v = static_cast<std::byte>(rng());
  for (std::size_t n : {0, 1, 31, 32, 33, 64, 95, 300}) {
    for (int trial = 0; trial < 20; ++trial) {
      ebac::detail::checksum64_stream s(n);
      std::size_t i = 0;
      while (i < n) {
        const std::size_t k = std::min<std::size_t>(n - i, std::uniform_int_distribution<std::size_t>(0, 40)(rng));
        s.update(b.data() + i, k);
        i += k;
      }
      CHECK(s.finish() == ebac::detail::checksum64(b.data(), n));
    }
  }
}

TEST_CASE("decompress_stream: the same elements as host::decompress, window by window, from pieces") {
  using namespace ebac;
  const extents e{8, 40, 33};
  const std::uint64_t n = 8 * 40 * 33;
  const auto x = wave(n, true);
  using RL = pipeline<lorenzo, sign_preserving_quantizer, run_length>;
  using HL = pipeline<lorenzo, linear_quantizer, huffman>;
  using AN = pipeline<no_prediction, sign_preserving_quantizer, context_ans>;
  using BN = pipeline<no_prediction, linear_quantizer, block_bitpack>;
  // Lorenzo blocks larger than a chunk (chunks depend on each other), and within one.
  check_equal<float>(make_stream(x, e, RL{lorenzo::along_last(2, 3, 16)}, 32, 1e-3), "lorenzo run-length, dependent chunks");
  check_equal<float>(make_stream(x, e, HL{lorenzo::along_last(1, 3, 32)}, 1024, 1e-3), "lorenzo huffman");
  check_equal<float>(make_stream(x, e, AN{}, 256, 1e-3), "context ANS (groups of eight chunks)");
  check_equal<float>(make_stream(x, e, BN{}, 4096, 1e-3), "bit-packing");
  const auto s = make_stream(x, e, BN{}, 4096, 1e-3);
  REQUIRE(host::inspect(s.data(), s.size()).outlier_count == 5);
  // A stored stream (noise at a tight bound), and a lossless integer one.
  std::vector<float> noise(5000);
  std::mt19937 rng(1);
  for (auto& v : noise) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  const auto stored = make_stream(noise, extents{5000}, BN{}, 1024, 1e-9);
  REQUIRE(host::inspect(stored.data(), stored.size()).is_stored());
  check_equal<float>(stored, "stored");
  std::vector<std::uint8_t> bytes(n);
  for (std::uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(i * i % 251);
  compress_options opt;
  check_equal<std::uint8_t>(host::compress(bytes.data(), e, pipeline<lorenzo, sign_preserving_quantizer, huffman>{}, opt), "u8");
}

TEST_CASE("decompress_stream: verdicts as host::decompress's, the reader never read past the stream") {
  using namespace ebac;
  const auto x = wave(8 * 40 * 33, true);
  using BN = pipeline<no_prediction, linear_quantizer, block_bitpack>;
  const auto s = make_stream(x, extents{8, 40, 33}, BN{}, 1024, 1e-3);
  auto verdict = [](auto&& f) {
    try {
      f();
    } catch (const ebac::error& e) { return e.code(); }
    return status::ok;
  };
  auto streamed = [&](const std::vector<std::byte>& b) {
    return verdict([&] { (void)stream_decode<float>(b, x.size(), 1000, 4096, 2); });
  };
  auto whole = [&](const std::vector<std::byte>& b) {
    return verdict([&] { (void)host::decompress<float>(b.data(), b.size(), 1); });
  };
  // Truncated anywhere: the header, the table, the payload, the outliers, the checksum.
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{5}, std::size_t{100}, std::size_t{200}, s.size() / 2, s.size() - 30, s.size() - 1}) {
    CAPTURE(cut);
    const std::vector<std::byte> t(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK(streamed(t) == whole(t));
    CHECK(streamed(t) != status::ok);
  }
  // A flipped byte in the chunk table, the payload and the outliers: the checksum says so, first.
  const stream_header h = host::inspect(s.data(), s.size());
  for (std::uint64_t at : {h.section_offset(section_chunk_table) + 1, h.section_offset(section_payload) + 10,
                           h.section_offset(section_outlier_index), h.section_offset(section_outlier_value) + 2}) {
    CAPTURE(at);
    auto c = s;
    c[at] ^= std::byte{0x5a};
    CHECK(whole(c) == status::checksum_mismatch);
    CHECK(streamed(c) == status::checksum_mismatch);
  }
  // Trailing bytes: left unread for the caller.
  auto longer = s;
  longer.resize(s.size() + 100, std::byte{7});
  std::size_t consumed = 0;
  const auto got = stream_decode<float>(longer, x.size(), 999, 4096, 1, &consumed);
  const auto want = host::decompress<float>(s.data(), s.size(), 1);
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);  // NaNs among them: their bits
  CHECK(consumed == s.size());
  // Over the output cap, and of another dtype: refused from the header, before the body.
  piece_reader r{&s, 1 << 20};
  host::stream_decode_options o;
  o.max_output_bytes = 1000;
  auto ignore = [](std::uint64_t, const float*, std::size_t) { FAIL("nothing is written past the cap"); };
  CHECK(verdict([&] { host::decompress_stream_to<float>(r, ignore, o); }) == status::buffer_too_small);
  CHECK(r.pos <= max_stream_prefix_bytes);
  piece_reader r2{&s, 1 << 20};
  CHECK(verdict([&] { host::decompress_stream_to<std::int32_t>(r2, [](std::uint64_t, const std::int32_t*, std::size_t) {}); }) ==
        status::invalid_argument);
}

TEST_CASE("decompress_stream: least_lorenzo_scratch, two slabs and a chunk where Lorenzo chunks depend on each other") {
  using namespace ebac;
  auto header = [](const lorenzo& l, std::uint32_t chunk) {
    stream_header h;
    h.type = dtype::u8;
    h.shape = extents{4, 50, 60};  // 12000 elements
    h.predictor = predictor_id::lorenzo;
    h.lorenzo_params = l;
    h.chunk_elements = chunk;
    return h;
  };
  // Along the last two axes, blocks of 3000 (a plane) in chunks of 1024: the slab is a row of 60.
  CHECK(host::least_lorenzo_scratch(header(lorenzo::along_last(2, 3, 64), 1024)) == 8 * 60 + 4 * 1024);
  // Along all three: the slab is a plane of 3000.
  CHECK(host::least_lorenzo_scratch(header(lorenzo::along_last(3, 3, 64), 1024)) == 8 * 3000 + 4 * 1024);
  // A chunk larger than the tensor: one chunk, its codes counted as the tensor's.
  CHECK(host::least_lorenzo_scratch(header(lorenzo::along_last(3, 3, 64), 1 << 20)) == 0);
  // Chunks of whole blocks (a row of 60 along the last axis, chunks of 960), no predictor, stored: none.
  CHECK(host::least_lorenzo_scratch(header(lorenzo::along_last(1, 3, 64), 960)) == 0);
  stream_header none = header(lorenzo::along_last(3, 3, 64), 1024);
  none.predictor = predictor_id::none;
  CHECK(host::least_lorenzo_scratch(none) == 0);
  stream_header stored = header(lorenzo::along_last(3, 3, 64), 1024);
  stored.flags = stream_flag_stored;
  CHECK(host::least_lorenzo_scratch(stored) == 0);
}
