// ebac/error_model/distinct_rows.hpp - identical input rows of a layer whose
// weight gradient is a sum over rows, merged before the model sees them.
//
// A Linear's weight gradient dW = sum_r dy_r x_r^T and a LayerNorm's gamma
// gradient dgamma_d = sum_r (dy_rd / s_r) xhat_rd add one term per row (a
// row: every leading extent, batch and tokens). Every ebac quantizer's error
// is a function of the value alone, so rows with the same input have the same
// error e_g, and the change of the gradient is, term for term,
//     sum_r dy_r e_r^T = sum_g (sum_{r in g} dy_r) e_g^T:
// the weight-gradient error of a layer whose rows are the distinct rows and
// whose output gradient is each group's sum. The model (weight_error_model.hpp)
// assumes the errors of different rows independent; on the merged rows that
// holds, on the repeated ones it does not (their errors add coherently,
// weighted by how alike their gradients are). Transformers repeat rows: the
// ViT's patch embedding gives every black Fashion-MNIST patch at one
// position the same row (position embedding + bias): 600 distinct rows of
// 800 at batch 16, 200 of them copies of another row. The merge is
// exact and changes nothing where no row repeats. Rows compare bit for bit
// (two zeros of different sign stay apart: conservative, their errors agree).
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/layer_geometry.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// The groups of identical rows of a rows x features input: each group's
/// first row (in order of first appearance) and each row's group.
struct row_groups {
  std::vector<std::int64_t> first;  ///< first row of group k
  std::vector<std::int64_t> group;  ///< group of row r
  [[nodiscard]] std::int64_t count() const noexcept { return static_cast<std::int64_t>(first.size()); }
  [[nodiscard]] std::int64_t rows() const noexcept { return static_cast<std::int64_t>(group.size()); }
  [[nodiscard]] bool all_distinct() const noexcept { return first.size() == group.size(); }
};

/// Groups the rows of x (rows x features, row-major) that are bit-identical.
template <class T>
row_groups group_identical_rows(std::int64_t rows, std::int64_t features, const T* x) {
  row_groups g;
  g.group.resize(static_cast<std::size_t>(rows));
  const std::size_t row_bytes = static_cast<std::size_t>(features) * sizeof(T);
  auto bytes_of = [&](std::int64_t r) { return std::string_view(reinterpret_cast<const char*>(x + r * features), row_bytes); };
  std::unordered_map<std::string_view, std::int64_t> seen;  // a row's bytes -> its group
  seen.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto [it, fresh] = seen.try_emplace(bytes_of(r), g.count());
    if (fresh) g.first.push_back(r);
    g.group[static_cast<std::size_t>(r)] = it->second;
  }
  return g;
}

/// The first row of every group (count() x features): the merged layer's input.
template <class T>
std::vector<T> first_rows(const row_groups& g, std::int64_t features, const T* x) {
  std::vector<T> out(static_cast<std::size_t>(g.count() * features));
  const std::size_t row_bytes = static_cast<std::size_t>(features) * sizeof(T);
  for (std::int64_t k = 0; k < g.count(); ++k)
    std::memcpy(out.data() + k * features, x + g.first[static_cast<std::size_t>(k)] * features, row_bytes);
  return out;
}

/// The sum of every group's rows of dy (rows x features -> count() x
/// features): the merged layer's output gradient (summed in double, stored
/// as Out).
template <class Out = double, class D>
std::vector<Out> summed_rows(const row_groups& g, std::int64_t features, const D* dy) {
  std::vector<double> sum(static_cast<std::size_t>(g.count() * features), 0.0);
  for (std::int64_t r = 0; r < g.rows(); ++r) {
    double* o = sum.data() + g.group[static_cast<std::size_t>(r)] * features;
    for (std::int64_t f = 0; f < features; ++f) o[f] += static_cast<double>(dy[r * features + f]);
  }
  if constexpr (std::is_same_v<Out, double>) return sum;
  else return std::vector<Out>(sum.begin(), sum.end());
}

/// A row layer as the model reads it: g.batch rows of g.in_channels inputs
/// and g.out_channels output-gradient entries (a Linear, or a LayerNorm's
/// gamma view with dy scaled by 1/s), identical rows merged. Where no row
/// repeats it reads the caller's x and dy (no copy). It points into the
/// caller's arrays, which must outlive it.
template <class T, class D>
class merged_rows {
 public:
  merged_rows(const conv2d_geometry& g, const T* x, const D* dy)
      : groups_(group_identical_rows(g.batch, g.in_channels, x)), g_(g), x_(x), dy_(dy) {
    if (groups_.all_distinct()) return;
    g_.batch = groups_.count();
    x_rows_ = first_rows(groups_, g.in_channels, x);
    dy_rows_ = summed_rows<D>(groups_, g.out_channels, dy);
    x_ = x_rows_.data();
    dy_ = dy_rows_.data();
  }
  merged_rows(const merged_rows&) = delete;  // x_ and dy_ may point into this object
  merged_rows& operator=(const merged_rows&) = delete;

  [[nodiscard]] const conv2d_geometry& geometry() const noexcept { return g_; }
  [[nodiscard]] const T* input() const noexcept { return x_; }
  [[nodiscard]] const D* output_gradient() const noexcept { return dy_; }
  [[nodiscard]] std::int64_t distinct_rows() const noexcept { return groups_.count(); }
  [[nodiscard]] bool merged() const noexcept { return !groups_.all_distinct(); }
  /// The rows of a reconstruction y that the model reads with input():
  /// y itself, or its first row of every group (kept in `store`).
  [[nodiscard]] const T* rows_of(const T* y, std::vector<T>& store) const {
    if (!merged()) return y;
    store = first_rows(groups_, g_.in_channels, y);
    return store.data();
  }

 private:
  row_groups groups_;
  conv2d_geometry g_;
  std::vector<T> x_rows_;
  std::vector<D> dy_rows_;
  const T* x_;
  const D* dy_;
};

}  // namespace error_model
EBAC_NAMESPACE_END
