// ebac/quantizer/pool_window.hpp - max-pool indices as offsets inside their windows.
//
// Max pooling saves, for every output element, the flat index (over the
// input's spatial dimensions) of the input element it took. That index lies
// inside the output element's pooling window, so given the pooling geometry
// it is one of kernel_h x kernel_w (x kernel_d) offsets: a 2x2 window needs
// 2 bits where int64 storage spends 64. This stage codes each index as that
// offset (row-major over the kernel); an index outside its window (a caller
// who passed the wrong geometry, or indices of something else) is an outlier
// and stored raw, so the coding is lossless whatever the data.
//
// Geometry follows PyTorch's MaxPool1d/2d/3d: for spatial dimension j the
// window of output position o starts at o * stride - padding and holds
// kernel positions dilation apart; indices count over the unpadded input,
// innermost dimension fastest. The tensor's last `dims` extents are the
// output's spatial sizes; the dimensions before them (batch, channels) do
// not matter.
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/extents.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/quantizer_id.hpp>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

/// A pooling layer's geometry, per spatial dimension (outermost first).
/// dims == 0 means "no geometry" (compress_options::pooling default).
struct pool_geometry {
  std::uint32_t dims = 0;  ///< 1..3 spatial dimensions
  std::uint64_t input[3]{}, kernel[3]{}, stride[3]{}, padding[3]{}, dilation[3]{};

  /// Every field is bounded so that no window arithmetic can overflow
  /// 64 bits: sizes below 2^31, output extents below 2^32, an input plane
  /// of at most 2^62 elements (indices are int64), and fewer than 2^22
  /// offsets in a window (the code range).
  static constexpr std::uint64_t field_limit = std::uint64_t{1} << 31;

  [[nodiscard]] EBAC_HOST_DEVICE status validate(const extents& shape) const noexcept {
    if (dims < 1 || dims > 3 || shape.rank < static_cast<int>(dims)) return status::invalid_argument;
    std::uint64_t window = 1, plane = 1;
    for (std::uint32_t j = 0; j < dims; ++j) {
      const std::uint64_t out = shape.dims[shape.rank - static_cast<int>(dims) + static_cast<int>(j)];
      if (input[j] < 1 || kernel[j] < 1 || stride[j] < 1 || dilation[j] < 1) return status::invalid_argument;
      if (input[j] >= field_limit || kernel[j] >= field_limit || stride[j] >= field_limit || padding[j] >= field_limit ||
          dilation[j] >= field_limit || out >= (std::uint64_t{1} << 32))
        return status::invalid_argument;
      window *= kernel[j];  // each factor < 2^31 and the product stays < 2^22: no overflow
      if (window >= static_cast<std::uint64_t>(quantizer_code_limit)) return status::invalid_argument;
      if (plane > (std::uint64_t{1} << 62) / input[j]) return status::invalid_argument;  // indices fit int64
      plane *= input[j];
    }
    return status::ok;
  }

  /// Bytes of the parameter section (u8 dims, then five varints per dimension).
  [[nodiscard]] EBAC_HOST_DEVICE std::size_t serialized_bytes() const noexcept {
    std::size_t b = 1;
    for (std::uint32_t j = 0; j < dims; ++j)
      b += detail::varint_size(input[j]) + detail::varint_size(kernel[j]) + detail::varint_size(stride[j]) +
           detail::varint_size(padding[j]) + detail::varint_size(dilation[j]);
    return b;
  }
  EBAC_HOST_DEVICE void serialize(std::byte* p) const noexcept {
    p[0] = static_cast<std::byte>(dims);
    std::size_t k = 1;
    for (std::uint32_t j = 0; j < dims; ++j) {
      k += detail::put_varint(p + k, input[j]);
      k += detail::put_varint(p + k, kernel[j]);
      k += detail::put_varint(p + k, stride[j]);
      k += detail::put_varint(p + k, padding[j]);
      k += detail::put_varint(p + k, dilation[j]);
    }
  }
  /// Reads a parameter section and validates it against the stream's shape.
  [[nodiscard]] EBAC_HOST_DEVICE static status deserialize(const std::byte* p, std::size_t bytes, const extents& shape,
                                                           pool_geometry& out) noexcept {
    if (bytes < 1) return status::corrupt_stream;
    out = pool_geometry{};
    out.dims = static_cast<std::uint32_t>(p[0]);
    if (out.dims < 1 || out.dims > 3) return status::corrupt_stream;
    const std::byte* q = p + 1;
    const std::byte* end = p + bytes;
    for (std::uint32_t j = 0; j < out.dims; ++j)
      if (!detail::get_varint(q, end, out.input[j]) || !detail::get_varint(q, end, out.kernel[j]) ||
          !detail::get_varint(q, end, out.stride[j]) || !detail::get_varint(q, end, out.padding[j]) ||
          !detail::get_varint(q, end, out.dilation[j]))
        return status::corrupt_stream;
    if (q != end) return status::corrupt_stream;
    if (out.validate(shape) != status::ok) return status::corrupt_stream;
    // A writer serializes each field in its shortest form; a longer one is not a stream it wrote.
    if (out.serialized_bytes() != bytes) return status::corrupt_stream;
    return status::ok;
  }
};

