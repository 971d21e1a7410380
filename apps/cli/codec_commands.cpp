// apps/cli/codec_commands.cpp - ebac compress, decompress, info and eval.
#include "command_line.hpp"
#include "commands.hpp"
#include "outlier_lookahead.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>

namespace ebac_cli {

namespace {

namespace fs = std::filesystem;

/// decompress --max-output default: 4 GiB of decoded output.
constexpr std::uint64_t default_max_output = std::uint64_t{4} << 30;

}  // namespace

// --- compress, decompress, info ------------------------------------------------

int cmd_compress(int argc, char** argv) {
  const args a = parse_command(argc, argv,
                               {input_option,
                                output_option,
                                {"dtype", "--dtype", "element type: f32, f16, bf16, bool, u8, i8, i16, i32, i64"},
                                {"dims", "--dims", "extents, outermost first"},
                                {"eb", "--eb", "error bound (floating-point dtypes)"},
                                {"mode", "--mode", "abs (default) or rel"},
                                {"pipeline", "--pipeline", "pipeline name or triple"},
                                {"pool", "--pool", "max-pool geometry IN:K:S[:P[:D]] of an index tensor"},
                                threads_option});
  const std::string& in_path = input_arg(a);
  const std::string out_path = a.has("output") ? a.opt.at("output") : "-";
  const ebac::dtype t = parse_dtype_arg(a.need("dtype"));
  const ebac::extents e = parse_dims(a.need("dims"));
  ebac::compress_options opt;
  opt.bound = bound_for(a, t);
  opt.threads = threads_arg(a, 0);
  if (a.has("pool")) {
    if (ebac::is_floating(t)) throw usage_error("--pool applies to integer (max-pool index) tensors only");
    opt.pooling = parse_pool(a.opt.at("pool"), e);
  }
  const ebac::pipeline_spec spec = parse_pipeline_arg(a.has("pipeline") ? a.opt.at("pipeline") : "fast");
  const std::uint64_t need = byte_size(e, t);

  ebac_cli::output_file out(out_path);  // before any work: a bad output is reported at once
  ebac_cli::input_file in(in_path);
  out.check_not(in);
  ebac_cli::start_threads(opt.threads);
  const auto raw = in.read_exactly(need, "--dims and --dtype " + std::string(ebac::to_string(t)) + " need");
  const auto stream = compress_any(raw, t, e, spec, opt);
  out.write(stream.data(), stream.size());
  out.commit();
  return 0;
}

namespace {

/// decompress's reader: the stream's first bytes (read_stream_prefix), then the input.
struct replay_reader {
  std::vector<std::byte> prefix;
  std::size_t served = 0;
  input_file* in;
  static std::size_t read(void* self, std::byte* dst, std::size_t n) {
    auto& r = *static_cast<replay_reader*>(self);
    if (r.served < r.prefix.size()) {
      const std::size_t k = std::min(n, r.prefix.size() - r.served);
      std::memcpy(dst, r.prefix.data() + r.served, k);
      r.served += k;
      return k;
    }
    return r.in->read_some(dst, n);
  }
  /// The stream's header and stage parameters from the prefix (`total`: the
  /// stream's size), refused as a whole stream's would be.
  ebac::stream_header header(std::uint64_t total) const {
    ebac::stream_header h;
    const char* what = "";
    const ebac::status s =
        ebac::read_stream_header_fields(prefix.data(), prefix.size(), static_cast<std::size_t>(total), h, &what);
    if (s != ebac::status::ok) {
      (void)ebac::host::inspect(prefix.data(), prefix.size());  // names what is wrong, as for a whole stream
      ebac::detail::fail(s, what);
    }
    return h;
  }
};

/// decompress's sink. Into a temporary file: a window at a time
/// (positional writes: outliers come after the windows). Into an output
/// written in order (standard output, a device, a FIFO): each window as it
/// is decoded, its outliers put first where they can be read ahead
/// (`ahead`: a seekable input) or where the stream has none; else (a stream
/// with outliers on a pipe) into the whole output in memory, written at the end.
struct output_sink {
  output_file* out = nullptr;
  std::unique_ptr<std::byte[]> whole = {};           // the output, its pages touched as windows arrive
  outlier_lookahead* ahead = nullptr;                // the outliers, read ahead
  std::vector<std::byte> buffer = {}, discard = {};  // a window; an outlier run already put (ahead)
  std::uint64_t next = 0;                            // in order: the bytes written so far
  std::uint64_t digest = 0;                          // of the outlier runs decompress_stream put (ahead)
  std::size_t element = 1;                           // bytes an element
  static std::byte* room(std::vector<std::byte>& b, std::size_t bytes) {
    if (b.size() < bytes) {
      b.clear();
      b.shrink_to_fit();  // not the old and the new buffer at once
      b.resize(bytes);
    }
    return b.data();
  }
  static void* target(void* self, std::uint64_t first, std::size_t bytes) {
    auto& k = *static_cast<output_sink*>(self);
    if (k.whole) return k.whole.get() + first;
    if (!k.out->positional() && first < k.next) return room(k.discard, bytes);  // an outlier run, put before
    return room(k.buffer, bytes);
  }
  static void written(void* self, std::uint64_t first, std::size_t bytes) {
    auto& k = *static_cast<output_sink*>(self);
    if (k.whole) return;
    if (k.out->positional()) return k.out->write_at(first, k.buffer.data(), bytes);
    if (first < k.next) {  // an outlier run over elements written: ahead put them
      for (std::size_t i = 0; i < bytes; i += k.element)
        k.digest += outlier_mix((first + i) / k.element, k.discard.data() + i, k.element);
      return;
    }
    if (k.ahead) k.ahead->apply(first, k.buffer.data(), bytes);
    k.out->write(k.buffer.data(), bytes);
    k.next = first + bytes;
  }
};

}  // namespace

int cmd_decompress(int argc, char** argv) {
  const args a = parse_command(
      argc, argv,
      {input_option, output_option, threads_option, {"max-output", "--max-output", "most bytes to decode (default 4G)"}});
  const std::string& in_path = input_arg(a);
  const std::string out_path = a.has("output") ? a.opt.at("output") : "-";
  const int threads = threads_arg(a, 0);
  const std::uint64_t max_output = a.has("max-output") ? parse_size(a.opt.at("max-output"), "--max-output") : default_max_output;

  ebac_cli::output_file out(out_path);
  ebac_cli::input_file in(in_path);
  out.check_not(in);
  ebac_cli::start_threads(threads);
  // The header (refused as read_stream_prefix refuses it), then the body
  // window by window: neither the whole stream nor, into a regular file,
  // the whole output is held (host/decompress_stream.hpp).
  std::uint64_t total = 0;
  replay_reader reader{read_stream_prefix(in, max_output, total), 0, &in};
  const ebac::stream_header h = reader.header(total);
  // A Lorenzo slab larger than the memory rule allows (1.5 x the output +
  // 64 MiB: the scratch within half the output + 48 MiB) is refused here,
  // before anything is allocated.
  const std::uint64_t out_bytes = ebac::element_count(h) * ebac::size_of(h.type);  // within max_output (read_stream_prefix)
  const std::uint64_t slabs = ebac::host::least_lorenzo_scratch(h);
  if (slabs > ebac::host::detail::decode_scratch_budget(out_bytes))
    throw input_error("the stream's Lorenzo blocks span chunks, and decoding them takes " + format_bytes(slabs) +
                      " of scratch (two slabs of " + std::to_string(h.lorenzo_params.pass(h.shape, 0).inner) +
                      " 4-byte codes and a chunk's), more than decompress allows beside " + format_bytes(out_bytes) +
                      " of output (1.5 x the output + 64 MiB in all): not decoded");
  // A regular file's size says at once whether the stream is all there and
  // alone, before any output.
  const std::int64_t size = in.size_from_start();
  if (size >= 0 && static_cast<std::uint64_t>(size) < total)
    ebac::detail::fail(ebac::status::truncated_stream, "stream shorter than its sections (input " + in.name() + " has " +
                                                           std::to_string(size) + " bytes, its header says " +
                                                           std::to_string(total) + ")");
  if (size >= 0 && static_cast<std::uint64_t>(size) > total) refuse_trailing_data(in, total);
  output_sink sink{&out};
  sink.element = ebac::size_of(h.type);
  std::optional<outlier_lookahead> ahead;
  if (!out.positional() && h.outlier_count > 0) {
    if (in.seekable()) {
      ahead.emplace(in, h.section_offset(ebac::section_outlier_index), h.section_bytes[ebac::section_outlier_index],
                    h.section_offset(ebac::section_outlier_value), ebac::element_count(h), h.outlier_count, sink.element);
      sink.ahead = &*ahead;
    } else {
      try {
        sink.whole.reset(new std::byte[static_cast<std::size_t>(out_bytes)]);  // not zero-filled: every byte is decoded
      } catch (const std::bad_alloc&) {
        throw input_error("out of memory: cannot allocate the " + format_bytes(out_bytes) + " the stream decodes to");
      }
    }
  }
  // One context for both: the reader and the sink side by side.
  struct both {
    replay_reader* r;
    output_sink* k;
  } ctx{&reader, &sink};
  ebac::isa::stream_io io;
  io.context = &ctx;
  io.read = [](void* c, std::byte* p, std::size_t n) { return replay_reader::read(static_cast<both*>(c)->r, p, n); };
  io.target = [](void* c, std::uint64_t f, std::size_t b) { return output_sink::target(static_cast<both*>(c)->k, f, b); };
  io.written = [](void* c, std::uint64_t f, std::size_t b) { output_sink::written(static_cast<both*>(c)->k, f, b); };
  decompress_stream_any(io, h.type, threads, max_output);
  std::byte extra;
  if (in.read_some(&extra, 1) > 0) refuse_trailing_data(in, total);
  if (sink.whole) out.write(sink.whole.get(), static_cast<std::size_t>(out_bytes));
  if (ahead && ahead->digest() != sink.digest)
    throw input_error("input " + in.name() + " changed while it was read: its outliers, read ahead, differ from the stream's");
  out.commit();
  return 0;
}

namespace {

const char* quantizer_name(ebac::quantizer_id q) {
  switch (q) {
    case ebac::quantizer_id::linear: return "linear";
    case ebac::quantizer_id::sign_preserving: return "sign";
    case ebac::quantizer_id::exact: return "exact";
    case ebac::quantizer_id::levels: return "levels";
    case ebac::quantizer_id::pool_window: return "pool_window";
  }
  return "unknown";
}

}  // namespace

namespace {

/// info's reading of a stream: its header (refused as decompress refuses
/// it), then, for a coded stream, its chunk table, whose sizes must add up
/// to the payload section; the rest is not read into memory. A regular
/// file's size says whether the stream is whole and alone; anything else is
/// read to the stream's end (and one byte further) a megabyte at a time.
/// The checksum is not verified (decompress verifies it).
ebac::stream_header read_header_and_table(input_file& in, std::uint64_t& total) {
  replay_reader r{read_stream_prefix(in, ebac::unlimited_output, total), 0, &in};
  const ebac::stream_header h = r.header(total);
  const std::int64_t size = in.size_from_start();
  auto truncated = [&](std::uint64_t have) {
    ebac::detail::fail(ebac::status::truncated_stream, "stream shorter than its sections (input " + in.name() + " has " +
                                                           std::to_string(have) + " bytes, its header says " +
                                                           std::to_string(total) + ")");
  };
  if (size >= 0 && static_cast<std::uint64_t>(size) < total) truncated(static_cast<std::uint64_t>(size));
  if (size >= 0 && static_cast<std::uint64_t>(size) > total) refuse_trailing_data(in, total);
  std::uint64_t at = 0;  // bytes of the stream read
  std::vector<std::byte> piece(std::size_t{1} << 20);
  auto read = [&](std::uint64_t n) -> std::size_t {  // up to n bytes (at most a piece) into `piece`
    std::size_t got = 0;
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(n, piece.size()));
    while (got < want) {
      const std::size_t k = replay_reader::read(&r, piece.data() + got, want - got);
      if (k == 0) truncated(at + got);
      got += k;
    }
    at += got;
    return got;
  };
  if (!h.is_stored()) {
    const std::uint64_t table = h.section_offset(ebac::section_chunk_table);
    while (at < table) read(table - at);
    std::uint64_t left = h.section_bytes[ebac::section_chunk_table], sum = 0;
    while (left > 0) {
      const std::size_t k = read(std::min<std::uint64_t>(left, std::uint64_t{1} << 20));
      for (std::size_t i = 0; i + 4 <= k; i += 4) sum += ebac::detail::load_le<std::uint32_t>(piece.data() + i);
      left -= k;
    }
    if (sum != h.section_bytes[ebac::section_payload])
      ebac::detail::fail(ebac::status::corrupt_stream, "chunk sizes do not add up to the payload section");
  }
  if (size < 0) {  // not a regular file: read to the end, holding a piece
    while (at < total) read(total - at);
    std::byte extra;
    if (replay_reader::read(&r, &extra, 1) > 0) refuse_trailing_data(in, total);
  }
  return h;
}

}  // namespace

