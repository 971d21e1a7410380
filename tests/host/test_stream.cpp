// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#include "test_support.hpp"

#include <ebac/format/outlier_index.hpp>

#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>
#endif
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace ebac_test;

namespace {

constexpr float qnan = std::numeric_limits<float>::quiet_NaN();
constexpr float finf = std::numeric_limits<float>::infinity();

/// A small tensor with smooth values, zeros, NaN/Inf and huge values, so that
/// every section of the stream (codebook, chunks, outliers) is non-empty.
std::vector<float> mixed_tensor(std::size_t n, std::uint64_t seed) {
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

std::vector<stream_case> small_streams(bool checksum) {
  std::vector<stream_case> v;
  v.push_back(make_case<float>("fast", {300}, checksum));
  v.push_back(make_case<float>("ratio", {2, 3, 7, 9}, checksum));
  v.push_back(make_case<ebac::float16>("rle", {5, 61}, checksum));
  v.push_back(make_case<ebac::bfloat16>("plain", {257}, checksum));
  v.push_back(make_case<float>("lorenzo2:linear:huffman", {3, 10, 11}, checksum, 64));
  v.push_back(make_case<ebac::float16>("lorenzo1:sign:bitpack", {4, 70}, checksum, 32));
  v.push_back(make_case<float>("none:linear:rle", {200}, checksum, 96));
  v.push_back(make_case<float>("fast", {0}, checksum));
  v.push_back(make_case<float>("ratio", {3, 0, 5}, checksum));
  v.push_back(make_case<ebac::bfloat16>("ratio-flat", {1}, checksum));
  return v;
}

/// Decompresses into the stream's own dtype; returns "" or the error text.
/// Only ebac::error is acceptable; anything else fails the test.
std::string try_decompress(const std::byte* p, std::size_t n, ebac::dtype t, int threads = 1) {
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

std::unique_ptr<std::byte[]> exact_copy(const std::vector<std::byte>& v, std::size_t n) {
  std::unique_ptr<std::byte[]> b(new std::byte[n ? n : 1]);
  if (n) std::memcpy(b.get(), v.data(), n);
  return b;
}

ebac::status header_status(const std::vector<std::byte>& s, const char** what = nullptr) {
  auto c = exact_copy(s, s.size());
  ebac::stream_header h;
  return ebac::read_stream_header(c.get(), s.size(), h, what);
}

#if defined(__unix__)
/// The zero-element streams of the "no hang" test: extents {2^40, 2^20, 0}
/// with 2-D Lorenzo over axes 0 and 1 (no checksum / a recomputed one).
std::vector<std::byte> zero_element_stream(bool checksum) {
  using P = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  const P p{ebac::lorenzo::along({0, 1}, 1)};
  ebac::compress_options o;
  o.bound = {1e-3, ebac::bound_mode::absolute};
  o.threads = 1;
  o.checksum = false;
  auto s = ebac::host::compress(static_cast<const float*>(nullptr), ebac::extents{1, 1, 0}, p, o);
  // The same stream claiming extents {2^40, 2^20, 0}: still 0 elements, still valid.
  ebac::detail::store_le<std::uint64_t>(s.data() + 112, std::uint64_t{1} << 40);
  ebac::detail::store_le<std::uint64_t>(s.data() + 120, std::uint64_t{1} << 20);
  if (checksum) {  // checksums are not signatures: anyone can recompute one
    s[10] = std::byte{1};
    s.resize(s.size() + 8);
    ebac::detail::store_le<std::uint64_t>(s.data() + s.size() - 8, ebac::detail::checksum64(s.data(), s.size() - 8));
  }
  return s;
}

/// The probe itself, run in a fresh process (see below): decompress or
/// compress a zero-element tensor with huge extents, serially and with two
/// OpenMP threads. Exit status 0: finished (or threw ebac::error).
int zero_element_probe(const std::string& which) {
  for (int threads : {1, 2}) {
    try {
      if (which == "compress") {
        using P = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
        ebac::compress_options o;
        o.bound = {1e-3, ebac::bound_mode::absolute};
        o.threads = threads;
        (void)ebac::host::compress(static_cast<const float*>(nullptr), ebac::extents{1ull << 40, 1ull << 20, 0},
                                   P{ebac::lorenzo::along({0, 1}, 1)}, o);
      } else {
        const auto s = zero_element_stream(which == "decompress-checksum");
        (void)ebac::host::decompress<float>(s.data(), s.size(), threads);
      }
    } catch (const ebac::error&) {
    } catch (...) { return 3; }
  }
  return 0;
}

/// When the test binary is started with EBAC_TEST_ZERO_ELEMENT_PROBE set, it
/// runs that probe before doctest starts and exits with its status.
const struct zero_element_probe_hook {
  zero_element_probe_hook() {
    if (const char* w = std::getenv("EBAC_TEST_ZERO_ELEMENT_PROBE")) std::_Exit(zero_element_probe(w));
  }
} zero_element_probe_hook_instance;

/// Runs a probe in a fresh copy of this test binary (fork + exec, so OpenMP
/// starts clean in it) and waits at most `seconds`. Returns "" when it
/// finished in time, else what happened; the child is killed on timeout, so
/// a hang fails the test instead of hanging the suite.
std::string run_probe_with_deadline(const std::string& which, int seconds) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    setenv("EBAC_TEST_ZERO_ELEMENT_PROBE", which.c_str(), 1);
    execl("/proc/self/exe", "ebac_tests", static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  for (int i = 0; i < seconds * 20; ++i) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
      if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return "could not re-execute the test binary";
      if (WIFEXITED(st)) return "threw a non-ebac exception";
      return "died with signal " + std::to_string(WTERMSIG(st));
    }
    usleep(50000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return "did not finish within " + std::to_string(seconds) + " s (hang)";
}
#endif

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("stream: header layout") {
    const auto c = make_case<ebac::float16>("ratio", {2, 3, 7, 9}, true);
    const auto& s = c.bytes;
    REQUIRE(s.size() > 144);
    CHECK(std::string(reinterpret_cast<const char*>(s.data()), 4) == "EBAC");
    CHECK(ebac::detail::load_le<std::uint16_t>(s.data() + 4) == EBAC_FORMAT_VERSION);
    CHECK(ebac::detail::load_le<std::uint16_t>(s.data() + 6) == 112 + 8 * 4);
    CHECK(s[8] == std::byte{2});   // f16
    CHECK(s[9] == std::byte{1});   // absolute
    CHECK(s[10] == std::byte{1});  // checksum flag
    CHECK(s[11] == std::byte{4});  // rank
    CHECK(s[12] == std::byte{2});  // lorenzo
    CHECK(s[13] == std::byte{2});  // 2-D
    CHECK(s[14] == std::byte{2});  // sign-preserving
    CHECK(s[15] == std::byte{3});  // huffman
    CHECK(s[16] == std::byte{2});
    CHECK(s[17] == std::byte{3});
    CHECK(ebac::detail::bits_double(ebac::detail::load_le<std::uint64_t>(s.data() + 32)) == 1e-2);
    CHECK(ebac::detail::load_le<std::uint32_t>(s.data() + 48) == ebac::default_chunk_elements);
    CHECK(ebac::detail::load_le<std::uint64_t>(s.data() + 56) >= 4);  // NaN, sNaN, -Inf, 3e30 (inf in f16)
    for (int i = 0; i < 4; ++i) CHECK(ebac::detail::load_le<std::uint64_t>(s.data() + 112 + 8 * i) == c.shape.dims[i]);
    CHECK(ebac::detail::load_le<std::uint64_t>(s.data() + 64) == 0);  // no stage parameters for these stages
    const auto h = ebac::host::inspect(s.data(), s.size());
    std::uint64_t total = h.header_bytes() + 8;
    for (auto b : h.section_bytes) total += b;
    CHECK(total == s.size());
    CHECK(h.section_bytes[ebac::section_outlier_value] == h.outlier_count * 2);
    CHECK(ebac::detail::load_le<std::uint64_t>(s.data() + s.size() - 8) == ebac::detail::checksum64(s.data(), s.size() - 8));
  }

  TEST_CASE("stream: every truncation of a valid stream is rejected") {
    for (bool checksum : {true, false}) {
      for (const auto& c : small_streams(checksum)) {
        INFO("pipeline ", c.pipeline, " shape ", shape_str(c.shape), " checksum ", checksum, " size ", c.bytes.size());
        REQUIRE(header_status(c.bytes) == ebac::status::ok);
        REQUIRE(try_decompress(c.bytes.data(), c.bytes.size(), c.type).empty());
        std::size_t accepted = 0, first = 0;
        for (std::size_t l = 0; l < c.bytes.size(); ++l) {
          auto t = exact_copy(c.bytes, l);
          ebac::stream_header h;
          const char* what = nullptr;
          const ebac::status st = ebac::read_stream_header(t.get(), l, h, &what);
          const std::string err = try_decompress(t.get(), l, c.type);
          if ((st == ebac::status::ok || err.empty() || what == nullptr) && accepted++ == 0) first = l;
        }
        CHECK_MESSAGE(accepted == 0, accepted, " truncations accepted, first at length ", first);
      }
    }
  }

  TEST_CASE("stream: every single-byte mutation of a checksummed stream is rejected") {
    for (const auto& c : small_streams(true)) {
      INFO("pipeline ", c.pipeline, " shape ", shape_str(c.shape), " size ", c.bytes.size());
      std::size_t accepted = 0, first = 0;
      for (std::size_t pos = 0; pos < c.bytes.size(); ++pos) {
        for (std::uint8_t x : {0x01, 0x04, 0x80, 0xff}) {
          auto m = c.bytes;
          m[pos] ^= static_cast<std::byte>(x);
          auto t = exact_copy(m, m.size());
          ebac::stream_header h;
          const ebac::status st = ebac::read_stream_header(t.get(), m.size(), h);
          const std::string err = try_decompress(t.get(), m.size(), c.type);
          if ((st == ebac::status::ok || err.empty()) && accepted++ == 0) first = pos;
        }
      }
      CHECK_MESSAGE(accepted == 0, accepted, " mutations accepted, first at byte ", first);
    }
    // A flipped payload byte is reported as a checksum mismatch.
    auto c = make_case<float>("fast", {300}, true);
    const auto h = ebac::host::inspect(c.bytes.data(), c.bytes.size());
    c.bytes[h.section_offset(ebac::section_payload) + 3] ^= std::byte{0x10};
    CHECK(header_status(c.bytes) == ebac::status::checksum_mismatch);
    try {
      (void)ebac::host::decompress<float>(c.bytes.data(), c.bytes.size());
      FAIL_CHECK("corrupted stream decoded");
    } catch (const ebac::error& e) {
      CHECK(e.code() == ebac::status::checksum_mismatch);
      CHECK(std::string(e.what()).find("checksum") != std::string::npos);
    }
  }

  namespace {

  /// The decoded elements' bytes, or the error text (as try_decompress).
  std::string try_decompress_bytes(const std::byte* p, std::size_t n, ebac::dtype t, int threads,
                                   std::vector<unsigned char>& out) {
    out.clear();
    std::string err;
    ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) {
      try {
        const auto v = ebac::host::decompress<T>(p, n, threads);  // bool: bytes
        out.resize(v.size() * sizeof(v[0]));
        if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
      } catch (const ebac::error& e) {
        err = e.what();
        if (err.empty()) err = "(empty message)";
      } catch (const std::exception& e) {
        FAIL_CHECK("decompress threw a non-ebac exception: ", e.what());
        err = "other";
      }
    });
    return err;
  }

  /// Header bytes a reader must check whatever the rest says (docs/format.md,
  /// "What a decoder rejects"): magic, version, header size, dtype (decoded
  /// here as the stream's own type, so a changed dtype is a wrong one), flags,
  /// rank, the reserved byte, and the six section sizes (which must add up to
  /// the stream's size). A checksum-less stream changed in any of them is refused.
  bool structural_header_byte(std::size_t pos) {
    return pos <= 8 || pos == 10 || pos == 11 || pos == 19 || (pos >= 64 && pos < 112);
  }

  }  // namespace

