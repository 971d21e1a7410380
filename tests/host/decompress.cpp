// tests/host/decompress.cpp - the tests of include/ebac/host/decompress.hpp.
//
// Stream format: layout, validation of every field, every truncation and
// single-byte mutation, and the host codec's argument checks.
#include "test_support.hpp"
#include "../format/stream_cases.hpp"

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

/// The decoded elements' bytes, or the error text (as try_decompress).
std::string try_decompress_bytes(const std::byte* p, std::size_t n, ebac::dtype t, int threads, std::vector<unsigned char>& out) {
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

TEST_SUITE("host") {
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

}  // TEST_SUITE
