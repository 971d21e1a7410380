// ebac/host/compress.hpp - host::compress: a tensor into a self-describing
// stream, on the CPU.
//
// Which stages code a tensor is decided per tensor (compress_to, after
// quantizer/stage_choice.hpp): a tensor of at most max_levels distinct
// values becomes palette indices, an integer tensor its own values (or,
// with a pooling geometry, offsets in its pooling windows), a
// floating-point tensor the pipeline's quantizer; the pipeline may ask
// for the predictor (and the quantizer) a sample codes smallest
// (cheapest_predictor). host/encode_stream.hpp then codes it.
#pragma once

#include <ebac/compress_options.hpp>
#include <ebac/concepts.hpp>
#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/extents.hpp>
#include <ebac/status.hpp>
#include <ebac/format/chunking.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/pipeline.hpp>
#include <ebac/predictor/lorenzo.hpp>
#include <ebac/predictor/no_prediction.hpp>
#include <ebac/quantizer/exact.hpp>
#include <ebac/quantizer/levels.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/quantizer/pool_window.hpp>
#include <ebac/quantizer/quantizer_bound.hpp>
#include <ebac/quantizer/stage_choice.hpp>
#include <ebac/host/encode_chunks.hpp>
#include <ebac/host/encode_stream.hpp>
#include <ebac/host/predictor_sample.hpp>
#include <ebac/host/stream_destination.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {

namespace detail {

/// The candidates of pipeline::choose_predictor, in the order of preference
/// on a tie: the pipeline's own Lorenzo, flat 1-D Lorenzo, no prediction.
enum class predictor_candidate { pipeline, flat, none };

/// Codes the planned sample of the tensor with each candidate predictor
/// (quantizer `q`, encoder E, no checksum, never stored) and returns the one
/// whose stream, scaled to the whole tensor, is smallest. `h` is the
/// tensor's header, quantizer fields filled. An estimating_encoder
/// (concepts.hpp) only gathers the sample's statistics and learns its
/// codebook: the stream's size is estimated from them (within 0.1% and 8
/// bytes a chunk of the coded size: tests/encoder/context_ans_statistics.cpp), which
/// skips each candidate's coding pass.
///
/// `every_predictor` false tries the pipeline's predictor only (a choice of
/// quantizer alone: pipeline::choose_quantizer); `predicted_bytes` receives
/// the winner's predicted stream size, which compress_to compares across
/// quantizers.
///
/// When the sample is the whole tensor and `whole_stream` is given, the
/// candidates are coded as the tensor's own stream (h and opt as they are,
/// but never stored; the sizes shift by the same bytes, so the choice is
/// the same) and the winner's stream is handed back in it, so that a small
/// tensor is not coded a fourth time.
template <class E, class S, class Q>
predictor_candidate cheapest_predictor(const S* in, std::uint64_t n, const extents& shape, const lorenzo& pred, const Q& q,
                                       const stream_header& h, const compress_options& opt,
                                       std::vector<std::byte>* whole_stream = nullptr, bool every_predictor = true,
                                       double* predicted_bytes = nullptr) {
  const predictor_sample plan = plan_predictor_sample(pred, shape, n);
  const bool keep = plan.whole && whole_stream != nullptr;
  std::vector<S> gathered;
  const S* x = in;
  std::uint64_t m = n;
  if (!plan.whole) {
    m = plan.elements();
    gathered.resize(static_cast<std::size_t>(m));
    gather_predictor_sample(in, plan, gathered.data());
    x = gathered.data();
  }
  compress_options o = opt;
  o.store_when_larger = false;
  stream_header hs = h;
  if (!keep) {
    o.checksum = false;
    hs.shape = plan.shape;
    hs.flags = 0;
  }
  std::vector<std::byte> stream, kept;
  // The stream's size: estimated without coding the chunks where the
  // encoder can (a sample's stream only predicts the tensor's anyway),
  // else the coded stream's.
  const bool estimate = estimating_encoder<E> && !keep;
  auto predicted = [&](const auto& candidate) {
    stream_header sample_header = hs;
    sample_header.chunk_elements = stream_chunk_elements(candidate, plan.shape, h.chunk_elements);
    stream_header written;
    std::uint64_t estimated = 0;
    encode_stream<E>(
        x, m, plan.shape, candidate, q, sample_header, o,
        [&](std::size_t bytes) {
          stream.resize(bytes);
          return stream.data();
        },
        &written, estimate ? &estimated : nullptr);
    return predicted_stream_bytes(estimate ? estimated : static_cast<std::uint64_t>(stream.size()),
                                  written.section_bytes[section_codebook], m, n);
  };
  predictor_candidate best = predictor_candidate::pipeline;
  double best_bytes = predicted(plan.pred);
  if (keep) kept.swap(stream);
  auto consider = [&](double bytes, predictor_candidate c) {
    if (!(bytes < best_bytes)) return;
    best = c, best_bytes = bytes;
    if (keep) kept.swap(stream);
  };
  if (every_predictor) {
    const bool already_flat = pred.dims == 1 && pred.axis[0] == lorenzo_flat_axis && pred.tile[0] == lorenzo::default_flat_tile;
    if (!already_flat) consider(predicted(lorenzo::flat()), predictor_candidate::flat);
    consider(predicted(no_prediction{}), predictor_candidate::none);
  }
  if (keep) *whole_stream = std::move(kept);
  if (predicted_bytes != nullptr) *predicted_bytes = best_bytes;
  return best;
}

/// One tensor's compression: its elements, its stream header as the stages
/// are chosen, where the stream goes, and the ways compress_to codes it.
template <class Pipeline, element T>
struct tensor_compression {
  using E = typename Pipeline::encoder_type;
  using S = storage_t<T>;
  static constexpr bool lorenzo_pipeline = std::is_same_v<typename Pipeline::predictor_type, lorenzo>;