int cmd_info(int argc, char** argv) {
  const args a = parse_command(argc, argv, {input_option});
  ebac_cli::input_file in(input_arg(a));
  std::uint64_t total = 0;
  const ebac::stream_header h = read_header_and_table(in, total);
  std::string dims;
  for (int i = 0; i < h.shape.rank; ++i) {
    if (i) dims += ',';
    dims += std::to_string(h.shape.dims[i]);
  }
  std::printf("format %d dtype %s dims %s mode %s eb %.17g eb_abs %.17g predictor %s", EBAC_FORMAT_VERSION,
              std::string(ebac::to_string(h.type)).c_str(), dims.c_str(),
              ebac::is_floating(h.type) ? std::string(ebac::to_string(h.mode)).c_str() : "lossless", h.eb_requested, h.eb_abs,
              h.predictor == ebac::predictor_id::none ? "none" : "lorenzo");
  if (h.predictor == ebac::predictor_id::lorenzo) {  // "key value" pairs, like the rest of the line
    std::printf(" lorenzo_dims %d axes", h.lorenzo_params.dims);
    for (int k = 0; k < h.lorenzo_params.dims; ++k)
      std::printf(k ? ",%s" : " %s", h.lorenzo_params.axis[k] == ebac::lorenzo_flat_axis
                                         ? "flat"
                                         : std::to_string(h.lorenzo_params.axis[k]).c_str());
    std::printf(" tiles");
    for (int k = 0; k < h.lorenzo_params.dims; ++k) std::printf(k ? ",%u" : " %u", h.lorenzo_params.tile[k]);
  }
  // A stored stream holds the raw elements: no quantizer, encoder or chunks
  // (the header's fields for them are unused).
  const bool stored = h.is_stored();
  std::printf(" quantizer %s encoder %s chunk %s outliers %" PRIu64 " bytes %" PRIu64 " checksum %s stored %s\n",
              stored ? "none" : quantizer_name(h.quantizer), stored ? "none" : std::string(ebac::encoder_name(h.encoder)).c_str(),
              stored ? "none" : std::to_string(h.chunk_elements).c_str(), h.outlier_count, total, h.has_checksum() ? "yes" : "no",
              stored ? "yes" : "no");
  return 0;
}

