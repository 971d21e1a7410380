// tests/format/stream_header.cpp - the tests of include/ebac/format/stream_header.hpp.
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

}  // TEST_SUITE
