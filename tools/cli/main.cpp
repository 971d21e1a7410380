// ebac - command-line front end of the host backend.
//
//   ebac compress   --input F --output G --dtype f32|f16|bf16 --dims D0,D1,... --eb X [--mode abs|rel] [--pipeline NAME]
//   ebac decompress --input G --output F2
//   ebac eval       --input F --dtype T --dims ... --eb X [--mode abs|rel] [--pipeline NAME|all] [--json]
//   ebac eval       --manifest data/corpus/manifest.tsv --eb X [--mode ...] [--pipeline ...] [--json]
//   ebac info       --input G
//
// Scripts rely on this tool: every failure exits non-zero with one line on
// stderr that says what was wrong, and an existing output file is only ever
// replaced by a complete result (write to a temporary file, then rename).
#include <ebac/ebac.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr const char* usage_text =
    "usage:\n"
    "  ebac compress   --input F --output G --dtype f32|f16|bf16 --dims D0,D1,... --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME] [--threads N]\n"
    "  ebac decompress --input G --output F [--threads N]\n"
    "  ebac eval       (--input F --dtype T --dims D0,... | --manifest M.tsv) --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME|all] [--json] [--threads N] [--min-time S]\n"
    "  ebac info       --input G\n"
    "  ebac grad-error --activation A --grad-output D --layer linear|conv2d|batchnorm2d --input-shape N,C[,H,W] [--weight-shape O,C[,KH,KW]] [--stride S] [--padding P] [--dilation D] [--groups G] (--eb X [--mode abs|rel] | --target-rel T) [--pipeline NAME] [--trials K] [--json]\n"
    "  ebac --version | --help\n"
    "dims are outermost first; input files are raw little-endian arrays.\n"
    "--mode defaults to abs. --threads 0 uses every core (default for compress and\n"
    "decompress); eval defaults to 1 thread so its MB/s are single-core figures.\n"
    "pipelines: fast, ratio, ratio-flat, rle, plain, or PREDICTOR:QUANTIZER:ENCODER with\n"
    "  PREDICTOR none|lorenzo|lorenzo1|lorenzo2|lorenzo3, QUANTIZER sign|linear,\n"
    "  ENCODER bitpack|rle|huffman (e.g. lorenzo2:sign:huffman).\n";

struct args {
  std::string command;
  std::map<std::string, std::string> opt;
  bool json = false;

  bool has(const std::string& k) const { return opt.count(k) != 0; }
  const std::string& need(const std::string& k) const {
    auto it = opt.find(k);
    if (it == opt.end()) throw usage_error("missing required option --" + k);
    return it->second;
  }
};

args parse_args(int argc, char** argv, const std::vector<std::string>& allowed) {
  args a;
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) throw usage_error("unexpected argument '" + s + "'");
    std::string key = s.substr(2), value;
    const auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (key == "json") {
      a.json = true;
      continue;
    } else {
      if (i + 1 >= argc) throw usage_error("option --" + key + " needs a value");
      value = argv[++i];
    }
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw usage_error("unknown option --" + key + " for '" + a.command + "'");
    if (a.opt.count(key)) throw usage_error("option --" + key + " given twice");
    a.opt[key] = value;
  }
  return a;
}

double parse_double(const std::string& s, const char* what) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || errno == ERANGE) throw usage_error(std::string(what) + " '" + s + "' is not a number");
  return v;
}

