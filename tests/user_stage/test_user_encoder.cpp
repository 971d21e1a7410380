// An encoder the library does not ship (varint_encoder.hpp), registered by
// the program's compile definitions alone, goes through the whole public
// API: pipeline names, compress, the stream header, the reader's checks,
// decompress. Expected values are worked out here, not read back from the
// codec: the varint bytes by hand, the bound from what the caller asked.
#include <ebac/ebac.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

using user_stage::varint_encoder;

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> b;
  for (int x : v) b.push_back(static_cast<std::byte>(x));
  return b;
}

/// A smooth field with noise and a post-ReLU-like zero half, 8 x 64 x 64.
std::vector<float> field(ebac::extents& e) {
  e = ebac::extents{8, 64, 64};
  std::vector<float> x(8 * 64 * 64);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.f, 0.05f);
  for (std::size_t c = 0; c < 8; ++c)
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t j = 0; j < 64; ++j) {
        const float v = std::sin(0.1f * static_cast<float>(i + c)) * std::cos(0.07f * static_cast<float>(j)) + noise(rng);
        x[(c * 64 + i) * 64 + j] = j < 32 ? std::fmax(v, 0.f) : v;
      }
  return x;
}

/// x compressed by the pipeline named `pipeline` under the absolute bound eb.
std::vector<std::byte> compress_with(const char* pipeline, const std::vector<float>& x, const ebac::extents& e, double eb,
                                     bool checksum = true) {
  ebac::pipeline_spec spec;
  REQUIRE(ebac::parse_pipeline(pipeline, spec));
  REQUIRE(spec.encoder == static_cast<ebac::encoder_id>(200));
  ebac::compress_options o;
  o.bound = {eb, ebac::bound_mode::absolute};
  o.checksum = checksum;
  return ebac::with_pipeline(spec, e, [&](auto p) { return ebac::host::compress(x.data(), e, p, o); });
}

}  // namespace

TEST_SUITE("user_stage") {
  TEST_CASE("user encoder: registered beside the library's, by name and id") {
    ebac::encoder_id id{};
    REQUIRE(ebac::encoder_named("varint", id));
    CHECK(static_cast<int>(id) == 200);
    CHECK(ebac::encoder_registered(200));
    CHECK(ebac::encoder_name(static_cast<ebac::encoder_id>(200)) == "varint");
    CHECK_FALSE(ebac::encoder_needs_codebook(id));
    CHECK(ebac::encoder_min_payload_bytes(id, 1000) == 1000);
    // The library's encoders are all still there, and nothing else.
    int registered = 0;
    for (int raw = 0; raw < 256; ++raw) registered += ebac::encoder_registered(static_cast<std::uint8_t>(raw));
    CHECK(registered == 6);
    for (const char* name : {"bitpack", "rle", "huffman", "ans", "striped"}) CHECK(ebac::encoder_named(name, id));
    CHECK_FALSE(ebac::encoder_registered(201));
  }

  TEST_CASE("user encoder: its chunk bytes, worked out by hand") {
    const varint_encoder e{};
    const std::vector<std::uint32_t> codes = {0, 1, 127, 128, 300, 0xffffffffu};
    std::vector<std::byte> out(e.max_chunk_bytes(codes.size()));
    out.resize(e.encode_chunk(codes.data(), codes.size(), out.data()));
    // 300 = 0b10'0101100 -> 0xac 0x02; 2^32-1 -> ff ff ff ff 0f.
    CHECK(out == bytes_of({0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f}));
    std::vector<std::uint32_t> back(codes.size());
    CHECK(e.decode_chunk(out.data(), out.size(), back.data(), back.size()) == ebac::status::ok);
    CHECK(back == codes);
    // A byte short, a byte over, and a code above 32 bits are refused.
    CHECK(e.decode_chunk(out.data(), out.size() - 1, back.data(), back.size()) == ebac::status::corrupt_stream);
    auto longer = out;
    longer.push_back(std::byte{0});
    CHECK(e.decode_chunk(longer.data(), longer.size(), back.data(), back.size()) == ebac::status::corrupt_stream);
    const auto big = bytes_of({0x80, 0x80, 0x80, 0x80, 0x10});  // 2^32
    CHECK(e.decode_chunk(big.data(), big.size(), back.data(), 1) == ebac::status::corrupt_stream);
  }

  TEST_CASE("user encoder: a pipeline by name compresses within the requested bound and decompresses") {
    ebac::extents e;
    const std::vector<float> x = field(e);
    const double eb = 1e-2;  // what the caller asks, absolute
    for (const char* name : {"lorenzo:sign:varint", "none:linear:varint", "lorenzo2:linear:varint"}) {
      CAPTURE(name);
      const auto s = compress_with(name, x, e, eb);
      const ebac::stream_header h = ebac::host::inspect(s.data(), s.size());
      CHECK(static_cast<int>(h.encoder) == 200);
      // Every element costs at least one varint byte (minus the outliers'
      // share, which this smooth field has none of).
      CHECK(s.size() >= x.size());
      CHECK(s.size() < 2 * x.size());  // codes below 2^14 at this bound: at most 2 bytes each
      const auto y = ebac::host::decompress<float>(s.data(), s.size());
      REQUIRE(y.size() == x.size());
      double worst = 0;
      for (std::size_t i = 0; i < x.size(); ++i) worst = std::fmax(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
      CHECK(worst <= eb);
      CHECK(worst > eb / 10);  // lossy at the bound, not stored raw
    }
  }

  TEST_CASE("user encoder: the reader's checks apply to its streams") {
    ebac::extents e;
    const std::vector<float> x = field(e);
    const auto s = compress_with("lorenzo:sign:varint", x, e, 1e-2);
    std::vector<float> y(x.size());
    // Cut short anywhere: refused, never read past the end.
    for (std::size_t cut : {std::size_t{1}, std::size_t{20}, s.size() / 2, s.size() - 1}) {
      CAPTURE(cut);
      CHECK_THROWS_AS(ebac::host::decompress(s.data(), s.size() - cut, y.data(), y.size()), ebac::error);
    }
    // Without the checksum, a payload byte changed so that a varint runs on
    // past its chunk is caught by the encoder's own decode_chunk.
    auto t = compress_with("lorenzo:sign:varint", x, e, 1e-2, /*checksum=*/false);
    t[t.size() - 1] = std::byte{0x80};
    try {
      ebac::host::decompress(t.data(), t.size(), y.data(), y.size());
      FAIL("a varint cut by the end of the payload decoded");
    } catch (const ebac::error& err) { CHECK(err.code() == ebac::status::corrupt_stream); }
  }

  TEST_CASE("user encoder: a stream for a program without it") {
    // Written for the next CTest case, which runs the plain ebac CLI (built
    // without this encoder) on it and expects "unknown encoder id".
    ebac::extents e;
    const std::vector<float> x = field(e);
    const auto s = compress_with("lorenzo:sign:varint", x, e, 1e-2);
    std::ofstream f(EBAC_USER_STAGE_STREAM, std::ios::binary);
    f.write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
    REQUIRE(f.good());
  }
}