  const S* in;  // a bool is read as its byte (dtype.hpp)
  std::uint64_t n;
  const extents& shape;
  const Pipeline& pipe;
  const compress_options& opt;
  stream_destination destination;
  stream_header h;

  /// The stream of these stages (h holding the quantizer's fields).
  template <class P, class Q>
  std::size_t code(const P& pred, const Q& q) {
    h.chunk_elements = stream_chunk_elements(pred, shape, pipe.chunk_elements);
    return detail::encode_stream<E>(in, n, shape, pred, q, h, opt, destination);
  }

  /// The candidate quantizer q's sample (h holding q's eb_abs and top)
  /// weighs smallest (detail::cheapest_predictor): every predictor with
  /// pipeline::choose_predictor, else the pipeline's own.
  struct weighed {
    detail::predictor_candidate predictor = detail::predictor_candidate::pipeline;
    double bytes = 0;
    std::vector<std::byte> whole;  // a small tensor's candidates were coded whole: the winner's stream
  };
  template <class Q>
  weighed weigh(const Q& q) {
    weighed w;
    w.predictor =
        detail::cheapest_predictor<E>(in, n, shape, pipe.predictor, q, h, opt, &w.whole, pipe.choose_predictor, &w.bytes);
    return w;
  }

  /// The winner's stream is the stream, unless it might have to be stored
  /// (then the usual path decides; a stream no larger than the raw elements
  /// never is).
  template <class Q>
  std::size_t code_weighed(const Q& q, const weighed& w) {
    if (!w.whole.empty() && !(opt.store_when_larger && w.whole.size() > n * sizeof(S))) {
      std::memcpy(destination(w.whole.size()), w.whole.data(), w.whole.size());
      return w.whole.size();
    }
    switch (w.predictor) {
      case detail::predictor_candidate::flat: return code(lorenzo::flat(), q);
      case detail::predictor_candidate::none: return code(no_prediction{}, q);
      case detail::predictor_candidate::pipeline: break;
    }
    return code(pipe.predictor, q);
  }

  /// The pipeline's predictor, or the candidate a sample codes smallest
  /// (pipeline::choose_predictor).
  template <class Q>
  std::size_t code_predicted(const Q& q) {
    if constexpr (lorenzo_pipeline) {
      if (pipe.choose_predictor && n > 0) return code_weighed(q, weigh(q));
    }
    return code(pipe.predictor, q);
  }

  /// Floating-point elements: their palette losslessly where it pays, else
  /// the pipeline's quantizer under the bound (or, with
  /// pipeline::choose_quantizer, the linear one where it codes smaller).
  std::size_t code_floating(const level_palette& palette) {
    using Q = typename Pipeline::quantizer_type;
    // The range: for a relative bound, and for 16-bit elements, whose
    // largest magnitude becomes the quantizer's top level (linear.hpp).
    constexpr bool wants_top = sizeof(T) == 2;
    value_range range;
    if (opt.bound.mode == bound_mode::relative || wants_top)
      range = palette.count > 0 ? palette_range<T>(palette) : detail::finite_range(in, n, pipe.chunk_elements, opt.threads);
    // Finite: compress_argument_error took only a finite bound (a relative
    // one at most 1e6) and a range of finite floats spans at most 2 FLT_MAX.
    const double eb_abs = quantizer_bound<Q, T>(opt.bound, range);
    const Q q = Q::make(eb_abs).with_top(wants_top ? top_level_of(range) : 0.0f);
    if (palette.count > 0 && levels_pay<T>(palette, q)) {
      h.palette = palette;  // lossless: eb_abs stays 0
      return code(no_prediction{}, level_quantizer{palette});
    }
    h.eb_abs = eb_abs;
    h.top = q.top.value;
    // pipeline::choose_quantizer: the linear quantizer of the same bound
    // where its stream is predicted smaller (a tie keeps zeros and signs).
    if constexpr (lorenzo_pipeline && std::is_same_v<Q, sign_preserving_quantizer>) {
      if (pipe.choose_quantizer && n > 0) {
        const weighed keeping_signs = weigh(q);
        const double linear_eb = quantizer_bound<linear_quantizer, T>(opt.bound, range);
        const linear_quantizer linear = linear_quantizer::make(linear_eb).with_top(wants_top ? top_level_of(range) : 0.0f);
        h.eb_abs = linear_eb;
        h.top = linear.top.value;
        const weighed plain = weigh(linear);
        if (plain.bytes < keeping_signs.bytes) return code_weighed(linear, plain);
        h.eb_abs = eb_abs;
        h.top = q.top.value;
        return code_weighed(q, keeping_signs);
      }
    }
    return code_predicted(q);
  }

