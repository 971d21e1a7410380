// ebac/host/stream_outliers.hpp - the outlier sections of a stream read
// in order (host/stream_source.hpp) put into an element sink: an index
// section no larger than a bitmap of the elements is held, a larger one
// (forged, or varints padded) decoded into that bitmap first, so that the
// index never takes more than n / 8 bytes (host/decompress_stream.hpp).
#pragma once

#include <ebac/config.hpp>
#include <ebac/dtype.hpp>
#include <ebac/status.hpp>
#include <ebac/detail/bytes.hpp>
#include <ebac/format/outlier_index.hpp>
#include <ebac/format/stream_header.hpp>
#include <ebac/host/stream_source.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace host {
namespace detail {

/// Puts the outliers' values, read from src in index order, where
/// index_at(j) (outlier j's element, increasing) says: runs of consecutive
/// elements together, the values a segment at a time.
template <class S, class R, class Sink>
class outlier_runs {
 public:
  /// k: the stream's outlier count (the value section holds k values).
  outlier_runs(stream_source<R>& src, Sink& sink, std::uint64_t k) : src_(src), sink_(sink), k_(k) {}
  /// Outlier j (the next in order) is element i; its value is the j-th of the section.
  void put(std::uint64_t j, std::uint64_t i) {
    if (j >= values_end_) {  // the next segment of the value section
      values_ = src_.take(std::min(segment, k_ - j) * sizeof(S));
      values_first_ = j;
      values_end_ = j + std::min(segment, k_ - j);
    }
    if (!run_.empty() && (i != run_first_ + run_.size() || run_.size() == segment)) flush();
    if (run_.empty()) run_first_ = i;
    run_.push_back(
        from_raw_bits<S>(::ebac::detail::load_le<typename bits_of<S>::type>(values_ + (j - values_first_) * sizeof(S))));
  }
  void flush() {
    if (run_.empty()) return;
    std::copy(run_.begin(), run_.end(), sink_.target(run_first_, run_.size()));
    sink_.written(run_first_, run_.size());
    run_.clear();
  }
  static constexpr std::uint64_t segment = std::uint64_t{1} << 16;

 private:
  stream_source<R>& src_;
  Sink& sink_;
  std::vector<S> run_;
  std::uint64_t k_, run_first_ = 0, values_first_ = 0, values_end_ = 0;
  const std::byte* values_ = nullptr;
};

[[noreturn]] inline void fail_outlier_index() {
  ::ebac::detail::fail(status::corrupt_stream,
                       "outlier index section: a varint runs past the section, an index is not below the element count, "
                       "or it does not hold exactly outlier_count indices");
}

/// The outlier index section read a megabyte at a time and decoded in
/// order into a bitmap of the n elements (n / 8 bytes, whatever the
/// section's size), with outlier_index_reader's verdicts: every varint
/// decodes inside the section (10 bytes at most) with a gap below n, every
/// index is below n, and there are exactly k. For a section larger than
/// the bitmap: a forged one, or varints padded with continuation bytes, may
/// be nearly as large as the output, and holding it beside an output held
/// in memory (a pipe) would take 2x the output.
template <class R>
std::vector<std::uint64_t> outlier_bitmap(stream_source<R>& src, std::uint64_t bytes, std::uint64_t n, std::uint64_t k) {
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n + 63) / 64));
  std::vector<std::byte> buf;
  std::uint64_t left = bytes, count = 0, last = 0;
  while (left > 0 || !buf.empty()) {
    const std::uint64_t piece = std::min<std::uint64_t>(left, std::uint64_t{1} << 20);
    src.take_into(buf, piece);
    left -= piece;
    const std::byte* p = buf.data();
    const std::byte* const end = buf.data() + buf.size();
    // Whole varints only, unless the section ends here: one is 10 bytes at most.
    while (p < end && (end - p >= 10 || left == 0)) {
      std::uint64_t gap = 0;
      if (!::ebac::detail::get_varint(p, end, gap) || gap >= n || count >= k) fail_outlier_index();
      const std::uint64_t i = count == 0 ? gap : last + gap + 1;  // no wrap: last and gap are below n
      if (i >= n) fail_outlier_index();
      bits[static_cast<std::size_t>(i / 64)] |= std::uint64_t{1} << (i % 64);
      last = i;
      ++count;
    }
    buf.erase(buf.begin(), buf.begin() + (p - buf.data()));
    if (left == 0 && !buf.empty()) fail_outlier_index();
  }
  if (count != k) fail_outlier_index();
  return bits;
}

/// The outlier sections into the sink. An index section no larger than a
/// bitmap of the elements is held and placed a segment at a time (the
/// values read with each segment); a larger one is decoded into that bitmap
/// first (outlier_bitmap). Runs of consecutive indices are put together.
template <class S, class R, class Sink>
void place_outliers(stream_source<R>& src, const stream_header& h, Sink& sink) {
  const std::uint64_t n = element_count(h), k = h.outlier_count, bytes = h.section_bytes[section_outlier_index];
  outlier_runs<S, R, Sink> runs(src, sink, k);
  if (bytes > (n + 7) / 8) {
    const std::vector<std::uint64_t> bits = outlier_bitmap(src, bytes, n, k);
    std::uint64_t j = 0;
    for (std::size_t w = 0; w < bits.size(); ++w)
      for (std::uint64_t word = bits[w]; word != 0; word &= word - 1)
        runs.put(j++, 64 * static_cast<std::uint64_t>(w) + static_cast<std::uint64_t>(std::countr_zero(word)));
    runs.flush();
    return;
  }
  std::vector<std::byte> index_bytes;
  src.take_into(index_bytes, bytes);
  const outlier_index_reader index{index_bytes.data(), index_bytes.size(), n};
  constexpr std::uint64_t segment = std::uint64_t{1} << 16;
  outlier_index_reader::summary before;
  const outlier_index_reader::combine add = index.op();
  std::uint64_t placed = 0;
  bool ok = true;
  for (std::uint64_t b = 0; b < index.bytes && ok; b += segment) {
    const auto here = index.summarize(b, b + segment);
    ok = index.place(b, b + segment, before, k, [&](std::uint64_t j, std::uint64_t i) {
      runs.put(j, i);
      ++placed;
    });
    before = add(before, here);
  }
  runs.flush();
  if (!ok || placed != k) fail_outlier_index();
}

}  // namespace detail
}  // namespace host
EBAC_NAMESPACE_END
