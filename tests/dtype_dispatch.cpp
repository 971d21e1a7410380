// tests/dtype_dispatch.cpp - the tests of include/ebac/dtype_dispatch.hpp.
//
// ebac::visit_dtype: each run-time dtype reaches the callable as its own
// element type, and an id that is no dtype is refused with ebac::error.
#include "host/test_support.hpp"

#include <ebac/dtype_dispatch.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace {

/// What visit_dtype handed the callable, as plain values.
struct seen {
  ebac::dtype type{};  ///< dtype_of<T>
  std::size_t bytes = 0;
  bool floating = false;
  bool matches = false;  ///< T is the type `expected` names
};

template <class Expected>
seen visit_expecting(ebac::dtype t) {
  return ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) {
    return seen{ebac::dtype_of<T>::value, sizeof(T), ebac::floating_element<T>, std::is_same_v<T, Expected>};
  });
}

template <class Expected>
void check_maps(ebac::dtype t, std::size_t bytes, bool floating) {
  CAPTURE(ebac::to_string(t));
  const seen s = visit_expecting<Expected>(t);
  CHECK(s.matches);
  CHECK(s.type == t);
  CHECK(s.bytes == bytes);
  CHECK(s.bytes == ebac::size_of(t));
  CHECK(s.floating == floating);
  CHECK(s.floating == ebac::is_floating(t));
}

}  // namespace

TEST_CASE("visit_dtype: each dtype reaches the callable as its element type") {
  check_maps<float>(ebac::dtype::f32, 4, true);
  check_maps<ebac::float16>(ebac::dtype::f16, 2, true);
  check_maps<ebac::bfloat16>(ebac::dtype::bf16, 2, true);
  check_maps<bool>(ebac::dtype::b8, sizeof(bool), false);
  check_maps<std::uint8_t>(ebac::dtype::u8, 1, false);
  check_maps<std::int8_t>(ebac::dtype::i8, 1, false);
  check_maps<std::int16_t>(ebac::dtype::i16, 2, false);
  check_maps<std::int32_t>(ebac::dtype::i32, 4, false);
  check_maps<std::int64_t>(ebac::dtype::i64, 8, false);
}

TEST_CASE("visit_dtype: every valid id round-trips through dtype_of, and the result comes back") {
  for (unsigned id = ebac::dtype_id_min; id <= ebac::dtype_id_max; ++id) {
    CAPTURE(id);
    const auto t = static_cast<ebac::dtype>(id);
    const ebac::dtype back = ebac::visit_dtype(t, []<class T>(std::type_identity<T>) { return ebac::dtype_of<T>::value; });
    CHECK(back == t);
  }
  // A void callable, and one that returns a reference (decltype(auto) keeps it).
  int calls = 0;
  ebac::visit_dtype(ebac::dtype::i16, [&]<class T>(std::type_identity<T>) { ++calls; });
  CHECK(calls == 1);
  int& r = ebac::visit_dtype(ebac::dtype::f32, [&]<class T>(std::type_identity<T>) -> int& { return calls; });
  CHECK(&r == &calls);
}

TEST_CASE("visit_dtype: an id that is no dtype is refused with ebac::error, and the callable is not called") {
  for (unsigned id : {0u, 10u, 0x7fu, 0xffu}) {
    CAPTURE(id);
    int calls = 0;
    try {
      ebac::visit_dtype(static_cast<ebac::dtype>(id), [&]<class T>(std::type_identity<T>) { ++calls; });
      FAIL_CHECK("no ebac::error for dtype id ", id);
    } catch (const ebac::error& e) {
      CHECK(e.code() == ebac::status::invalid_argument);
      const std::string w = e.what();
      CHECK(w.find("dtype id " + std::to_string(id) + " ") != std::string::npos);
      CHECK(w.find("1..9") != std::string::npos);
    }
    CHECK(calls == 0);
  }
}
