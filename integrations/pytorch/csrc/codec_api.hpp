// codec_api.hpp - the seam between the PyTorch bindings and an ebac backend.
//
// bindings.cpp (torch + pybind11) talks to a backend only through these
// declarations, so the translation unit that instantiates ebac's templates
// (host_codec.cpp) never sees torch's headers and the torch one never sees
// ebac's codec (it includes one standalone ebac header, host/large_buffer.hpp,
// for the huge-page mappings of the tensors it creates). A CUDA backend is added the same way: a cuda_codec.cu defining the
// cuda_* functions below, compiled only when EBAC_TORCH_WITH_CUDA is set
// (setup.py / the in-tree loader decide; see docs/pytorch.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ebac_torch {

/// Element types, numbered as ebac::dtype (the stream format's dtype ids):
/// floats are compressed under the bound, the others losslessly.
enum class elem : int { f32 = 1, f16 = 2, bf16 = 3, b8 = 4, u8 = 5, i8 = 6, i16 = 7, i32 = 8, i64 = 9 };

/// Which kernels the CUDA backend runs (ebac::cuda::kernel_path, same
/// order); the host backend ignores it.
enum class cuda_kernels : int { staged = 0, fused = 1, single_pass = 2 };

/// One tensor to compress: `count` elements of `type` at `data`, laid out
/// row-major with extents dims[0..rank) (outermost first; rank 1..8).
struct compress_request {
  const void* data = nullptr;
  elem type = elem::f32;
  std::uint64_t dims[8]{};
  int rank = 0;
  double error_bound = 0;
  bool relative = true;  ///< value-range relative bound, else absolute
  std::string pipeline = "fast";
  int threads = 0;                              ///< 0: all OpenMP threads
  bool checksum = false;                        ///< in-memory training buffers skip it by default
  cuda_kernels kernels = cuda_kernels::staged;  ///< CUDA tensors only
  /// Max-pool indices: the pooling layer's geometry (ebac::pool_geometry;
  /// pool_dims == 0: none). The tensor's last pool_dims extents are the
  /// output's spatial sizes.
  int pool_dims = 0;
  std::int64_t pool_input[3]{}, pool_kernel[3]{}, pool_stride[3]{}, pool_padding[3]{}, pool_dilation[3]{};
};

/// A LayerNorm input's rows in LayerNorm's units (ebac_torch/hooks.py,
/// _row_normalized), in one pass over memory (layernorm_rows.cpp): for x of
/// n_rows x d float32, row-major,
///   sigma[r] = sqrt(biased variance of row r + eps), rounded to float,
///   rows[r][i] = x[r][i] / sigma[r] (float division),
///   shift[r] = the mean of rows[r] (accumulated in double, rounded to float),
///   col_lo[i], col_hi[i] = min, max over r of rows[r][i] - shift[r] (float),
/// and what the result holds. When an element is not finite, finite is false
/// and the outputs are unspecified.
struct row_normalization {
  bool finite = true;
  float lo = 0, hi = 0;     ///< min and max of x
  float sigma_max = 0;      ///< max of sigma
  float rows_max_abs = 0;   ///< max |rows|
  float shift_max_abs = 0;  ///< max |shift|
};
row_normalization normalize_rows(const float* x, std::int64_t n_rows, std::int64_t d, double eps, float* rows, float* sigma,
                                 float* shift, float* col_lo, float* col_hi);

/// What a stream says about itself (ebac::host::inspect).
struct stream_info {
  elem type = elem::f32;
  std::vector<std::int64_t> dims;
  bool relative = true;
  double eb_requested = 0;
  double eb_abs = 0;
  std::uint64_t outliers = 0;
  std::uint64_t bytes = 0;
  int predictor = 0, quantizer = 0, encoder = 0;
  bool checksum = false;
  bool stored = false;          ///< the raw elements (coding would not have shrunk them)
  bool lossless_dtype = false;  ///< an integer or bool stream (no bound)
  bool pooled = false;          ///< max-pool indices: dims are (leading elements, the pooling output's sizes)
};

