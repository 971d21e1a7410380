// bindings.cpp - the ebac_torch extension module (pybind11 + ATen).
//
// Exposes compress/decompress of one tensor to Python; the saved-tensor
// hooks, stats and policies live in Python (ebac_torch/hooks.py) because
// torch.autograd.graph.saved_tensors_hooks only takes Python callables.
//
// Layout: a tensor whose strides are a permutation of a dense row-major
// layout (contiguous, channels_last, a transposed view ...) is compressed in
// its physical memory order, with no copy, and comes back with the same
// strides; anything else is made contiguous first. Size-1 dimensions are
// dropped from the extents the compressor sees, so Lorenzo predicts along
// real axes.
//
// Devices: CPU tensors go to the host backend. CUDA tensors go to the CUDA
// backend (cuda_codec.cu) when the extension was built with it
// (EBAC_TORCH_WITH_CUDA): on the tensor's device and PyTorch's current
// stream, with memory from PyTorch's caching allocator, and the blob stays on
// that device. Without it compress() raises and the Python layer keeps CUDA
// tensors uncompressed.
#include <torch/extension.h>

#if defined(EBAC_TORCH_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "codec_api.hpp"

#include <ebac/host/large_buffer.hpp>

namespace py = pybind11;

namespace ebac_torch {
namespace {

elem elem_of(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return elem::f32;
    case at::kHalf: return elem::f16;
    case at::kBFloat16: return elem::bf16;
    case at::kBool: return elem::b8;
    case at::kByte: return elem::u8;
    case at::kChar: return elem::i8;
    case at::kShort: return elem::i16;
    case at::kInt: return elem::i32;
    case at::kLong: return elem::i64;
    default: break;
  }
  TORCH_CHECK(false, "ebac_torch: cannot compress dtype ", s,
              " (float32, float16, bfloat16 under a bound; bool, uint8, int8, int16, int32, int64 losslessly)");
  return elem::f32;  // unreachable
}

at::ScalarType scalar_of(int code) {
  switch (static_cast<elem>(code)) {
    case elem::f32: return at::kFloat;
    case elem::f16: return at::kHalf;
    case elem::bf16: return at::kBFloat16;
    case elem::b8: return at::kBool;
    case elem::u8: return at::kByte;
    case elem::i8: return at::kChar;
    case elem::i16: return at::kShort;
    case elem::i32: return at::kInt;
    case elem::i64: return at::kLong;
  }
  TORCH_CHECK(false, "ebac_torch: unknown element code ", code);
  return at::kFloat;  // unreachable
}

const char* dtype_name(elem e) {
  switch (e) {
    case elem::f32: return "float32";
    case elem::f16: return "float16";
    case elem::bf16: return "bfloat16";
    case elem::b8: return "bool";
    case elem::u8: return "uint8";
    case elem::i8: return "int8";
    case elem::i16: return "int16";
    case elem::i32: return "int32";
    case elem::i64: return "int64";
  }
  return "?";
}

/// Dimension order from the largest stride to the smallest, or an empty
/// vector when the strides do not describe a dense, non-overlapping layout.
std::vector<int64_t> physical_order(const at::Tensor& t) {
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  const int64_t rank = t.dim();
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (int64_t k = rank - 1; k >= 0; --k) {
    const int64_t d = perm[static_cast<size_t>(k)];
    if (sizes[d] == 1) continue;  // any stride is fine for a size-1 dimension
    if (strides[d] != expected) return {};
    expected *= sizes[d];
  }
  return perm;
}

/// The extents the compressor sees: physical order, size-1 axes dropped,
/// leading axes folded when more than 8 remain.
void fill_extents(const at::Tensor& t, const std::vector<int64_t>& perm, compress_request& r) {
  std::vector<std::uint64_t> d;
  for (int64_t k : perm)
    if (t.size(k) != 1) d.push_back(static_cast<std::uint64_t>(t.size(k)));
  if (d.empty()) d.push_back(1);
  while (d.size() > 8) {
    d[1] *= d[0];
    d.erase(d.begin());
  }
  r.rank = static_cast<int>(d.size());
  for (size_t i = 0; i < d.size(); ++i) r.dims[i] = d[i];
}

/// A uint8 CPU tensor that owns the stream bytes (no copy).
at::Tensor wrap_bytes(std::vector<std::byte>&& bytes) {
  auto* owner = new std::vector<std::byte>(std::move(bytes));
  const auto n = static_cast<int64_t>(owner->size());
  return torch::from_blob(
      owner->data(), {n}, [owner](void*) { delete owner; }, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
}

#if defined(EBAC_TORCH_WITH_CUDA)
/// PyTorch's caching allocator behind codec_api's plain interface.
device_allocator torch_cuda_allocator() {
  device_allocator a;
  a.allocate = [](std::size_t bytes, void* stream, void*) -> void* {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes ? bytes : 1, static_cast<cudaStream_t>(stream));
  };
  a.deallocate = [](void* p, void*, void*) { c10::cuda::CUDACachingAllocator::raw_delete(p); };
  return a;
}

/// Where cuda_compress puts the stream: a uint8 tensor on the input's device.
struct cuda_blob_target {
  at::Device device;
  at::Tensor blob;
  static void* output(std::uint64_t bytes, void* ctx) {
    auto* self = static_cast<cuda_blob_target*>(ctx);
    self->blob = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(self->device));
    return self->blob.data_ptr();
  }
};
#endif