  TEST_CASE(
      "stream: mutations of checksum-less streams are rejected (always, in the structural header fields) or decode alike on 1 "
      "and 3 threads") {
    // Without a checksum a changed payload may decode to other values: what
    // must hold is that every mutation either throws ebac::error (anything
    // else fails try_decompress_bytes) or decodes to bits that do not depend
    // on the thread count, and that a change to a field the reader validates
    // is refused.
    std::mt19937_64 rng(31);
    std::size_t decoded = 0, rejected = 0;
    auto attempt = [&](const std::vector<std::byte>& m, ebac::dtype type, int threads, bool must_reject) {
      auto t = exact_copy(m, m.size());
      std::vector<unsigned char> y, y3;
      const std::string err = try_decompress_bytes(t.get(), m.size(), type, threads, y);
      const std::string err3 = try_decompress_bytes(t.get(), m.size(), type, 3, y3);
      CHECK_MESSAGE(err.empty() == err3.empty(), threads, " thread(s): ", err.empty() ? "decoded" : err,
                    "; 3 threads: ", err3.empty() ? "decoded" : err3);
      if (err.empty() && err3.empty()) CHECK_MESSAGE(y3 == y, "decodes differently on 3 threads");
      if (!err.empty()) {
        ++rejected;
        return;
      }
      ++decoded;
      CHECK_FALSE_MESSAGE(must_reject, "a checksum-less stream with a changed structural header byte decoded");
    };
    for (const auto& c : small_streams(false)) {
      INFO("pipeline ", c.pipeline, " shape ", shape_str(c.shape), " size ", c.bytes.size());
      for (std::size_t pos = 0; pos < c.bytes.size(); ++pos) {
        CAPTURE(pos);
        for (int k = 0; k < 4; ++k) {
          auto m = c.bytes;
          const std::uint8_t x = k == 0 ? 0x01 : k == 1 ? 0x80 : k == 2 ? 0xff : static_cast<std::uint8_t>(1 + rng() % 255);
          m[pos] ^= static_cast<std::byte>(x);
          // Two threads only now and then: on a shared machine OpenMP's
          // busy-waiting makes thousands of tiny parallel calls slow.
          attempt(m, c.type, (pos + k) % 16 == 0 ? 2 : 1, structural_header_byte(pos));
        }
      }
    }
    // Multi-byte mutations in the header and the sections.
    for (const auto& c : small_streams(false)) {
      INFO("pipeline ", c.pipeline, " shape ", shape_str(c.shape), " size ", c.bytes.size());
      for (int k = 0; k < 300; ++k) {
        auto m = c.bytes;
        const int flips = 2 + static_cast<int>(rng() % 6);
        for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<std::byte>(rng());
        // Several section sizes changed together can add up again: only a
        // single changed size, or another structural field, must be refused.
        std::size_t sizes_changed = 0;
        for (std::size_t pos = 64; pos < 112; pos += 8)
          sizes_changed += std::memcmp(m.data() + pos, c.bytes.data() + pos, 8) != 0;
        bool other = false;
        for (std::size_t pos = 0; pos < 64; ++pos) other |= structural_header_byte(pos) && m[pos] != c.bytes[pos];
        attempt(m, c.type, 1, other || sizes_changed == 1);
      }
    }
    MESSAGE("checksum-less mutations: ", decoded, " decoded, ", rejected, " rejected with ebac::error");
  }

