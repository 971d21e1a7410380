// ebac - command-line front end of the host backend.
//
//   ebac compress   [INPUT] [-o OUTPUT] --dtype f32|f16|bf16 --dims D0,D1,... --eb X [--mode abs|rel] [--pipeline NAME]
//   ebac decompress [INPUT] [-o OUTPUT] [--max-output SIZE]
//   ebac eval       [INPUT] --dtype T --dims ... --eb X [--mode abs|rel] [--pipeline NAME|all] [--json]
//   ebac eval       --manifest data/corpus/manifest.tsv --eb X [--mode ...] [--pipeline ...] [--json]
//   ebac info       [INPUT]
//
// INPUT is a path or `-` (standard input), also spelled --input/-i; OUTPUT
// defaults to `-` (standard output). Arguments are parsed by CLI11, JSON is
// written by nlohmann-json; io.hpp reads and writes files.
//
// Scripts rely on this tool: every failure exits non-zero with one line on
// stderr that says what was wrong, and an existing output file is only ever
// replaced by a complete result (io.hpp).
#include <ebac/ebac.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "io.hpp"

namespace {

namespace fs = std::filesystem;
using ebac_cli::input_error;
using ebac_cli::usage_error;

constexpr const char* usage_text =
    "usage:\n"
    "  ebac compress   [INPUT] [-o OUTPUT] --dtype T --dims D0,D1,... --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME] [--pool IN:K:S[:P[:D]]] [--threads N]\n"
    "  ebac decompress [INPUT] [-o OUTPUT] [--max-output SIZE] [--threads N]\n"
    "  ebac eval       ([INPUT] --dtype T --dims D0,... [--pool ...] | --manifest M.tsv) --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME|all] [--json] [--threads N] [--min-time S]\n"
    "  ebac info       [INPUT]\n"
    "  ebac grad-error --activation A --grad-output D --layer linear|conv2d|batchnorm2d --input-shape N,C[,H,W] [--weight-shape O,C[,KH,KW]] [--stride S] [--padding P] [--dilation D] [--groups G] (--eb X [--mode abs|rel] | --target-rel T) [--pipeline NAME] [--trials K] [--json]\n"
    "  ebac --version | --help          (ebac COMMAND --help: that command's options)\n"
    "INPUT is a file, a pipe or '-' for standard input (also --input/-i); OUTPUT\n"
    "(--output/-o) defaults to '-', standard output. Regular output files are\n"
    "replaced atomically, symbolic links followed; see the README's CLI section.\n"
    "dims are outermost first; inputs are raw little-endian arrays.\n"
    "T is f32, f16 or bf16 (coded under --eb) or bool, u8, i8, i16, i32, i64\n"
    "(coded losslessly; --eb is not needed and is ignored). --pool gives a\n"
    "max-pool index tensor's geometry (input sizes : kernel : stride [: padding\n"
    "[: dilation]], comma lists, one value for every spatial dim or one each;\n"
    "e.g. 28,28:2:2): its indices become offsets inside their windows.\n"
    "--mode defaults to abs; --eb is a normal double > 0 (>= 2.2e-308).\n"
    "--threads 0 uses every core (default for compress and decompress; at most 1024);\n"
    "eval defaults to 1 thread so its MB/s are single-core figures.\n"
    "--max-output: the most bytes decompress writes (default 4G; suffixes K, M, G, T\n"
    "  are powers of 1024); a stream that decodes to more is refused before decoding.\n"
    "pipelines: fast, ratio, ratio-flat, rle, plain, or PREDICTOR:QUANTIZER:ENCODER with\n"
    "  PREDICTOR none|lorenzo|lorenzo1|lorenzo2|lorenzo3, QUANTIZER sign|linear,\n"
    "  ENCODER bitpack|rle|huffman (e.g. lorenzo2:sign:huffman). lorenzoK predicts\n"
    "  along the last min(K, rank-1) axes of a tensor of rank >= 3 and along the\n"
    "  flattened tensor below rank 3 (lorenzo1: the last axis); 'ebac info' shows\n"
    "  the axes a stream used.\n";

/// decompress --max-output default: 4 GiB of decoded output.
constexpr std::uint64_t default_max_output = std::uint64_t{4} << 30;

// --- the command line ----------------------------------------------------------

/// A command's options by name ("eb", "input", ...), as given.
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

struct option_def {
  const char* key;    ///< the name in args::opt
  const char* names;  ///< CLI11 names, e.g. "-o,--output"; "input,--input,-i" also takes a positional
  const char* help;
};

/// Parses `ebac COMMAND ...` with CLI11: options take one value each
/// ("--eb 1e-3" or "--eb=1e-3"), none may repeat, unknown ones are refused.
/// Values are checked by the command, which knows what they mean.
args parse_command(int argc, char** argv, std::initializer_list<option_def> defs, bool json_flag = false) {
  args a;
  a.command = argv[1];
  CLI::App app("ebac " + a.command, "ebac " + a.command);
  app.set_help_flag("-h,--help", "print this command's options");
  for (const option_def& d : defs) {
    const std::string key = d.key;
    app.add_option_function<std::string>(d.names, [&a, key](const std::string& v) { a.opt[key] = v; }, d.help);
  }
  if (json_flag) app.add_flag("--json", a.json, "one JSON object per result line");
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    throw usage_error(e.what());
  }
  return a;
}