/// Codes a max-pool index as its offset inside the element's window.
/// Positional: the element's flat index in the tensor picks the window. The
/// code is unzigzag(offset), so that the encoder, which sees zigzagged codes,
/// packs the offset itself (levels.hpp does the same).
struct pool_window_quantizer {
  static constexpr quantizer_id id = quantizer_id::pool_window;
  static constexpr bool preserves_zero_and_sign = true;  // lossless

  pool_geometry g;
  std::uint64_t out[3]{};        ///< output spatial extents (the tensor's last dims)
  std::uint64_t in_stride[3]{};  ///< elements per step of each input spatial dimension
  std::uint64_t k_stride[3]{};   ///< offsets per step of each kernel dimension
  std::uint64_t plane = 1;       ///< input elements per (batch, channel) plane
  std::uint32_t window = 1;      ///< offsets in a window (codes are 0..window-1)

  /// `g` must have passed validate(shape).
  [[nodiscard]] EBAC_HOST_DEVICE static pool_window_quantizer make(const pool_geometry& g, const extents& shape) noexcept {
    pool_window_quantizer q;
    q.g = g;
    const int d = static_cast<int>(g.dims);
    std::uint64_t s = 1, k = 1;
    for (int j = d - 1; j >= 0; --j) {
      q.out[j] = shape.dims[shape.rank - d + j];
      q.in_stride[j] = s;
      q.k_stride[j] = k;
      s *= g.input[j];
      k *= g.kernel[j];
    }
    q.plane = s;
    q.window = static_cast<std::uint32_t>(k);
    return q;
  }

  /// x: the index saved for the tensor's element at flat position i.
  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE quantized quantize(S x, std::uint64_t i) const noexcept {
    static_assert(std::is_integral_v<S>);
    const auto v = static_cast<std::int64_t>(x);
    if (v < 0 || static_cast<std::uint64_t>(v) >= plane) return {0, true};
    std::uint64_t rest = static_cast<std::uint64_t>(v), pos = i;
    std::uint32_t offset = 0;
    for (int j = static_cast<int>(g.dims) - 1; j >= 0; --j) {
      const std::uint64_t ih = rest % g.input[j], o = pos % out[j];
      rest /= g.input[j];
      pos /= out[j];
      // offset from the window's start, o * stride - padding (may be negative: padding)
      const std::int64_t off =
          static_cast<std::int64_t>(ih) - (static_cast<std::int64_t>(o * g.stride[j]) - static_cast<std::int64_t>(g.padding[j]));
      const auto dil = static_cast<std::int64_t>(g.dilation[j]);
      if (off < 0 || off % dil != 0 || off / dil >= static_cast<std::int64_t>(g.kernel[j])) return {0, true};
      offset += static_cast<std::uint32_t>(static_cast<std::uint64_t>(off / dil) * k_stride[j]);
    }
    return {detail::unzigzag(offset), false};
  }

  /// The index a (valid) code stands for at flat position i.
  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE S reconstruct(std::int32_t code, std::uint64_t i) const noexcept {
    std::uint64_t pos = i, v = 0;
    const std::uint64_t c = detail::zigzag(code);
    for (int j = static_cast<int>(g.dims) - 1; j >= 0; --j) {
      const std::uint64_t o = pos % out[j];
      pos /= out[j];
      const std::uint64_t t = (c / k_stride[j]) % g.kernel[j];
      // o * stride - padding + t * dilation, in wrapping arithmetic (a
      // window reaching into the padding never holds a valid code's index)
      v += (o * g.stride[j] - g.padding[j] + t * g.dilation[j]) * in_stride[j];
    }
    return static_cast<S>(v);
  }

  template <class S>
  [[nodiscard]] EBAC_HOST_DEVICE bool valid_code(std::int32_t code) const noexcept {
    return detail::zigzag(code) < window;
  }
};

EBAC_NAMESPACE_END