// --- eval --------------------------------------------------------------------

namespace {

struct eval_result {
  std::string pipeline;
  double ratio, max_abs_error, psnr, compress_MBps, decompress_MBps, eb_abs;
  bool bound_held;
  std::uint64_t bytes_in, bytes_out;
};

template <class F>
double best_seconds(F&& f, double min_time) {
  using clock = std::chrono::steady_clock;
  double best = 1e300, total = 0;
  for (int rep = 0; rep < 100 && (rep < 1 || total < min_time); ++rep) {
    const auto t0 = clock::now();
    f();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

template <class T>
eval_result evaluate(const std::vector<std::byte>& raw, const ebac::extents& e, const std::string& name,
                     const ebac::compress_options& opt, double min_time) {
  const auto spec = parse_pipeline_arg(name);
  const T* x = reinterpret_cast<const T*>(raw.data());
  std::uint64_t n = 0;
  (void)e.count(n);
  std::vector<std::byte> stream;
  const double tc = best_seconds([&] { stream = compress_any(raw, ebac::dtype_of<T>::value, e, spec, opt); }, min_time);
  std::vector<ebac::storage_t<T>> y(static_cast<std::size_t>(n));  // bool: one byte each
  T* const yp = reinterpret_cast<T*>(y.data());
  const double td = best_seconds(
      [&] { decompress_into(stream.data(), stream.size(), ebac::dtype_of<T>::value, yp, n, opt.threads); }, min_time);
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  eval_result res;
  res.pipeline = name;
  res.bytes_in = raw.size();
  res.bytes_out = stream.size();
  res.ratio = stream.empty() ? 0 : static_cast<double>(raw.size()) / static_cast<double>(stream.size());
  res.compress_MBps = raw.size() / tc / 1e6;
  res.decompress_MBps = raw.size() / td / 1e6;
  if constexpr (ebac::integer_element<T>) {
    // Lossless: every element's bytes must come back, compared here.
    const auto* xs = reinterpret_cast<const ebac::storage_t<T>*>(raw.data());
    double max_err = 0;
    for (std::uint64_t i = 0; i < n; ++i)
      max_err = std::max(max_err, std::fabs(static_cast<double>(xs[i]) - static_cast<double>(y[i])));
    res.max_abs_error = max_err;
    res.eb_abs = 0;
    res.bound_held = std::memcmp(xs, y.data(), static_cast<std::size_t>(n) * sizeof(y[0])) == 0;
    res.psnr = INFINITY;
    return res;
  } else {
    // Judge the reconstruction here, independently of the compressor's checks.
    double max_err = 0, sq = 0;
    ebac::value_range r;
    bool exact_nonfinite = true;
    std::uint64_t finite = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const float xf = ebac::to_float(x[i]), yf = ebac::to_float(y[i]);
      if (std::isfinite(xf)) {
        const double d = std::fabs(static_cast<double>(xf) - static_cast<double>(yf));
        max_err = std::max(max_err, std::isnan(d) ? INFINITY : d);
        sq += d * d;
        r.add(xf);
        ++finite;
      } else if (ebac::raw_bits(x[i]) != ebac::raw_bits(y[i])) {
        exact_nonfinite = false;
      }
    }
    res.max_abs_error = max_err;
    res.eb_abs = h.eb_abs;
    res.bound_held = max_err <= h.eb_abs && exact_nonfinite;
    const double mse = finite ? sq / static_cast<double>(finite) : 0;
    res.psnr = (mse > 0 && r.span() > 0) ? 20 * std::log10(r.span()) - 10 * std::log10(mse) : INFINITY;
    return res;
  }
}

void print_result(const eval_result& r, bool json, const std::string& file, bool header) {
  if (json) {
    nlohmann::ordered_json j;
    if (!file.empty()) j["file"] = file;
    j["pipeline"] = r.pipeline;
    j["ratio"] = json_number(r.ratio);
    j["max_abs_error"] = json_number(r.max_abs_error);
    j["bound_held"] = r.bound_held;
    j["psnr"] = json_number(r.psnr);
    j["compress_MBps"] = json_number(r.compress_MBps);
    j["decompress_MBps"] = json_number(r.decompress_MBps);
    j["bytes_in"] = r.bytes_in;
    j["bytes_out"] = r.bytes_out;
    j["eb_abs"] = json_number(r.eb_abs);
    print_json_line(j);
    return;
  }
  if (header) {
    std::printf("%-44s %-11s %9s %12s %12s %5s %8s %10s %10s\n", "file", "pipeline", "ratio", "max_abs_err", "eb_abs", "held",
                "psnr", "comp_MB/s", "dec_MB/s");
  }
  std::printf("%-44s %-11s %9.2f %12.4g %12.4g %5s %8.2f %10.1f %10.1f\n", file.empty() ? "-" : file.c_str(), r.pipeline.c_str(),
              r.ratio, r.max_abs_error, r.eb_abs, r.bound_held ? "yes" : "NO", r.psnr, r.compress_MBps, r.decompress_MBps);
}

struct eval_input {
  std::string path, label;
  ebac::dtype type;
  ebac::extents shape;
};

std::vector<eval_input> read_manifest(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw input_error("cannot open manifest '" + path + "'");
  const fs::path base = fs::path(path).parent_path();
  std::vector<eval_input> out;
  std::string line;
  std::vector<std::string> cols;
  int lineno = 0;
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::stringstream ss(s);
    std::string c;
    while (std::getline(ss, c, '\t')) v.push_back(c);
    return v;
  };
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    auto v = split(line);
    if (cols.empty()) {
      cols = v;
      continue;
    }
    auto col = [&](const char* name) -> std::string {
      const auto it = std::find(cols.begin(), cols.end(), name);
      if (it == cols.end()) throw input_error("manifest '" + path + "' has no column '" + name + "'");
      const auto k = static_cast<std::size_t>(it - cols.begin());
      if (k >= v.size()) throw input_error("manifest '" + path + "' line " + std::to_string(lineno) + " has too few columns");
      return v[k];
    };
    if (std::find(cols.begin(), cols.end(), "role") != cols.end() && col("role") != "activation") continue;
    ebac::dtype t;
    if (!ebac::parse_dtype(col("dtype"), t)) continue;  // integer tensors (e.g. max-pool indices) are not compressed
    if (col("file") == "-") continue;
    out.push_back({(base / col("file")).string(), col("file"), t, parse_dims(col("dims"))});
  }
  if (out.empty()) throw input_error("manifest '" + path + "' lists no floating-point activation files");
  return out;
}
}  // namespace