bool parse_mode(const std::string& mode) {
  if (mode == "rel" || mode == "relative") return true;
  if (mode == "abs" || mode == "absolute") return false;
  TORCH_CHECK(false, "ebac_torch: mode must be 'rel' or 'abs', got '", mode, "'");
  return true;  // unreachable
}

/// "staged", "fused" or "single_pass" (ebac::cuda::kernel_path); checked on
/// every device so that a typo fails on a CPU run too.
cuda_kernels parse_kernel_path(const std::string& name) {
  if (name == "staged") return cuda_kernels::staged;
  if (name == "fused") return cuda_kernels::fused;
  if (name == "single_pass") return cuda_kernels::single_pass;
  TORCH_CHECK(false, "ebac_torch: kernel_path must be 'staged', 'fused' or 'single_pass', got '", name, "'");
  return cuda_kernels::staged;  // unreachable
}

/// The pooling geometry of a max-pool index tensor, from Python's
/// (input, kernel, stride, padding, dilation) sizes of its spatial dims.
void fill_pooling(const std::vector<std::vector<int64_t>>& p, compress_request& r) {
  TORCH_CHECK(p.size() == 5, "ebac_torch: pooling is (input, kernel, stride, padding, dilation)");
  const size_t d = p[0].size();
  TORCH_CHECK(d >= 1 && d <= 3, "ebac_torch: pooling over 1 to 3 spatial dimensions");
  for (const auto& v : p) TORCH_CHECK(v.size() == d, "ebac_torch: pooling sizes must all have ", d, " entries");
  r.pool_dims = static_cast<int>(d);
  for (size_t j = 0; j < d; ++j) {
    r.pool_input[j] = p[0][j];
    r.pool_kernel[j] = p[1][j];
    r.pool_stride[j] = p[2][j];
    r.pool_padding[j] = p[3][j];
    r.pool_dilation[j] = p[4][j];
  }
}

/// compress(t, error_bound, mode, pipeline, threads, checksum, kernel_path, pooling) -> (blob, strides)
/// `strides` are those the decompressed tensor must get (t's own when its
/// layout is dense, else contiguous ones). Integer and bool tensors are coded
/// losslessly (the bound is ignored); `pooling` marks a tensor of max-pool
/// indices (its last dims are the pooling output's spatial dims).
py::tuple compress(at::Tensor t, double error_bound, const std::string& mode, const std::string& pipeline, int64_t threads,
                   bool checksum, const std::string& kernel_path,
                   const std::optional<std::vector<std::vector<int64_t>>>& pooling) {
  TORCH_CHECK(t.layout() == at::kStrided, "ebac_torch: only strided (dense) tensors can be compressed");
  TORCH_CHECK(t.numel() > 0, "ebac_torch: cannot compress an empty tensor");
  compress_request r;
  r.type = elem_of(t.scalar_type());
  r.error_bound = error_bound;
  r.relative = parse_mode(mode);
  r.pipeline = pipeline;
  r.threads = static_cast<int>(threads);
  r.checksum = checksum;
  r.kernels = parse_kernel_path(kernel_path);
#if !defined(EBAC_TORCH_WITH_CUDA)
  TORCH_CHECK(!t.is_cuda(), "ebac_torch was built without the CUDA backend: cannot compress a CUDA tensor");
#endif
  TORCH_CHECK(t.is_cuda() || t.device().is_cpu(), "ebac_torch: unsupported device ", t.device());
#if defined(EBAC_TORCH_WITH_CUDA)
  std::optional<c10::cuda::CUDAGuard> guard;  // a copy below must land on the tensor's device
  if (t.is_cuda()) guard.emplace(t.device());
#endif
  if (pooling.has_value()) {
    // The geometry names the last dims: keep them as they are (size 1
    // included) in row-major order, and fold everything before them.
    fill_pooling(*pooling, r);
    TORCH_CHECK(t.dim() >= r.pool_dims, "ebac_torch: a pooling geometry of ", r.pool_dims, " dims on a tensor of rank ", t.dim());
    // The last dims are the pooling output's: the size max-pooling gives this
    // input, kernel, stride, padding and dilation (floor or ceil mode).
    for (int j = 0; j < r.pool_dims; ++j) {
      const int64_t in = r.pool_input[j], k = r.pool_kernel[j], st = r.pool_stride[j], pad = r.pool_padding[j],
                    dil = r.pool_dilation[j], out = t.size(t.dim() - r.pool_dims + j);
      TORCH_CHECK(in >= 1 && k >= 1 && st >= 1 && dil >= 1 && pad >= 0 && in < (int64_t{1} << 31) && k < (int64_t{1} << 31) &&
                      st < (int64_t{1} << 31) && pad < (int64_t{1} << 31) && dil < (int64_t{1} << 31),
                  "ebac_torch: pooling: sizes must be >= 1 (padding >= 0) and below 2^31 in spatial dim ", j);
      const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
      int64_t lo = -1, hi = -1;
      if (span >= 0) {
        lo = span / st + 1;
        hi = (span + st - 1) / st + 1;
        if (hi > lo && (hi - 1) * st >= in + pad) --hi;
      }
      TORCH_CHECK(2 * pad <= k && span >= 0 && (out == lo || out == hi), "ebac_torch: pooling: input ", in, ", kernel ", k,
                  ", stride ", st, ", padding ", pad, ", dilation ", dil, " in spatial dim ", j, " pool to ", lo,
                  hi != lo ? " (or " + std::to_string(hi) + " in ceil mode)" : std::string(), ", but the tensor's size there is ",
                  out);
    }
    t = t.contiguous();
    std::uint64_t lead = 1;
    for (int64_t k = 0; k < t.dim() - r.pool_dims; ++k) lead *= static_cast<std::uint64_t>(t.size(k));
    r.rank = r.pool_dims + 1;
    r.dims[0] = lead;
    for (int j = 0; j < r.pool_dims; ++j) r.dims[1 + j] = static_cast<std::uint64_t>(t.size(t.dim() - r.pool_dims + j));
  } else {
    // The layout is the same question on either device.
    std::vector<int64_t> perm = physical_order(t);
    if (perm.empty()) {
      t = t.contiguous();
      perm = physical_order(t);
    }
    fill_extents(t, perm, r);
  }
  r.data = t.data_ptr();
#if defined(EBAC_TORCH_WITH_CUDA)
  if (t.is_cuda()) {
    cuda_blob_target target{t.device(), at::Tensor()};
    const device_allocator a = torch_cuda_allocator();
    {
      // The backend waits for the device (size read-back): let other Python
      // threads run meanwhile. Nothing below touches a Python object.
      py::gil_scoped_release nogil;
      cuda_compress(r, at::cuda::getCurrentCUDAStream(t.device().index()).stream(), a,
                    blob_sink{&cuda_blob_target::output, &target});
    }
    return py::make_tuple(target.blob, t.strides().vec());
  }
#endif
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release nogil;
    bytes = host_compress(r);
  }
  return py::make_tuple(wrap_bytes(std::move(bytes)), t.strides().vec());
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

