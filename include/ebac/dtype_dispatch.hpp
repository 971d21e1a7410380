// ebac/dtype_dispatch.hpp - a run-time dtype to a call with its element type.
//
// The one place that turns a run-time dtype (read from a stream header, a
// command line or a framework tensor) into a C++ element type: the CLI, the
// PyTorch extension and the fuzzers all dispatch through it, so a new dtype
// is added here once. Host-only: an id that is no dtype throws ebac::error
// (a dtype cast from a byte or an int may be anything).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

EBAC_NAMESPACE_BEGIN

/// Calls f(std::type_identity<T>{}) with T the element type of dtype t
/// (float, float16, bfloat16, bool, uint8_t, int8_t, int16_t, int32_t,
/// int64_t) and returns what it returns, which must be one type for all T.
/// Throws ebac::error (status::invalid_argument) when t is not a dtype id.
///
///   ebac::visit_dtype(h.type, [&]<class T>(std::type_identity<T>) { ebac::host::decompress<T>(...); });
template <class F>
decltype(auto) visit_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: return std::forward<F>(f)(std::type_identity<float>{});
    case dtype::f16: return std::forward<F>(f)(std::type_identity<float16>{});
    case dtype::bf16: return std::forward<F>(f)(std::type_identity<bfloat16>{});
    case dtype::b8: return std::forward<F>(f)(std::type_identity<bool>{});
    case dtype::u8: return std::forward<F>(f)(std::type_identity<std::uint8_t>{});
    case dtype::i8: return std::forward<F>(f)(std::type_identity<std::int8_t>{});
    case dtype::i16: return std::forward<F>(f)(std::type_identity<std::int16_t>{});
    case dtype::i32: return std::forward<F>(f)(std::type_identity<std::int32_t>{});
    case dtype::i64: return std::forward<F>(f)(std::type_identity<std::int64_t>{});
  }
  detail::fail(status::invalid_argument, "dtype id " + std::to_string(static_cast<unsigned>(t)) + " is not one of " +
                                             std::to_string(dtype_id_min) + ".." + std::to_string(dtype_id_max) +
                                             " (f32 f16 bf16 bool u8 i8 i16 i32 i64)");
}

EBAC_NAMESPACE_END