int cmd_eval(int argc, char** argv) {
  const args a = parse_command(argc, argv,
                               {input_option,
                                {"manifest", "--manifest", "a manifest.tsv listing the inputs"},
                                {"dtype", "--dtype", "element type"},
                                {"dims", "--dims", "extents, outermost first"},
                                {"eb", "--eb", "error bound"},
                                {"pool", "--pool", "max-pool geometry IN:K:S[:P[:D]] of an index tensor"},
                                {"mode", "--mode", "abs (default) or rel"},
                                {"pipeline", "--pipeline", "a pipeline, or all (the default)"},
                                threads_option,
                                {"min-time", "--min-time", "seconds of repetitions per timing (default 0.2)"}},
                               /*json_flag=*/true);
  ebac::compress_options opt;
  // Integer and bool inputs are coded losslessly: they take no bound.
  const bool lossless_input = !a.has("manifest") && a.has("dtype") && !ebac::is_floating(parse_dtype_arg(a.opt.at("dtype")));
  opt.bound = lossless_input && !a.has("eb") ? ebac::error_bound{} : parse_bound(a);
  opt.threads = threads_arg(a, 1);
  double min_time = 0.2;
  if (a.has("min-time")) {
    min_time = parse_double(a.opt.at("min-time"), "--min-time");
    if (!(min_time >= 0) || !std::isfinite(min_time) || min_time > 3600)
      throw usage_error("--min-time must be a number of seconds in [0, 3600], got '" + a.opt.at("min-time") + "'");
  }
  std::vector<std::string> names;
  const std::string pname = a.has("pipeline") ? a.opt.at("pipeline") : "all";
  if (pname == "all") names.assign(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
  else {
    (void)parse_pipeline_arg(pname);
    names.push_back(pname);
  }
  std::vector<eval_input> inputs;
  if (a.has("manifest")) {
    if (a.has("input") || a.has("dims") || a.has("dtype") || a.has("pool"))
      throw usage_error("--manifest replaces --input, --dims, --dtype and --pool");
    inputs = read_manifest(a.opt.at("manifest"));
  } else {
    inputs.push_back({input_arg(a), "", parse_dtype_arg(a.need("dtype")), parse_dims(a.need("dims"))});
    if (a.has("pool")) {
      if (ebac::is_floating(inputs.back().type)) throw usage_error("--pool applies to integer (max-pool index) tensors only");
      opt.pooling = parse_pool(a.opt.at("pool"), inputs.back().shape);
    }
  }
  ebac_cli::start_threads(opt.threads);
  bool all_held = true, header = true;
  for (const auto& in : inputs) {
    const auto raw = read_array(in.path, in.shape, in.type);
    for (const auto& name : names) {
      const eval_result r = ebac::visit_dtype(
          in.type, [&]<class T>(std::type_identity<T>) { return evaluate<T>(raw, in.shape, name, opt, min_time); });
      all_held = all_held && r.bound_held;
      print_result(r, a.json, in.label, header);
      header = false;
      std::fflush(stdout);
    }
  }
  if (!all_held) {
    std::fprintf(stderr, "ebac: error: the error bound was NOT held for at least one input\n");
    return 3;
  }
  return 0;
}

}  // namespace ebac_cli