const option_def input_option{"input", "input,--input,-i", "input file, or - for standard input"};
const option_def output_option{"output", "-o,--output", "output file, or - for standard output (the default)"};
const option_def threads_option{"threads", "--threads", "threads: 0 = every core"};

/// Parses a double, telling apart garbage, overflow and underflow.
double parse_double(const std::string& s, const char* what) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
    throw usage_error(std::string(what) + " '" + s + "' is not a number");
  if (errno == ERANGE && std::isinf(v)) throw usage_error(std::string(what) + " '" + s + "' is out of range (above 1.8e308, the largest double)");
  if (v != 0 && std::fabs(v) < DBL_MIN)
    throw usage_error(std::string(what) + " '" + s + "' is too small: below 2.2e-308, the smallest normal double");
  if (errno == ERANGE) throw usage_error(std::string(what) + " '" + s + "' is too small: it underflows to 0");
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

/// "4096", "512K", "64M", "4G", "1T" (powers of 1024; also KiB, MiB, ... and KB, MB, ...).
std::uint64_t parse_size(const std::string& s, const char* what) {
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  std::string unit = s.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  for (auto [name, k] : {std::pair{"", 0}, {"B", 0}, {"K", 10}, {"KB", 10}, {"KIB", 10}, {"M", 20}, {"MB", 20}, {"MIB", 20},
                         {"G", 30}, {"GB", 30}, {"GIB", 30}, {"T", 40}, {"TB", 40}, {"TIB", 40}})
    if (unit == name) shift = k;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(s.substr(0, digits).c_str(), nullptr, 10) : 0;
  if (digits == 0 || shift < 0 || errno == ERANGE || (shift > 0 && v > (~0ULL >> shift)))
    throw usage_error(std::string(what) + " '" + s + "' must be a byte count such as 1000000, 512M or 4G");
  return static_cast<std::uint64_t>(v) << shift;
}

std::string format_bytes(std::uint64_t b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes", b);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes (%.4g %s)", b, v, units[u]);
  return buf;
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

// --- element types: parsed by ebac::parse_dtype, dispatched by ebac::visit_dtype ----

/// The --dtype names the CLI takes (each one ebac::visit_dtype handles).
constexpr const char* cli_dtypes = "f32, f16, bf16, bool, u8, i8, i16, i32 or i64";

ebac::dtype parse_dtype_arg(const std::string& s) {
  ebac::dtype t;
  if (!ebac::parse_dtype(s, t)) throw usage_error("unknown --dtype '" + s + "' (expected " + cli_dtypes + ")");
  return t;
}

/// The error bound for dtype t: required for floating-point data; integer
/// and bool data are coded losslessly and take none (a given one is ignored).
ebac::error_bound parse_bound(const args& a);
ebac::error_bound bound_for(const args& a, ebac::dtype t) {
  if (ebac::is_floating(t) || a.has("eb")) return parse_bound(a);
  return ebac::error_bound{};
}

