// tests/quantizer/chosen_stages.cpp - the tests of include/ebac/quantizer/chosen_stages.hpp.
//
// The CUDA backend's per-tensor decisions, run on the host with the same
// per-block functions its kernels call (cuda/kernels/levels.cuh and
// encode.cuh's header_kernel), against the host backend:
//  - the level palette: per-thread level_counters over a chunk, the block's
//    pairwise tree (level_tree_step), then the chunks' tree, with the early
//    exit once a chunk overflows, whatever order the blocks run in, give
//    host::detail::find_levels's palette;
//  - the stage choice (choose_float_stages / choose_integer_stages +
//    apply_stages) gives the host stream's quantizer, predictor, bound, top
//    level and parameter section;
//  - the stored form's header (stored_header) is the host's write_stored
//    header, and the device's test (coded > raw, no checksum) picks the
//    stored form exactly when the host does.
#include "../host/test_support.hpp"
#include "device_palette.hpp"

#include <ebac/format/apply_stages.hpp>
#include <ebac/format/stored_header.hpp>
#include <ebac/quantizer/level_search.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

/// The main stage set's header, as compress_stages fills it in.
template <class Pipeline, class T>
ebac::stream_header main_header(const ebac::extents& e, const Pipeline& pipe, const ebac::compress_options& opt, bool pooled) {
  ebac::stream_header h;
  h.type = ebac::dtype_of<T>::value;
  h.mode = opt.bound.mode;
  h.flags = 0;
  h.shape = e;
  if constexpr (ebac::floating_element<T>) {
    h.predictor = Pipeline::predictor_type::id;
    if constexpr (std::is_same_v<typename Pipeline::predictor_type, ebac::lorenzo>) h.lorenzo_params = pipe.predictor;
    h.quantizer = Pipeline::quantizer_type::id;
  } else if (pooled) {
    h.predictor = ebac::predictor_id::none;
    h.quantizer = ebac::quantizer_id::pool_window;
    h.pool = opt.pooling;
  } else {
    h.predictor = Pipeline::predictor_type::id;
    if constexpr (std::is_same_v<typename Pipeline::predictor_type, ebac::lorenzo>) h.lorenzo_params = pipe.predictor;
    h.quantizer = ebac::quantizer_id::exact;
  }
  h.encoder = Pipeline::encoder_type::id;
  h.eb_requested = ebac::floating_element<T> ? opt.bound.value : 0.0;
  h.chunk_elements = pipe.chunk_elements;
  return h;
}

/// The fields the stage choice decides, against the host's coded stream.
void check_same_stages(const ebac::stream_header& dev, const std::vector<std::byte>& host_stream) {
  const auto hh = ebac::host::inspect(host_stream.data(), host_stream.size());
  REQUIRE_FALSE(hh.is_stored());
  CHECK(static_cast<int>(dev.quantizer) == static_cast<int>(hh.quantizer));
  CHECK(static_cast<int>(dev.predictor) == static_cast<int>(hh.predictor));
  CHECK(ebac::detail::double_bits(dev.eb_abs) == ebac::detail::double_bits(hh.eb_abs));
  CHECK(ebac::detail::float_bits(dev.top) == ebac::detail::float_bits(hh.top));
  CHECK(dev.section_bytes[ebac::section_params] == hh.section_bytes[ebac::section_params]);
  // The chunk size of the chosen predictor (format/chunking.hpp), and the chunk table with it.
  CHECK(dev.chunk_elements == hh.chunk_elements);
  CHECK(dev.section_bytes[ebac::section_chunk_table] == hh.section_bytes[ebac::section_chunk_table]);
  CHECK(same_palette(dev.palette, hh.palette));
  // The parameter section the device writes (header_kernel: write_params) is the host's.
  std::vector<std::byte> params(dev.params_bytes());
  REQUIRE(params.size() == hh.section_bytes[ebac::section_params]);
  if (!params.empty()) {  // an empty vector's data() may be null, which memcmp must not get
    dev.write_params(params.data());
    CHECK(std::memcmp(params.data(), host_stream.data() + hh.section_offset(ebac::section_params), params.size()) == 0);
  }
}