long parse_int(const std::string& s, const char* what, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    throw usage_error(std::string(what) + " '" + s + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

ebac::extents parse_dims(const std::string& s) {
  ebac::extents e;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      throw usage_error("--dims '" + s + "' must be comma-separated non-negative integers");
    if (e.rank == ebac::max_rank) throw usage_error("--dims: at most " + std::to_string(ebac::max_rank) + " dimensions");
    errno = 0;
    const unsigned long long v = std::strtoull(item.c_str(), nullptr, 10);
    if (errno == ERANGE) throw usage_error("--dims: extent '" + item + "' is too large");
    e.dims[e.rank++] = v;
  }
  if (e.rank == 0 || s.back() == ',') throw usage_error("--dims '" + s + "' must be comma-separated non-negative integers");
  std::uint64_t n;
  if (e.count(n) != ebac::status::ok) throw usage_error("--dims '" + s + "': element count overflows 64 bits");
  return e;
}

ebac::dtype parse_dtype_arg(const std::string& s) {
  ebac::dtype t;
  if (!ebac::parse_dtype(s, t) || !ebac::is_floating(t)) throw usage_error("unknown --dtype '" + s + "' (expected f32, f16 or bf16)");
  return t;
}

ebac::error_bound parse_bound(const args& a) {
  ebac::error_bound eb;
  eb.value = parse_double(a.need("eb"), "--eb");
  if (!(eb.value > 0) || !std::isfinite(eb.value)) throw usage_error("--eb must be a finite number > 0, got '" + a.need("eb") + "'");
  eb.mode = ebac::bound_mode::absolute;
  if (a.has("mode") && !ebac::parse_bound_mode(a.opt.at("mode"), eb.mode))
    throw usage_error("unknown --mode '" + a.opt.at("mode") + "' (expected abs or rel)");
  return eb;
}

ebac::pipeline_spec parse_pipeline_arg(const std::string& name) {
  ebac::pipeline_spec s;
  if (!ebac::parse_pipeline(name, s)) throw usage_error("unknown --pipeline '" + name + "' (see ebac --help)");
  return s;
}

std::vector<std::byte> read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw input_error("input file '" + path + "' does not exist");
  if (fs::is_directory(path, ec)) throw input_error("input '" + path + "' is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw input_error("cannot open input file '" + path + "'");
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(f.tellg());
  f.seekg(0);
  std::vector<std::byte> data(size);
  if (size && !f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(size)))
    throw input_error("cannot read input file '" + path + "'");
  return data;
}

/// Writes atomically: a temporary file beside the target, then rename, so a
/// failure never leaves a partial result where the output should be.
void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw input_error("output directory '" + dir.string() + "' does not exist");
  if (fs::is_directory(target, ec)) throw input_error("output '" + path + "' is a directory");
  const fs::path tmp = dir / (".ebac-tmp-" + std::to_string(::getpid()) + "-" + target.filename().string());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw input_error("cannot create temporary output file in '" + dir.string() + "'");
    if (size) f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    f.flush();
    if (!f) {
      f.close();
      fs::remove(tmp, ec);
      throw input_error("cannot write output file '" + path + "' (disk full?)");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw input_error("cannot move the result into '" + path + "'");
  }
}

void check_distinct(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && fs::equivalent(in, out, ec)) throw usage_error("--output must not be the --input file");
}

std::uint64_t expect_size(const ebac::extents& e, ebac::dtype t) {
  std::uint64_t n = 0;
  (void)e.count(n);
  if (n > std::numeric_limits<std::uint64_t>::max() / ebac::size_of(t)) throw usage_error("--dims: byte size overflows");
  return n;
}

template <class F>
decltype(auto) with_element(ebac::dtype t, F&& f) {
  switch (t) {
    case ebac::dtype::f16: return f(ebac::float16{});
    case ebac::dtype::bf16: return f(ebac::bfloat16{});
    case ebac::dtype::f32: return f(float{});
    default: break;
  }
  throw input_error("integer and bool streams (dtype " + std::string(ebac::to_string(t)) + ") are not handled by this tool yet");
}

void check_input_size(const std::string& path, std::size_t bytes, const ebac::extents& e, ebac::dtype t) {
  const std::uint64_t n = expect_size(e, t);
  if (bytes != n * ebac::size_of(t))
    throw input_error("input '" + path + "' has " + std::to_string(bytes) + " bytes but --dims and --dtype " +
                      std::string(ebac::to_string(t)) + " need " + std::to_string(n * ebac::size_of(t)));
}

int threads_arg(const args& a, int def) {
  return a.has("threads") ? static_cast<int>(parse_int(a.opt.at("threads"), "--threads", 0, 4096)) : def;
}

std::vector<std::byte> compress_any(const std::vector<std::byte>& raw, ebac::dtype t, const ebac::extents& e,
                                    const ebac::pipeline_spec& spec, const ebac::compress_options& opt) {
  return with_element(t, [&](auto tag) {
    using T = decltype(tag);
    const T* in = reinterpret_cast<const T*>(raw.data());
    return ebac::with_pipeline(spec, e, [&](auto pipe) { return ebac::host::compress(in, e, pipe, opt); });
  });
}

