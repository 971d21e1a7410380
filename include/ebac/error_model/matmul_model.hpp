// ebac/error_model/matmul_model.hpp - parameter-free matmuls, as attention
// has them: C_g = A_g B_g for every slice g of the leading extents (batch x
// heads), with A saved for backward.
//
// Backward reads the saved A for the other operand's gradient only:
// dB_g = A_g^T dC_g (dA = dC B^T does not read A). An error E in A changes it
// by E_g^T dC_g, which is the weight gradient of a grouped linear layer: rows
// m = 0..M-1 shared by all slices, G groups of K input and N output features,
// input X[m, g K + k] = A_g[m, k], output gradient dY[m, g N + n] = dC_g[m, n],
// weight gradient W[g N + n, k] = sum_m dC_g[m, n] A_g[m, k] = dB_g[k, n].
// So the linear/conv model (weight_error_model.hpp) applies unchanged once
// the slices are laid side by side (matmul_rows_layout), and so does the
// reference gradient that measures it.
//
// The attention cases, in PyTorch's layout [batch, heads, tokens, head dim]:
//   - O = P V with the softmax probabilities P saved (after attention
//     dropout): A = P [T, T], dC = dO [T, Dh], and the error reaches dV;
//   - S = Q K^T with Q saved: A = Q [T, Dh], dC = dS [T, T], the error
//     reaches dK (as d(K^T));
//   - the other saved operand (V, K) is the same case on the transposed
//     product C^T = B^T A^T: pass B^T as A and dC^T as dC.
// docs/error-model.md section 6.4 has the measured tables.
#pragma once

#include <ebac/config.hpp>
#include <ebac/error_model/layer_geometry.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace error_model {

/// The grouped linear layer whose weight gradient is dB of `slices` products
/// [rows x inner] x [inner x cols].
[[nodiscard]] constexpr conv2d_geometry matmul_geometry(std::int64_t slices, std::int64_t rows, std::int64_t inner,
                                                        std::int64_t cols) noexcept {
  conv2d_geometry g;
  g.batch = rows;
  g.in_channels = slices * inner;
  g.out_channels = slices * cols;
  g.groups = slices;
  g.in_h = g.in_w = 1;
  return g;
}

/// [slices, rows, width] -> [rows, slices * width]: the slices side by side,
/// the layout in which matmul_geometry's input (width = inner) and output
/// gradient (width = cols) are read.
template <class T>
[[nodiscard]] std::vector<T> matmul_rows_layout(const T* a, std::int64_t slices, std::int64_t rows, std::int64_t width) {
  std::vector<T> out(static_cast<std::size_t>(slices * rows * width));
  for (std::int64_t g = 0; g < slices; ++g)
    for (std::int64_t m = 0; m < rows; ++m)
      for (std::int64_t k = 0; k < width; ++k)
        out[static_cast<std::size_t>((m * slices + g) * width + k)] = a[(g * rows + m) * width + k];
  return out;
}

}  // namespace error_model
EBAC_NAMESPACE_END