  TEST_CASE("stream: inputs that are not ebac streams are rejected") {
    std::vector<std::vector<std::byte>> bad;
    bad.push_back({});
    bad.push_back(std::vector<std::byte>(3, std::byte{'E'}));
    std::vector<std::byte> text(200);
    const char* msg = "this is certainly not an ebac stream, just some text bytes ...";
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<std::byte>(msg[i % std::strlen(msg)]);
    bad.push_back(text);
    std::mt19937_64 rng(32);
    for (int k = 0; k < 200; ++k) {
      std::vector<std::byte> r(rng() % 400);
      for (auto& b : r) b = static_cast<std::byte>(rng());
      if (k % 2 && r.size() >= 6) {  // a valid magic and version, random rest
        r[0] = std::byte{'E'};
        r[1] = std::byte{'B'};
        r[2] = std::byte{'A'};
        r[3] = std::byte{'C'};
        ebac::detail::store_le<std::uint16_t>(r.data() + 4, EBAC_FORMAT_VERSION);
      }
      bad.push_back(r);
    }
    for (const auto& b : bad) {
      auto t = exact_copy(b, b.size());
      ebac::stream_header h;
      CHECK(ebac::read_stream_header(t.get(), b.size(), h) != ebac::status::ok);
      for (auto type : {ebac::dtype::f32, ebac::dtype::f16, ebac::dtype::bf16})
        CHECK_FALSE(try_decompress(t.get(), b.size(), type).empty());
    }
    auto c = make_case<float>("fast", {300}, true);
    auto v = c.bytes;
    v[4] = std::byte{99};  // future format version
    CHECK(header_status(v) == ebac::status::unsupported);
    v = c.bytes;
    v.push_back(std::byte{0});  // trailing byte
    CHECK(header_status(v) != ebac::status::ok);
    CHECK_FALSE(try_decompress(v.data(), v.size(), ebac::dtype::f32).empty());
  }

