// ebac/host/chunk_passes.hpp - what the host codec's two directions share:
// how a tensor is cut into chunks, and a predictor pass over a whole field.
//
// Part of the host codec (host/codec.hpp says how it flows); compress.hpp
// and decompress.hpp build on it.
#pragma once

#include <ebac/config.hpp>
#include <ebac/predictor/predictor_id.hpp>
#include <ebac/quantizer/linear.hpp>
#include <ebac/host/parallel.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// Elements a parallel task of run_pass should cover at least: a pass over
/// one tile of a 7x7 or 28x28 map is a microsecond of work, less than handing
/// it to another thread costs (measured on the corpus: Lorenzo 2-D decoding
/// at half the serial speed with 2 threads when every tile was a task).
inline constexpr std::uint64_t pass_task_elements = std::uint64_t{1} << 15;

/// One predictor pass over a whole field of wrapped int32 codes, its units
/// (P::pass_unit: one tile of one outer index) grouped into parallel tasks
/// of >= pass_task_elements, which changes no result.
template <bool Forward, class P>
void run_pass(const P&, std::uint32_t* f, const axis_pass& p, int threads) {
  const std::uint64_t tiles = (p.extent + p.tile - 1) / p.tile;
  const std::uint64_t units = p.outer * tiles;
  const std::uint64_t unit_elements = std::max<std::uint64_t>(1, std::min(p.tile, p.extent) * p.inner);
  const std::uint64_t per_task = std::max<std::uint64_t>(1, pass_task_elements / unit_elements);
  const auto tasks = static_cast<std::int64_t>((units + per_task - 1) / per_task);
  parallel_for(tasks, threads, [&](std::int64_t task) {
    const std::uint64_t u0 = static_cast<std::uint64_t>(task) * per_task, u1 = std::min(units, u0 + per_task);
    for (std::uint64_t u = u0; u < u1; ++u) P::template pass_unit<Forward>(f, p, u / tiles, u % tiles, 0, p.inner);
  });
}

template <class Q>
constexpr bool is_float_quantizer = std::is_same_v<Q, linear_quantizer> || std::is_same_v<Q, sign_preserving_quantizer>;

/// The elements of quantize_chunk's first pass taken at once, a constant
/// trip count: at -O2 GCC (12) vectorizes only a loop whose count is a known
/// multiple of the vector width and whose pointers need no run-time overlap
/// check (restrict), and this loop was half of a compression there.
inline constexpr std::size_t quantize_block = 512;

/// Elements in chunk c of n elements cut in chunks of C: C, or what is
/// left for the last chunk.
[[nodiscard]] inline std::size_t chunk_length(std::uint64_t c, std::uint32_t C, std::uint64_t n) noexcept {
  return static_cast<std::size_t>(std::min<std::uint64_t>(C, n - c * C));
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