  /// Integer and bool elements, losslessly: their palette, max-pool offsets
  /// in their window, or the exact quantizer.
  std::size_t code_integer(const level_palette& palette) {
    if (palette.count > 0) {
      h.palette = palette;
      return code(no_prediction{}, level_quantizer{palette});
    }
    if (opt.pooling.dims != 0) {
      h.pool = opt.pooling;
      return code(no_prediction{}, pool_window_quantizer::make(opt.pooling, shape));
    }
    return code_predicted(exact_quantizer{});
  }
};

/// The compressor: picks the stages for this tensor (stage_choice.hpp) and
/// codes it. The two public compress() overloads differ only in `destination`
/// (stream_destination.hpp: one copy of the encoder serves both).
template <class Pipeline, element T>
std::size_t compress_to(const T* input, const extents& shape, const Pipeline& pipe, const compress_options& opt,
                        stream_destination destination) {
  using S = storage_t<T>;
  using ::ebac::detail::fail;

  if (const char* why = ::ebac::detail::compress_argument_error<T>(shape, pipe, opt)) fail(status::invalid_argument, why);
  std::uint64_t n = 0;
  (void)shape.count(n);
  if (n > 0 && input == nullptr) fail(status::invalid_argument, "input pointer is null");
  const stream_header h = begin_stream_header<T>(shape, pipe, opt, opt.checksum);
  tensor_compression<Pipeline, T> tensor{reinterpret_cast<const S*>(input), n, shape, pipe, opt, destination, h};
  const level_palette palette = detail::find_levels(tensor.in, n, pipe.chunk_elements, opt.max_levels, opt.threads);
  if constexpr (floating_element<T>) return tensor.code_floating(palette);
  else return tensor.code_integer(palette);
}


}  // namespace detail

/// Compresses n = count(shape) elements of `in` into a self-describing stream.
/// Floating-point elements are compressed under opt.bound; integer and bool
/// elements losslessly. Throws ebac::error naming the offending argument.
/// Working memory besides the stream: the coded chunks, and with a codebook
/// encoder (Huffman, context ANS) the tensor's codes, two bytes an element
/// (four with a predictor whose chunks depend on each other).
template <class Pipeline, element T>
std::vector<std::byte> compress(const T* in, const extents& shape, const Pipeline& pipe, const compress_options& opt) {
  std::vector<std::byte> out;
  detail::compress_to(in, shape, pipe, opt, [&](std::size_t bytes) {
    out.resize(bytes);
    return out.data();
  });
  return out;
}

/// Compresses into a caller's buffer (an arena, pinned memory, ...) and
/// returns the stream's size. A capacity of max_compressed_bytes(shape, pipe)
/// always suffices (max_coded_bytes with opt.store_when_larger off); with less, a stream that does not fit throws
/// status::buffer_too_small. On any error `out` is left untouched. `out`
/// must not overlap `in` (outlier values are read from `in` while writing).
template <class Pipeline, element T>
std::size_t compress(const T* in, const extents& shape, const Pipeline& pipe, const compress_options& opt, std::byte* out,
                     std::size_t capacity) {
  if (out == nullptr) ::ebac::detail::fail(status::invalid_argument, "output pointer is null");
  return detail::compress_to(in, shape, pipe, opt, [&](std::size_t bytes) {
    if (bytes > capacity)
      ::ebac::detail::fail(status::buffer_too_small, "the stream takes " + std::to_string(bytes) + " bytes, the buffer holds " +
                                                         std::to_string(capacity) + " (max_compressed_bytes() always suffices)");
    return out;
  });
}

}  // namespace host
EBAC_NAMESPACE_END
