// ebac/host/parallel.hpp - the host backend's only source of parallelism.
//
// Work is always split into the same units (chunks, tiles) whatever the
// thread count, and results are combined in unit order, so the output is
// byte-identical for 1 thread or 64. Without OpenMP everything runs serially.
//
// An exception must never leave an OpenMP region (the runtime would call
// std::terminate), yet the units allocate (outlier lists, encoder output,
// histograms). parallel_for therefore catches whatever a unit throws, lets
// the region finish, and rethrows after it; see parallel_for.
#pragma once

#include <ebac/config.hpp>
#include <ebac/status.hpp>

#include <cstdint>
#include <exception>
#include <new>

#if EBAC_HAS_OPENMP()
#include <atomic>
#include <omp.h>
#endif

EBAC_NAMESPACE_BEGIN
namespace host {

/// threads == 0: OpenMP's default team size; 1: serial.
inline int resolve_threads(int threads) noexcept {
#if EBAC_HAS_OPENMP()
  return threads > 0 ? threads : omp_get_max_threads();
#else
  (void)threads;
  return 1;
#endif
}

namespace detail {

/// What a failed unit leaves for the caller: an allocation failure becomes
/// ebac::error(status::out_of_memory), anything else is kept as thrown.
inline std::exception_ptr unit_failure() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    try {
      ::ebac::detail::fail(status::out_of_memory, "a memory allocation failed while processing a chunk");
    } catch (...) { return std::current_exception(); }
  } catch (...) { return std::current_exception(); }
}

}  // namespace detail

/// Calls f(i) for i in [0, n), on up to `threads` threads.
///
/// f may throw. Nothing escapes the parallel region: every unit's exception
/// is caught, units not yet started are skipped once one has failed, and
/// after the region the exception of the lowest-numbered unit that threw is
/// rethrown. Units are handed out in increasing order, so every unit below a
/// failing one has run; when failures do not depend on timing this is the
/// exception a serial run throws. std::bad_alloc is rethrown as ebac::error
/// with status::out_of_memory, on one thread as on many.
///
/// Each thread gets at least `min_units` units, so fewer threads run where n
/// is small: 4 where a unit is one chunk, fewer where a unit is several
/// chunks' work.
template <class F>
void parallel_for(std::int64_t n, int threads, F&& f, std::int64_t min_units = 4) {
  std::exception_ptr failure;
#if EBAC_HAS_OPENMP()
  // A parallel region ends in a barrier that waits for every thread; with
  // few units per thread (small tensors) that wait costs more than the work,
  // and on a busy machine far more (measured: 3.2 GB/s serial, 0.03 GB/s
  // with 2 threads on a 7-chunk tensor). So each thread gets >= 4 units of
  // a chunk each.
  int t = resolve_threads(threads);
  if (min_units < 1) min_units = 1;
  if (static_cast<std::int64_t>(t) * min_units > n) t = static_cast<int>(n / min_units);
  if (t > 1) {
    std::atomic<std::int64_t> first_failed{n};  // n: none yet
#pragma omp parallel for schedule(dynamic, 1) num_threads(t)
    for (std::int64_t i = 0; i < n; ++i) {
      if (first_failed.load(std::memory_order_relaxed) < i) continue;
      try {
        f(i);
      } catch (...) {
        std::exception_ptr e = detail::unit_failure();
#pragma omp critical(ebac_parallel_for_failure)
        if (i < first_failed.load(std::memory_order_relaxed)) {
          first_failed.store(i, std::memory_order_relaxed);
          failure = std::move(e);
        }
      }
    }
    if (failure) std::rethrow_exception(failure);
    return;
  }
#else
  (void)threads;
  (void)min_units;
#endif
  try {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  } catch (...) { failure = detail::unit_failure(); }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace host
EBAC_NAMESPACE_END
