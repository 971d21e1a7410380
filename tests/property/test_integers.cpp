// Property tests: integer and bool tensors (max-pool indices, masks,
// labels) are coded losslessly by every pipeline, deterministically, within
// max_compressed_bytes; max-pool indices with their pooling geometry cost a
// few bits each.
#include "property_inputs.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace ebac_test;

namespace {

template <class T>
const char* int_name();
template <>
const char* int_name<bool>() {
  return "bool";
}
template <>
const char* int_name<std::uint8_t>() {
  return "u8";
}
template <>
const char* int_name<std::int8_t>() {
  return "i8";
}
template <>
const char* int_name<std::int16_t>() {
  return "i16";
}
template <>
const char* int_name<std::int32_t>() {
  return "i32";
}
template <>
const char* int_name<std::int64_t>() {
  return "i64";
}

/// The bytes of a tensor of T (a bool tensor as bytes, which may hold any value).
template <class T>
using bytes_of = std::vector<ebac::storage_t<T>>;

/// Compresses x (as T) with `pipe` and checks: the stream is deterministic
/// (twice, 1 and 2 threads, into a caller buffer), fits max_compressed_bytes
/// and the header plus raw bytes computed here, describes the input, and
/// decodes bit-exactly with 1 and 2 threads. Returns the stream.
template <class T>
std::vector<std::byte> check_lossless(const bytes_of<T>& x, const ebac::extents& e, const std::string& pipe,
                                      const std::string& label, const ebac::pool_geometry& pool = {}) {
  INFO("case: pipeline=", pipe, " dtype=", std::string(int_name<T>()), " shape=", shape_str(e), " data=", label);
  REQUIRE(x.size() == count_of(e));
  const ebac::pipeline_spec spec = spec_of(pipe);
  ebac::compress_options o;
  o.bound = {};  // ignored for integers: the default (invalid for floats) must be accepted
  o.threads = 1;
  o.pooling = pool;
  const T* in = reinterpret_cast<const T*>(x.data());
  const auto s1 = compress(in, e, spec, o);
  CHECK(compress(in, e, spec, o) == s1);
  o.threads = 2;
  CHECK(compress(in, e, spec, o) == s1);
  const ebac::stream_header h = ebac::host::inspect(s1.data(), s1.size());
  CHECK(h.type == ebac::dtype_of<T>::value);
  CHECK(h.shape == e);
  CHECK(h.eb_requested == 0);
  CHECK(h.eb_abs == 0);
  CHECK(s1.size() <= 112 + 8 * static_cast<std::size_t>(e.rank) + x.size() * sizeof(T) + 8);
  CHECK(s1.size() <= max_bytes<T>(e, spec));
  if (!h.is_stored()) {
    CHECK((h.quantizer == ebac::quantizer_id::exact || h.quantizer == ebac::quantizer_id::levels ||
           h.quantizer == ebac::quantizer_id::pool_window));
    CHECK(s1.size() <= ebac::with_pipeline(spec, e, [&](auto p) { return ebac::max_coded_bytes<decltype(p), T>(e, p); }));
  }
  const auto y1 = ebac::host::decompress<T>(s1.data(), s1.size(), 1);
  bytes_of<T> y2(x.size(), static_cast<ebac::storage_t<T>>(0x5a));
  ebac::host::decompress<T>(s1.data(), s1.size(), reinterpret_cast<T*>(y2.data()), y2.size(), 2);
  REQUIRE(y1.size() == x.size());
  // An empty tensor's data() may be null, which memcmp must not get (UBSan).
  const std::size_t bytes = x.size() * sizeof(T);
  CHECK_MESSAGE((bytes == 0 || std::memcmp(y1.data(), x.data(), bytes) == 0), "not bit-exact");
  CHECK_MESSAGE((bytes == 0 || std::memcmp(y2.data(), x.data(), bytes) == 0), "not bit-exact with 2 threads");
  return s1;
}

template <class T>
void sweep_integers(std::uint64_t& cases) {
  using S = ebac::storage_t<T>;
  std::mt19937_64 rng(static_cast<std::uint64_t>(sizeof(T)) * 977 + std::is_signed_v<S>);
  const auto lo = static_cast<std::int64_t>(std::numeric_limits<S>::min());
  const auto hi = static_cast<std::int64_t>(std::numeric_limits<S>::max());
  auto clamp = [&](std::int64_t v) { return static_cast<S>(std::min(hi, std::max(lo, v))); };
  for (const ebac::extents& e : property_shapes()) {
    const std::uint64_t n = count_of(e);
    if (sanitized_build && n > 20000) continue;
    std::vector<std::pair<std::string, bytes_of<T>>> data;
    bytes_of<T> full(n), small(n), ramp(n), extremes(n), labels(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      full[i] = static_cast<S>(rng());                                  // every bit pattern (bool: any byte)
      small[i] = clamp(static_cast<std::int64_t>(rng() % 41) - 20);     // small values: exact codes
      ramp[i] = clamp(static_cast<std::int64_t>(i % 5000) * 3 - 7000);  // smooth: Lorenzo pays
      const std::int64_t ext[] = {
          lo, hi, 0, -1, 1, (std::int64_t{1} << 22) - 1, -(std::int64_t{1} << 22) + 1, std::int64_t{1} << 22};
      extremes[i] = clamp(ext[rng() % 8]);     // the code limit's edges
      labels[i] = static_cast<S>(rng() % 10);  // 10 classes: a palette
    }
    data = {{"all bit patterns", full}, {"small", small}, {"ramp", ramp}, {"extremes", extremes}, {"labels", labels}};
    for (const auto& [label, x] : data)
      for (const char* pipe : {"fast", "ratio", "ratio-flat", "rle", "plain", "lorenzo3:sign:huffman", "lorenzo2:linear:bitpack",
                               "lorenzo2:sign:ans"}) {
        check_lossless<T>(x, e, pipe, label);
        ++cases;
      }
  }
}

/// PyTorch's max_pool (first maximum wins) over a random post-ReLU map:
/// the indices it saves, for N x C planes of the given input size.
struct pool_case {
  ebac::pool_geometry g;
  ebac::extents out;
  std::vector<std::int64_t> idx;
};

pool_case max_pool(std::uint32_t dims, const std::uint64_t* input, const std::uint64_t* kernel, const std::uint64_t* stride,
                   const std::uint64_t* padding, const std::uint64_t* dilation, std::uint64_t planes, std::uint64_t seed,
                   bool ceil_mode = false) {
  pool_case c;
  c.g.dims = dims;
  std::uint64_t outsz[3] = {1, 1, 1}, in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1};
  for (std::uint32_t j = 0; j < dims; ++j) {
    c.g.input[j] = in[j] = input[j];
    c.g.kernel[j] = k[j] = kernel[j];
    c.g.stride[j] = s[j] = stride[j];
    c.g.padding[j] = p[j] = padding[j];
    c.g.dilation[j] = d[j] = dilation[j];
    const std::uint64_t span = in[j] + 2 * p[j] - d[j] * (k[j] - 1) - 1;
    outsz[j] = (ceil_mode ? (span + s[j] - 1) / s[j] : span / s[j]) + 1;
    if (ceil_mode && (outsz[j] - 1) * s[j] >= in[j] + p[j]) --outsz[j];  // PyTorch: the last window starts inside
  }
  c.out.rank = static_cast<int>(dims) + 2;
  c.out.dims[0] = planes;
  c.out.dims[1] = 1;
  for (std::uint32_t j = 0; j < dims; ++j) c.out.dims[2 + j] = outsz[j];
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::normal_distribution<float> nd;
  const std::uint64_t plane = in[0] * in[1] * in[2];
  std::vector<float> x(planes * plane);
  for (float& v : x) v = std::max(0.0f, nd(rng));  // ReLU'd: many ties at 0
  for (std::uint64_t n = 0; n < planes; ++n)
    for (std::uint64_t o0 = 0; o0 < outsz[0]; ++o0)
      for (std::uint64_t o1 = 0; o1 < outsz[1]; ++o1)
        for (std::uint64_t o2 = 0; o2 < outsz[2]; ++o2) {
          float best = -1.0f;
          std::int64_t at = -1;
          const std::uint64_t o[3] = {o0, o1, o2};
          for (std::uint64_t t0 = 0; t0 < k[0]; ++t0)
            for (std::uint64_t t1 = 0; t1 < k[1]; ++t1)
              for (std::uint64_t t2 = 0; t2 < k[2]; ++t2) {
                const std::uint64_t t[3] = {t0, t1, t2};
                std::int64_t pos[3];
                bool inside = true;
                for (int j = 0; j < 3; ++j) {
                  pos[j] = static_cast<std::int64_t>(o[j] * s[j] + t[j] * d[j]) - static_cast<std::int64_t>(p[j]);
                  inside &= pos[j] >= 0 && pos[j] < static_cast<std::int64_t>(in[j]);
                }
                if (!inside) continue;
                const std::int64_t flat =
                    (pos[0] * static_cast<std::int64_t>(in[1]) + pos[1]) * static_cast<std::int64_t>(in[2]) + pos[2];
                const float v = x[n * plane + static_cast<std::uint64_t>(flat)];
                if (v > best) {
                  best = v;
                  at = flat;
                }
              }
          c.idx.push_back(at);
        }
  return c;
}

}  // namespace

