// ebac/host/stream_destination.hpp - where the host compressor writes a
// stream: a callable, asked once for `bytes` bytes when the stream's size is
// known, that returns where to write them (or throws), seen through one
// non-template type.
//
// Why: host::compress has two public forms (a new std::vector, a caller's
// buffer) and the predictor choice sizes its candidates into a third
// buffer. With the destination a template parameter, each of the three
// compiled its own copy of the whole encoder for every pipeline and element
// type, and the prebuilt codec's compress units spent most of their build
// on those copies. Through this type the encoder is compiled once; the cost
// is one indirect call a stream.
#pragma once

#include <ebac/config.hpp>

#include <cstddef>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace host::detail {

/// A reference to a callable std::byte*(std::size_t), like a function_ref:
/// it does not own the callable, which must outlive it (a lambda passed
/// straight to the compressor lives until the call returns).
class stream_destination {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, stream_destination> && std::is_invocable_r_v<std::byte*, F&, std::size_t>)
      stream_destination(F&& f)
  noexcept  // NOLINT(google-explicit-constructor): a lambda converts where a destination is expected
      : callable_(static_cast<const void*>(&f)), call_([](const void* c, std::size_t bytes) -> std::byte* {
          return (*static_cast<std::remove_reference_t<F>*>(const_cast<void*>(c)))(bytes);
        }) {}

  /// Where the stream's `bytes` bytes go.
  std::byte* operator()(std::size_t bytes) const { return call_(callable_, bytes); }

 private:
  const void* callable_;
  std::byte* (*call_)(const void*, std::size_t);
};

}  // namespace host::detail
EBAC_NAMESPACE_END