  TEST_CASE("stream: the header parser validates every field before using it") {
    const auto base = make_case<float>("ratio", {4, 10, 12}, false).bytes;  // no checksum: structure alone
    REQUIRE(header_status(base) == ebac::status::ok);
    struct edit {
      const char* name;
      std::function<void(std::vector<std::byte>&)> f;
    };
    using ebac::detail::store_le;
    auto u8 = [](std::size_t off, std::uint8_t v) {
      return [=](std::vector<std::byte>& s) { s[off] = static_cast<std::byte>(v); };
    };
    auto u32 = [](std::size_t off, std::uint32_t v) {
      return [=](std::vector<std::byte>& s) { store_le<std::uint32_t>(s.data() + off, v); };
    };
    auto u64 = [](std::size_t off, std::uint64_t v) {
      return [=](std::vector<std::byte>& s) { store_le<std::uint64_t>(s.data() + off, v); };
    };
    auto f64 = [](std::size_t off, double v) {
      return [=](std::vector<std::byte>& s) { store_le<std::uint64_t>(s.data() + off, ebac::detail::double_bits(v)); };
    };
    const std::vector<edit> edits = {
        {"magic", u8(0, 'X')},
        {"header bytes", [](std::vector<std::byte>& s) { store_le<std::uint16_t>(s.data() + 6, 100); }},
        {"dtype 0", u8(8, 0)},
        {"dtype 4 (bool) with a bound mode", u8(8, 4)},
        {"dtype 10", u8(8, 10)},
        {"mode 0", u8(9, 0)},
        {"mode 3", u8(9, 3)},
        {"flag bits", u8(10, 4)},
        {"stored flag on a coded stream", u8(10, 2)},
        {"checksum flag without checksum", u8(10, 1)},
        {"rank 0", u8(11, 0)},
        {"rank 9", u8(11, 9)},
        {"rank 2 (header size mismatch)", u8(11, 2)},
        {"predictor id 0", u8(12, 0)},
        {"predictor id 3", u8(12, 3)},
        {"lorenzo dims 0", u8(13, 0)},
        {"lorenzo dims 4", u8(13, 4)},
        {"lorenzo axis >= rank", u8(17, 3)},
        {"lorenzo axes not increasing", u8(16, 2)},
        {"lorenzo tile 0", u32(20, 0)},
        {"quantizer id 0", u8(14, 0)},
        {"quantizer id 3 (exact: integers only)", u8(14, 3)},
        {"quantizer id 5 (pool windows: integers only)", u8(14, 5)},
        {"quantizer id 6", u8(14, 6)},
        {"quantizer id 4 (levels) without a palette", u8(14, 4)},
        {"encoder id 0", u8(15, 0)},
        {"encoder id 6 (the first id no encoder has)", u8(15, 6)},
        {"encoder id 200 (a program's own, not in this build)", u8(15, 200)},
        {"encoder bitpack with a codebook", u8(15, 1)},
        {"requested bound 0", f64(32, 0.0)},
        {"requested bound NaN", f64(32, std::nan(""))},
        {"requested bound -1", f64(32, -1.0)},
        {"requested bound inf", f64(32, INFINITY)},
        {"absolute bound NaN", f64(40, std::nan(""))},
        {"absolute bound -1e-3", f64(40, -1e-3)},
        {"absolute bound inf", f64(40, INFINITY)},
        {"chunk 0", u32(48, 0)},
        {"chunk 31", u32(48, 31)},
        {"chunk 48", u32(48, 48)},
        {"chunk 2^24 + 32", u32(48, (1u << 24) + 32)},
        {"outliers > elements", u64(56, 481)},
        {"reserved byte 19", u8(19, 1)},
        {"top level on a float32 stream", u32(52, 0x40c00000u)},
        {"parameter section huge", u64(64, ~std::uint64_t{0})},
        {"parameter section for stages without parameters",
         [](std::vector<std::byte>& s) {
           // move one byte of the payload's size into the parameter section: sizes still add up
           store_le<std::uint64_t>(s.data() + 64, 1);
           store_le<std::uint64_t>(s.data() + 88, ebac::detail::load_le<std::uint64_t>(s.data() + 88) - 1);
         }},
        {"codebook section huge", u64(72, ~std::uint64_t{0})},
        {"chunk table section huge", u64(80, std::uint64_t{1} << 63)},
        {"payload section + 1",
         [](std::vector<std::byte>& s) {
           store_le<std::uint64_t>(s.data() + 88, ebac::detail::load_le<std::uint64_t>(s.data() + 88) + 1);
         }},
        {"payload section - 1",
         [](std::vector<std::byte>& s) {
           store_le<std::uint64_t>(s.data() + 88, ebac::detail::load_le<std::uint64_t>(s.data() + 88) - 1);
         }},
        {"outlier value section + 4",
         [](std::vector<std::byte>& s) {
           store_le<std::uint64_t>(s.data() + 104, ebac::detail::load_le<std::uint64_t>(s.data() + 104) + 4);
         }},
        {"dims overflow",
         [](std::vector<std::byte>& s) {
           store_le<std::uint64_t>(s.data() + 112, std::uint64_t{1} << 40);
           store_le<std::uint64_t>(s.data() + 120, std::uint64_t{1} << 40);
         }},
        {"dims > 2^48 elements",
         [](std::vector<std::byte>& s) {
           store_le<std::uint64_t>(s.data() + 112, std::uint64_t{1} << 30);
           store_le<std::uint64_t>(s.data() + 120, std::uint64_t{1} << 20);
         }},
        {"dims: more chunks than the table", u64(112, 4000)},
    };
    for (const auto& e : edits) {
      CAPTURE(e.name);
      auto s = base;
      e.f(s);
      const char* what = nullptr;
      const ebac::status st = header_status(s, &what);
      CHECK(st != ebac::status::ok);
      CHECK(what != nullptr);
      CHECK_FALSE(try_decompress(s.data(), s.size(), ebac::dtype::f32).empty());
    }
  }

