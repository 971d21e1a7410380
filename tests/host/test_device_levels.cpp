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
#include "test_support.hpp"

#include <ebac/format/stored_header.hpp>
#include <ebac/format/apply_stages.hpp>
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

/// What level_sets_kernel and level_merge_kernel compute, with the threads
/// and blocks run one after another: `threads` threads a block (the kernel
/// has 64; the palette must not depend on it), chunks taken in `order`
/// (blocks run in any order; a block that starts after a chunk overflowed
/// skips its reads).
template <class S>
ebac::level_palette device_palette(const S* in, std::uint64_t n, std::uint32_t chunk, std::uint32_t capacity,
                                   std::uint32_t threads, const std::vector<std::uint64_t>& order) {
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  if (capacity == 0 || n == 0) return {};  // compress_stages launches nothing then
  std::vector<ebac::level_set> sets(chunks);
  bool too_many = false;
  std::vector<ebac::level_set> part(threads);
  for (const std::uint64_t c : order) {
    const std::uint64_t first = c * chunk, m = std::min<std::uint64_t>(chunk, n - first);
    const bool skip = too_many;  // read once at the block's start
    for (std::uint32_t t = 0; t < threads; ++t) {
      ebac::level_counter counter(capacity);
      if (!skip) {
        for (std::uint64_t k = t; k < m && !counter.full(); k += threads)
          counter.add(static_cast<std::uint64_t>(ebac::raw_bits(in[first + k])));
      } else {
        counter.give_up();
      }
      part[t] = counter.finish();
    }
    for (std::uint64_t stride = 1; stride < threads; stride *= 2)
      for (std::uint64_t p = 0; p < ebac::level_tree_pairs(threads, stride); ++p)
        ebac::level_tree_step(part.data(), threads, stride, p);
    sets[c] = part[0];
    too_many = too_many || part[0].overflow;
  }
  if (too_many) {
    sets[0].overflow = true;
  } else {
    for (std::uint64_t stride = 1; stride < chunks; stride *= 2)
      for (std::uint64_t p = 0; p < ebac::level_tree_pairs(chunks, stride); ++p)
        ebac::level_tree_step(sets.data(), chunks, stride, p);
  }
  return ebac::palette_of(sets[0]);
}