/// The checks on decompress's arguments that need no stream: element code,
/// shape and strides of one rank, no negative entry, and strides that lay the
/// elements out densely (a permutation of row-major), as every stream is
/// decoded into one dense block of numel elements. Returns the element count.
/// ValueError/TypeError naming the argument (a Compressed's field of that name).
std::uint64_t check_layout(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int elem_code) {
  bool known = false;
  for (int c = static_cast<int>(elem::f32); c <= static_cast<int>(elem::i64); ++c) known = known || c == elem_code;
  TORCH_CHECK_TYPE(known, "ebac_torch: dtype: element code ", elem_code, " is not one ebac codes");
  TORCH_CHECK_VALUE(sizes.size() <= 64, "ebac_torch: shape: rank ", sizes.size(), " (at most 64)");
  TORCH_CHECK_VALUE(strides.size() == sizes.size(), "ebac_torch: strides: ", strides.size(), " entries for a shape of rank ",
                    sizes.size());
  std::uint64_t n = 1;
  for (int64_t v : sizes) {
    TORCH_CHECK_VALUE(v >= 0, "ebac_torch: shape: negative size in ", list_text(sizes));
    TORCH_CHECK_VALUE(v == 0 || n <= (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(v),
                      "ebac_torch: shape: ", list_text(sizes), " has too many elements");
    n *= static_cast<std::uint64_t>(v);
  }
  for (int64_t v : strides) TORCH_CHECK_VALUE(v >= 0, "ebac_torch: strides: negative stride in ", list_text(strides));
  if (n == 0) return 0;
  // Dense: sorted by stride, each dimension of size > 1 steps over exactly
  // the elements of the ones inside it (a size-1 dimension's stride is never used).
  std::vector<size_t> perm(sizes.size());
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  std::uint64_t expected = 1;
  for (size_t k = perm.size(); k-- > 0;) {
    const size_t d = perm[k];
    if (sizes[d] == 1) continue;
    TORCH_CHECK_VALUE(static_cast<std::uint64_t>(strides[d]) == expected, "ebac_torch: strides: ", list_text(strides),
                      " do not lay out shape ", list_text(sizes),
                      " densely (a decoded tensor is one dense block: strides must be a permutation of row-major ones)");
    expected *= static_cast<std::uint64_t>(sizes[d]);
  }
  return n;
}

/// The extents compress() gave the codec for a tensor of these sizes and
/// (dense) strides: fill_extents's rule, or, for max-pool indices, the
/// leading elements folded before the last `pool_dims` sizes.
std::vector<int64_t> codec_extents(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int pool_dims) {
  std::vector<int64_t> d;
  if (pool_dims > 0) {
    if (static_cast<int>(sizes.size()) < pool_dims) return d;
    int64_t lead = 1;
    for (size_t k = 0; k + static_cast<size_t>(pool_dims) < sizes.size(); ++k) lead *= sizes[k];
    d.push_back(lead);
    for (size_t k = sizes.size() - static_cast<size_t>(pool_dims); k < sizes.size(); ++k) d.push_back(sizes[k]);
    return d;
  }
  std::vector<size_t> perm(sizes.size());
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
  for (size_t k : perm)
    if (sizes[k] != 1) d.push_back(sizes[k]);
  if (d.empty()) d.push_back(1);
  while (d.size() > 8) {
    d[1] *= d[0];
    d.erase(d.begin());
  }
  return d;
}

bool row_major(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    if (sizes[k] == 1) continue;
    if (strides[k] != expected) return false;
    expected *= sizes[k];
  }
  return true;
}

