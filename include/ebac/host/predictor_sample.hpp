// ebac/host/predictor_sample.hpp - a small, spread-out piece of a tensor on
// which candidate predictors are tried (pipeline_spec::choose_predictor).
//
// Which predictor codes a tensor smallest depends on the data: Lorenzo over
// the spatial axes wins on smooth maps and at tight bounds, no prediction on
// sparse post-ReLU maps at loose ones (docs/benchmarks.md, "Results: ratio
// pipelines"). Coding the whole tensor once per candidate would multiply the
// compression time; coding a sample of about 2^17 elements per candidate
// costs a fraction of one pass on a tensor of training size (less again
// where the encoder estimates the sample's size from its statistics instead
// of coding it: concepts.hpp, estimating_encoder).
//
// The sample is made of the predictor's own independent blocks
// (lorenzo::independent_elements: a plane of the predicted axes, or a flat
// tile), taken evenly spaced over the tensor so that it sees every part of
// the batch, and copied next to each other: every candidate predicts inside
// the sample exactly as it would inside those blocks of the whole tensor
// (flat Lorenzo's tiles and the chunk cuts aside). A block larger than the
// sample keeps its first rows. Nothing here is written to a stream: the
// choice shows only as the predictor the stream header names.
#pragma once

#include <ebac/config.hpp>
#include <ebac/extents.hpp>
#include <ebac/predictor/lorenzo.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// Elements of the sample each candidate predictor is tried on.
inline constexpr std::uint64_t predictor_sample_elements = std::uint64_t{1} << 17;

/// Blocks taken when one block is larger than the sample (each keeps its
/// first rows).
inline constexpr std::uint64_t predictor_sample_max_blocks = 8;

/// Where the sample comes from: `blocks` evenly spaced blocks of
/// `block_elements` elements, the first `taken_elements` of each. `whole`:
/// the tensor is small enough to try the candidates on all of it.
struct predictor_sample {
  bool whole = true;
  std::uint64_t total_blocks = 0;
  std::uint64_t block_elements = 0;
  std::uint64_t blocks = 0;
  std::uint64_t taken_elements = 0;
  extents shape{};  ///< the sample's extents (the tensor's when whole)
  lorenzo pred{};   ///< the predictor, re-addressed for the sample's extents

  [[nodiscard]] std::uint64_t elements() const noexcept { return blocks * taken_elements; }
  /// First element of the k-th sampled block in the tensor.
  [[nodiscard]] std::uint64_t block_start(std::uint64_t k) const noexcept { return (k * total_blocks / blocks) * block_elements; }
};

/// Plans the sample of a tensor of extents e (n elements, validated for
/// `pred`) of about `target` elements.
[[nodiscard]] inline predictor_sample plan_predictor_sample(const lorenzo& pred, const extents& e, std::uint64_t n,
                                                            std::uint64_t target = predictor_sample_elements) noexcept {
  predictor_sample s;
  s.shape = e;
  s.pred = pred;
  const std::uint64_t block = pred.independent_elements(e);
  if (n <= target || block == 0 || n / block == 0) return s;  // small, or no whole block: try on everything
  // A block's rows: along axes, the outermost predicted axis's extent, each
  // row everything inside it; a flat tile has rows of one element.
  const bool flat = pred.axis[0] == lorenzo_flat_axis;
  const std::uint64_t rows = flat ? block : e.dims[pred.axis[0]];
  const std::uint64_t row_elements = flat ? 1 : block / rows;
  const std::uint64_t total = n / block;
  const std::uint64_t k = block <= target ? std::min(total, target / block) : std::min(total, predictor_sample_max_blocks);
  const std::uint64_t r = std::min(rows, std::max<std::uint64_t>(1, target / (k * row_elements)));
  if (k == total && r == rows && total * block == n) return s;  // the sample would be the tensor
  s.whole = false;
  s.total_blocks = total;
  s.block_elements = block;
  s.blocks = k;
  s.taken_elements = r * row_elements;
  s.pred = pred.on_blocks(e, k * block, s.shape);  // {k, rows, inner...} or {k * tile}
  if (flat) s.shape.dims[0] = s.elements();
  else s.shape.dims[1] = r;
  return s;
}

/// Copies the planned sample of `in` into out[0, s.elements()).
template <class S>
void gather_predictor_sample(const S* in, const predictor_sample& s, S* out) noexcept {
  for (std::uint64_t k = 0; k < s.blocks; ++k)
    std::memcpy(out + k * s.taken_elements, in + s.block_start(k), static_cast<std::size_t>(s.taken_elements) * sizeof(S));
}

/// The whole tensor's stream size a candidate's sample stream predicts: the
/// codebook is paid once whatever the size, everything else grows with the
/// elements coded.
[[nodiscard]] inline double predicted_stream_bytes(std::uint64_t sample_stream, std::uint64_t sample_codebook,
                                                   std::uint64_t sample_n, std::uint64_t n) noexcept {
  const double rest = static_cast<double>(sample_stream - sample_codebook);
  return rest * (static_cast<double>(n) / static_cast<double>(sample_n)) + static_cast<double>(sample_codebook);
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
