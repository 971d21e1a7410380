// ebac/cuda/codec.cuh - host convenience layer over the device-scope API.
//
// Allocates through a pluggable allocator (so PyTorch's caching allocator can
// serve it), optionally reads the compressed size back, and throws
// ebac::error. Use device_codec.cuh directly for graph capture or to avoid
// the size read-back.
#pragma once

#include <ebac/cuda/config.cuh>
#include <ebac/cuda/device_codec.cuh>
#include <ebac/status.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

EBAC_NAMESPACE_BEGIN
namespace cuda {

/// Stream-ordered allocation hooks; the default uses cudaMallocAsync.
struct allocator {
  void* (*allocate)(std::size_t bytes, cudaStream_t stream, void* context) = nullptr;
  void (*deallocate)(void* p, cudaStream_t stream, void* context) = nullptr;
  void* context = nullptr;
};

inline allocator default_allocator() {
  allocator a;
  a.allocate = [](std::size_t bytes, cudaStream_t s, void*) -> void* {
    void* p = nullptr;
    return cudaMallocAsync(&p, bytes ? bytes : 1, s) == cudaSuccess ? p : nullptr;
  };
  a.deallocate = [](void* p, cudaStream_t s, void*) { (void)cudaFreeAsync(p, s); };
  return a;
}

namespace detail {
/// Throws for a failed CUDA call: out_of_memory when the device ran out,
/// invalid_argument for cudaErrorInvalidValue (what the device-scope calls
/// return for what they refuse; this layer checks the common cases itself
/// first, with a message), device_error otherwise (no device, a failed
/// launch, ...), with CUDA's own name and message.
/// When the root cause is a missing driver or device, CUB's queries report
/// only "invalid device ordinal": the message then says what is missing.
inline std::string describe(cudaError_t e) { return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")"; }
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  std::string msg = std::string(what) + ": " + describe(e);
  int devices = 0;
  const cudaError_t d = cudaGetDeviceCount(&devices);  // on the error path only
  (void)cudaGetLastError();
  if (d != cudaSuccess && d != e) msg += "; no usable CUDA device: " + describe(d);
  else if (d == cudaSuccess && devices == 0) msg += "; no CUDA device is visible";
  ::ebac::detail::fail(e == cudaErrorMemoryAllocation ? status::out_of_memory
                       : e == cudaErrorInvalidValue   ? status::invalid_argument
                                                      : status::device_error,
                       msg);
}

/// Owns one allocation from an allocator (move-only).
class device_allocation {
 public:
  device_allocation() = default;
  device_allocation(std::size_t bytes, cudaStream_t s, const allocator& a) : bytes_(bytes), stream_(s), alloc_(a) {
    ptr_ = a.allocate(bytes, s, a.context);
    if (!ptr_) {
      // The allocator returns only a pointer; a CUDA allocator leaves its
      // error behind: say "no device" rather than "out of memory" when that
      // is what happened.
      const cudaError_t e = cudaGetLastError();
      const std::string what = "device allocation of " + std::to_string(bytes) + " bytes failed";
      if (e != cudaSuccess && e != cudaErrorMemoryAllocation)
        ::ebac::detail::fail(status::device_error, what + ": " + describe(e));
      ::ebac::detail::fail(status::out_of_memory, what);
    }
  }
  device_allocation(device_allocation&& o) noexcept { *this = std::move(o); }
  device_allocation& operator=(device_allocation&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(stream_, o.stream_);
    std::swap(alloc_, o.alloc_);
    return *this;
  }
  device_allocation(const device_allocation&) = delete;
  device_allocation& operator=(const device_allocation&) = delete;
  ~device_allocation() {
    if (ptr_) alloc_.deallocate(ptr_, stream_, alloc_.context);
  }
  [[nodiscard]] void* get() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  allocator alloc_{};
};
}  // namespace detail

