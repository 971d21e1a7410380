// ebac/pipeline.hpp - composing predictor x quantizer x encoder.
//
// A pipeline is a compile-time triple checked by the concepts in
// concepts.hpp; any predictor composes with any quantizer and any encoder.
// For tools that choose at run time (the CLI, the PyTorch extension), a
// pipeline_spec names the stages and with_pipeline() calls a generic lambda
// with the matching concrete pipeline type.
#pragma once

#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/encoder/block_bitpack.hpp>
#include <ebac/encoder/huffman.hpp>
#include <ebac/encoder/registry.hpp>
#include <ebac/encoder/run_length.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/linear.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

EBAC_NAMESPACE_BEGIN

/// Elements per independently encoded chunk: the unit of parallel work and of
/// the chunk table. Fixed per stream, so the output never depends on threads.
inline constexpr std::uint32_t default_chunk_elements = 1u << 14;

template <predictor Predictor, quantizer Quantizer, encoder Encoder>
struct pipeline {
  using predictor_type = Predictor;
  using quantizer_type = Quantizer;
  using encoder_type = Encoder;

  Predictor predictor{};
  std::uint32_t chunk_elements = default_chunk_elements;
  /// Host only (the CUDA backend refuses it). With a Lorenzo predictor: per
  /// tensor, code with whichever of this predictor, flat 1-D Lorenzo and no
  /// prediction gives the smallest stream on a sample of the tensor
  /// (host/predictor_sample.hpp; with the ANS encoder the sample's stream
  /// size is estimated from its statistics, not coded). The stream header
  /// names the one used, so decoding is unchanged; like everything else, the
  /// choice does not depend on the thread count.
  bool choose_predictor = false;
  /// Host only (the CUDA backend refuses it). With a Lorenzo predictor and
  /// the zero/sign-preserving quantizer: per tensor, code with the linear
  /// quantizer of the same bound instead where the sample (as above, with
  /// choose_predictor every predictor for each quantizer) says its stream is
  /// smaller. This gives up zero and sign preservation (a small value may
  /// come back as 0): the error bound is all such a stream promises, as
  /// SZ3's, ZFP's and quantize + zstd's do. The header names the quantizer.
  bool choose_quantizer = false;
};

/// A pipeline chosen at run time.
struct pipeline_spec {
  predictor_id predictor = predictor_id::lorenzo;
  lorenzo lorenzo_params = lorenzo::flat();
  /// 0: use lorenzo_params as given. 2 or 3: Lorenzo over the last 2 (3)
  /// axes when the tensor has rank >= 3 (spatial activations), else flat 1-D.
  int lorenzo_auto_dims = 0;
  quantizer_id quantizer = quantizer_id::sign_preserving;
  encoder_id encoder = encoder_id::block_bitpack;
  std::uint32_t chunk_elements = default_chunk_elements;
  /// pipeline::choose_predictor and pipeline::choose_quantizer (host only).
  bool choose_predictor = false;
  bool choose_quantizer = false;

  /// The concrete Lorenzo parameters for a tensor of this shape.
  [[nodiscard]] lorenzo lorenzo_for(const extents& e) const noexcept {
    if (lorenzo_auto_dims == 0) return lorenzo_params;
    if (e.rank >= 3) {
      const int d = lorenzo_auto_dims < e.rank - 1 ? lorenzo_auto_dims : e.rank - 1;
      return lorenzo::along_last(d, e.rank, d == 3 ? lorenzo::default_tile_3d : lorenzo::default_tile_2d);
    }
    return lorenzo::flat();
  }
};

/// The named pipelines, in the order `--pipeline all` reports them.
inline constexpr std::array<std::string_view, 9> pipeline_names = {"fast", "ratio",     "ratio-flat", "rle",           "plain",
                                                                   "max",  "max-bound", "balanced",   "balanced-bound"};