/// decompress's arguments against the stream's header, before any memory is
/// touched: the dtype the header names, its element count, and the extents
/// in memory order that compress() derived from the shape and strides.
void check_against_stream(const stream_info& s, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                          int elem_code) {
  const std::uint64_t n = check_layout(sizes, strides, elem_code);
  TORCH_CHECK_VALUE(static_cast<elem>(elem_code) == s.type, "ebac_torch: dtype: ", dtype_name(static_cast<elem>(elem_code)),
                    ", but the blob holds ", dtype_name(s.type), " elements");
  std::uint64_t held = 1;
  for (int64_t v : s.dims) held *= static_cast<std::uint64_t>(v);  // the header reader checked the product
  TORCH_CHECK_VALUE(n == held, "ebac_torch: shape: ", list_text(sizes), " has ", n, " elements, but the blob holds ", held);
  // An integer stream compressed with a pooling geometry holds the pooling
  // layout (row-major, the leading dims folded, the last ones kept) whatever
  // stage coded it: window offsets (pooled), palette levels when the planes
  // are so small that few distinct indices occur, or raw bytes (stored).
  const int pool_dims = static_cast<int>(s.dims.size()) - 1;
  const bool pool_layout = (s.pooled || s.lossless_dtype) && pool_dims >= 1 && pool_dims <= 3 && row_major(sizes, strides) &&
                           codec_extents(sizes, strides, pool_dims) == s.dims;
  TORCH_CHECK_VALUE(pool_layout || (!s.pooled && codec_extents(sizes, strides, 0) == s.dims),
                    "ebac_torch: shape and strides: ", list_text(sizes), " with strides ", list_text(strides),
                    " lay the elements out as ", list_text(codec_extents(sizes, strides, s.pooled ? pool_dims : 0)),
                    " in memory, but the blob holds ", list_text(s.dims));
}

/// The header of a blob (a CPU copy of a device blob's first bytes).
stream_info header_of(const at::Tensor& blob) {
  const int64_t k = std::min<int64_t>(blob.numel(), static_cast<int64_t>(max_header_bytes));
  const at::Tensor head = blob.is_cuda() ? blob.slice(0, 0, k).cpu() : blob;
  try {
    return inspect_header(reinterpret_cast<const std::byte*>(head.data_ptr<std::uint8_t>()), static_cast<std::size_t>(k),
                          static_cast<std::size_t>(blob.numel()));
  } catch (const std::runtime_error& e) { TORCH_CHECK_VALUE(false, "ebac_torch: blob: ", e.what()); }
  return {};  // unreachable
}

void check_blob_tensor(const at::Tensor& blob) {
  TORCH_CHECK_TYPE(blob.scalar_type() == at::kByte && blob.dim() == 1 && blob.is_contiguous(),
                   "ebac_torch: blob: a compressed blob is a contiguous 1-D uint8 tensor, got ", blob.scalar_type(), " of ",
                   blob.dim(), " dims", blob.is_contiguous() ? "" : ", not contiguous");
}

/// check_fields(blob, sizes, strides, elem_code): what decompress checks
/// first, on its own (a device blob's header is copied to the host).
void check_fields(const at::Tensor& blob, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int elem_code) {
  check_blob_tensor(blob);
  check_layout(sizes, strides, elem_code);
  check_against_stream(header_of(blob), sizes, strides, elem_code);
}

/// An uninitialized dense CPU tensor for a decompressed stream. One of 2 MiB
/// or more (host::large_mapping_min_bytes) gets a mapping of its own whose whole 2 MiB pages are advised for
/// transparent huge pages, where Linux has them: a decompressed tensor is
/// fresh memory written once in full, and with 4 KiB pages every page is a
/// fault; those faults (not the zeroing) were a fifth of a ViT step's kernel
/// time on the host. ebac::host::map_huge_pages gives it a mapping of its own
/// (unmapped when the tensor is freed); otherwise, or if the mapping fails,
/// at::empty_strided.
at::Tensor empty_output(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, at::ScalarType st) {
  const at::TensorOptions options = at::TensorOptions().dtype(st).device(at::kCPU);
  std::size_t bytes = c10::elementSize(st);
  for (int64_t d : sizes) bytes *= static_cast<std::size_t>(d);  // dense (check_layout): numel elements
  if (void* p = ebac::host::map_huge_pages(bytes))
    return at::from_blob(
        p, sizes, strides, [bytes](void* q) { ebac::host::unmap_huge_pages(q, bytes); }, options);
  return at::empty_strided(sizes, strides, options);
}

/// decompress(blob, sizes, strides, elem_code, threads, kernel_path) -> tensor
/// The arguments are checked before any memory is touched (ValueError or
/// TypeError naming the one that is wrong; a damaged CPU blob is a ValueError
/// naming the blob). A CUDA blob's header stays on the device here (no
/// synchronization, so this works inside a capture's refusal path): the
/// layout is checked to be dense, and the device decoder checks the element
/// count and dtype; ebac_torch.decompress checks the rest (check_fields).
at::Tensor decompress(const at::Tensor& blob, std::vector<int64_t> sizes, std::vector<int64_t> strides, int elem_code,
                      int64_t threads, const std::string& kernel_path) {
  [[maybe_unused]] const cuda_kernels kernels = parse_kernel_path(kernel_path);  // CUDA blobs only
  check_blob_tensor(blob);
  check_layout(sizes, strides, elem_code);
  const at::ScalarType st = scalar_of(elem_code);
  if (blob.is_cuda()) {
#if defined(EBAC_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(blob.device());
    at::Tensor out = at::empty_strided(sizes, strides, at::TensorOptions().dtype(st).device(blob.device()));
    {
      py::gil_scoped_release nogil;  // the backend waits for the device (header, status)
      cuda_decompress(reinterpret_cast<const std::byte*>(blob.data_ptr<std::uint8_t>()), static_cast<std::size_t>(blob.numel()),
                      out.data_ptr(), static_cast<elem>(elem_code), static_cast<std::uint64_t>(out.numel()),
                      at::cuda::getCurrentCUDAStream(blob.device().index()).stream(), torch_cuda_allocator(), kernels);
    }
    return out;
#else
    TORCH_CHECK(false, "ebac_torch was built without the CUDA backend: cannot decompress a CUDA blob");
#endif
  }
  TORCH_CHECK(blob.device().is_cpu(), "ebac_torch: unsupported device ", blob.device());
  check_against_stream(header_of(blob), sizes, strides, elem_code);
  at::Tensor out = empty_output(sizes, strides, st);
  const auto* data = reinterpret_cast<const std::byte*>(blob.data_ptr<std::uint8_t>());
  const auto size = static_cast<std::size_t>(blob.numel());
  void* dst = out.data_ptr();
  const auto count = static_cast<std::uint64_t>(out.numel());
  std::string failure;
  {
    py::gil_scoped_release nogil;
    try {
      host_decompress(data, size, dst, static_cast<elem>(elem_code), count, static_cast<int>(threads));
    } catch (const std::runtime_error& e) {  // ebac::error: the stream is damaged
      failure = e.what();
    }
  }
  TORCH_CHECK_VALUE(failure.empty(), "ebac_torch: blob: ", failure);
  return out;
}

