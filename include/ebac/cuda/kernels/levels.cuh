// ebac/cuda/kernels/levels.cuh - the tensor's level palette and its stages, decided on the device.
//
// Which quantizer codes a tensor depends on its data (quantizer/
// stage_choice.hpp): a palette of at most max_levels values, and for float
// tensors the value range and whether the palette beats the bound. The
// device finds both and decides without telling the host:
//   1. level_sets_kernel: one block a chunk; each thread counts every
//      level_threads-th element of the chunk (level_counter), the block
//      merges its threads' sets by a pairwise tree in shared memory
//      (level_tree_step) and writes the chunk's set. A chunk with too many
//      values raises a flag; blocks that start later skip their reads (the
//      answer "no palette" no longer depends on them).
//   2. level_merge_kernel: one block merges the chunks' sets by the same
//      tree, in chunk order (quantizer/level_search.hpp).
//   3. choose_stages_kernel: one thread turns the merged set into a palette
//      (palette_of) and, with the value range, into chosen_stages
//      (quantizer/chosen_stages.hpp: the host's decision, host-tested), and
//      writes where the stage-parameter and codebook sections end.
// Every later kernel that depends on the choice is launched once per stage
// set with a stage_gate: the launch whose set was not chosen returns at once.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/tuning/block_sizes.cuh>
#include <ebac/dtype.hpp>
#include <ebac/error_bound.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/format/apply_stages.hpp>
#include <ebac/quantizer/level_search.hpp>
#include <ebac/quantizer/levels.hpp>

#include <cstdint>

EBAC_NAMESPACE_BEGIN
namespace cuda {
namespace detail {

/// Which stage set a launch belongs to (chosen_stages::levels: 1 the
/// palette's, 0 the main one). `levels` points at the device's choice;
/// nullptr when only one set can be chosen (level coding off). Declared
/// outside `kernels` (and used there as kernels::stage_gate): the host
/// lambdas that launch per stage set take it, and no host symbol may name
/// cuda::kernels (tests/cuda/abi/check_exports.cmake).
struct stage_gate {
  const std::uint32_t* levels = nullptr;
  std::uint32_t mine = 0;
  /// True when the other set was chosen: the kernel returns at once.
  [[nodiscard]] __device__ bool closed() const { return levels != nullptr && *levels != mine; }
};

}  // namespace detail

namespace kernels {

using detail::stage_gate;

/// Words of the stream layout the kernels share (encode.cuh,
/// payload_layout_kernel): [4..7] come from choose_stages_kernel.
inline constexpr std::size_t layout_words = 8;

/// sets[c] = chunk c's level set (capacity `capacity`); *too_many (zero on
/// entry) becomes 1 once a chunk overflows.
template <class S>
EBAC_KERNEL void __launch_bounds__(level_threads) level_sets_kernel(const S* in, std::uint64_t n, std::uint32_t chunk,
                                                                    std::uint32_t capacity, level_set* sets, unsigned* too_many) {
  // level_set has default member initializers, which __shared__ variables may not have: raw storage.
  __shared__ alignas(level_set) unsigned char storage[sizeof(level_set) * level_threads];
  level_set* part = reinterpret_cast<level_set*>(storage);
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t first = c * chunk;
  const std::uint64_t m = detail::chunk_length(c, n, chunk);
  level_counter counter(capacity);
  if (*static_cast<volatile const unsigned*>(too_many) == 0) {
    for (std::uint64_t k = threadIdx.x; k < m && !counter.full(); k += level_threads)
      counter.add(static_cast<std::uint64_t>(raw_bits(in[first + k])));
  } else {
    counter.give_up();
  }
  part[threadIdx.x] = counter.finish();
  __syncthreads();
  for (std::uint64_t stride = 1; stride < level_threads; stride *= 2) {
    if (threadIdx.x < level_tree_pairs(level_threads, stride)) level_tree_step(part, level_threads, stride, threadIdx.x);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sets[c] = part[0];
    if (part[0].overflow) atomicOr(too_many, 1u);
  }
}

/// sets[0] = the merge of sets[0, chunks) in chunk order (one block). When
/// a chunk overflowed, so does the tensor: sets[0] is marked and nothing
/// else is merged.
template <int = 0>
EBAC_KERNEL void __launch_bounds__(level_merge_threads)
    level_merge_kernel(level_set* sets, std::uint64_t chunks, const unsigned* too_many) {
  if (*too_many) {  // final: level_sets_kernel has finished
    if (threadIdx.x == 0) sets[0].overflow = true;
    return;
  }
  for (std::uint64_t stride = 1; stride < chunks; stride *= 2) {
    const std::uint64_t pairs = level_tree_pairs(chunks, stride);
    for (std::uint64_t p = threadIdx.x; p < pairs; p += level_merge_threads) level_tree_step(sets, chunks, stride, p);
    __syncthreads();  // global writes of this round are visible to the whole block in the next
  }
}

/// One thread: the stages of the tensor (chosen_stages.hpp) from its merged
/// level set (nullptr: level coding off, or an empty tensor) and, for float
/// tensors, its range keys (range_kernel's; unused unless the bound is
/// relative or the dtype 16-bit). For integer tensors `main` is the main
/// quantizer (exact, or pool_window made from the pooling geometry). `h`
/// is the header of the main stages with the pipeline's chunk size;
/// layout[4] gets the stage-parameter section's size, layout[5] where the
/// codebook section starts, layout[6] and [7] the chosen set's chunks and
/// chunk size (apply_stages: the chosen predictor's, format/chunking.hpp).
template <class T, class MainQ>
EBAC_KERNEL void choose_stages_kernel(error_bound bound, const std::int32_t* keys, const level_set* merged, MainQ main,
                                      stream_header h, chosen_stages<MainQ>* out, std::uint64_t* layout, int* status) {
  const level_palette palette = merged ? palette_of(*merged) : level_palette{};
  chosen_stages<MainQ> s;
  if constexpr (floating_element<T>) {
    (void)main;
    s = choose_float_stages<T, MainQ>(bound, value_range::from_keys(keys[0], keys[1]), palette);
  } else {
    (void)bound;
    (void)keys;
    s = choose_integer_stages(palette, main);
  }
  if (s.bad_bound) detail::set_status(status, device_bad_bound);
  *out = s;
  apply_stages(h, s);
  layout[4] = h.section_bytes[section_params];
  layout[5] = h.section_offset(section_codebook);
  layout[6] = h.section_bytes[section_chunk_table] / 4;
  layout[7] = h.chunk_elements;
}

}  // namespace kernels
}  // namespace cuda
EBAC_NAMESPACE_END
