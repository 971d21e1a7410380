// Property tests: every pipeline x dtype x mode x shape round-trips within
// the bound, deterministically and independently of the thread count.
#include "property_inputs.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace ebac_test;

namespace {

const double k_bounds[] = {1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6};
const kind k_kinds[] = {kind::uniform, kind::relu, kind::smooth, kind::mixed};

/// All pipelines x both modes x all shapes for element type T. Bound and data
/// kind rotate with the indices so every pipeline meets every bound and kind.
template <class T>
void sweep() {
  const auto pipes = all_pipelines();
  const auto shapes = property_shapes();
  std::uint64_t cases = 0;
  for (std::size_t pi = 0; pi < pipes.size(); ++pi)
    for (int mi = 0; mi < 2; ++mi)
      for (std::size_t si = 0; si < shapes.size(); ++si) {
        if (sanitized_build && count_of(shapes[si]) > 20000 && (pi + mi) % 3 != 0) continue;
        const ebac::error_bound eb{k_bounds[(pi + si + 3 * mi) % 6],
                                   mi ? ebac::bound_mode::relative : ebac::bound_mode::absolute};
        const kind k = k_kinds[(pi + si + mi) % 4];
        const auto x = make_tensor<T>(shapes[si], k, 1000 * pi + 10 * si + mi);
        check_roundtrip(x, shapes[si], pipes[pi], eb, kind_name(k));
        ++cases;
      }
  CHECK(cases >= pipes.size() * 2 * (shapes.size() - 2));
}

}  // namespace

TEST_SUITE("property") {
  TEST_CASE("property: all pipelines x modes x shapes, float32") { sweep<float>(); }
  TEST_CASE("property: all pipelines x modes x shapes, float16") { sweep<ebac::float16>(); }
  TEST_CASE("property: all pipelines x modes x shapes, bfloat16") { sweep<ebac::bfloat16>(); }

  TEST_CASE("property: every bound from 1e-1 to 1e-6, tiny and huge, on a few pipelines") {
    const std::vector<double> bounds = {1e-1,  1e-2,  1e-3,   1e-4, 1e-5, 1e-6, 1e-9, 1e-20, 1e-38,
                                        1e-40, 1e-45, 1e-300, 1.0,  1e3,  1e30, 1e39, 1e300};
    const ebac::extents e{3, 11, 23};
    for (const char* pipe :
         {"fast", "ratio", "rle", "plain", "lorenzo2:linear:huffman", "lorenzo3:sign:rle", "balanced", "balanced-bound"})
      for (double b : bounds)
        for (auto mode : {ebac::bound_mode::absolute, ebac::bound_mode::relative}) {
          if (mode == ebac::bound_mode::relative && b > 1e6) continue;  // not a sensible relative bound
          const ebac::error_bound eb{b, mode};
          for (kind k : {kind::smooth, kind::mixed}) {
            check_roundtrip(make_tensor<float>(e, k, 7), e, pipe, eb, kind_name(k));
            check_roundtrip(make_tensor<ebac::float16>(e, k, 8), e, pipe, eb, kind_name(k));
            check_roundtrip(make_tensor<ebac::bfloat16>(e, k, 9), e, pipe, eb, kind_name(k));
          }
        }
  }

  TEST_CASE("property: chunk sizes (fused and whole-tensor paths, many chunks, partial last chunk)") {
    const auto pipes = all_pipelines();
    for (std::uint32_t chunk : {32u, 64u, 96u, 1024u, 4096u, 8192u, 1u << 24}) {
      for (std::size_t pi = 0; pi < pipes.size(); ++pi) {
        const ebac::extents e = (pi % 2) ? ebac::extents{5, 7, 61} : ebac::extents{2, 3, 4, 101};
        const ebac::error_bound eb{(pi % 3) ? 1e-3 : 1e-2, (pi % 4) ? ebac::bound_mode::absolute : ebac::bound_mode::relative};
        const kind k = k_kinds[(pi + chunk) % 4];
        check_roundtrip(make_tensor<float>(e, k, pi + chunk), e, pipes[pi], eb, kind_name(k), chunk);
        if (pi % 5 == 0) check_roundtrip(make_tensor<ebac::float16>(e, k, pi + chunk), e, pipes[pi], eb, kind_name(k), chunk);
      }
    }
    // Flat Lorenzo with a tile that does / does not divide the chunk.
    std::vector<float> x = make_floats(20000, 20000, kind::smooth, 3);
    for (std::uint32_t tile : {1u, 32u, 100u, 4096u, 30000u}) {
      for (std::uint32_t chunk : {32u, 3200u, 16384u}) {
        CAPTURE(tile);
        ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::run_length> p{ebac::lorenzo::flat(tile), chunk};
        ebac::compress_options o;
        o.bound = {1e-3, ebac::bound_mode::absolute};
        o.threads = 1;
        const auto s1 = ebac::host::compress(x.data(), ebac::extents{20000}, p, o);
        o.threads = 2;
        const auto s2 = ebac::host::compress(x.data(), ebac::extents{20000}, p, o);
        CHECK(s1 == s2);
        const auto y = ebac::host::decompress<float>(s1.data(), s1.size(), 2);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < x.size(); ++i) bad += !exact_within(x[i], y[i], 1e-3);
        CHECK(bad == 0);
      }
    }
  }

  TEST_CASE("property: explicit Lorenzo axes on a 4-D tensor") {
    const ebac::extents e{3, 6, 17, 18};
    const auto x = make_tensor<float>(e, kind::smooth, 44);
    for (auto l : {ebac::lorenzo::along({0}, 2), ebac::lorenzo::along({0, 2}, 5), ebac::lorenzo::along({1, 2, 3}, 4),
                   ebac::lorenzo::along({0, 1, 3}, 64), ebac::lorenzo::along({3}, 1)}) {
      CAPTURE(int(l.dims));
      ebac::pipeline<ebac::lorenzo, ebac::sign_preserving_quantizer, ebac::huffman> p{l, 256};
      ebac::compress_options o;
      o.bound = {1e-4, ebac::bound_mode::relative};
      o.threads = 1;
      const auto s1 = ebac::host::compress(x.data(), e, p, o);
      o.threads = 2;
      CHECK(ebac::host::compress(x.data(), e, p, o) == s1);
      const auto h = ebac::host::inspect(s1.data(), s1.size());
      CHECK(h.lorenzo_params.dims == l.dims);
      const auto y = ebac::host::decompress<float>(s1.data(), s1.size(), 2);
      const double eb = promised_bound(x, o.bound);  // 1e-4 x (max - min), computed here
      REQUIRE(eb > 0);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < x.size(); ++i) bad += !exact_within(x[i], y[i], eb) || ((x[i] == 0) != (y[i] == 0));
      CHECK(bad == 0);
    }
  }

}  // TEST_SUITE
