// tests/encoder/registry.cpp - the tests of include/ebac/encoder/registry.hpp.
//
// Encoders: round trips on many code distributions and chunk sizes, exact
// byte layouts, and hostile input (every truncation, mutations, garbage).
// Every decoder input lives in an allocation of exactly its size so the
// sanitizer build catches a read past the end.
#include "../host/test_support.hpp"

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

TEST_CASE("encoder registry: ids, names and reader checks come from the encoders' own headers") {
  // What each encoder states, written out here from the format (docs/format.md).
  struct expected {
    ebac::encoder_id id;
    std::string_view name;
    bool codebook;
    std::uint64_t min_payload_for_100;  // least payload bytes of a 100-code stream
  };
  const expected want[] = {{ebac::encoder_id::block_bitpack, "bitpack", false, 4},
                           {ebac::encoder_id::run_length, "rle", false, 0},
                           {ebac::encoder_id::huffman, "huffman", true, 0},
                           {ebac::encoder_id::context_ans, "ans", true, 20},
                           {ebac::encoder_id::striped_huffman, "striped", true, 0}};
  int registered = 0;
  for (int raw = 0; raw < 256; ++raw) registered += ebac::encoder_registered(static_cast<std::uint8_t>(raw));
  CHECK(registered == 5);
  for (const auto& w : want) {
    CAPTURE(w.name);
    CHECK(ebac::encoder_registered(static_cast<std::uint8_t>(w.id)));
    CHECK(ebac::encoder_name(w.id) == w.name);
    ebac::encoder_id got{};
    REQUIRE(ebac::encoder_named(w.name, got));
    CHECK(got == w.id);
    CHECK(ebac::encoder_needs_codebook(w.id) == w.codebook);
    CHECK(ebac::encoder_min_payload_bytes(w.id, 100) == w.min_payload_for_100);
    // The pipeline triple of that name resolves to a pipeline with that encoder type.
    ebac::pipeline_spec spec;
    REQUIRE(ebac::parse_pipeline(std::string("none:sign:") + std::string(w.name), spec));
    const ebac::encoder_id resolved = ebac::with_pipeline(
        spec, ebac::extents{100}, [](const auto& pipe) { return std::remove_cvref_t<decltype(pipe)>::encoder_type::id; });
    CHECK(resolved == w.id);
  }
  ebac::encoder_id none{};
  CHECK_FALSE(ebac::encoder_named("zstd", none));
  CHECK(ebac::encoder_name(static_cast<ebac::encoder_id>(0)) == "?");
  CHECK_FALSE(ebac::encoder_needs_codebook(static_cast<ebac::encoder_id>(200)));
  ebac::pipeline_spec spec;
  CHECK_FALSE(ebac::parse_pipeline("none:sign:zstd", spec));
  // An id no encoder has is refused by name.
  bool threw = false;
  try {
    (void)ebac::visit_encoder(static_cast<ebac::encoder_id>(9), [](auto) { return 0; });
  } catch (const ebac::error& e) { threw = std::string(e.what()).find("unknown encoder id") != std::string::npos; }
  CHECK(threw);
}