/// A compressed stream in device memory. Its memory goes back to the
/// allocator on the stream it was compressed on, ordered after the work
/// queued there: keep that stream alive until the device_stream is gone.
struct device_stream {
  detail::device_allocation buffer;  // capacity = output_capacity (the stream is its first `bytes`)
  detail::device_allocation size;    // one std::uint64_t: the stream's bytes
  std::uint64_t bytes = 0;           // valid when compress() read it back
  [[nodiscard]] const std::byte* data() const noexcept { return static_cast<const std::byte*>(buffer.get()); }
  [[nodiscard]] const std::uint64_t* device_size() const noexcept { return static_cast<const std::uint64_t*>(size.get()); }
};

namespace detail {

/// A stream's codebook in device memory, uploaded from the host
/// (synchronizes: the host tables must stay alive until the copy is done).
struct uploaded_codebook {
  device_allocation memory;
  device_codebook view;
};

inline uploaded_codebook upload_codebook(const huffman_codebook& cb, cudaStream_t stream, const allocator& alloc) {
  const huffman_image img = pack_huffman_image(cb);
  uploaded_codebook u;
  u.memory = device_allocation(img.bytes.size(), stream, alloc);
  check(cudaMemcpyAsync(u.memory.get(), img.bytes.data(), img.bytes.size(), cudaMemcpyHostToDevice, stream),
        "uploading the Huffman codebook");
  check(cudaStreamSynchronize(stream), "uploading the Huffman codebook");
  u.view.image = static_cast<const std::byte*>(u.memory.get());
  return u;
}

/// The decoding tables of a derived codebook (context_ans_codebook::derive,
/// which deserialize runs) in one allocation: freq, cumulative and
/// first_token, each at a multiple of 16 bytes; `view.ans` is the codebook
/// bound to them (context_ans::bind with device pointers). The encoding
/// steps, three quarters of the tables' bytes, stay behind: the device
/// only decodes ANS (view.ans.steps is null).
inline uploaded_codebook upload_codebook(const context_ans_codebook& cb, cudaStream_t stream, const allocator& alloc) {
  auto bytes_of = [](const auto& v) { return v.size() * sizeof(v[0]); };
  auto padded = [](std::size_t b) { return (b + 15) / 16 * 16; };
  const std::size_t freq = padded(bytes_of(cb.freq)), cum = padded(bytes_of(cb.cumulative));
  std::vector<std::byte> image(freq + cum + padded(bytes_of(cb.first_token)));
  std::memcpy(image.data(), cb.freq.data(), bytes_of(cb.freq));
  std::memcpy(image.data() + freq, cb.cumulative.data(), bytes_of(cb.cumulative));
  std::memcpy(image.data() + freq + cum, cb.first_token.data(), bytes_of(cb.first_token));
  uploaded_codebook u;
  u.memory = device_allocation(image.size(), stream, alloc);
  check(cudaMemcpyAsync(u.memory.get(), image.data(), image.size(), cudaMemcpyHostToDevice, stream), "uploading the ANS tables");
  check(cudaStreamSynchronize(stream), "uploading the ANS tables");
  const auto* base = static_cast<const std::byte*>(u.memory.get());
  u.view.ans = context_ans{cb.row,
                           cb.classes,
                           cb.diagonal,
                           reinterpret_cast<const std::uint16_t*>(base),
                           reinterpret_cast<const std::uint16_t*>(base + freq),
                           nullptr,
                           reinterpret_cast<const std::uint8_t*>(base + freq + cum),
                           nullptr,  // first_token_fine: host only
                           cb.version >= 1};
  return u;
}

/// Reads a stream's codebook section to the host, validates it as the host
/// decoder does (E::codebook::deserialize) and uploads it; a stream without
/// a codebook gets an empty one.
inline uploaded_codebook read_codebook(const stream_header& h, const std::byte* d_in, cudaStream_t stream,
                                       const allocator& alloc) {
  uploaded_codebook book;
  if (h.is_stored()) return book;
  ::ebac::visit_encoder(h.encoder, [&](auto tag) {
    using E = typename decltype(tag)::type;
    if constexpr (E::needs_codebook && has_device_decoder<E>) {
      const std::string what = "reading the " + std::string(E::name) + " codebook";
      std::vector<std::byte> bytes(static_cast<std::size_t>(h.section_bytes[section_codebook]));
      check(
          cudaMemcpyAsync(bytes.data(), d_in + h.section_offset(section_codebook), bytes.size(), cudaMemcpyDeviceToHost, stream),
          what.c_str());
      check(cudaStreamSynchronize(stream), what.c_str());
      typename E::codebook cb;
      const status s = E::codebook::deserialize(bytes.data(), bytes.size(), cb);
      if (s != status::ok) ::ebac::detail::fail(s, "invalid " + std::string(E::name) + " codebook");
      book = upload_codebook(cb, stream, alloc);
    }
  });
  return book;
}

}  // namespace detail

