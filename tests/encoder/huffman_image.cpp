// tests/encoder/huffman_image.cpp - the tests of include/ebac/encoder/huffman_image.hpp.
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

TEST_SUITE("host") {
  TEST_CASE("huffman: the flat codebook image (what the CUDA backend uploads) codes exactly like the codebook") {
    std::mt19937_64 rng(29);
    for (const auto& cs : code_sets(2)) {
      if (cs.codes.empty()) continue;
      const auto cb = ebac::huffman_codebook::choose(histogram(cs.codes, true), histogram(cs.codes, false));
      const ebac::huffman_image img = ebac::pack_huffman_image(cb);
      REQUIRE(img.bytes.size() == ebac::huffman_image_layout::bytes);
      REQUIRE(img.serialized_bytes <= ebac::huffman_codebook::max_serialized_bytes);
      // Copied somewhere else, as an upload would: the functor reads only the image.
      std::vector<std::uint64_t> storage((img.bytes.size() + 7) / 8);
      std::memcpy(storage.data(), img.bytes.data(), img.bytes.size());
      const auto* base = reinterpret_cast<const std::byte*>(storage.data());
      const ebac::huffman from_image = ebac::bind_huffman_image(base);
      CHECK(from_image.use_runs == cb.use_runs);
      CHECK(ebac::detail::load_le<std::uint64_t>(base + ebac::huffman_image_layout::serialized_size) == img.serialized_bytes);
      const ebac::huffman from_book = ebac::huffman::bind(cb);
      const std::size_t m = cs.codes.size();  // the whole set: the codebook was built from all of its tokens
      std::vector<std::byte> a(from_book.max_chunk_bytes(m)), b(a.size());
      const std::size_t na = from_book.encode_chunk(cs.codes.data(), m, a.data());
      const std::size_t nb = from_image.encode_chunk(cs.codes.data(), m, b.data());
      REQUIRE(na == nb);
      CHECK(std::memcmp(a.data(), b.data(), na) == 0);
      std::vector<std::uint32_t> back(m);
      REQUIRE(from_image.decode_chunk(b.data(), nb, back.data(), m) == ebac::status::ok);
      CHECK(std::equal(back.begin(), back.end(), cs.codes.begin()));
      // The image's serialized part is the stream's codebook section.
      std::vector<std::byte> ser;
      cb.serialize(ser);
      REQUIRE(ser.size() == img.serialized_bytes);
      CHECK(std::memcmp(ser.data(), base + ebac::huffman_image_layout::serialized, ser.size()) == 0);
      check_encoder(from_image, cs, rng, false);
    }
    // Every symbol used, with maximal gaps: the serialized size stays within its bound.
    std::vector<std::uint64_t> all(A::size);
    for (std::uint32_t s = 0; s < A::size; ++s) all[s] = 1 + (s % 7);
    const auto full = codebook_of(all, true);
    std::vector<std::byte> ser;
    full.serialize(ser);
    CHECK(ser.size() <= ebac::huffman_codebook::max_serialized_bytes);
  }

}  // TEST_SUITE