/// True when `name` is a pipeline ebac::parse_pipeline accepts.
bool valid_pipeline(const std::string& name);

/// Host backend. Throw ebac::error (a std::runtime_error) on bad input.
std::vector<std::byte> host_compress(const compress_request& r);
void host_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, int threads);
stream_info host_inspect(const std::byte* data, std::size_t size);

/// What a stream's header says, from its first bytes only (a device blob's
/// header copied to the host); `total_bytes` is the whole stream's size.
/// ebac::max_stream_prefix_bytes: the header with 8 extents and the largest
/// stage-parameter section (host_codec.cpp checks that the numbers agree).
inline constexpr std::size_t max_header_bytes = 112 + 8 * 8 + 129;
stream_info inspect_header(const std::byte* head, std::size_t head_bytes, std::size_t total_bytes);

/// Stream-ordered device memory (the torch translation unit passes PyTorch's
/// caching allocator). `stream` is a cudaStream_t.
struct device_allocator {
  void* (*allocate)(std::size_t bytes, void* stream, void* context) = nullptr;
  void (*deallocate)(void* p, void* stream, void* context) = nullptr;
  void* context = nullptr;
};

/// CUDA backend (cuda_codec.cu, built only with EBAC_TORCH_WITH_CUDA):
/// ebac::cuda's host layer on `stream`. cuda_compress reads the stream's size
/// back (one synchronization), asks `output(bytes)` for the blob's memory and
/// copies the stream there; cuda_decompress reads the header (and a Huffman
/// codebook) and the decoder's status back. Throw ebac::error on bad input.
struct blob_sink {
  void* (*output)(std::uint64_t bytes, void* context) = nullptr;
  void* context = nullptr;
};
void cuda_compress(const compress_request& r, void* stream, const device_allocator& a, const blob_sink& sink);
void cuda_decompress(const std::byte* data, std::size_t size, void* out, elem type, std::uint64_t count, void* stream,
                     const device_allocator& a, cuda_kernels kernels = cuda_kernels::staged);

/// A Conv2d (or, with 1x1 everything, a Linear: rows = batch, features =
/// in_channels) whose saved input is compressed; PyTorch conventions.
struct layer_geometry {
  std::int64_t batch = 1, in_channels = 1, in_h = 1, in_w = 1, out_channels = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  bool linear = false;
};

/// ebac's error model (include/ebac/error_model) applied to one layer.
struct weight_error_estimate {
  double sigma = 0;           ///< predicted RMS of the weight-gradient error
  double iid_sigma = 0;       ///< the i.i.d. baseline of DESIGN.md with the measured E[e^2]
  double coherent_share = 0;  ///< share of sigma^2 from the flat-region / mean-error term
  double flat_share = 0;      ///< share of input positions the model treats as flat
};

/// x: the saved input, y: its reconstruction, dy: the layer's output
/// gradient; all float32, contiguous NCHW (N x F for a linear layer).
/// Throws std::invalid_argument when shapes and geometry disagree.
/// weight_grad_rms: RMS of the layer's weight gradient as the trainer last
/// saw it (0 if unknown: the model then treats the gradient as noise-like).
weight_error_estimate predict_weight_error(const layer_geometry& g, const float* x, const float* y, const float* dy,
                                           double eb_abs, double weight_grad_rms = 0);

/// ebac::error_model::batchnorm_input_grad_change: the change of a
/// training-mode BatchNorm2d's input gradient when its saved input x (N x C x
/// plane) is replaced by y. gamma may be null. Throws std::invalid_argument.
void batchnorm_input_grad_change(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* y,
                                 const float* dy, const float* gamma, double eps, double* out);

