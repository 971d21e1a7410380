// host/large_buffer.hpp: every element writable and read back, small
// buffers from new[], large ones a mapping of their own advised for huge
// pages where Linux has them (checked in /proc/self/smaps, not through the
// class), moves handing the memory over, and a size that overflows refused.
#include "test_support.hpp"

#include <ebac/host/large_buffer.hpp>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <utility>

#if defined(__linux__)
#include <unistd.h>
#endif

namespace {

/// The mapping in /proc/self/smaps that holds address p: its end address
/// and its VmFlags line, or {0, ""} when there is none (not Linux, or no
/// such mapping).
struct mapping_of_address {
  std::uintptr_t end = 0;
  std::string flags;
};

mapping_of_address mapping_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  mapping_of_address m;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
      if (inside) m.end = hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      m.flags = line;
      return m;
    }
  }
  return {};
}

std::string vm_flags_of(const void* p) { return mapping_of(p).flags; }

/// A large_buffer mapping of `bytes` at p: it starts on a huge page, the
/// advice ("hg" in VmFlags) covers the bytes at `advised` offsets (its whole
/// huge pages), and not its last byte's mapping (the tail, left to small
/// pages so that it holds no more memory than asked), which it returns.
mapping_of_address check_huge_page_layout(const void* p, std::size_t bytes, std::initializer_list<std::size_t> advised) {
  const auto* first = static_cast<const unsigned char*>(p);
  CHECK(reinterpret_cast<std::uintptr_t>(first) % ebac::host::huge_page_bytes == 0);
  for (const std::size_t at : advised) {
    const std::string flags = vm_flags_of(first + at);
    INFO("offset " << at << ": " << flags);
    CHECK(flags.find(" hg") != std::string::npos);
  }
  mapping_of_address tail = mapping_of(first + bytes - 1);
  INFO(tail.flags);
  CHECK(!tail.flags.empty());
  CHECK(tail.flags.find(" hg") == std::string::npos);
  return tail;
}

template <class T>
void fill_and_check(ebac::host::large_buffer<T>& b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) b.get()[i] = static_cast<T>(i * 2654435761u);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += b.get()[i] != static_cast<T>(i * 2654435761u);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("large_buffer: small buffers come from new[], large ones are mappings advised for huge pages") {
  using ebac::host::large_buffer;
  large_buffer<std::uint16_t> none;
  CHECK_FALSE(none);
  CHECK(none.get() == nullptr);

  const std::size_t small = 1000;
  large_buffer<std::uint16_t> s(small);
  REQUIRE(s);
  CHECK_FALSE(s.mapped());
  fill_and_check(s, small);

  // 6 MiB and a bit: three whole huge pages and a part of a fourth.
  const std::size_t large = (std::size_t{3} << 20) + 77;
  large_buffer<std::uint16_t> l(large);
  REQUIRE(l);
  CHECK(l.mapped() == ebac::host::huge_pages_available());
  fill_and_check(l, large);
#if defined(__linux__)
  if (ebac::host::huge_pages_available()) {
    // Starts on a huge page; the advice ("hg" in VmFlags) covers its whole
    // huge pages, from the first byte on, and not its tail (a part of a huge
    // page, left to small pages so that it holds no more memory than asked).
    const std::size_t huge = ebac::host::huge_page_bytes, bytes = 2 * large;
    const auto* first = reinterpret_cast<const unsigned char*>(l.get());
    const mapping_of_address tail = check_huge_page_layout(first, bytes, {0, huge + 5, 3 * huge - 1});
    // ... and ends with the last small page that `bytes` reaches: the spare
    // huge page asked for to align it was handed back.
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    CHECK(tail.end == (reinterpret_cast<std::uintptr_t>(first) + bytes + page - 1) / page * page);
  }
#endif

  // A move hands the memory over and leaves the source empty.
  std::uint16_t* const data = l.get();
  large_buffer<std::uint16_t> m(std::move(l));
  CHECK(m.get() == data);
  CHECK_FALSE(l);  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty by contract
  large_buffer<std::uint16_t> n2;
  n2 = std::move(m);
  CHECK(n2.get() == data);
  CHECK(n2.mapped() == ebac::host::huge_pages_available());
  fill_and_check(n2, large);

  // reset(0) and reset() free it; reset(k) reuses the object.
  n2.reset(0);
  CHECK_FALSE(n2);
  n2.reset(small);
  CHECK_FALSE(n2.mapped());
  fill_and_check(n2, small);
  n2.reset();
  CHECK_FALSE(n2);
}

TEST_CASE("large_buffer: one whole huge page is enough for a mapping of its own, less is not") {
  using ebac::host::large_buffer;
  const std::size_t huge = ebac::host::huge_page_bytes;
  large_buffer<std::uint8_t> below(huge - 1);
  CHECK_FALSE(below.mapped());
  fill_and_check(below, huge - 1);
  // 2.5 MiB: one whole huge page and a tail of half of one.
  const std::size_t bytes = huge + huge / 4;
  large_buffer<std::uint8_t> b(bytes);
  REQUIRE(b);
  CHECK(b.mapped() == ebac::host::huge_pages_available());
  fill_and_check(b, bytes);
#if defined(__linux__)
  if (ebac::host::huge_pages_available()) { (void)check_huge_page_layout(b.get(), bytes, {0, huge - 1}); }
#endif
}

TEST_CASE("large_buffer: a size whose bytes overflow is refused with bad_alloc before anything is allocated") {
  ebac::host::large_buffer<std::uint16_t> b;
  CHECK_THROWS_AS(b.reset(std::numeric_limits<std::size_t>::max() / 2 + 1), std::bad_alloc);
  CHECK_FALSE(b);
}

TEST_CASE("compression whose kept tokens and codes fill large buffers keeps every promise") {
  // 4.7 M elements: the striped encoder's kept symbols (a byte each) and raw
  // bits (two bytes), and ratio's kept codes (two bytes), are each over the
  // size that gets a mapping of its own (encode_stream.hpp).
  ebac::extents e;
  e.rank = 4;
  e.dims[0] = 8;
  e.dims[1] = 16;
  e.dims[2] = 192;
  e.dims[3] = 192;
  const std::vector<float> x = ebac_test::post_relu_maps(e, 7);
  REQUIRE(x.size() * sizeof(std::uint8_t) >= ebac::host::large_mapping_min_bytes);
  for (const char* pipe : {"balanced", "ratio"})
    (void)ebac_test::check_roundtrip(x, e, pipe, {1e-2, ebac::bound_mode::relative}, "post-ReLU maps, training size");
}
