// ebac/error_model/quantizer_error.hpp - the error the compressor actually
// makes, element by element.
//
// The reconstruction error does not depend on the predictor or the encoder:
// Lorenzo prediction runs on the integer codes (dual quantization) and the
// encoders are lossless, so y = quantizer reconstruction of the element's
// code, or x itself for an outlier. reconstruct_like_decoder() therefore
// gives the decompressed tensor without building a stream, which lets the
// inverse map try candidate bounds cheaply.
//
// The closed forms below are what a trainer can use without quantizing
// anything: the expected squared error of a value under each quantizer.
// They are not uniform eb^2/3 everywhere: exact zeros have no error, and
// under the zero/sign-preserving quantizer every x in (0, 2eb] is
// reconstructed as eb (error eb - |x|, biased); under the linear one every
// |x| < eb becomes 0 (error -x).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cmath>
#include <cstddef>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// y[i] = what the decoder returns for x[i] under quantizer q.
template <class Quantizer, class T>
void reconstruct_like_decoder(const Quantizer& q, const T* x, std::size_t n, T* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const quantized r = quantize_element(q, x[i]);
    y[i] = r.outlier ? x[i] : reconstruct_element<T>(q, r.code);
  }
}

/// E[e^2] for a value of magnitude a under the zero/sign-preserving quantizer
/// with bound eb: exact in the first bin, the uniform average beyond it
/// (over the position of a inside its bin, which a histogram cannot resolve).
struct sign_preserving_square_error {
  double eb = 0;
  EBAC_HOST_DEVICE constexpr double operator()(double a) const noexcept {
    a = a < 0 ? -a : a;
    if (a == 0) return 0;
    if (a <= 2 * eb) return (eb - a) * (eb - a);
    return eb * eb / 3;
  }
};

/// E[e^2] for a value of magnitude a under the linear quantizer (step 2eb).
struct linear_square_error {
  double eb = 0;
  EBAC_HOST_DEVICE constexpr double operator()(double a) const noexcept {
    a = a < 0 ? -a : a;
    if (a < eb) return a * a;
    return eb * eb / 3;
  }
};

}  // namespace error_model
EBAC_NAMESPACE_END