/// --pool IN:K:S[:P[:D]]: a max-pool index tensor's geometry, each part a
/// comma list with one value per spatial dimension (or one for all).
ebac::pool_geometry parse_pool(const std::string& s, const ebac::extents& shape) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
  if (parts.size() < 3 || parts.size() > 5)
    throw usage_error("--pool '" + s + "': expected INPUT:KERNEL:STRIDE[:PADDING[:DILATION]] (e.g. 28,28:2:2)");
  auto list = [&](const std::string& part, const char* what) {
    std::vector<std::uint64_t> v;
    std::stringstream ps(part);
    for (std::string x; std::getline(ps, x, ',');)
      v.push_back(static_cast<std::uint64_t>(parse_int(x, (std::string("--pool ") + what).c_str(), 0, (1LL << 31) - 1)));
    if (v.empty()) throw usage_error(std::string("--pool: no ") + what + " given");
    return v;
  };
  const auto input = list(parts[0], "input size");
  if (input.size() > 3) throw usage_error("--pool: 1 to 3 spatial dimensions, got " + std::to_string(input.size()));
  ebac::pool_geometry g;
  g.dims = static_cast<std::uint32_t>(input.size());
  auto fill = [&](std::uint64_t* dst, std::size_t k, const char* what, std::uint64_t def) {
    const auto v = k < parts.size() ? list(parts[k], what) : std::vector<std::uint64_t>{def};
    if (v.size() != 1 && v.size() != g.dims)
      throw usage_error(std::string("--pool: ") + what + " needs 1 or " + std::to_string(g.dims) + " values");
    for (std::uint32_t j = 0; j < g.dims; ++j) dst[j] = v.size() == 1 ? v[0] : v[j];
  };
  for (std::uint32_t j = 0; j < g.dims; ++j) g.input[j] = input[j];
  fill(g.kernel, 1, "kernel", 1);
  fill(g.stride, 2, "stride", 1);
  fill(g.padding, 3, "padding", 0);
  fill(g.dilation, 4, "dilation", 1);
  if (g.validate(shape) != ebac::status::ok)
    throw usage_error("--pool '" + s + "' does not fit --dims: the last " + std::to_string(g.dims) +
                      " dims must be the pooled output's sizes; sizes >= 1, fewer than 2^22 offsets in a window");
  return g;
}

ebac::error_bound parse_bound(const args& a) {
  ebac::error_bound eb;
  const std::string& s = a.need("eb");
  eb.value = parse_double(s, "--eb");
  if (!(eb.value > 0) || !std::isfinite(eb.value)) throw usage_error("--eb must be a finite number > 0, got '" + s + "'");
  eb.mode = ebac::bound_mode::absolute;
  if (a.has("mode") && !ebac::parse_bound_mode(a.opt.at("mode"), eb.mode))
    throw usage_error("unknown --mode '" + a.opt.at("mode") + "' (expected abs or rel)");
  return eb;
}

ebac::pipeline_spec parse_pipeline_arg(const std::string& name) {
  ebac::pipeline_spec s;
  if (!ebac::parse_pipeline(name, s)) throw usage_error("unknown --pipeline '" + name + "'");
  return s;
}

int threads_arg(const args& a, int def) {
  return a.has("threads") ? static_cast<int>(parse_int(a.opt.at("threads"), "--threads", 0, ebac_cli::max_threads)) : def;
}

/// The input path: positional or --input (not both: CLI11 refuses a second value).
const std::string& input_arg(const args& a) {
  if (!a.has("input")) throw usage_error("missing the input (a path, or - for standard input; also --input)");
  return a.opt.at("input");
}

/// Bytes of a tensor the format can hold (refused before any input is read).
std::uint64_t byte_size(const ebac::extents& e, ebac::dtype t) {
  std::uint64_t n = 0;
  (void)e.count(n);
  if (n > ebac::max_stream_elements) throw usage_error("--dims: more than 2^48 elements, the stream format's limit");
  return n * ebac::size_of(t);
}

