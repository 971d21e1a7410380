// ebac/element_code.hpp - one element's encoder input, from the raw tensor.
//
// The staged pipeline quantizes the whole tensor into a field, then turns the
// field into predictor residuals, then zigzags them into the codes the
// encoder packs. A fused kernel (cuda/kernels/fused_bitpack.cuh) skips both
// arrays: it quantizes an element and the predecessors its predictor reads
// on the spot. Same functors, same order of operations, so the same code;
// tests/element_code.cpp checks that on the host. Elements go
// through quantize_at (quantizer/element_ops.hpp), so every quantizer
// works here, the positional pool_window one included (it gets the
// element's flat index). It composes a predictor with a quantizer, so it
// sits with the pipeline, above both stages (docs/stages.md, "Layers").
#pragma once

#include <ebac/config.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/element_ops.hpp>
#include <ebac/quantizer/linear.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace detail {

/// zigzag(residual of the quantized field at i), with every quantized value
/// it reads computed from `in` by quantize_at. `outlier` says whether
/// element i itself is stored raw (its field value is then 0, as staged).
/// S is the element's storage type (storage_t<T>).
template <class P, class Q, class S>
EBAC_HOST_DEVICE std::uint32_t element_code(const P& pred, const extents& shape, const Q& q, const S* in, std::uint64_t i,
                                            bool& outlier) noexcept {
  const quantized self = quantize_at(q, in[i], i);
  outlier = self.outlier;
  const auto q_at = [&](std::uint64_t j) -> std::uint32_t {
    return static_cast<std::uint32_t>(j == i ? self.code : quantize_at(q, in[j], j).code);
  };
  return zigzag(static_cast<std::int32_t>(pred.residual(shape, i, q_at)));
}

}  // namespace detail
EBAC_NAMESPACE_END