/// Parses a named pipeline ("fast", "ratio", ...) or an explicit
/// "predictor:quantizer:encoder" triple, e.g. "lorenzo2:sign:huffman".
///   predictor: none | lorenzo (flat 1-D) | lorenzo1 | lorenzo2 | lorenzo3 (last axes)
///   quantizer: sign (zero/sign preserving) | linear
///   encoder:   the name of a registered encoder (encoder/registry.hpp): bitpack | rle | huffman | ans | striped
inline bool parse_pipeline(std::string_view name, pipeline_spec& s) {
  s = pipeline_spec{};
  if (name == "fast") return true;  // flat Lorenzo + sign-preserving + bit-packing
  if (name == "ratio") {
    s.lorenzo_auto_dims = 2;
    s.encoder = encoder_id::huffman;
    return true;
  }
  if (name == "ratio-flat") {
    s.encoder = encoder_id::huffman;
    return true;
  }
  if (name == "rle") {
    s.encoder = encoder_id::run_length;
    return true;
  }
  if (name == "plain") {
    s.predictor = predictor_id::none;
    return true;
  }
  // Compressed on the host only (the CUDA backend refuses it, but decodes
  // its streams): ratio's stages with the context-modelled ANS encoder,
  // smaller than ratio at every bound measured (docs/benchmarks.md) at
  // about half its speed. Chunks of 2^16 elements: each chunk costs 24
  // bytes (table entry, byte count, four final states), which at 16384
  // elements was 60% of a 1e-1 attention map's stream. A GPU decodes one
  // chunk a thread: a 1 GiB tensor in these chunks at 22-40 GB/s, in chunks
  // of 4096 at about 250 GB/s for a 3% smaller ratio (docs/cuda.md). The
  // predictor is chosen per tensor: no prediction codes sparse post-ReLU
  // maps at loose bounds 5-11% smaller than 2-D Lorenzo, flat Lorenzo some
  // dense maps 4-10% smaller.
  if (name == "max") {
    s.lorenzo_auto_dims = 2;
    s.encoder = encoder_id::context_ans;
    s.chunk_elements = 1u << 16;
    s.choose_predictor = true;
    return true;
  }
  // max, without its promise of zeros and signs: per tensor also the linear
  // quantizer where that codes smaller (pipeline::choose_quantizer). For a
  // saved tensor whose backward needs only values within the bound (the
  // input of a convolution, a linear layer or a BatchNorm), not a ReLU mask
  // read from it. On the training slice its streams are 11-42% smaller than
  // max's at rel 1e-1, 0-7% at 1e-2 and tighter (docs/benchmarks.md).
  if (name == "max-bound") {
    parse_pipeline("max", s);
    s.choose_quantizer = true;
    return true;
  }
  // ratio's stages with the striped Huffman encoder (encoder/striped_huffman.hpp):
  // within 1% of ratio's streams on the training slice, decompressed
  // 0.98-1.75x and compressed 0.93-1.49x as fast, and decompressed
  // 1.16-1.70x faster again since the striped decoder (docs/benchmarks.md). Host
  // only: the CUDA backend refuses its pipelines and its streams.
  if (name == "balanced") {
    s.lorenzo_auto_dims = 2;
    s.encoder = encoder_id::striped_huffman;
    return true;
  }
  // balanced with the linear quantizer: the bound is all it promises (a
  // small value may come back as 0, as with max-bound); at rel 1e-1 its
  // streams are markedly smaller (docs/benchmarks.md).
  if (name == "balanced-bound") {
    parse_pipeline("balanced", s);
    s.quantizer = quantizer_id::linear;
    return true;
  }
  const auto c1 = name.find(':');
  if (c1 == std::string_view::npos) return false;
  const auto c2 = name.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return false;
  const auto p = name.substr(0, c1), q = name.substr(c1 + 1, c2 - c1 - 1), e = name.substr(c2 + 1);
  if (p == "none") s.predictor = predictor_id::none;
  else if (p == "lorenzo") s.lorenzo_params = lorenzo::flat();
  else if (p == "lorenzo1") s.lorenzo_auto_dims = 1;
  else if (p == "lorenzo2") s.lorenzo_auto_dims = 2;
  else if (p == "lorenzo3") s.lorenzo_auto_dims = 3;
  else return false;
  if (s.lorenzo_auto_dims == 1) {  // last axis only
    s.lorenzo_auto_dims = 0;
    s.lorenzo_params = lorenzo{};
    s.lorenzo_params.dims = 1;
    s.lorenzo_params.axis[0] = 0xfe;  // resolved to rank-1 by resolve_last_axis()
    s.lorenzo_params.tile[0] = lorenzo::default_flat_tile;
  }
  if (q == "sign") s.quantizer = quantizer_id::sign_preserving;
  else if (q == "linear") s.quantizer = quantizer_id::linear;
  else return false;
  return encoder_named(e, s.encoder);
}

/// Calls f(pipeline<P, Q, E>{...}) for the stages a spec names, resolved for
/// a tensor of shape e. Instantiates every combination once.
template <class F>
decltype(auto) with_pipeline(const pipeline_spec& s, const extents& e, F&& f) {
  auto with_encoder = [&](auto pred, auto quant_tag) -> decltype(auto) {
    using P = decltype(pred);
    using Q = typename decltype(quant_tag)::type;
    return visit_encoder(s.encoder, [&](auto encoder_tag) -> decltype(auto) {
      return f(
          pipeline<P, Q, typename decltype(encoder_tag)::type>{pred, s.chunk_elements, s.choose_predictor, s.choose_quantizer});
    });
  };
  auto with_quantizer = [&](auto pred) -> decltype(auto) {
    if (s.quantizer == quantizer_id::linear) return with_encoder(pred, std::type_identity<linear_quantizer>{});
    return with_encoder(pred, std::type_identity<sign_preserving_quantizer>{});
  };
  if (s.predictor == predictor_id::none) return with_quantizer(no_prediction{});
  lorenzo l = s.lorenzo_for(e);
  if (l.dims == 1 && l.axis[0] == 0xfe) l.axis[0] = static_cast<std::uint8_t>(e.rank - 1);
  return with_quantizer(l);
}

EBAC_NAMESPACE_END
