// apps/cli/outlier_lookahead.hpp - a stream's outliers read ahead from a
// seekable input, so that decompress can write each window final and in
// order to an output that cannot go back (standard output, a FIFO).
//
// host::decompress_stream reads a stream once, in order, and puts the
// outliers after the windows, over elements it already handed over: an
// output written in order would have to hold the whole output until then.
// Where the input is a regular file, the outlier sections can be read
// first instead: this reads the index section a 64 KiB segment at a time
// (with the byte before it and the 10 after it, so that each segment's
// varints are read as outlier_index_reader reads them in the whole
// section) and the values of each segment's outliers, and overwrites them
// in each window before it is written. Its memory is a segment's outliers,
// whatever the stream's size. It judges nothing: on an index that does not
// decode it stops, and the stream's own pass (decompress_stream, which
// still reads and checks the sections in order) refuses the stream. That
// pass's outliers are compared with these by a digest of (element, value)
// pairs: the same file read twice must give the same ones.
#pragma once

#include "io.hpp"

#include <ebac/format/outlier_index.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ebac_cli {

/// An order-free digest of (element, value bytes) pairs: a sum of mixes.
inline std::uint64_t outlier_mix(std::uint64_t element, const std::byte* value, std::size_t size) {
  std::uint64_t v = 0;
  std::memcpy(&v, value, size);  // size <= 8
  std::uint64_t x = element * 0x9e3779b97f4a7c15u ^ (v + 0x632be59bd9b4e019u);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9u;
  x ^= x >> 29;
  return x;
}

class outlier_lookahead {
 public:
  /// `in`: the seekable input; the sections' offsets from the stream's
  /// start; n elements of `size` bytes, k outliers.
  outlier_lookahead(const input_file& in, std::uint64_t index_offset, std::uint64_t index_bytes, std::uint64_t values_offset,
                    std::uint64_t n, std::uint64_t k, std::size_t size)
      : in_(in),
        index_offset_(index_offset),
        index_bytes_(index_bytes),
        values_offset_(values_offset),
        n_(n),
        k_(k),
        size_(size) {}

  /// Overwrites the outliers among the output's bytes [first, first + bytes)
  /// held at `out` (whole elements; windows in increasing order).
  void apply(std::uint64_t first, std::byte* out, std::size_t bytes) {
    const std::uint64_t e0 = first / size_, e1 = (first + bytes) / size_;
    for (;;) {
      if (next_ == pending_.size() && !load_segment()) return;
      const std::uint64_t i = pending_[next_];
      if (i >= e1) return;
      const std::byte* value = values_.data() + next_ * size_;
      if (i >= e0) {
        std::memcpy(out + (i - e0) * size_, value, size_);
        digest_ += outlier_mix(i, value, size_);
      }
      ++next_;
    }
  }

  /// The digest of the outliers apply() placed.
  std::uint64_t digest() const { return digest_; }

 private:
  static constexpr std::uint64_t segment = std::uint64_t{1} << 16;

  /// Decodes the next segment's outliers into pending_ (and their values);
  /// false when there are none left, or the index does not decode.
  bool load_segment() {
    pending_.clear();
    next_ = 0;
    while (pending_.empty()) {
      if (done_ || at_ >= index_bytes_ || before_.starts >= k_) return false;
      // Bytes [at_ - 1, at_ + segment + 10) of the section, clamped to it.
      const std::uint64_t from = at_ > 0 ? at_ - 1 : 0, to = std::min(index_bytes_, at_ + segment + 10);
      bytes_.resize(static_cast<std::size_t>(to - from));
      in_.read_at(index_offset_ + from, bytes_.data(), bytes_.size());
      const ebac::outlier_index_reader local{bytes_.data(), bytes_.size(), n_};
      const std::uint64_t lo = at_ - from, hi = lo + std::min(segment, index_bytes_ - at_);
      const auto here = local.summarize(lo, hi);
      std::uint64_t first_j = 0;
      const bool ok = local.place(lo, hi, before_, k_, [&](std::uint64_t j, std::uint64_t i) {
        if (pending_.empty()) first_j = j;
        pending_.push_back(i);
      });
      before_ = local.op()(before_, here);
      at_ += segment;
      if (!ok) done_ = true;  // the stream's own pass refuses it
      values_.resize(pending_.size() * size_);
      if (!pending_.empty()) in_.read_at(values_offset_ + first_j * size_, values_.data(), values_.size());
    }
    return true;
  }

  const input_file& in_;
  std::uint64_t index_offset_, index_bytes_, values_offset_, n_, k_;
  std::size_t size_;
  std::uint64_t at_ = 0;  // the next segment's first byte in the section
  ebac::outlier_index_reader::summary before_;
  bool done_ = false;
  std::vector<std::byte> bytes_, values_;
  std::vector<std::uint64_t> pending_;  // the segment's outliers' elements, increasing
  std::size_t next_ = 0;
  std::uint64_t digest_ = 0;
};

}  // namespace ebac_cli