TEST_SUITE("property") {
  TEST_CASE("integers: every integer dtype, shape and pipeline round-trips bit-exactly") {
    std::uint64_t cases = 0;
    sweep_integers<bool>(cases);
    sweep_integers<std::uint8_t>(cases);
    sweep_integers<std::int8_t>(cases);
    sweep_integers<std::int16_t>(cases);
    sweep_integers<std::int32_t>(cases);
    sweep_integers<std::int64_t>(cases);
    CHECK(cases >= 6u * 5 * 7 * (sanitized_build ? 12 : 16));
  }

  TEST_CASE("integers: values beyond the code range are stored raw, and a bool byte other than 0/1 survives") {
    std::vector<std::int64_t> x(5000);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = (i % 100 == 0) ? std::numeric_limits<std::int64_t>::min() + static_cast<std::int64_t>(i)
                            : static_cast<std::int64_t>(i % 300);
    const auto s = check_lossless<std::int64_t>(x, ebac::extents{5000}, "ratio", "sparse int64 extremes");
    const auto h = ebac::host::inspect(s.data(), s.size());
    CHECK(h.quantizer == ebac::quantizer_id::exact);
    CHECK(h.outlier_count == 50);
    CHECK(s.size() < 5000 * 8 / 4);
    const bytes_of<bool> b = {0, 1, 1, 0, 2, 255, 1, 0, 1, 1, 0, 0};
    check_lossless<bool>(b, ebac::extents{12}, "fast", "bool bytes");
  }

  TEST_CASE("integers: max-pool indices with their geometry cost at most 3 bits each for a 2x2 window") {
    struct geo {
      std::uint32_t dims;
      std::uint64_t in[3], k[3], s[3], p[3], d[3];
      bool ceil;
      const char* name;
    };
    const geo geos[] = {
        {2, {28, 28, 1}, {2, 2, 1}, {2, 2, 1}, {0, 0, 0}, {1, 1, 1}, false, "2x2/2 on 28x28"},
        {2, {56, 56, 1}, {3, 3, 1}, {2, 2, 1}, {1, 1, 0}, {1, 1, 1}, false, "3x3/2 pad 1 on 56x56 (ResNet stem)"},
        {2, {27, 31, 1}, {3, 2, 1}, {2, 3, 1}, {1, 0, 0}, {2, 1, 1}, true, "3x2 dilated, ceil mode, odd sizes"},
        {1, {100, 1, 1}, {4, 1, 1}, {3, 1, 1}, {2, 0, 0}, {1, 1, 1}, false, "1-D"},
        {3, {8, 10, 12}, {2, 2, 2}, {2, 2, 2}, {0, 0, 1}, {1, 1, 1}, false, "3-D"},
    };
    for (const geo& g : geos) {
      CAPTURE(g.name);
      pool_case c = max_pool(g.dims, g.in, g.k, g.s, g.p, g.d, 64, g.dims * 31 + g.k[0]);
      // ebac's extents: N x C x spatial (C folded into N here: any leading dims work)
      for (const char* pipe : {"ratio", "fast", "rle", "plain"}) {
        const auto s = check_lossless<std::int64_t>(c.idx, c.out, pipe, g.name, c.g);
        const auto h = ebac::host::inspect(s.data(), s.size());
        CHECK(h.quantizer == ebac::quantizer_id::pool_window);
        CHECK(h.outlier_count == 0);
        CHECK(h.pool.dims == g.dims);
        const double bits = 8.0 * static_cast<double>(s.size()) / static_cast<double>(c.idx.size());
        CAPTURE(bits);
        if (std::string(pipe) == "ratio" && g.k[0] * g.k[1] * g.k[2] == 4) CHECK(bits <= 3.0);
      }
      // Without the geometry: delta coding of the raw indices, still lossless.
      check_lossless<std::int64_t>(c.idx, c.out, "ratio", std::string(g.name) + " without geometry");
    }
    // The wrong geometry (a 2x2 window for 3x3 indices): indices outside their
    // window are outliers, the result is still exact.
    const std::uint64_t in56[3] = {56, 56, 1}, k3[3] = {3, 3, 1}, s2[3] = {2, 2, 1}, p1[3] = {1, 1, 0}, d1[3] = {1, 1, 1};
    pool_case c = max_pool(2, in56, k3, s2, p1, d1, 16, 9);
    ebac::pool_geometry wrong = c.g;
    wrong.kernel[0] = wrong.kernel[1] = 2;
    const auto s = check_lossless<std::int64_t>(c.idx, c.out, "ratio", "wrong geometry", wrong);
    CHECK(ebac::host::inspect(s.data(), s.size()).outlier_count > 0);
    // int32 indices work the same way.
    std::vector<std::int32_t> i32(c.idx.begin(), c.idx.end());
    check_lossless<std::int32_t>(i32, c.out, "ratio", "int32 indices", c.g);
  }

  TEST_CASE("integers: invalid pooling geometries and misuse are refused with a message") {
    ebac::compress_options o;
    std::vector<std::int64_t> x(64, 0);
    std::vector<float> f(64, 0.0f);
    const ebac::extents e{4, 4, 4};
    const auto spec = spec_of("ratio");
    auto refuse = [&](const ebac::pool_geometry& g, const std::string& contains) {
      o.pooling = g;
      try {
        (void)compress(x.data(), e, spec, o);
        FAIL_CHECK("accepted geometry: ", contains);
      } catch (const ebac::error& err) {
        CHECK(err.code() == ebac::status::invalid_argument);
        CHECK(std::string(err.what()).find(contains) != std::string::npos);
      }
    };
    ebac::pool_geometry g;
    g.dims = 2;
    for (int j = 0; j < 2; ++j) {
      g.input[j] = 8;
      g.kernel[j] = 2;
      g.stride[j] = 2;
      g.dilation[j] = 1;
    }
    o.pooling = g;
    CHECK_NOTHROW((void)compress(x.data(), e, spec, o));
    auto bad = g;
    bad.kernel[1] = 0;
    refuse(bad, "pooling geometry");
    bad = g;
    bad.dims = 4;
    refuse(bad, "pooling geometry");
    bad = g;
    bad.stride[0] = std::uint64_t{1} << 31;
    refuse(bad, "pooling geometry");
    bad = g;
    bad.kernel[0] = bad.kernel[1] = 4096;
    refuse(bad, "pooling geometry");  // 2^24 offsets
    {                                 // more spatial dimensions than the tensor has
      o.pooling = g;
      try {
        (void)compress(x.data(), ebac::extents{64}, spec, o);
        FAIL_CHECK("2 spatial dims on a rank-1 tensor accepted");
      } catch (const ebac::error& err) { CHECK(std::string(err.what()).find("pooling geometry") != std::string::npos); }
    }
    o.pooling = g;
    ebac::compress_options of = o;
    of.bound = {1e-2, ebac::bound_mode::relative};
    try {
      (void)compress(f.data(), e, spec, of);
      FAIL_CHECK("a float tensor with a pooling geometry was accepted");
    } catch (const ebac::error& err) { CHECK(std::string(err.what()).find("integer") != std::string::npos); }
  }

}  // TEST_SUITE