  TEST_CASE("stream: predictor fields a stream does not use must be zero") {
    for (const char* pipe : {"ratio", "ratio-flat"}) {
      CAPTURE(pipe);
      const auto base = make_case<float>(pipe, {4, 10, 12}, false).bytes;
      REQUIRE(header_status(base) == ebac::status::ok);
      const int used = static_cast<int>(base[12] == std::byte{2} ? static_cast<std::uint8_t>(base[13]) : 0);
      for (int k = used; k < 3; ++k) {
        CAPTURE(k);
        auto a = base;
        a[16 + static_cast<std::size_t>(k)] = std::byte{1};
        CHECK(header_status(a) == ebac::status::corrupt_stream);
        auto t = base;
        ebac::detail::store_le<std::uint32_t>(t.data() + 20 + 4 * k, 64);
        CHECK(header_status(t) == ebac::status::corrupt_stream);
      }
    }
  }

  TEST_CASE("stream: decoder checks sections it cannot validate in the header") {
    // Chunk sizes that do not add up, outlier indices out of range or not
    // increasing: all must end in ebac::error, never in a crash.
    auto c = make_case<float>("fast", {3000}, false, 1024);
    const auto h = ebac::host::inspect(c.bytes.data(), c.bytes.size());
    REQUIRE(h.outlier_count >= 4);
    {
      auto s = c.bytes;
      const auto off = h.section_offset(ebac::section_chunk_table);
      ebac::detail::store_le<std::uint32_t>(s.data() + off, ebac::detail::load_le<std::uint32_t>(s.data() + off) + 1);
      CHECK_FALSE(try_decompress(s.data(), s.size(), ebac::dtype::f32).empty());
    }
    {
      auto s = c.bytes;
      const auto off = h.section_offset(ebac::section_chunk_table);
      ebac::detail::store_le<std::uint32_t>(s.data() + off, ebac::detail::load_le<std::uint32_t>(s.data() + off) + 1);
      ebac::detail::store_le<std::uint32_t>(s.data() + off + 4, ebac::detail::load_le<std::uint32_t>(s.data() + off + 4) - 1);
      CHECK_FALSE(try_decompress(s.data(), s.size(), ebac::dtype::f32).empty());  // sum right, split wrong
    }
    {
      auto s = c.bytes;  // first outlier index varint -> 3000 (== n), same varint length not guaranteed: rewrite section
      const auto off = h.section_offset(ebac::section_outlier_index);
      std::vector<std::byte> idx(h.section_bytes[ebac::section_outlier_index]);
      std::memcpy(idx.data(), s.data() + off, idx.size());
      // Set every continuation byte's payload to the maximum: indices blow past n.
      for (auto& b : idx) b |= std::byte{0x7f};
      std::memcpy(s.data() + off, idx.data(), idx.size());
      CHECK_FALSE(try_decompress(s.data(), s.size(), ebac::dtype::f32).empty());
    }
  }

