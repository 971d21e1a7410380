// ebac/host/codec_instances.hpp - the host codec's instantiations, declared
// or defined in one place, so that a program compiles the codec once.
//
// ebac is header-only: every translation unit that calls host::compress or
// host::decompress instantiates and optimizes the whole codec again, for each
// pipeline type it may see (with_pipeline() reaches 2 predictors x 2
// quantizers x 3 encoders) and each element type: about a minute of -O3 per
// element type. A program with many such units can instead
//   - compile every unit with EBAC_HOST_CODEC_PREBUILT defined (host/codec.hpp
//     then declares the instantiations below `extern template`), and
//   - define them once, e.g. one unit per element type:
//       #include <ebac/host/codec_instances.hpp>
//       EBAC_HOST_CODEC_INSTANTIATE_COMPRESS(float)
//       EBAC_HOST_CODEC_INSTANTIATE_DECOMPRESS(float)
// CMake does both: ebac_add_host_codec(<target>) (cmake/ebacHostCodec.cmake)
// builds a static library of those units whose users get the define.
//
// Only the public entry points are listed. A pipeline type not listed (a
// user's own stages) is instantiated where it is used, as without the define;
// a listed one that no unit defines is a link error, never a silent change.
#pragma once

#include <ebac/host/compress.hpp>
#include <ebac/host/decompress.hpp>
#include <ebac/host/inspect.hpp>

EBAC_NAMESPACE_BEGIN
namespace detail::host_codec_instances {
// Single-parameter aliases: a template-id with commas cannot be a macro argument.
template <class E>
using lorenzo_sign = pipeline<lorenzo, sign_preserving_quantizer, E>;
template <class E>
using lorenzo_linear = pipeline<lorenzo, linear_quantizer, E>;
template <class E>
using none_sign = pipeline<no_prediction, sign_preserving_quantizer, E>;
template <class E>
using none_linear = pipeline<no_prediction, linear_quantizer, E>;
}  // namespace detail::host_codec_instances
EBAC_NAMESPACE_END

// X(T, P) for every pipeline type with_pipeline() can produce, with element type T.
#define EBAC_HOST_CODEC_PIPELINES_E_(X, T, E)                   \
  X(T, ::ebac::detail::host_codec_instances::lorenzo_sign<E>)   \
  X(T, ::ebac::detail::host_codec_instances::lorenzo_linear<E>) \
  X(T, ::ebac::detail::host_codec_instances::none_sign<E>)      \
  X(T, ::ebac::detail::host_codec_instances::none_linear<E>)
// One line per registered encoder (encoder/registry.hpp).
#define EBAC_HOST_CODEC_PIPELINES_(X, T)                    \
  EBAC_HOST_CODEC_PIPELINES_E_(X, T, ::ebac::block_bitpack) \
  EBAC_HOST_CODEC_PIPELINES_E_(X, T, ::ebac::run_length)    \
  EBAC_HOST_CODEC_PIPELINES_E_(X, T, ::ebac::huffman)       \
  EBAC_HOST_CODEC_PIPELINES_E_(X, T, ::ebac::context_ans)   \
  EBAC_HOST_CODEC_PIPELINES_E_(X, T, ::ebac::striped_huffman)

// The two compress() overloads for pipeline P and element type T.
#define EBAC_HOST_CODEC_COMPRESS_DECL_(PREFIX, T, P)                                                                         \
  PREFIX std::vector<std::byte> ebac::host::compress<P, T>(const T*, const ::ebac::extents&, const P&,                       \
                                                           const ::ebac::compress_options&);                                 \
  PREFIX std::size_t ebac::host::compress<P, T>(const T*, const ::ebac::extents&, const P&, const ::ebac::compress_options&, \
                                                std::byte*, std::size_t);
#define EBAC_HOST_CODEC_EXTERN_COMPRESS_(T, P) EBAC_HOST_CODEC_COMPRESS_DECL_(extern template, T, P)
#define EBAC_HOST_CODEC_DEFINE_COMPRESS_(T, P) EBAC_HOST_CODEC_COMPRESS_DECL_(template, T, P)

// The two decompress() overloads for element type T.
#define EBAC_HOST_CODEC_DECOMPRESS_DECL_(PREFIX, T)                                                            \
  PREFIX void ebac::host::decompress<T>(const std::byte*, std::size_t, T*, std::uint64_t, int, std::uint64_t); \
  PREFIX std::vector<::ebac::storage_t<T>> ebac::host::decompress<T>(const std::byte*, std::size_t, int, std::uint64_t);

/// Defines compress() for every pipeline type with element type T (one unit of the program).
#define EBAC_HOST_CODEC_INSTANTIATE_COMPRESS(T) EBAC_HOST_CODEC_PIPELINES_(EBAC_HOST_CODEC_DEFINE_COMPRESS_, T)
/// Defines decompress() for element type T (one unit of the program).
#define EBAC_HOST_CODEC_INSTANTIATE_DECOMPRESS(T) EBAC_HOST_CODEC_DECOMPRESS_DECL_(template, T)
/// Declares both, for element type T, as defined in another unit.
#define EBAC_HOST_CODEC_EXTERN(T)                                 \
  EBAC_HOST_CODEC_PIPELINES_(EBAC_HOST_CODEC_EXTERN_COMPRESS_, T) \
  EBAC_HOST_CODEC_DECOMPRESS_DECL_(extern template, T)

// Every element type ebac codes (dtype.hpp), as the macro argument X takes it.
#define EBAC_HOST_CODEC_FOR_EACH_ELEMENT(X) \
  X(float)                                  \
  X(::ebac::float16) X(::ebac::bfloat16) X(bool) X(std::uint8_t) X(std::int8_t) X(std::int16_t) X(std::int32_t) X(std::int64_t)

#ifdef EBAC_HOST_CODEC_PREBUILT
EBAC_HOST_CODEC_FOR_EACH_ELEMENT(EBAC_HOST_CODEC_EXTERN)
#endif
