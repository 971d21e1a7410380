// tests/pipeline.cpp - the tests of include/ebac/pipeline.hpp.
//
// Predictors (Lorenzo axis passes, no prediction) and run-time pipeline choice.
#include "host/test_support.hpp"

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

using namespace ebac_test;

namespace {

struct resolved {
  ebac::predictor_id predictor;
  ebac::lorenzo l;
  ebac::quantizer_id quantizer;
  ebac::encoder_id encoder;
  std::uint32_t chunk;
};

resolved resolve(const std::string& name, const ebac::extents& e) {
  const auto spec = spec_of(name);
  return ebac::with_pipeline(spec, e, [&](auto p) {
    using P = decltype(p);
    resolved r{};
    r.predictor = P::predictor_type::id;
    if constexpr (std::is_same_v<typename P::predictor_type, ebac::lorenzo>) r.l = p.predictor;
    r.quantizer = P::quantizer_type::id;
    r.encoder = P::encoder_type::id;
    r.chunk = p.chunk_elements;
    return r;
  });
}

}  // namespace

TEST_SUITE("host") {
  TEST_CASE("pipelines: names parse and resolve to the documented stages") {
    using ebac::encoder_id;
    using ebac::predictor_id;
    using ebac::quantizer_id;
    const ebac::extents r4{2, 3, 70, 70}, r3{3, 70, 70}, r2{70, 70}, r1{1000};
    auto fast = resolve("fast", r4);
    CHECK(fast.predictor == predictor_id::lorenzo);
    CHECK(fast.l.dims == 1);
    CHECK(fast.l.axis[0] == ebac::lorenzo_flat_axis);
    CHECK(fast.quantizer == quantizer_id::sign_preserving);
    CHECK(fast.encoder == encoder_id::block_bitpack);
    CHECK(fast.chunk == ebac::default_chunk_elements);

    auto ratio = resolve("ratio", r4);
    CHECK(ratio.l.dims == 2);
    CHECK(ratio.l.axis[0] == 2);
    CHECK(ratio.l.axis[1] == 3);
    CHECK(ratio.encoder == encoder_id::huffman);
    CHECK(resolve("ratio", r3).l.dims == 2);
    CHECK(resolve("ratio", r2).l.axis[0] == ebac::lorenzo_flat_axis);  // rank < 3: flat
    CHECK(resolve("ratio", r1).l.axis[0] == ebac::lorenzo_flat_axis);
    CHECK(resolve("ratio-flat", r4).l.axis[0] == ebac::lorenzo_flat_axis);
    CHECK(resolve("ratio-flat", r4).encoder == encoder_id::huffman);
    CHECK(resolve("rle", r4).encoder == encoder_id::run_length);
    CHECK(resolve("plain", r4).predictor == predictor_id::none);
    CHECK(resolve("plain", r4).quantizer == quantizer_id::sign_preserving);
    auto max = resolve("max", r4);  // ratio's stages, the ANS encoder, chunks of 2^16
    CHECK(max.l.dims == 2);
    CHECK(max.l.axis[0] == 2);
    CHECK(max.l.axis[1] == 3);
    CHECK(max.quantizer == quantizer_id::sign_preserving);
    CHECK(max.encoder == encoder_id::context_ans);
    CHECK(max.chunk == 65536);

    auto l3 = resolve("lorenzo3:linear:rle", r4);
    CHECK(l3.l.dims == 3);
    CHECK(l3.l.axis[0] == 1);
    CHECK(l3.quantizer == quantizer_id::linear);
    CHECK(l3.encoder == encoder_id::run_length);
    CHECK(resolve("lorenzo3:sign:bitpack", r3).l.dims == 2);  // capped at rank - 1
    auto l1 = resolve("lorenzo1:sign:huffman", r4);
    CHECK(l1.l.dims == 1);
    CHECK(l1.l.axis[0] == 3);
    CHECK(resolve("lorenzo1:sign:huffman", r1).l.axis[0] == 0);
    CHECK(resolve("none:linear:bitpack", r4).predictor == predictor_id::none);
    CHECK(resolve("lorenzo:sign:rle", r4).l.axis[0] == ebac::lorenzo_flat_axis);
    for (auto name : ebac::pipeline_names) {
      ebac::pipeline_spec s;
      CHECK(ebac::parse_pipeline(name, s));
    }
    for (const char* bad : {"", "fast:", "Fast", "lorenzo4:sign:rle", "none:sign", "none::rle", "none:sign:rle:x",
                            "none:sign:zstd", "none:round:rle", "lorenzo2:sign:", ":sign:rle", "all"}) {
      ebac::pipeline_spec s;
      CAPTURE(bad);
      CHECK_FALSE(ebac::parse_pipeline(bad, s));
    }
  }

}  // TEST_SUITE