/// Decompresses into raw little-endian bytes of the stream's dtype.
std::vector<std::byte> decompress_any(const std::vector<std::byte>& stream, int threads) {
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  const std::uint64_t n = ebac::element_count(h);
  std::vector<std::byte> out(static_cast<std::size_t>(n * ebac::size_of(h.type)));
  with_element(h.type, [&](auto tag) {
    using T = decltype(tag);
    ebac::host::decompress(stream.data(), stream.size(), reinterpret_cast<T*>(out.data()), n, threads);
  });
  return out;
}

int cmd_compress(int argc, char** argv) {
  const args a = parse_args(argc, argv, {"input", "output", "dtype", "dims", "eb", "mode", "pipeline", "threads"});
  const std::string& in = a.need("input");
  const std::string& out = a.need("output");
  const ebac::dtype t = parse_dtype_arg(a.need("dtype"));
  const ebac::extents e = parse_dims(a.need("dims"));
  ebac::compress_options opt;
  opt.bound = parse_bound(a);
  opt.threads = threads_arg(a, 0);
  const ebac::pipeline_spec spec = parse_pipeline_arg(a.has("pipeline") ? a.opt.at("pipeline") : "fast");
  check_distinct(in, out);
  const auto raw = read_file(in);
  check_input_size(in, raw.size(), e, t);
  const auto stream = compress_any(raw, t, e, spec, opt);
  write_file_atomic(out, stream.data(), stream.size());
  return 0;
}

int cmd_decompress(int argc, char** argv) {
  const args a = parse_args(argc, argv, {"input", "output", "threads"});
  const std::string& in = a.need("input");
  const std::string& out = a.need("output");
  check_distinct(in, out);
  const auto stream = read_file(in);
  const auto raw = decompress_any(stream, threads_arg(a, 0));
  write_file_atomic(out, raw.data(), raw.size());
  return 0;
}

int cmd_info(int argc, char** argv) {
  const args a = parse_args(argc, argv, {"input"});
  const auto stream = read_file(a.need("input"));
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  std::string dims;
  for (int i = 0; i < h.shape.rank; ++i) dims += (i ? "," : "") + std::to_string(h.shape.dims[i]);
  std::printf("format %d dtype %s dims %s mode %s eb %.17g eb_abs %.17g predictor %s", EBAC_FORMAT_VERSION,
              std::string(ebac::to_string(h.type)).c_str(), dims.c_str(), std::string(ebac::to_string(h.mode)).c_str(),
              h.eb_requested, h.eb_abs, h.predictor == ebac::predictor_id::none ? "none" : "lorenzo");
  if (h.predictor == ebac::predictor_id::lorenzo) {  // "key value" pairs, like the rest of the line
    std::printf(" lorenzo_dims %d axes", h.lorenzo_params.dims);
    for (int k = 0; k < h.lorenzo_params.dims; ++k)
      std::printf(k ? ",%s" : " %s", h.lorenzo_params.axis[k] == ebac::lorenzo_flat_axis ? "flat" : std::to_string(h.lorenzo_params.axis[k]).c_str());
    std::printf(" tiles");
    for (int k = 0; k < h.lorenzo_params.dims; ++k) std::printf(k ? ",%u" : " %u", h.lorenzo_params.tile[k]);
  }
  std::printf(" quantizer %s encoder %s chunk %u outliers %" PRIu64 " bytes %zu checksum %s\n",
              h.quantizer == ebac::quantizer_id::linear ? "linear" : "sign",
              h.encoder == ebac::encoder_id::huffman ? "huffman" : h.encoder == ebac::encoder_id::run_length ? "rle" : "bitpack",
              h.chunk_elements, h.outlier_count, stream.size(), h.has_checksum() ? "yes" : "no");
  return 0;
}

// --- eval --------------------------------------------------------------------

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
  std::vector<T> y(static_cast<std::size_t>(n));
  const double td = best_seconds([&] { ebac::host::decompress(stream.data(), stream.size(), y.data(), n, opt.threads); }, min_time);
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());

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
  eval_result res;
  res.pipeline = name;
  res.bytes_in = raw.size();
  res.bytes_out = stream.size();
  res.ratio = stream.empty() ? 0 : static_cast<double>(raw.size()) / static_cast<double>(stream.size());
  res.max_abs_error = max_err;
  res.eb_abs = h.eb_abs;
  res.bound_held = max_err <= h.eb_abs && exact_nonfinite;
  const double mse = finite ? sq / static_cast<double>(finite) : 0;
  res.psnr = (mse > 0 && r.span() > 0) ? 20 * std::log10(r.span()) - 10 * std::log10(mse) : INFINITY;
  res.compress_MBps = raw.size() / tc / 1e6;
  res.decompress_MBps = raw.size() / td / 1e6;
  return res;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