/// Compresses d_in on `stream` (every dtype; floats under opt.bound,
/// integers and bool losslessly, stages chosen on the device as on the
/// host). With read_size, waits for the stream and fills `bytes`, and
/// checks the device status; otherwise nothing syncs (Huffman pipelines
/// included: their codebook is built on the device; the ANS encoder is
/// refused, status::unsupported: compress on the host). The buffer has room
/// for output_capacity; the stream is its first `bytes` bytes (at most
/// max_compressed_bytes with opt.store_when_larger). `path` picks the
/// kernels of a bit-packing pipeline (device_codec.cuh).
template <class Pipeline, element T>
device_stream compress(const T* d_in, const extents& shape, const Pipeline& pipe, const compress_options& opt,
                       cudaStream_t stream = nullptr, const allocator& alloc = default_allocator(), bool read_size = true,
                       kernel_path path = kernel_path::staged) {
  if (const char* why = ::ebac::detail::compress_argument_error<T>(shape, pipe, opt))
    ::ebac::detail::fail(status::invalid_argument, why);
  std::uint64_t n = 0;
  (void)shape.count(n);
  if (n > 0 && d_in == nullptr) ::ebac::detail::fail(status::invalid_argument, "input pointer is null");
  if constexpr (!has_device_encoder<typename Pipeline::encoder_type>)
    ::ebac::detail::fail(status::unsupported, "the CUDA backend has no kernels for this pipeline's encoder (" +
                                                  std::string(Pipeline::encoder_type::name) + "): compress on the host");
  if (pipe.choose_predictor)
    ::ebac::detail::fail(status::unsupported,
                         "the CUDA backend codes with the pipeline's predictor; choose_predictor is host only");
  if (pipe.choose_quantizer)
    ::ebac::detail::fail(status::unsupported,
                         "the CUDA backend codes with the pipeline's quantizer; choose_quantizer is host only");
  if ((n + pipe.chunk_elements - 1) / pipe.chunk_elements > max_chunks)
    ::ebac::detail::fail(status::invalid_argument,
                         "more than 2^31 - 1 chunks (the CUDA backend's grid limit): use larger chunk_elements");
  std::size_t temp = 0;
  detail::check(::ebac::cuda::compress(nullptr, temp, d_in, shape, pipe, opt, nullptr, 0, nullptr, nullptr, stream, path),
                "ebac::cuda::compress (temp query)");
  device_stream out;
  const std::size_t cap = output_capacity<Pipeline, T>(shape, pipe);
  out.buffer = detail::device_allocation(cap, stream, alloc);
  out.size = detail::device_allocation(sizeof(std::uint64_t) + sizeof(int), stream, alloc);
  detail::device_allocation tmp(temp, stream, alloc);
  auto* d_size = static_cast<std::uint64_t*>(out.size.get());
  int* d_status = reinterpret_cast<int*>(d_size + 1);
  detail::check(::ebac::cuda::compress(tmp.get(), temp, d_in, shape, pipe, opt, static_cast<std::byte*>(out.buffer.get()), cap,
                                       d_size, d_status, stream, path),
                "ebac::cuda::compress");
  if (read_size) {
    std::uint64_t host[2] = {0, 0};
    detail::check(cudaMemcpyAsync(host, d_size, sizeof(std::uint64_t) + sizeof(int), cudaMemcpyDeviceToHost, stream),
                  "reading the compressed size");
    detail::check(cudaStreamSynchronize(stream), "ebac::cuda::compress");
    int st = 0;
    std::memcpy(&st, reinterpret_cast<const std::byte*>(host) + sizeof(std::uint64_t), sizeof st);
    if (st != device_ok) ::ebac::detail::fail(status::invalid_argument, "relative bound times the value range is not finite");
    out.bytes = host[0];
  }
  return out;
}