py::dict inspect(const at::Tensor& blob, int64_t stream_bytes) {
  TORCH_CHECK(blob.scalar_type() == at::kByte && blob.dim() == 1 && blob.is_contiguous(),
              "ebac_torch: a compressed blob is a contiguous 1-D uint8 tensor");
  stream_info s;
  if (stream_bytes > 0) {
    // The leading bytes of a stream of stream_bytes bytes (a header copied
    // out earlier): only the header is parsed and checked against that size.
    TORCH_CHECK(blob.device().is_cpu() && stream_bytes >= blob.numel(),
                "ebac_torch: inspect(head, stream_bytes) takes a CPU copy of a stream's first bytes and the stream's size");
    s = inspect_header(reinterpret_cast<const std::byte*>(blob.data_ptr<std::uint8_t>()), static_cast<std::size_t>(blob.numel()),
                       static_cast<std::size_t>(stream_bytes));
  } else if (blob.device().is_cpu()) {
    s = host_inspect(reinterpret_cast<const std::byte*>(blob.data_ptr<std::uint8_t>()), static_cast<std::size_t>(blob.numel()));
  } else {
    // A device blob: only its header comes to the host (the payload's
    // integrity is the device decoder's to check).
    const int64_t k = std::min<int64_t>(blob.numel(), static_cast<int64_t>(max_header_bytes));
    const at::Tensor head = blob.slice(0, 0, k).cpu();
    s = inspect_header(reinterpret_cast<const std::byte*>(head.data_ptr<std::uint8_t>()), static_cast<std::size_t>(k),
                       static_cast<std::size_t>(blob.numel()));
  }
  py::dict d;
  d["dtype"] = dtype_name(s.type);
  d["dims"] = s.dims;
  d["mode"] = s.lossless_dtype ? "none" : (s.relative ? "rel" : "abs");
  d["eb_requested"] = s.eb_requested;
  d["eb_abs"] = s.eb_abs;
  d["outliers"] = s.outliers;
  d["bytes"] = s.bytes;
  d["predictor"] = s.predictor;
  d["quantizer"] = s.quantizer;
  d["encoder"] = s.encoder;
  d["checksum"] = s.checksum;
  d["stored"] = s.stored;
  return d;
}

/// A weak reference to a tensor's storage: says whether a tensor seen later
/// still lives in that same storage, without keeping its memory alive (a
/// data_ptr alone can be reused by a new allocation once the old one dies).
class StorageRef {
 public:
  explicit StorageRef(const at::Tensor& t) : ref_(t.storage().getWeakStorageImpl()) {}
  bool same(const at::Tensor& t) const {
    if (!t.has_storage()) return false;
    auto p = ref_.lock();
    return p && p.get() == t.storage().unsafeGetStorageImpl();
  }
  bool alive() const { return !ref_.expired(); }

 private:
  c10::weak_intrusive_ptr<c10::StorageImpl> ref_;
};

std::uintptr_t storage_id(const at::Tensor& t) {
  if (!t.has_storage()) return 0;
  return reinterpret_cast<std::uintptr_t>(t.storage().unsafeGetStorageImpl());
}

/// d(dx) of an elementwise function (error_model/elementwise_model.hpp) at
/// every element, float64 shaped like x; CPU float copies as above.
at::Tensor elementwise_input_grad_change_py(const std::string& fn, const at::Tensor& x, const at::Tensor& y,
                                            const at::Tensor& dy) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.sizes() == dy.sizes(),
              "ebac_torch: elementwise_input_grad_change takes three tensors of one shape");
  auto host = [](const at::Tensor& t) { return t.detach().to(at::kCPU).to(at::kFloat).contiguous(); };
  const at::Tensor xf = host(x), yf = host(y), df = host(dy);
  at::Tensor out = at::empty(x.sizes(), at::TensorOptions().dtype(at::kDouble));
  try {
    py::gil_scoped_release nogil;
    elementwise_input_grad_change(fn, xf.numel(), xf.data_ptr<float>(), yf.data_ptr<float>(), df.data_ptr<float>(),
                                  out.data_ptr<double>());
  } catch (const std::invalid_argument& e) { TORCH_CHECK(false, e.what()); }
  return out;
}