/// ebac::error_model::elementwise_input_grad_change at every element: the
/// change of dx = dy g(x) of an elementwise function (`fn`: gelu, silu, tanh,
/// sigmoid; x what it saves) when x is replaced by y. std::invalid_argument
/// for an unknown function.
void elementwise_input_grad_change(const std::string& fn, std::int64_t n, const float* x, const float* y, const float* dy,
                                   double* out);

/// ebac::adapt::controller behind a small handle (the torch TU never sees
/// ebac's headers). Bounds are in whatever unit the caller observes them in
/// (ebac_torch uses value-range relative bounds).
struct controller_settings {
  double target_relative_error = 0.1;  ///< tau; see ebac/adapt/bound_update.hpp
  double smoothing = 0.5, max_step = 4.0, eb_min = 1e-7, eb_max = 0.5, tolerance = 0.25;
  std::int64_t window = 100;
  double initial_eb = 1e-3;
};
struct controller_layer_report {
  double eb = 0, previous_eb = 0, target_relative_error = 0, achieved_relative_error = 0, compression_ratio = 0;
  std::int64_t observations = 0, rejected = 0;
  std::string warning;  ///< empty when none
};
class controller_handle {
 public:
  controller_handle(const controller_settings& s, std::size_t layers);  // throws on a bad configuration
  ~controller_handle();
  controller_handle(const controller_handle&) = delete;
  controller_handle& operator=(const controller_handle&) = delete;
  std::size_t layers() const;
  double bound(std::size_t i) const;
  double target(std::size_t i) const;
  bool set_target(std::size_t i, double target_relative_error);
  bool observe(std::size_t i, double eb, double predicted_sigma, double grad_rms, double compression_ratio);
  bool end_iteration();
  std::int64_t iteration() const;
  std::int64_t report_iteration() const;
  std::vector<controller_layer_report> report() const;

 private:
  struct impl;
  impl* p_;
};

/// ebac::adapt::plan_batch: the largest batch that fits a memory budget.
struct planner_request {
  double budget_bytes = 0, static_bytes = 0, uncompressed_bytes_per_sample = 0, safety_margin = 0.1;
  std::int64_t target_global_batch = 0, max_batch = std::int64_t{1} << 24, reference_batch = 16;
  double reference_lr = 0.1;
  bool sqrt_scaling = false;
  double warmup_samples = 0, reference_tau = 0.1;
  std::vector<double> bytes_per_sample, compression_ratio;          ///< one entry per compressed tensor
  double working_bytes_per_sample = -1, working_set_tensors = 3.5;  ///< see planner_config
  /// A probe step (probe_batch > 0): the working set is measured from it (ebac::adapt::working_from_probe).
  double probe_rise_bytes = 0, probe_static_bytes = 0;
  std::int64_t probe_batch = 0;
  /// A second probe step at another batch (second_probe_batch > 0; same static part): the two are read as a
  /// line (ebac::adapt::probe_line), and the working set has no floor.
  double second_probe_rise_bytes = 0;
  std::int64_t second_probe_batch = 0;
};
struct planner_result {
  std::string state, description;
  bool ok = false;
  std::int64_t max_micro_batch = 0, micro_batch = 0, accumulation_steps = 0, global_batch = 0, warmup_steps = 0;
  double bytes_per_sample = 0, usable_bytes = 0, peak_bytes = 0, learning_rate = 0, target_relative_error = 0;
  double saved_bytes_per_sample = 0, working_bytes_per_sample = 0;
};
planner_result plan_batch(const planner_request& r);

/// ebac's version as "major.minor.patch".
std::string ebac_version();
/// The build of the host codec that host_compress/host_decompress run for
/// f32, f16 and bf16: "x86-64-v3" or "baseline" (EBAC_HOST_ISA; see
/// ebac/host/isa_codec.hpp). Throws std::invalid_argument for an
/// EBAC_HOST_ISA it does not know or cannot honour.
std::string host_isa_name();

}  // namespace ebac_torch
