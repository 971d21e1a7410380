// libFuzzer target: arbitrary bytes into the stream parser and the decoder.
//
// The contract (DESIGN.md, stream format): a truncated, corrupted or hostile
// stream gives ebac::error, never a crash, a hang, an out-of-bounds access or
// undefined behaviour. Anything else escaping here, or any sanitizer report,
// is a bug. Seeds are valid streams (make_seeds.cpp), mostly without a
// checksum so that mutations get past the header into the decoders.
#include <ebac/ebac.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace {

// A valid stream may legitimately expand to far more elements than it has
// bytes (an all-zero run-length chunk); the caller chooses the output size.
// Beyond this many elements only the header is checked, to keep runs fast
// and inside libFuzzer's memory limit.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 22;

template <class T>
void decode(const std::byte* data, std::size_t size) {
  const auto out = ebac::host::decompress<T>(data, size, /*threads=*/1);
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