  TEST_CASE("stream: a bit-packed stream cannot claim more elements than its payload can hold") {
    // One chunk of 2^24 elements needs at least 2^24 / 32 payload bytes; a
    // forged header claiming it over a 300-element payload is refused before
    // any decoder allocates for it.
    auto s = make_case<float>("fast", {300}, false).bytes;
    REQUIRE(header_status(s) == ebac::status::ok);
    ebac::detail::store_le<std::uint32_t>(s.data() + 48, 1u << 24);
    ebac::detail::store_le<std::uint64_t>(s.data() + 112, std::uint64_t{1} << 24);
    const char* what = nullptr;
    CHECK(header_status(s, &what) == ebac::status::corrupt_stream);
    REQUIRE(what != nullptr);
    CHECK(std::string(what).find("payload too small") != std::string::npos);
    CHECK_FALSE(try_decompress(s.data(), s.size(), ebac::dtype::f32).empty());
  }

#if defined(__unix__)
  TEST_CASE("stream: zero-element tensors with huge extents finish promptly (no hang)") {
    // A tensor with a zero extent has no elements whatever its other extents,
    // so neither the header check (element count 0) nor the chunk table bounds
    // them. The Lorenzo passes must not iterate over the lines of an empty
    // tensor: a 150-byte stream must not keep the decoder busy for hours.
    REQUIRE(header_status(zero_element_stream(false)) == ebac::status::ok);
    REQUIRE(header_status(zero_element_stream(true)) == ebac::status::ok);
    for (const char* which : {"decompress", "decompress-checksum", "compress"}) {
      const std::string r = run_probe_with_deadline(which, 10);
      CHECK_MESSAGE(r.empty(), std::string(which), " of a 0-element tensor with extents {2^40, 2^20, 0} (1 and 2 threads): ", r);
    }
  }
#endif