/// A float tensor's stages on the device's path: palette from the device
/// search, range as range_kernel's keys give it, choose_float_stages.
/// `shape` (default: 1-D) and `pred` (default: flat) as the pipeline's.
template <class T, class Q>
void check_float_choice(const std::vector<T>& x, const ebac::compress_options& base, ebac::extents shape = {},
                        const ebac::lorenzo& pred = ebac::lorenzo{}) {
  using pipe_t = ebac::pipeline<ebac::lorenzo, Q, ebac::block_bitpack>;
  const ebac::extents e = shape.rank ? shape : ebac::extents{x.size()};
  ebac::compress_options opt = base;
  opt.checksum = false;
  opt.store_when_larger = false;  // the coded stream's header, whatever its size
  pipe_t pipe{};
  pipe.predictor = pred;
  const auto host_stream = ebac::host::compress(x.data(), e, pipe, opt);
  const ebac::level_palette palette = device_palette(x.data(), x.size(), pipe.chunk_elements, opt.max_levels, 64,
                                                     in_order((x.size() + pipe.chunk_elements - 1) / pipe.chunk_elements));
  ebac::value_range scanned;  // range_kernel: min and max keys of the finite values
  for (const T& v : x) scanned.add(ebac::to_float(v));
  const auto s = ebac::choose_float_stages<T, Q>(opt.bound, scanned, palette);
  CHECK(s.bad_bound == 0);
  ebac::stream_header h = main_header<pipe_t, T>(e, pipe, opt, false);
  ebac::apply_stages(h, s);
  check_same_stages(h, host_stream);
}

}  // namespace

TEST_CASE("device stage choice: float tensors get the host's quantizer, bound, top level and palette") {
  const ebac::error_bound bounds[] = {
      {1e-2, ebac::bound_mode::absolute},
      {1e-3, ebac::bound_mode::relative},
      {0.6, ebac::bound_mode::absolute},  // coarser than a mask's levels: the bound's quantizer wins
      {1e-1, ebac::bound_mode::relative}};
  for (const auto& [name, xf] : float_cases(11)) {
    for (const auto& bound : bounds) {
      for (std::uint32_t max_levels : {16u, 0u, 2u}) {
        INFO("data: ", name, ", bound ", bound.value, " mode ", static_cast<int>(bound.mode), ", max_levels ", max_levels);
        ebac::compress_options opt;
        opt.bound = bound;
        opt.max_levels = max_levels;
        check_float_choice<float, ebac::sign_preserving_quantizer>(xf, opt);
        check_float_choice<float, ebac::linear_quantizer>(xf, opt);
        check_float_choice<ebac::float16, ebac::sign_preserving_quantizer>(from_floats<ebac::float16>(xf), opt);
        check_float_choice<ebac::bfloat16, ebac::linear_quantizer>(from_floats<ebac::bfloat16>(xf), opt);
      }
    }
  }
  // A saturated ReLU6 map in 16 bits: many values (no palette), a top level of 6.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(3.0f, 4.0f);
  std::vector<float> relu6(30000);
  for (float& v : relu6) v = std::min(6.0f, std::max(0.0f, nd(rng)));
  for (const auto& bound : bounds) {
    ebac::compress_options opt;
    opt.bound = bound;
    check_float_choice<ebac::float16, ebac::sign_preserving_quantizer>(from_floats<ebac::float16>(relu6), opt);
    check_float_choice<ebac::bfloat16, ebac::sign_preserving_quantizer>(from_floats<ebac::bfloat16>(relu6), opt);
    check_float_choice<ebac::bfloat16, ebac::linear_quantizer>(from_floats<ebac::bfloat16>(relu6), opt);
  }
  // The main stages' chunk is rounded to whole predictor blocks
  // (format/chunking.hpp: 16000 for rows of 1000, 60000 for one 300 x 100
  // plane, 20000 for 100 x 100 planes, 16320 for flat tiles of 96); a
  // palette's stays the pipeline's 16384 (no prediction).
  std::vector<float> mask30k(30000);
  for (float& v : mask30k) v = rng() % 10 == 0 ? 0.0f : 1.0f / 0.9f;
  ebac::compress_options abs2;
  abs2.bound = {1e-2, ebac::bound_mode::absolute};
  const struct {
    ebac::extents e;
    ebac::lorenzo pred;
  } along[] = {{{30, 1000}, ebac::lorenzo::along_last(1, 2, 64)},
               {{300, 100}, ebac::lorenzo::along_last(2, 2, 64)},
               {{3, 100, 100}, ebac::lorenzo::along_last(2, 3, 16)},
               {{30000}, ebac::lorenzo::flat(96)}};
  for (const auto& a : along) {
    CAPTURE(a.e.rank);
    check_float_choice<float, ebac::sign_preserving_quantizer>(relu6, abs2, a.e, a.pred);
    check_float_choice<float, ebac::sign_preserving_quantizer>(mask30k, abs2, a.e, a.pred);
    check_float_choice<ebac::float16, ebac::linear_quantizer>(from_floats<ebac::float16>(relu6), abs2, a.e, a.pred);
  }
}