std::vector<std::uint64_t> in_order(std::uint64_t chunks) {
  std::vector<std::uint64_t> v(chunks);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

bool same_palette(const ebac::level_palette& a, const ebac::level_palette& b) {
  if (a.count != b.count) return false;
  for (std::uint32_t i = 0; i < a.count; ++i)
    if (a.bits[i] != b.bits[i]) return false;
  return true;
}

std::string palette_str(const ebac::level_palette& p) {
  std::string s = std::to_string(p.count) + ":";
  for (std::uint32_t i = 0; i < p.count; ++i) {
    s += ' ';  // appended apart: gcc 12 warns (-Wrestrict, a false positive) on " " + std::string
    s += ebac_test::hex(p.bits[i]);
  }
  return s;
}

/// The device's palette equals the host's for every capacity, chunk size,
/// thread count and block order tried.
template <class S>
void check_palette(const std::vector<S>& x, const char* label, std::uint32_t seed) {
  INFO("data: ", label, ", n = ", x.size());
  std::mt19937 rng(seed);
  const std::uint64_t n = x.size();
  for (std::uint32_t chunk : {32u, 96u, 4096u, ebac::default_chunk_elements}) {
    const std::uint64_t chunks = (n + chunk - 1) / chunk;
    for (std::uint32_t capacity : {0u, 1u, 2u, 3u, 5u, 16u}) {
      CAPTURE(chunk);
      CAPTURE(capacity);
      const ebac::level_palette host = ebac::host::detail::find_levels(x.data(), n, chunk, capacity, 1);
      for (std::uint32_t threads : {64u, 1u, 7u}) {
        CAPTURE(threads);
        auto order = in_order(chunks);
        const ebac::level_palette dev = device_palette(x.data(), n, chunk, capacity, threads, order);
        CHECK_MESSAGE(same_palette(dev, host), "device ", palette_str(dev), " host ", palette_str(host));
        std::shuffle(order.begin(), order.end(), rng);
        const ebac::level_palette shuffled = device_palette(x.data(), n, chunk, capacity, threads, order);
        CHECK_MESSAGE(same_palette(shuffled, host), "device (blocks shuffled) ", palette_str(shuffled), " host ",
                      palette_str(host));
      }
    }
  }
}

template <class T>
std::vector<T> from_floats(const std::vector<float>& v) {
  return ebac_test::convert<T>(v);
}

/// Few-level float data: a dropout mask, one-hot rows, a ternary tensor,
/// values with counts that tie (order by bit pattern), 16 and 17 levels,
/// NaN among the levels, a constant, random normals (no palette).
std::vector<std::pair<std::string, std::vector<float>>> float_cases(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::pair<std::string, std::vector<float>>> v;
  const std::size_t n = 20011;  // not a multiple of any chunk
  {
    std::vector<float> x(n);
    for (float& e : x) e = u(rng) < 0.1f ? 0.0f : 1.0f / 0.9f;
    v.emplace_back("dropout mask", std::move(x));
  }
  {
    std::vector<float> x(n, 0.0f);
    for (std::size_t r = 0; r + 10 <= n; r += 10) x[r + rng() % 10] = 1.0f;
    v.emplace_back("one-hot", std::move(x));
  }
  {
    std::vector<float> x(n);
    for (float& e : x) {
      const float r = u(rng);
      e = r < 0.3f ? -0.7f : (r < 0.7f ? 0.0f : 0.7f);
    }
    v.emplace_back("ternary", std::move(x));
  }
  {
    std::vector<float> x(4 * 1000);  // four values, 1000 each: every count ties
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 4) - 1.5f;
    v.emplace_back("tied counts", std::move(x));
  }
  for (int levels : {16, 17}) {
    std::vector<float> x(n);
    for (float& e : x) e = static_cast<float>(rng() % static_cast<unsigned>(levels)) * 0.25f;
    x[0] = 0.0f;
    for (int k = 0; k < levels; ++k) x[1 + static_cast<std::size_t>(k)] = static_cast<float>(k) * 0.25f;  // every level present
    v.emplace_back(std::to_string(levels) + " levels", std::move(x));
  }
  {
    std::vector<float> x(n);
    for (float& e : x) e = u(rng) < 0.5f ? 0.0f : (u(rng) < 0.5f ? NAN : -INFINITY);
    v.emplace_back("NaN and -Inf among the levels", std::move(x));
  }
  v.emplace_back("constant", std::vector<float>(n, 0.75f));
  {
    std::vector<float> x(n);
    for (float& e : x) e = nd(rng);
    v.emplace_back("normals", std::move(x));
  }
  {
    std::vector<float> x(n, 0.0f);  // a palette in the first chunks, then a 17th value at the very end
    for (std::size_t i = 0; i + 1 < n; ++i) x[i] = static_cast<float>(i % 16);
    x[n - 1] = 100.0f;
    v.emplace_back("17th value in the last element", std::move(x));
  }
  return v;
}

}  // namespace