/// layernorm_rows(x, eps) -> None or (rows, sigma, shift, col_lo, col_hi,
/// lo, hi, sigma_max, rows_max_abs, shift_max_abs): normalize_rows
/// (codec_api.hpp) on a contiguous CPU float32 matrix; None when an element
/// is not finite.
py::object layernorm_rows_py(const at::Tensor& x, double eps) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "ebac_torch: layernorm_rows takes a contiguous CPU float32 matrix, got ", x.scalar_type(), " of rank ", x.dim(),
              " on ", x.device());
  TORCH_CHECK(x.size(0) > 0 && x.size(1) > 0, "ebac_torch: layernorm_rows: an empty matrix");
  TORCH_CHECK(eps >= 0 && std::isfinite(eps), "ebac_torch: layernorm_rows: eps must be finite and >= 0, got ", eps);
  const auto f = at::TensorOptions().dtype(at::kFloat);
  // rows: as large as x, written once in full (empty_output: huge pages where it is large).
  at::Tensor rows = empty_output(x.sizes().vec(), {x.size(1), 1}, at::kFloat), sigma = at::empty({x.size(0)}, f),
             shift = at::empty({x.size(0)}, f), col_lo = at::empty({x.size(1)}, f), col_hi = at::empty({x.size(1)}, f);
  row_normalization r;
  {
    py::gil_scoped_release nogil;
    r = normalize_rows(x.data_ptr<float>(), x.size(0), x.size(1), eps, rows.data_ptr<float>(), sigma.data_ptr<float>(),
                       shift.data_ptr<float>(), col_lo.data_ptr<float>(), col_hi.data_ptr<float>());
  }
  if (!r.finite) return py::none();
  return py::make_tuple(rows, sigma, shift, col_lo, col_hi, r.lo, r.hi, r.sigma_max, r.rows_max_abs, r.shift_max_abs);
}

/// d(dx) of a BatchNorm2d (error_model/batchnorm_propagation.hpp); CPU float
/// copies of CUDA or half tensors are made here (an observation-step cost).
at::Tensor batchnorm_input_grad_change_py(const at::Tensor& x, const at::Tensor& y, const at::Tensor& dy,
                                          const c10::optional<at::Tensor>& gamma, double eps) {
  TORCH_CHECK(x.dim() == 4 && x.sizes() == y.sizes() && x.sizes() == dy.sizes(),
              "ebac_torch: batchnorm_input_grad_change takes three N,C,H,W tensors of one shape");
  auto host = [](const at::Tensor& t) { return t.detach().to(at::kCPU).to(at::kFloat).contiguous(); };
  const at::Tensor xf = host(x), yf = host(y), df = host(dy);
  at::Tensor gf;
  if (gamma.has_value() && gamma->defined()) {
    gf = host(*gamma);
    TORCH_CHECK(gf.numel() == x.size(1), "ebac_torch: gamma has ", gf.numel(), " entries for ", x.size(1), " channels");
  }
  at::Tensor out = at::empty(x.sizes(), at::TensorOptions().dtype(at::kDouble));
  try {
    py::gil_scoped_release nogil;
    batchnorm_input_grad_change(x.size(0), x.size(1), x.size(2) * x.size(3), xf.data_ptr<float>(), yf.data_ptr<float>(),
                                df.data_ptr<float>(), gf.defined() ? gf.data_ptr<float>() : nullptr, eps, out.data_ptr<double>());
  } catch (const std::invalid_argument& e) { TORCH_CHECK(false, e.what()); }
  return out;
}

/// predict_weight_error(x, y, dy, eb_abs, kernel, stride, padding, dilation, groups) -> dict
/// x, y: a Conv2d's saved input and its reconstruction (N, C, H, W), dy its
/// output gradient (N, O, Ho, Wo); or, for a Linear, x, y (N, F) and dy (N, O)
/// with kernel etc. ignored.
py::dict predict_weight_error_py(const at::Tensor& x, const at::Tensor& y, const at::Tensor& dy, double eb_abs,
                                 std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> padding,
                                 std::vector<int64_t> dilation, int64_t groups, double weight_grad_rms) {
  TORCH_CHECK(x.sizes() == y.sizes(), "ebac_torch: x and its reconstruction differ in shape");
  TORCH_CHECK(x.dim() == dy.dim() && (x.dim() == 4 || x.dim() == 2) && x.size(0) == dy.size(0),
              "ebac_torch: predict_weight_error takes NCHW conv tensors or N x F linear tensors");
  layer_geometry g;
  g.batch = x.size(0);
  g.in_channels = x.size(1);
  g.out_channels = dy.size(1);
  if (x.dim() == 2) {
    g.linear = true;
  } else {
    TORCH_CHECK(kernel.size() == 2 && stride.size() == 2 && padding.size() == 2 && dilation.size() == 2,
                "ebac_torch: kernel, stride, padding and dilation are pairs");
    g.in_h = x.size(2);
    g.in_w = x.size(3);
    g.kernel_h = kernel[0], g.kernel_w = kernel[1];
    g.stride_h = stride[0], g.stride_w = stride[1];
    g.pad_h = padding[0], g.pad_w = padding[1];
    g.dilation_h = dilation[0], g.dilation_w = dilation[1];
    g.groups = groups;
  }
  const at::Tensor xf = x.detach().to(at::kFloat).contiguous(), yf = y.detach().to(at::kFloat).contiguous();
  const at::Tensor df = dy.detach().to(at::kFloat).contiguous();
  TORCH_CHECK(xf.device().is_cpu() && df.device().is_cpu(), "ebac_torch: predict_weight_error runs on CPU tensors");
  weight_error_estimate r;
  try {
    py::gil_scoped_release nogil;
    r = predict_weight_error(g, xf.data_ptr<float>(), yf.data_ptr<float>(), df.data_ptr<float>(), eb_abs, weight_grad_rms);
  } catch (const std::invalid_argument& e) { TORCH_CHECK(false, e.what()); }
  py::dict d;
  d["sigma"] = r.sigma;
  d["iid_sigma"] = r.iid_sigma;
  d["coherent_share"] = r.coherent_share;
  d["flat_share"] = r.flat_share;
  return d;
}