void print_result(const eval_result& r, bool json, const std::string& file, bool header) {
  if (json) {
    std::printf("{%s\"pipeline\": \"%s\", \"ratio\": %s, \"max_abs_error\": %s, \"bound_held\": %s, \"psnr\": %s, "
                "\"compress_MBps\": %s, \"decompress_MBps\": %s, \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64
                ", \"eb_abs\": %s}\n",
                file.empty() ? "" : ("\"file\": \"" + file + "\", ").c_str(), r.pipeline.c_str(), json_number(r.ratio).c_str(),
                json_number(r.max_abs_error).c_str(), r.bound_held ? "true" : "false", json_number(r.psnr).c_str(),
                json_number(r.compress_MBps).c_str(), json_number(r.decompress_MBps).c_str(), r.bytes_in, r.bytes_out,
                json_number(r.eb_abs).c_str());
    return;
  }
  if (header) {
    std::printf("%-44s %-11s %9s %12s %12s %5s %8s %10s %10s\n", "file", "pipeline", "ratio", "max_abs_err", "eb_abs",
                "held", "psnr", "comp_MB/s", "dec_MB/s");
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
    if (cols.empty()) { cols = v; continue; }
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

int cmd_eval(int argc, char** argv) {
  const args a = parse_args(argc, argv, {"input", "manifest", "dtype", "dims", "eb", "mode", "pipeline", "threads", "min-time"});
  ebac::compress_options opt;
  opt.bound = parse_bound(a);
  opt.threads = threads_arg(a, 1);
  const double min_time = a.has("min-time") ? parse_double(a.opt.at("min-time"), "--min-time") : 0.2;
  std::vector<std::string> names;
  const std::string pname = a.has("pipeline") ? a.opt.at("pipeline") : "all";
  if (pname == "all") names.assign(ebac::pipeline_names.begin(), ebac::pipeline_names.end());
  else {
    (void)parse_pipeline_arg(pname);
    names.push_back(pname);
  }
  std::vector<eval_input> inputs;
  if (a.has("manifest")) {
    if (a.has("input") || a.has("dims") || a.has("dtype")) throw usage_error("--manifest replaces --input, --dims and --dtype");
    inputs = read_manifest(a.opt.at("manifest"));
  } else {
    inputs.push_back({a.need("input"), "", parse_dtype_arg(a.need("dtype")), parse_dims(a.need("dims"))});
  }
  bool all_held = true, header = true;
  for (const auto& in : inputs) {
    const auto raw = read_file(in.path);
    check_input_size(in.path, raw.size(), in.shape, in.type);
    for (const auto& name : names) {
      const eval_result r = with_element(in.type, [&](auto tag) {
        return evaluate<decltype(tag)>(raw, in.shape, name, opt, min_time);
      });
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

}  // namespace

#include "grad_error.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(usage_text, stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  // Busy-waiting OpenMP threads collapse throughput when the machine is
  // shared (seen: 1.4 GB/s -> 0.05 GB/s with 2 threads on 2 busy cores).
  // Must be set before the first parallel region; a user's setting wins.
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  try {
    if (cmd == "--help" || cmd == "-h" || cmd == "help") { std::fputs(usage_text, stdout); return 0; }
    if (cmd == "--version") { std::printf("ebac %d.%d.%d (stream format %d)\n", EBAC_VERSION_MAJOR, EBAC_VERSION_MINOR, EBAC_VERSION_PATCH, EBAC_FORMAT_VERSION); return 0; }
    if (cmd == "compress") return cmd_compress(argc, argv);
    if (cmd == "decompress") return cmd_decompress(argc, argv);
    if (cmd == "eval") return cmd_eval(argc, argv);
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "grad-error") return cmd_grad_error(argc, argv);
    throw usage_error("unknown command '" + std::string(cmd) + "' (expected compress, decompress, eval, info or grad-error)");
  } catch (const usage_error& e) {
    std::fprintf(stderr, "ebac: usage error: %s (see ebac --help)\n", e.what());
    return 2;
  } catch (const input_error& e) {
    std::fprintf(stderr, "ebac: error: %s\n", e.what());
    return 1;
  } catch (const ebac::error& e) {
    std::fprintf(stderr, "ebac: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ebac: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ebac: error: %s\n", e.what());
    return 1;
  }
}