  TEST_CASE("host codec: argument errors throw ebac::error naming the problem") {
    std::vector<float> x(100, 1.0f);
    auto expect_error = [&](auto&& f, const char* what) {
      CAPTURE(what);
      try {
        f();
        FAIL_CHECK("no exception");
      } catch (const ebac::error& e) {
        CHECK(e.code() != ebac::status::ok);
        CHECK(std::string(e.what()).size() > 10);
      } catch (const std::exception& e) { FAIL_CHECK("not an ebac::error: ", e.what()); }
    };
    const ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> fast{};
    ebac::compress_options o;
    o.threads = 1;
    for (double eb : {0.0, -1e-3, std::nan(""), double(INFINITY), -double(INFINITY)}) {
      o.bound = {eb, ebac::bound_mode::absolute};
      expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{100}, fast, o); }, "bad bound");
      o.bound.mode = ebac::bound_mode::relative;
      expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{100}, fast, o); }, "bad bound (rel)");
    }
    o.bound = {1e-3, ebac::bound_mode::absolute};
    expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{}, fast, o); }, "rank 0");
    expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{1, 1, 1, 1, 1, 1, 1, 1, 100}, fast, o); }, "rank 9");
    expect_error(
        [&] {
          (void)ebac::host::compress(x.data(), ebac::extents{1ull << 32, 1ull << 32, 2}, fast, o);
        },
        "count overflow");
    expect_error(
        [&] {
          (void)ebac::host::compress(x.data(), ebac::extents{1ull << 25, 1ull << 24}, fast, o);
        },
        "> 2^48 elements");
    expect_error([&] { (void)ebac::host::compress(static_cast<const float*>(nullptr), ebac::extents{100}, fast, o); },
                 "null input");
    for (std::uint32_t chunk : {0u, 16u, 31u, 48u, (1u << 24) + 32, 0xffffffe0u}) {
      auto p = fast;
      p.chunk_elements = chunk;
      expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{100}, p, o); }, "chunk size");
    }
    {
      ebac::pipeline<ebac::lorenzo, ebac::linear_quantizer, ebac::huffman> p{ebac::lorenzo::along({2}, 16)};
      expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{10, 10}, p, o); }, "lorenzo axis >= rank");
      p.predictor = ebac::lorenzo::along({1, 0}, 16);
      expect_error([&] { (void)ebac::host::compress(x.data(), ebac::extents{10, 10}, p, o); }, "lorenzo axes not increasing");
    }
    // Empty tensors: a null pointer is fine.
    const auto s = ebac::host::compress(static_cast<const float*>(nullptr), ebac::extents{0}, fast, o);
    CHECK(ebac::host::decompress<float>(s.data(), s.size()).empty());

    const auto good = ebac::host::compress(x.data(), ebac::extents{100}, fast, o);
    std::vector<float> out(100);
    expect_error([&] { (void)ebac::host::decompress<ebac::float16>(good.data(), good.size()); }, "wrong dtype");
    expect_error([&] { ebac::host::decompress(good.data(), good.size(), out.data(), 99); }, "wrong count");
    expect_error([&] { ebac::host::decompress(good.data(), good.size(), out.data(), 101); }, "wrong count");
    expect_error([&] { ebac::host::decompress(good.data(), good.size(), static_cast<float*>(nullptr), 100); }, "null output");
    ebac::host::decompress(good.data(), good.size(), out.data(), 100);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(exact_within(x[i], out[i], 1e-3));
  }

  TEST_CASE("host codec: a relative bound whose absolute value overflows float is held, and above the 1e6 cap it is refused") {
    // The widest finite range, +-FLT_MAX: at the cap (relative 1e6) the
    // absolute bound is ~6.8e44, past float's range, so the quantizer's float
    // step cannot hold it; at relative 0.2 the bound (~0.4 FLT_MAX) fits, but
    // FLT_MAX falls in the bin whose centre, 3 half steps, overflows to Inf.
    // Either way every element must come back within the bound the caller
    // asked for, computed here in double: rel x (max - min), not the header's.
    constexpr float big = std::numeric_limits<float>::max();
    std::vector<float> x = {big, -big, 1.0f, 0.0f, -1.0f, 1e-30f, -3e38f, 2.5e38f, 1.7e38f, -1.2e38f, 7.0f};
    for (int i = 0; i < 200; ++i) x.push_back(big * (static_cast<float>(i) / 100.0f - 1.0f));
    const ebac::extents e{x.size()};
    ebac::compress_options o;
    o.threads = 1;
    o.max_levels = 0;  // code through the quantizer, not as a palette
    for (double rel : {1e6, 0.2}) {
      CAPTURE(rel);
      o.bound = {rel, ebac::bound_mode::relative};
      const double promised = promised_bound(x, o.bound);
      REQUIRE(promised == rel * (2.0 * static_cast<double>(big)));
      auto check = [&](const auto& pipe) {
        const auto s = ebac::host::compress(x.data(), e, pipe, o);
        const auto h = ebac::host::inspect(s.data(), s.size());
        REQUIRE_FALSE(h.is_stored());  // the quantizer path, not the raw copy
        CHECK(h.quantizer == std::remove_cvref_t<decltype(pipe)>::quantizer_type::id);
        const auto y = ebac::host::decompress<float>(s.data(), s.size());
        REQUIRE(y.size() == x.size());
        std::size_t bad = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          CAPTURE(i);
          if (!std::isfinite(y[i]) || !exact_within(x[i], y[i], promised)) ++bad;
        }
        CHECK(bad == 0);
      };
      check(ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{});
      check(ebac::pipeline<ebac::no_prediction, ebac::linear_quantizer, ebac::huffman>{});
    }
    // Above the cap the bound is refused before anything is coded.
    o.bound = {1e300, ebac::bound_mode::relative};
    ebac::status code = ebac::status::ok;
    try {
      (void)ebac::host::compress(x.data(), e,
                                 ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>{}, o);
    } catch (const ebac::error& err) { code = err.code(); }
    CHECK(code == ebac::status::invalid_argument);
  }

  TEST_CASE(
      "host codec: the largest relative bound over the widest range is held with a finite eb_abs, and larger ones are refused") {
    // compress_to has no "not finite" check of its own: the argument check
    // takes only finite bounds, a relative one at most 1e6, and a range of
    // finite values spans at most 2 FLT_MAX, so eb_abs <= 1e6 * 2 FLT_MAX is
    // finite. The extreme case, for every float dtype, with and without the
    // palette (whose range palette_range gives): held, eb_abs finite.
    const ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack> fast{};
    auto held = [&]<class T>(std::type_identity<T>, float top) {
      CAPTURE(ebac::to_string(ebac::dtype_of<T>::value));
      const std::vector<T> x = {ebac::from_float<T>(top), ebac::from_float<T>(-top), ebac::from_float<T>(1.0f),
                                ebac::from_float<T>(0.0f)};
      for (std::uint32_t levels : {0u, ebac::max_levels}) {
        CAPTURE(levels);
        ebac::compress_options o;
        o.threads = 1;
        o.max_levels = levels;
        o.bound = {1e6, ebac::bound_mode::relative};
        const auto s = ebac::host::compress(x.data(), ebac::extents{4}, fast, o);
        const auto y = ebac::host::decompress<T>(s.data(), s.size());
        const auto h = ebac::host::inspect(s.data(), s.size());
        CHECK(std::isfinite(h.eb_abs));
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(exact_within(ebac::to_float(x[i]), ebac::to_float(y[i]), h.eb_abs));
        // One step past the largest relative bound, and a bound that is not finite: refused up front.
        for (double v : {std::nextafter(1e6, 1e7), 1e300, std::numeric_limits<double>::infinity()}) {
          o.bound.value = v;
          CAPTURE(v);
          try {
            (void)ebac::host::compress(x.data(), ebac::extents{4}, fast, o);
            FAIL_CHECK("no ebac::error");
          } catch (const ebac::error& e) {
            CHECK(e.code() == ebac::status::invalid_argument);
            CHECK(std::string(e.what()).find("error bound must be finite") != std::string::npos);
          }
        }
      }
    };
    held(std::type_identity<float>{}, std::numeric_limits<float>::max());
    held(std::type_identity<ebac::float16>{}, 65504.0f);
    held(std::type_identity<ebac::bfloat16>{}, ebac::to_float(ebac::bfloat16{0x7f7f}));
  }

}  // TEST_SUITE