TEST_CASE("device stage choice: integer and bool tensors get the host's stages (palette, exact or pooling offsets)") {
  using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  std::mt19937 rng(9);
  // Max-pool indices of a 2x2/2 pool over 8x8 planes: 4 x 4 outputs a plane, 6 planes.
  ebac::pool_geometry g;
  g.dims = 2;
  for (int j = 0; j < 2; ++j) {
    g.input[j] = 8;
    g.kernel[j] = 2;
    g.stride[j] = 2;
    g.padding[j] = 0;
    g.dilation[j] = 1;
  }
  const ebac::extents pooled_shape{6, 4, 4};
  std::vector<std::int64_t> indices(6 * 16);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::uint64_t o = i % 16, oh = o / 4, ow = o % 4;
    indices[i] = static_cast<std::int64_t>((2 * oh + rng() % 2) * 8 + 2 * ow + rng() % 2);
  }
  auto check = [&](const auto& x, const ebac::extents& e, const ebac::compress_options& base, bool pooled) {
    using T = std::remove_cvref_t<decltype(x[0])>;
    ebac::compress_options opt = base;
    opt.checksum = false;
    opt.store_when_larger = false;
    const pipe_t pipe{};
    const auto host_stream = ebac::host::compress(x.data(), e, pipe, opt);
    const ebac::level_palette palette = device_palette(x.data(), x.size(), pipe.chunk_elements, opt.max_levels, 64,
                                                       in_order((x.size() + pipe.chunk_elements - 1) / pipe.chunk_elements));
    ebac::stream_header h = main_header<pipe_t, T>(e, pipe, opt, pooled);
    if (pooled) ebac::apply_stages(h, ebac::choose_integer_stages(palette, ebac::pool_window_quantizer::make(opt.pooling, e)));
    else ebac::apply_stages(h, ebac::choose_integer_stages(palette, ebac::exact_quantizer{}));
    check_same_stages(h, host_stream);
  };
  for (std::uint32_t max_levels : {16u, 0u}) {
    CAPTURE(max_levels);
    ebac::compress_options opt;
    opt.max_levels = max_levels;
    check(indices, pooled_shape, opt, false);  // up to 64 distinct indices: exact
    ebac::compress_options pool_opt = opt;
    pool_opt.pooling = g;
    check(indices, pooled_shape, pool_opt, true);
    std::vector<std::int64_t> few(indices.size(), 9);  // one value: a palette beats the geometry
    few[3] = 27;
    check(few, pooled_shape, pool_opt, true);
    std::vector<std::uint8_t> mask(5000);
    for (auto& b : mask) b = rng() % 3 == 0;
    check(mask, ebac::extents{5000}, opt, false);
    std::vector<std::int16_t> wide(5000);
    for (auto& v : wide) v = static_cast<std::int16_t>(rng());
    check(wide, ebac::extents{50, 100}, opt, false);
  }
}
