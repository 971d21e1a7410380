// ebac/format/apply_stages.hpp - a stream header for the stages chosen on the data.
//
// quantizer/chosen_stages.hpp decides which stages code a tensor (the
// palette's or the main ones, with their bound and top level); this header
// writes that decision into the stream header: the stage ids and
// parameters, the chosen predictor's chunk size and the chunk table's size.
// The CUDA backend runs it on one thread (cuda/kernels/levels.cuh);
// tests/format/stored_header.cpp checks it against the host's streams.
#pragma once

#include <ebac/config.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/quantizer/chosen_stages.hpp>
#include <ebac/quantizer/quantizer_id.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN

/// The chunk size the writer cuts a tensor into under the predictor a
/// header names (format/chunking.hpp; the host's compress_to asks
/// stream_chunk_elements of the predictor it codes with), from the
/// pipeline's `requested` size.
[[nodiscard]] EBAC_HOST_DEVICE std::uint32_t chunk_elements_for(const stream_header& h, std::uint32_t requested) noexcept {
  return h.predictor == predictor_id::lorenzo ? stream_chunk_elements(h.lorenzo_params, h.shape, requested)
                                              : stream_chunk_elements(no_prediction{}, h.shape, requested);
}

/// Turns the header of the main stages (predictor, quantizer id, pooling
/// geometry filled in by the writer, chunk_elements the pipeline's
/// requested size) into the header of the chosen ones: the palette's
/// stages, or the main ones with their bound and top level; the chunk size
/// of the chosen predictor and the chunk table's size with it.
template <class MainQ>
EBAC_HOST_DEVICE void apply_stages(stream_header& h, const chosen_stages<MainQ>& s) noexcept {
  if (s.levels) {
    h.predictor = predictor_id::none;
    h.lorenzo_params = lorenzo{};
    h.quantizer = quantizer_id::levels;
    h.palette = s.lq.palette;
    h.eb_abs = 0;
    h.top = 0;
  } else {
    h.eb_abs = s.eb_abs;
    h.top = s.top;
  }
  h.chunk_elements = chunk_elements_for(h, h.chunk_elements);
  std::uint64_t n = 0;
  (void)h.shape.count(n);
  h.section_bytes[section_chunk_table] = 4 * ((n + h.chunk_elements - 1) / h.chunk_elements);
  h.section_bytes[section_params] = h.params_bytes();
}

EBAC_NAMESPACE_END