TEST_CASE("host compress into a buffer: a null buffer is refused up front, the lorenzo factory never writes past its arrays") {
  using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  const std::vector<float> x(100, 1.25f);
  ebac::compress_options o;
  o.bound = {1e-3, ebac::bound_mode::absolute};
  ebac::status code = ebac::status::ok;
  try {
    (void)ebac::host::compress(x.data(), ebac::extents{100}, fast_t{}, o, nullptr, 1 << 20);
  } catch (const ebac::error& e) { code = e.code(); }
  CHECK(code == ebac::status::invalid_argument);
  // along_last with more than 3 dimensions (pipeline_spec::lorenzo_auto_dims
  // can ask for it on a rank >= 5 tensor): refused by validate, and, under
  // UBSan, no out-of-bounds write on the way.
  const ebac::lorenzo l = ebac::lorenzo::along_last(5, 6, 16);
  CHECK(l.validate(ebac::extents{2, 2, 2, 2, 2, 2}) != ebac::status::ok);
}

TEST_CASE("stream: max_compressed_bytes is 0 for what compress refuses, and never wraps") {
  using fast_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  const std::uint64_t limit = ebac::max_stream_elements;
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{limit}, fast_t{}) > 4 * limit);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{limit + 1}, fast_t{}) == 0);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{std::uint64_t{1} << 62}, fast_t{}) == 0);
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{}, fast_t{}) == 0);
  fast_t odd;
  odd.chunk_elements = 48;
  CHECK(ebac::max_compressed_bytes<fast_t, float>(ebac::extents{100}, odd) == 0);
}

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
