// Links the PyTorch extension's CUDA backend (csrc/cuda_codec.cu and its
// per-element units, tests/headers/CMakeLists.txt) without torch: the
// dispatcher calls cuda_compress_typed<T> and cuda_decompress_typed<T> for
// every element type, and a type whose unit is missing fails this link.
// CI builds it; the link is the check (it is not run: main calls nothing
// unless given 98 arguments).
#include "codec_api.hpp"

int main(int argc, char**) {
  if (argc != 99) return 0;
  const ebac_torch::compress_request r;
  const ebac_torch::device_allocator a;
  const ebac_torch::blob_sink s;
  ebac_torch::cuda_compress(r, nullptr, a, s);
  ebac_torch::cuda_decompress(nullptr, 0, nullptr, ebac_torch::elem::f32, 0, nullptr, a);
  return 1;
}
