// ebac/host/scratch.hpp - per-thread scratch buffers owned by one call.
//
// The chunk loops of compress and decompress need a buffer per thread (a
// chunk's codes, an encoder's worst-case output). They used to be
// thread_local, and so outlived the call: every OpenMP worker kept the
// largest buffer it had ever needed, sized by the chunk size of the last
// stream it saw (up to 2^24 elements, 64-128 MiB per thread, chosen by
// whoever wrote the stream). Here the call owns them: one slot per thread
// of parallel_for's team, grown on demand, freed when the call returns.
#pragma once

#include <ebac/config.hpp>
#include <ebac/host/parallel.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

template <class T>
class per_thread_scratch {
 public:
  /// `threads` as given to parallel_for: its teams never exceed resolve_threads(threads).
  explicit per_thread_scratch(int threads)
      : slots_(static_cast<std::size_t>(resolve_threads(threads) > 1 ? resolve_threads(threads) : 1)) {
#if EBAC_HAS_OPENMP()
    level_ = omp_get_level();
#endif
  }
  per_thread_scratch(const per_thread_scratch&) = delete;
  per_thread_scratch& operator=(const per_thread_scratch&) = delete;

  /// At least n elements for the calling thread's exclusive use until its
  /// next get(); contents unspecified (nothing is zero-filled).
  T* get(std::size_t n) {
    const std::size_t k = slot_index();
    if (k < slots_.size()) return grow(slots_[k], n);
    // Not one of parallel_for's team (cannot happen with parallel_for; kept
    // so a misuse costs an allocation, not a data race).
    std::lock_guard<std::mutex> lock(extra_mutex_);
    extra_.emplace_back();
    return grow(extra_.back(), n);
  }

 private:
  struct slot {
    std::unique_ptr<T[]> data;
    std::size_t capacity = 0;
  };

  static T* grow(slot& s, std::size_t n) {
    if (n > s.capacity || !s.data) {
      s.data.reset();  // release the old buffer before asking for the larger one
      s.capacity = 0;
      s.data.reset(new T[n > 0 ? n : 1]);
      s.capacity = n;
    }
    return s.data.get();
  }

  /// The calling thread's index in parallel_for's team; 0 on its serial path
  /// (which runs on the caller's thread, at the caller's nesting level).
  std::size_t slot_index() const noexcept {
#if EBAC_HAS_OPENMP()
    if (omp_get_level() > level_) return static_cast<std::size_t>(omp_get_thread_num());
#endif
    return 0;
  }

  std::vector<slot> slots_;
  int level_ = 0;
  std::mutex extra_mutex_;
  std::vector<slot> extra_;
};

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