/// Reads and validates a device stream's header on the host (synchronizes):
/// its first max_stream_prefix_bytes (the header and the stage-parameter
/// section: a palette, a pooling geometry), or the whole stream if shorter.
inline stream_header read_header(const std::byte* d_stream, std::size_t bytes, cudaStream_t stream = nullptr) {
  std::vector<std::byte> head(bytes < max_stream_prefix_bytes ? bytes : max_stream_prefix_bytes);
  detail::check(cudaMemcpyAsync(head.data(), d_stream, head.size(), cudaMemcpyDeviceToHost, stream), "reading the stream header");
  detail::check(cudaStreamSynchronize(stream), "reading the stream header");
  // Validate against the real size without the checksum (checked on the device).
  stream_header h;
  const char* what = "";
  status s = read_stream_header_fields(head.data(), head.size(), bytes, h, &what);
  if (s != status::ok) ::ebac::detail::fail(s, what);
  return h;
}

/// Decompresses a device stream into d_out (count elements) and checks the
/// device status (synchronizes). Throws ebac::error on a corrupt stream, and
/// status::buffer_too_small, before allocating anything, when the stream
/// decodes to more than max_output_bytes bytes (element count x sizeof(T),
/// as host::decompress). `path` picks the kernels of a bit-packed stream
/// (device_codec.cuh).
template <element T>
void decompress(const std::byte* d_in, std::size_t in_bytes, T* d_out, std::uint64_t count, cudaStream_t stream = nullptr,
                const allocator& alloc = default_allocator(), kernel_path path = kernel_path::staged,
                std::uint64_t max_output_bytes = unlimited_output) {
  const stream_header h = read_header(d_in, in_bytes, stream);
  // The host decoder's checks, before anything is allocated (a forged header
  // could claim any element count).
  ::ebac::detail::check_output_limit(h, max_output_bytes);
  if (const char* why = ::ebac::detail::decompress_argument_error(h, dtype_of<T>::value, count, d_out))
    ::ebac::detail::fail(status::invalid_argument, why);
  if ((count + h.chunk_elements - 1) / h.chunk_elements > max_chunks)
    ::ebac::detail::fail(status::unsupported,
                         "the stream has more than 2^31 - 1 chunks (the CUDA backend's grid limit); decode it on the host");
  if (!h.is_stored() && !has_device_decoder_for(h.encoder))
    ::ebac::detail::fail(status::unsupported, "the CUDA backend has no kernels for the stream's encoder (" +
                                                  std::string(encoder_name(h.encoder)) + "): decode it on the host");
  // Huffman and ANS: the codebook section is read and validated on the host
  // (the host decoder's deserialize), then uploaded as tables.
  const detail::uploaded_codebook book = detail::read_codebook(h, d_in, stream, alloc);
  const device_codebook* codebook = &book.view;
  std::size_t temp = 0;
  detail::check(::ebac::cuda::decompress<T>(nullptr, temp, h, d_in, in_bytes, d_out, count, nullptr, stream, codebook, path),
                "ebac::cuda::decompress (temp query)");
  detail::device_allocation tmp(temp, stream, alloc);
  detail::device_allocation st(sizeof(int), stream, alloc);
  detail::check(::ebac::cuda::decompress<T>(tmp.get(), temp, h, d_in, in_bytes, d_out, count, static_cast<int*>(st.get()), stream,
                                            codebook, path),
                "ebac::cuda::decompress");
  int host = 0;
  detail::check(cudaMemcpyAsync(&host, st.get(), sizeof host, cudaMemcpyDeviceToHost, stream), "reading the decode status");
  detail::check(cudaStreamSynchronize(stream), "ebac::cuda::decompress");
  if (host == device_corrupt_code)
    ::ebac::detail::fail(status::corrupt_stream, "a chunk holds a code its quantizer cannot have written (device decoder)");
  if (host != device_ok)
    ::ebac::detail::fail(host == device_checksum ? status::checksum_mismatch : status::corrupt_stream,
                         "the device decoder rejected the stream (code " + std::to_string(host) + ")");
}

}  // namespace cuda
EBAC_NAMESPACE_END