py::dict plan_batch_py(double budget_bytes, double static_bytes, double uncompressed_bytes_per_sample,
                       std::vector<double> bytes_per_sample, std::vector<double> compression_ratio, double safety_margin,
                       int64_t target_global_batch, int64_t max_batch, int64_t reference_batch, double reference_lr,
                       const std::string& scaling, double warmup_samples, double reference_tau, double working_bytes_per_sample,
                       double working_set_tensors, double probe_rise_bytes, double probe_static_bytes, int64_t probe_batch,
                       double second_probe_rise_bytes, int64_t second_probe_batch) {
  TORCH_CHECK(bytes_per_sample.size() == compression_ratio.size(),
              "ebac_torch: plan_batch: one compression ratio per compressed tensor");
  TORCH_CHECK(scaling == "linear" || scaling == "sqrt", "ebac_torch: plan_batch: scaling is 'linear' or 'sqrt'");
  planner_request r;
  r.budget_bytes = budget_bytes;
  r.static_bytes = static_bytes;
  r.uncompressed_bytes_per_sample = uncompressed_bytes_per_sample;
  r.bytes_per_sample = std::move(bytes_per_sample);
  r.compression_ratio = std::move(compression_ratio);
  r.safety_margin = safety_margin;
  r.target_global_batch = target_global_batch;
  r.max_batch = max_batch;
  r.reference_batch = reference_batch;
  r.reference_lr = reference_lr;
  r.sqrt_scaling = scaling == "sqrt";
  r.warmup_samples = warmup_samples;
  r.reference_tau = reference_tau;
  r.working_bytes_per_sample = working_bytes_per_sample;
  r.working_set_tensors = working_set_tensors;
  r.probe_rise_bytes = probe_rise_bytes;
  r.probe_static_bytes = probe_static_bytes;
  r.probe_batch = probe_batch;
  r.second_probe_rise_bytes = second_probe_rise_bytes;
  r.second_probe_batch = second_probe_batch;
  const planner_result o = plan_batch(r);
  py::dict d;
  d["ok"] = o.ok;
  d["state"] = o.state;
  d["description"] = o.description;
  d["max_micro_batch"] = o.max_micro_batch;
  d["micro_batch"] = o.micro_batch;
  d["accumulation_steps"] = o.accumulation_steps;
  d["global_batch"] = o.global_batch;
  d["warmup_steps"] = o.warmup_steps;
  d["bytes_per_sample"] = o.bytes_per_sample;
  d["usable_bytes"] = o.usable_bytes;
  d["peak_bytes"] = o.peak_bytes;
  d["learning_rate"] = o.learning_rate;
  d["target_relative_error"] = o.target_relative_error;
  d["saved_bytes_per_sample"] = o.saved_bytes_per_sample;
  d["working_bytes_per_sample"] = o.working_bytes_per_sample;
  return d;
}