TEST_CASE("device level search: per-thread counters and the block and chunk trees give the host's palette") {
  std::uint32_t seed = 7;
  for (const auto& [name, xf] : float_cases(1)) {
    check_palette(xf, name.c_str(), seed++);
    check_palette(from_floats<ebac::float16>(xf), (name + " f16").c_str(), seed++);
  }
  // Integer and bool tensors (bool held as its byte).
  std::mt19937 rng(3);
  std::vector<std::uint8_t> mask(30011);
  for (auto& b : mask) b = rng() % 10 == 0 ? 0 : 1;
  check_palette(mask, "bool mask", seed++);
  std::vector<std::int64_t> labels(20011);
  for (auto& l : labels) l = static_cast<std::int64_t>(rng() % 16) - 3;
  check_palette(labels, "int64 labels of 16 classes", seed++);
  std::vector<std::int64_t> big(20011);
  for (auto& l : big) l = static_cast<std::int64_t>(rng()) << 20;
  check_palette(big, "int64 values, all distinct", seed++);
  std::vector<std::int8_t> runs(5000);
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i] = static_cast<std::int8_t>((i / 700) % 3);  // long runs: counted at once
  check_palette(runs, "int8 runs", seed++);
  check_palette(std::vector<std::int32_t>(1, 42), "one element", seed++);
}

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

TEST_CASE("device stored form: stored_header is the host's stored header, chosen exactly when the host stores") {
  using pipe_t = ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::block_bitpack>;
  std::mt19937 rng(17);
  auto check = [&](const auto& x, const ebac::extents& e, const ebac::compress_options& base) {
    using T = std::remove_cvref_t<decltype(x[0])>;
    std::uint64_t n = x.size();
    for (bool checksum : {false, true}) {
      CAPTURE(checksum);
      ebac::compress_options opt = base;
      opt.checksum = checksum;
      opt.store_when_larger = false;
      const auto coded = ebac::host::compress(x.data(), e, pipe_t{}, opt);
      opt.store_when_larger = true;
      const auto stream = ebac::host::compress(x.data(), e, pipe_t{}, opt);
      const auto hc = ebac::host::inspect(coded.data(), coded.size());
      // header_kernel's test: the coded size without a checksum against header + raw.
      const bool device_stores = coded.size() - (checksum ? 8 : 0) > hc.header_bytes() + n * sizeof(T);
      const auto hs = ebac::host::inspect(stream.data(), stream.size());
      CHECK(hs.is_stored() == device_stores);
      if (!device_stores) continue;
      std::vector<std::byte> head(hc.header_bytes());
      ebac::stored_header(hc, n, checksum).write(head.data());
      CHECK(std::memcmp(head.data(), stream.data(), head.size()) == 0);
      CHECK(stream.size() == hc.header_bytes() + n * sizeof(T) + (checksum ? 8 : 0));
    }
  };
  // Random float16 bits at a tiny bound: nearly every element an outlier.
  std::vector<ebac::float16> noise(20000);
  for (auto& v : noise) v.bits = static_cast<std::uint16_t>(rng());
  ebac::compress_options tiny;
  tiny.bound = {1e-7, ebac::bound_mode::absolute};
  check(noise, ebac::extents{20000}, tiny);
  check(noise, ebac::extents{100, 200}, tiny);
  // At 1e-2 the finite values all fit the code range (22-bit codes, wider
  // than the raw 16 bits): stored, from a coded header with a top level.
  ebac::compress_options wide;
  wide.bound = {1e-2, ebac::bound_mode::absolute};
  {
    const auto coded = ebac::host::compress(noise.data(), ebac::extents{20000}, pipe_t{}, [&] {
      ebac::compress_options o = wide;
      o.store_when_larger = false;
      return o;
    }());
    REQUIRE(ebac::host::inspect(coded.data(), coded.size()).top > 0.0f);
  }
  check(noise, ebac::extents{20000}, wide);
  // Random bytes (uint8, under Lorenzo residuals: wider than 8 bits).
  std::vector<std::uint8_t> bytes(20000);
  for (auto& v : bytes) v = static_cast<std::uint8_t>(rng());
  check(bytes, ebac::extents{20000}, ebac::compress_options{});
  // Smooth data that codes well: not stored.
  std::vector<float> smooth(20000);
  for (std::size_t i = 0; i < smooth.size(); ++i) smooth[i] = std::sin(0.001f * static_cast<float>(i));
  ebac::compress_options rel;
  rel.bound = {1e-3, ebac::bound_mode::relative};
  check(smooth, ebac::extents{20000}, rel);
}