/// Reads a raw array of exactly the size dims and dtype describe.
std::vector<std::byte> read_array(const std::string& path, const ebac::extents& e, ebac::dtype t) {
  ebac_cli::input_file in(path);
  return in.read_exactly(byte_size(e, t), "--dims and --dtype " + std::string(ebac::to_string(t)) + " need");
}

/// Reads a whole stream; refuses one whose first bytes are no ebac header
/// (e.g. /dev/zero) without reading on.
std::vector<std::byte> read_stream(ebac_cli::input_file& in) {
  constexpr std::size_t magic_and_version = 8;
  return in.read(std::numeric_limits<std::uint64_t>::max(), magic_and_version, [](const std::byte* p, std::size_t) {
    // With only these bytes the header reader can judge nothing but the
    // magic and the version; "truncated" means they passed.
    ebac::stream_header h;
    const char* what = "";
    const ebac::status s = ebac::read_stream_header_fields(p, magic_and_version, std::numeric_limits<std::size_t>::max(), h, &what);
    if (s != ebac::status::ok && s != ebac::status::truncated_stream) ebac::detail::fail(s, what);
  });
}

std::vector<std::byte> compress_any(const std::vector<std::byte>& raw, ebac::dtype t, const ebac::extents& e,
                                    const ebac::pipeline_spec& spec, const ebac::compress_options& opt) {
  return ebac::visit_dtype(t, [&]<class T>(std::type_identity<T>) {
    const T* in = reinterpret_cast<const T*>(raw.data());
    return ebac::with_pipeline(spec, e, [&](auto pipe) { return ebac::host::compress(in, e, pipe, opt); });
  });
}