bool has_cuda() {
#if defined(EBAC_TORCH_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

}  // namespace
}  // namespace ebac_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace ebac_torch;
  m.doc() = "ebac error-bounded compression of torch tensors (host backend; CUDA backend when built with it)";
  m.def("compress", &compress, py::arg("tensor"), py::arg("error_bound"), py::arg("mode") = "rel", py::arg("pipeline") = "fast",
        py::arg("threads") = 0, py::arg("checksum") = false, py::arg("kernel_path") = "staged", py::arg("pooling") = py::none(),
        "Compress a tensor (float32/float16/bfloat16 under the bound; bool and integers losslessly; pooling = "
        "(input, kernel, stride, padding, dilation) for max-pool indices); returns (uint8 blob, strides to restore).");
  m.def("check_fields", &check_fields, py::arg("blob"), py::arg("sizes"), py::arg("strides"), py::arg("elem"),
        "What decompress checks before touching memory: blob, dtype, shape and strides against the stream's header "
        "(ValueError/TypeError naming the one that is wrong).");
  m.def("decompress", &decompress, py::arg("blob"), py::arg("sizes"), py::arg("strides"), py::arg("elem"), py::arg("threads") = 0,
        py::arg("kernel_path") = "staged", "Decompress a blob into a new tensor with the given sizes and strides.");
  m.def("inspect", &inspect, py::arg("blob"), py::arg("stream_bytes") = 0,
        "The stream header of a blob as a dict; with stream_bytes, blob is a CPU copy of that stream's first bytes.");
  m.attr("max_header_bytes") = py::int_(max_header_bytes);
  m.def("valid_pipeline", &valid_pipeline, py::arg("name"));
  m.def("storage_id", &storage_id, py::arg("tensor"), "Identity of a tensor's storage (0 if none).");
  m.def("has_cuda", &has_cuda, "True when built with the CUDA backend.");
  m.def("predict_weight_error", &predict_weight_error_py, py::arg("x"), py::arg("y"), py::arg("dy"), py::arg("eb_abs"),
        py::arg("kernel") = std::vector<int64_t>{1, 1}, py::arg("stride") = std::vector<int64_t>{1, 1},
        py::arg("padding") = std::vector<int64_t>{0, 0}, py::arg("dilation") = std::vector<int64_t>{1, 1}, py::arg("groups") = 1,
        py::arg("weight_grad_rms") = 0.0,
        "ebac's error model: predicted RMS weight-gradient error of a Conv2d/Linear layer whose saved "
        "input x is replaced by y.");
  m.def("batchnorm_input_grad_change", &batchnorm_input_grad_change_py, py::arg("x"), py::arg("y"), py::arg("dy"),
        py::arg("gamma"), py::arg("eps"),
        "ebac::error_model::batchnorm_input_grad_change: d(dx) of a training-mode BatchNorm2d whose saved "
        "input x is replaced by y (float64, shaped like x).");
  m.def("elementwise_input_grad_change", &elementwise_input_grad_change_py, py::arg("fn"), py::arg("x"), py::arg("y"),
        py::arg("dy"),
        "ebac::error_model::elementwise_input_grad_change: d(dx) = dy (g(y) - g(x)) of an elementwise function "
        "(gelu, silu, tanh, sigmoid) whose saved tensor x is replaced by y (float64, shaped like x).");
  m.def("layernorm_rows", &layernorm_rows_py, py::arg("x"), py::arg("eps"),
        "A LayerNorm input's rows in its units, in one pass: (rows, sigma, shift, col_lo, col_hi, lo, hi, sigma_max, "
        "rows_max_abs, shift_max_abs), or None when an element is not finite (see hooks._row_normalized).");
  m.def("ebac_version", &ebac_version);
  m.def("host_isa", &host_isa_name,
        "The build of the host codec that runs for f32/f16/bf16: x86-64-v3 or baseline (EBAC_HOST_ISA).");
  m.def("plan_batch", &plan_batch_py, py::arg("budget_bytes"), py::arg("static_bytes"), py::arg("uncompressed_bytes_per_sample"),
        py::arg("bytes_per_sample"), py::arg("compression_ratio"), py::arg("safety_margin") = 0.1,
        py::arg("target_global_batch") = 0, py::arg("max_batch") = int64_t{1} << 24, py::arg("reference_batch") = 16,
        py::arg("reference_lr") = 0.1, py::arg("scaling") = "linear", py::arg("warmup_samples") = 0.0,
        py::arg("reference_tau") = 0.1, py::arg("working_bytes_per_sample") = -1.0, py::arg("working_set_tensors") = 3.5,
        py::arg("probe_rise_bytes") = 0.0, py::arg("probe_static_bytes") = 0.0, py::arg("probe_batch") = 0,
        py::arg("second_probe_rise_bytes") = 0.0, py::arg("second_probe_batch") = 0,
        "ebac::adapt::plan_batch: the largest batch that fits a memory budget (saved + working set per sample), "
        "with lr and tau scaling; with probe_batch > 0 the working set is measured from that probe step (from the "
        "line through two steps with second_probe_batch > 0).");
  py::class_<controller_handle>(m, "Controller")
      .def(py::init([](std::size_t layers, double target_relative_error, int64_t window, double initial_eb, double smoothing,
                       double max_step, double eb_min, double eb_max, double tolerance) {
             controller_settings s;
             s.target_relative_error = target_relative_error;
             s.window = window;
             s.initial_eb = initial_eb;
             s.smoothing = smoothing;
             s.max_step = max_step;
             s.eb_min = eb_min;
             s.eb_max = eb_max;
             s.tolerance = tolerance;
             return new controller_handle(s, layers);
           }),
           py::arg("layers"), py::arg("target_relative_error") = 0.1, py::arg("window") = 100, py::arg("initial_eb") = 1e-3,
           py::arg("smoothing") = 0.5, py::arg("max_step") = 4.0, py::arg("eb_min") = 1e-7, py::arg("eb_max") = 0.5,
           py::arg("tolerance") = 0.25)
      .def("layers", &controller_handle::layers)
      .def("bound", &controller_handle::bound)
      .def("target", &controller_handle::target, py::arg("layer"))
      .def(
          "set_target",
          [](controller_handle& c, std::size_t i, double t) {
            if (!c.set_target(i, t))
              throw std::invalid_argument("Controller.set_target: layer " + std::to_string(i) + " of " +
                                          std::to_string(c.layers()) + ", target " + std::to_string(t) +
                                          ": need an existing layer and a finite target > 0");
          },
          py::arg("layer"), py::arg("target_relative_error"))
      .def("observe", &controller_handle::observe, py::arg("layer"), py::arg("eb"), py::arg("predicted_sigma"),
           py::arg("grad_rms"), py::arg("compression_ratio") = 0.0)
      .def("end_iteration", &controller_handle::end_iteration)
      .def("iteration", &controller_handle::iteration)
      .def("report", [](const controller_handle& c) {
        py::dict d;
        d["iteration"] = c.report_iteration();
        py::list layers;
        for (const auto& l : c.report()) {
          py::dict x;
          x["eb"] = l.eb;
          x["previous_eb"] = l.previous_eb;
          x["target_relative_error"] = l.target_relative_error;
          x["achieved_relative_error"] = l.achieved_relative_error;
          x["compression_ratio"] = l.compression_ratio;
          x["observations"] = l.observations;
          x["rejected"] = l.rejected;
          x["warning"] = l.warning;
          layers.append(x);
        }
        d["layers"] = layers;
        return d;
      });
  py::class_<StorageRef>(m, "StorageRef")
      .def(py::init<const at::Tensor&>())
      .def("same", &StorageRef::same)
      .def("alive", &StorageRef::alive);
}
