// libFuzzer target: arbitrary bytes into the stream parser and the decoder.
//
// The contract (DESIGN.md, stream format): a truncated, corrupted or hostile
// stream gives ebac::error, never a crash, a hang, an out-of-bounds access or
// undefined behaviour. Anything else escaping here, or any sanitizer report,
// is a bug; so is host::decompress_stream, fed the same bytes in pieces,
// disagreeing with host::decompress (a verdict or a bit). Seeds are valid streams (make_seeds.cpp), mostly without a
// checksum so that mutations get past the header into the decoders.
#include <ebac/ebac.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// A valid stream may legitimately expand to far more elements than it has
// bytes (an all-zero run-length chunk); the caller chooses the output size.
// Beyond this many elements only the header is checked, to keep runs fast
// and inside libFuzzer's memory limit.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 22;

/// The stream read 7 bytes at a time and decoded window by window
/// (host::decompress_stream, windows of a chunk): true where it decodes,
/// its elements in `out`.
template <class T>
bool decode_streamed(const std::byte* data, std::size_t size, std::uint64_t n, std::vector<ebac::storage_t<T>>& out) {
  out.assign(static_cast<std::size_t>(n), ebac::storage_t<T>{});
  ebac::host::memory_sink<ebac::storage_t<T>> sink{out.data()};
  std::size_t at = 0;
  ebac::host::stream_decode_options o;
  o.threads = 1;
  o.window_bytes = 1;
  try {
    ebac::host::decompress_stream<T>(
        [&](std::byte* p, std::size_t k) {
          k = std::min<std::size_t>({k, size - at, 7});
          std::memcpy(p, data + at, k);
          at += k;
          return k;
        },
        sink, o);
  } catch (const ebac::error&) { return false; }
  return true;
}

template <class T>
void decode(const std::byte* data, std::size_t size) {
  std::vector<ebac::storage_t<T>> streamed;
  const bool streamed_ok = decode_streamed<T>(data, size, ebac::element_count(ebac::host::inspect(data, size)), streamed);
  std::vector<ebac::storage_t<T>> out;
  try {
    out = ebac::host::decompress<T>(data, size, /*threads=*/1);
  } catch (const ebac::error&) {
    if (streamed_ok) __builtin_trap();  // the streaming decoder accepted what the whole-buffer one refuses
    throw;
  }
  // The same verdict and the same bits, window by window.
  // (An empty result's data() may be null, which memcmp must not be given.)
  if (!streamed_ok || out.size() != streamed.size() ||
      (!out.empty() && std::memcmp(out.data(), streamed.data(), out.size() * sizeof(out[0])) != 0))
    __builtin_trap();
  // Touch the result so a partially written output is seen by MSan-like tools.
  volatile std::size_t sink = out.size();
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const auto* data = reinterpret_cast<const std::byte*>(bytes);
  try {
    const ebac::stream_header h = ebac::host::inspect(data, size);
    if (ebac::element_count(h) > max_elements) return 0;
    ebac::visit_dtype(h.type, [&]<class T>(std::type_identity<T>) { decode<T>(data, size); });  // every dtype, integers too
  } catch (const ebac::error&) {
    // The documented way to reject a stream.
  }
  return 0;
}