/// Decompresses into raw little-endian bytes of the stream's dtype.
std::vector<std::byte> decompress_any(const std::vector<std::byte>& stream, int threads,
                                      std::uint64_t max_output = ebac::unlimited_output) {
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  const std::uint64_t n = ebac::element_count(h);
  const std::uint64_t bytes = n * ebac::size_of(h.type);
  if (bytes > max_output)
    throw input_error("the stream decodes to " + format_bytes(bytes) + ", more than --max-output " + format_bytes(max_output) +
                      "; give a larger --max-output to decode it");
  std::vector<std::byte> out;
  try {
    out.resize(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw input_error("out of memory: cannot allocate the " + format_bytes(bytes) + " the stream decodes to");
  }
  ebac::visit_dtype(h.type, [&]<class T>(std::type_identity<T>) {
    ebac::host::decompress(stream.data(), stream.size(), reinterpret_cast<T*>(out.data()), n, threads, max_output);
  });
  return out;
}

// --- compress, decompress, info ------------------------------------------------

int cmd_compress(int argc, char** argv) {
  const args a = parse_command(argc, argv,
                               {input_option, output_option, {"dtype", "--dtype", "element type: f32, f16, bf16, bool, u8, i8, i16, i32, i64"},
                                {"dims", "--dims", "extents, outermost first"}, {"eb", "--eb", "error bound (floating-point dtypes)"},
                                {"mode", "--mode", "abs (default) or rel"}, {"pipeline", "--pipeline", "pipeline name or triple"},
                                {"pool", "--pool", "max-pool geometry IN:K:S[:P[:D]] of an index tensor"}, threads_option});
  const std::string& in_path = input_arg(a);
  const std::string out_path = a.has("output") ? a.opt.at("output") : "-";
  const ebac::dtype t = parse_dtype_arg(a.need("dtype"));
  const ebac::extents e = parse_dims(a.need("dims"));
  ebac::compress_options opt;
  opt.bound = bound_for(a, t);
  opt.threads = threads_arg(a, 0);
  if (a.has("pool")) opt.pooling = parse_pool(a.opt.at("pool"), e);
  if (opt.pooling.dims != 0 && ebac::is_floating(t)) throw usage_error("--pool applies to integer (max-pool index) tensors only");
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

int cmd_decompress(int argc, char** argv) {
  const args a = parse_command(argc, argv,
                               {input_option, output_option, threads_option,
                                {"max-output", "--max-output", "most bytes to decode (default 4G)"}});
  const std::string& in_path = input_arg(a);
  const std::string out_path = a.has("output") ? a.opt.at("output") : "-";
  const int threads = threads_arg(a, 0);
  const std::uint64_t max_output = a.has("max-output") ? parse_size(a.opt.at("max-output"), "--max-output") : default_max_output;

  ebac_cli::output_file out(out_path);
  ebac_cli::input_file in(in_path);
  out.check_not(in);
  ebac_cli::start_threads(threads);
  const auto stream = read_stream(in);
  const auto raw = decompress_any(stream, threads, max_output);
  out.write(raw.data(), raw.size());
  out.commit();
  return 0;
}

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

int cmd_info(int argc, char** argv) {
  const args a = parse_command(argc, argv, {input_option});
  ebac_cli::input_file in(input_arg(a));
  const auto stream = read_stream(in);
  const ebac::stream_header h = ebac::host::inspect(stream.data(), stream.size());
  std::string dims;
  for (int i = 0; i < h.shape.rank; ++i) dims += (i ? "," : "") + std::to_string(h.shape.dims[i]);
  std::printf("format %d dtype %s dims %s mode %s eb %.17g eb_abs %.17g predictor %s", EBAC_FORMAT_VERSION,
              std::string(ebac::to_string(h.type)).c_str(), dims.c_str(), ebac::is_floating(h.type) ? std::string(ebac::to_string(h.mode)).c_str() : "lossless",
              h.eb_requested, h.eb_abs, h.predictor == ebac::predictor_id::none ? "none" : "lorenzo");
  if (h.predictor == ebac::predictor_id::lorenzo) {  // "key value" pairs, like the rest of the line
    std::printf(" lorenzo_dims %d axes", h.lorenzo_params.dims);
    for (int k = 0; k < h.lorenzo_params.dims; ++k)
      std::printf(k ? ",%s" : " %s", h.lorenzo_params.axis[k] == ebac::lorenzo_flat_axis ? "flat" : std::to_string(h.lorenzo_params.axis[k]).c_str());
    std::printf(" tiles");
    for (int k = 0; k < h.lorenzo_params.dims; ++k) std::printf(k ? ",%u" : " %u", h.lorenzo_params.tile[k]);
  }
  std::printf(" quantizer %s encoder %s chunk %u outliers %" PRIu64 " bytes %zu checksum %s stored %s\n",
              quantizer_name(h.quantizer),
              std::string(ebac::encoder_name(h.encoder)).c_str(),
              h.chunk_elements, h.outlier_count, stream.size(), h.has_checksum() ? "yes" : "no", h.is_stored() ? "yes" : "no");
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
  std::vector<ebac::storage_t<T>> y(static_cast<std::size_t>(n));  // bool: one byte each
  T* const yp = reinterpret_cast<T*>(y.data());
  const double td = best_seconds([&] { ebac::host::decompress(stream.data(), stream.size(), yp, n, opt.threads); }, min_time);
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

/// A JSON number, or null where there is none (infinite PSNR, NaN).
nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

/// One JSON object on one line; names that are not UTF-8 get U+FFFD.
void print_json_line(const nlohmann::ordered_json& j) {
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
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
  const args a = parse_command(argc, argv,
                               {input_option, {"manifest", "--manifest", "a manifest.tsv listing the inputs"},
                                {"dtype", "--dtype", "element type"}, {"dims", "--dims", "extents, outermost first"},
                                {"eb", "--eb", "error bound"}, {"pool", "--pool", "max-pool geometry IN:K:S[:P[:D]] of an index tensor"}, {"mode", "--mode", "abs (default) or rel"},
                                {"pipeline", "--pipeline", "a pipeline, or all (the default)"}, threads_option,
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
      const eval_result r = ebac::visit_dtype(in.type, [&]<class T>(std::type_identity<T>) {
        return evaluate<T>(raw, in.shape, name, opt, min_time);
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

namespace {

/// Error messages stay on one line whatever a file name holds.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

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
  ebac_cli::install_signal_handlers();
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
    std::fprintf(stderr, "ebac: usage error: %s (see ebac --help)\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ebac: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // input_error, ebac::error, ...
    std::fprintf(stderr, "ebac: error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
