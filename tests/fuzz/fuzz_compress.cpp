// libFuzzer target: arbitrary bytes as a tensor (any dtype, any shape up to
// rank 4, any bound, pipeline and max-pool geometry; compress_input.hpp),
// through compress and decompress, with the promise checked on every element
// here, independently of the library's own verification:
//   - integer and bool tensors: every element's bytes come back;
//   - finite x: |x - y| <= the requested bound (absolute; or relative x
//     (max - min) over the finite inputs, in double), decided exactly;
//   - NaN and +-Inf: the same bits;
//   - the sign-preserving quantizer: zero stays zero, signs stay;
//   - the stream is no larger than max_compressed_bytes and its header says
//     what was asked.
// Any violation traps; so does an exception other than the one refusal a
// valid request can meet (a relative bound whose product with the range
// overflows).
#include "compress_input.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

[[noreturn]] void violation(const char* what, std::uint64_t i = 0, double x = 0, double y = 0, double eb = 0) {
  std::fprintf(stderr, "fuzz_compress: %s (element %llu: x = %.17g, y = %.17g, bound %.17g)\n", what,
               static_cast<unsigned long long>(i), x, y, eb);
  __builtin_trap();
}

/// |x - y| <= eb, exactly: the double difference s = x - y plus its exact
/// rounding error (two-sum) decide the one ambiguous case |s| == eb.
bool within(double x, double y, double eb) {
  const double s = x - y;
  const double z = s - x;
  const double err = (x - (s - z)) + (-y - z);  // (x - y) - s, exactly
  const double m = std::fabs(s);
  if (m != eb) return m < eb;
  return err == 0 || (s > 0) == (err < 0);
}

template <class T>
T load(const std::uint8_t* p) {
  typename ebac::bits_of<T>::type bits = 0;
  std::memcpy(&bits, p, sizeof bits);  // little-endian hosts only, like the library
  return ebac::from_raw_bits<T>(bits);
}

/// Integer and bool tensors: lossless, bytes compared.
template <class T>
void run_integer(const ebac_fuzz::compress_case& c) {
  using S = ebac::storage_t<T>;
  std::vector<S> x(static_cast<std::size_t>(c.count));
  if (c.count) std::memcpy(x.data(), c.data, static_cast<std::size_t>(c.count) * sizeof(S));
  if constexpr (std::is_same_v<T, bool>)
    for (S& v : x) v &= 1;
  ebac::compress_options opt;
  opt.threads = 1;
  opt.checksum = (c.count & 1) != 0;
  opt.pooling = c.pooling;
  const T* in = reinterpret_cast<const T*>(x.data());
  std::vector<std::byte> stream;
  std::size_t bound_bytes = 0;
  try {
    stream = ebac::with_pipeline(c.spec, c.shape, [&](auto pipe) {
      bound_bytes = ebac::max_compressed_bytes<decltype(pipe), T>(c.shape, pipe);
      return ebac::host::compress(in, c.shape, pipe, opt);
    });
  } catch (const ebac::error& e) {
    std::fprintf(stderr, "fuzz_compress: compress refused a valid request: %s\n", e.what());
    __builtin_trap();
  }
  if (stream.size() > bound_bytes) violation("stream larger than max_compressed_bytes");
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  if (h.type != ebac::dtype_of<T>::value || ebac::element_count(h) != c.count || h.has_checksum() != opt.checksum)
    violation("the header does not describe the request");
  const std::vector<S> y = ebac::host::decompress<T>(stream.data(), stream.size(), 1);
  if (y.size() != x.size()) violation("wrong element count");
  for (std::uint64_t i = 0; i < c.count; ++i)
    if (x[i] != y[i]) violation("integer element not restored exactly", i, static_cast<double>(x[i]), static_cast<double>(y[i]));
}

template <class T>
void run(const ebac_fuzz::compress_case& c) {
  std::vector<T> x(static_cast<std::size_t>(c.count));
  for (std::uint64_t i = 0; i < c.count; ++i) x[i] = load<T>(c.data + i * sizeof(T));

  // The promised bound, computed here.
  double lo = 0, hi = 0;
  bool any = false;
  for (const T& v : x) {
    const double f = ebac::to_float(v);
    if (!std::isfinite(f)) continue;
    lo = any ? std::min(lo, f) : f;
    hi = any ? std::max(hi, f) : f;
    any = true;
  }
  const double promised = c.bound.mode == ebac::bound_mode::absolute ? c.bound.value : c.bound.value * (any ? hi - lo : 0.0);

  ebac::compress_options opt;
  opt.bound = c.bound;
  opt.threads = 1;
  opt.checksum = (c.count & 1) != 0;
  std::vector<std::byte> stream;
  std::size_t bound_bytes = 0;
  try {
    stream = ebac::with_pipeline(c.spec, c.shape, [&](auto pipe) {
      bound_bytes = ebac::max_compressed_bytes<decltype(pipe), T>(c.shape, pipe);
      return ebac::host::compress(x.data(), c.shape, pipe, opt);
    });
  } catch (const ebac::error& e) {
    if (e.code() == ebac::status::invalid_argument && !std::isfinite(promised)) return;  // documented refusal
    std::fprintf(stderr, "fuzz_compress: compress refused a valid request: %s\n", e.what());
    __builtin_trap();
  }
  if (stream.size() > bound_bytes) violation("stream larger than max_compressed_bytes");
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  if (h.type != ebac::dtype_of<T>::value || h.mode != c.bound.mode || h.eb_requested != c.bound.value ||
      ebac::element_count(h) != c.count || h.has_checksum() != opt.checksum)
    violation("the header does not describe the request");

  const std::vector<T> y = ebac::host::decompress<T>(stream.data(), stream.size(), 1);
  if (y.size() != x.size()) violation("wrong element count");
  // Promised by the spec, or (choose_quantizer) by the quantizer the stream names.
  const bool signs = c.spec.quantizer == ebac::quantizer_id::sign_preserving &&
                     (!c.spec.choose_quantizer || h.quantizer != ebac::quantizer_id::linear);
  for (std::uint64_t i = 0; i < c.count; ++i) {
    const double xf = ebac::to_float(x[i]), yf = ebac::to_float(y[i]);
    if (!std::isfinite(xf)) {
      if (ebac::raw_bits(x[i]) != ebac::raw_bits(y[i])) violation("NaN/Inf not restored bit-exactly", i, xf, yf, promised);
      continue;
    }
    if (!std::isfinite(yf)) violation("finite input decoded as NaN/Inf", i, xf, yf, promised);
    if (!within(xf, yf, promised)) violation("error bound violated", i, xf, yf, promised);
    if (signs && ((xf == 0) != (yf == 0) || (xf < 0) != (yf < 0) || (xf > 0) != (yf > 0)))
      violation("zero or sign not preserved", i, xf, yf, promised);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  ebac_fuzz::compress_case c;
  if (!ebac_fuzz::read_compress_case(bytes, size, c)) return 0;
  ebac::visit_dtype(c.type, [&]<class T>(std::type_identity<T>) {
    if constexpr (ebac::floating_element<T>) run<T>(c);
    else run_integer<T>(c);
  });
  return 0;
}
