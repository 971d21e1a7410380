// apps/cli/command_line.cpp - what every ebac command shares: its options
// parsed by CLI11, values checked with one-line errors, raw arrays and
// streams read, and the element-type dispatch into the codec.
#include "command_line.hpp"
#include "commands.hpp"

#include <CLI/CLI.hpp>
#include <ebac/host/isa_codec.hpp>
#include <ebac/host/isa_dispatch.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

// 1 where CMake built x86_64_v3_codec.cpp into the program (EBAC_CLI_X86_64_V3).
#ifndef EBAC_CLI_X86_64_V3
#define EBAC_CLI_X86_64_V3 0
#endif

namespace ebac_cli {

/// Parses `ebac COMMAND ...` with CLI11: options take one value each
/// ("--eb 1e-3" or "--eb=1e-3"), none may repeat, unknown ones are refused.
/// Values are checked by the command, which knows what they mean.
args parse_command(int argc, char** argv, std::initializer_list<option_def> defs, bool json_flag) {
  args a;
  a.command = argv[1];
  CLI::App app("ebac " + a.command, "ebac " + a.command);
  app.set_help_flag("-h,--help", "print this command's options");
  for (const option_def& d : defs) {
    const std::string key = d.key;
    app.add_option_function<std::string>(
        d.names, [&a, key](const std::string& v) { a.opt[key] = v; }, d.help);
  }
  if (json_flag) app.add_flag("--json", a.json, "one JSON object per result line");
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) { throw usage_error(e.what()); }
  return a;
}


/// Parses a double, telling apart garbage, overflow and underflow.
double parse_double(const std::string& s, const char* what) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
    throw usage_error(std::string(what) + " '" + s + "' is not a number");
  if (errno == ERANGE && std::isinf(v))
    throw usage_error(std::string(what) + " '" + s + "' is out of range (above 1.8e308, the largest double)");
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
    throw usage_error(std::string(what) + " '" + s + "' must be an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  return v;
}

/// "4096", "512K", "64M", "4G", "1T" (powers of 1024; also KiB, MiB, ... and KB, MB, ...).
std::uint64_t parse_size(const std::string& s, const char* what) {
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  std::string unit = s.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  for (auto [name, k] : {std::pair{"", 0},
                         {"B", 0},
                         {"K", 10},
                         {"KB", 10},
                         {"KIB", 10},
                         {"M", 20},
                         {"MB", 20},
                         {"MIB", 20},
                         {"G", 30},
                         {"GB", 30},
                         {"GIB", 30},
                         {"T", 40},
                         {"TB", 40},
                         {"TIB", 40}})
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
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes", b);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes (%.4g %s)", b, v, units[u]);
  return buf;
}

ebac::extents parse_dims(const std::string& s, const std::string& option) {
  ebac::extents e;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      throw usage_error(option + " '" + s + "' must be comma-separated non-negative integers");
    if (e.rank == ebac::max_rank) throw usage_error(option + ": at most " + std::to_string(ebac::max_rank) + " dimensions");
    errno = 0;
    const unsigned long long v = std::strtoull(item.c_str(), nullptr, 10);
    if (errno == ERANGE) throw usage_error(option + ": extent '" + item + "' is larger than 2^64 - 1");
    e.dims[e.rank++] = v;
  }
  if (e.rank == 0 || s.back() == ',') throw usage_error(option + " '" + s + "' must be comma-separated non-negative integers");
  std::uint64_t n;
  if (e.count(n) != ebac::status::ok)
    throw usage_error(option + " '" + s + "': the element count (the product of the extents) is larger than 2^64 - 1");
  return e;
}

// --- element types: parsed by ebac::parse_dtype, dispatched by ebac::visit_dtype ----

ebac::dtype parse_dtype_arg(const std::string& s) {
  ebac::dtype t;
  if (!ebac::parse_dtype(s, t)) throw usage_error("unknown --dtype '" + s + "' (expected " + cli_dtypes + ")");
  return t;
}

/// The error bound for dtype t: required for floating-point data; integer
/// and bool data are coded losslessly and take none (a given one is ignored).
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
  // The last dims are the pooling output's: the size max-pooling gives
  // (PyTorch's rule, floor or ceil mode) for this input, kernel, stride,
  // padding and dilation.
  for (std::uint32_t j = 0; j < g.dims; ++j) {
    const std::uint64_t out = shape.dims[shape.rank - static_cast<int>(g.dims) + static_cast<int>(j)];
    const auto in = static_cast<std::int64_t>(g.input[j]), k = static_cast<std::int64_t>(g.kernel[j]),
               st = static_cast<std::int64_t>(g.stride[j]), pad = static_cast<std::int64_t>(g.padding[j]),
               dil = static_cast<std::int64_t>(g.dilation[j]);
    const std::int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    std::int64_t lo = -1, hi = -1;
    if (span >= 0) {
      lo = span / st + 1;
      hi = (span + st - 1) / st + 1;
      if (hi > lo && (hi - 1) * st >= in + pad) --hi;
    }
    if (2 * pad > k || span < 0 || (static_cast<std::int64_t>(out) != lo && static_cast<std::int64_t>(out) != hi))
      throw usage_error("--pool '" + s + "' does not match --dims in spatial dim " + std::to_string(j) + ": input " +
                        std::to_string(in) + ", kernel " + std::to_string(k) + ", stride " + std::to_string(st) + ", padding " +
                        std::to_string(pad) + ", dilation " + std::to_string(dil) +
                        (2 * pad > k ? std::string(" (padding more than half the kernel)")
                         : span < 0  ? std::string(" give no output (the window is larger than the padded input)")
                                     : " pool to " + std::to_string(lo) +
                                          (hi != lo ? " (" + std::to_string(hi) + " in ceil mode)" : std::string())) +
                        ", but --dims gives " + std::to_string(out));
  }
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
std::uint64_t byte_size(const ebac::extents& e, ebac::dtype t, const std::string& option) {
  std::uint64_t n = 0;
  (void)e.count(n);
  if (n > ebac::max_stream_elements)
    throw usage_error(option + ": " + std::to_string(n) + " elements, more than 2^48, the stream format's limit");
  return n * ebac::size_of(t);
}

/// Reads a raw array of exactly the size dims and dtype describe.
std::vector<std::byte> read_array(const std::string& path, const ebac::extents& e, ebac::dtype t, const std::string& option) {
  ebac_cli::input_file in(path);
  return in.read_exactly(byte_size(e, t, option), option + " and --dtype " + std::string(ebac::to_string(t)) + " need");
}

/// Reads a stream's header and stage parameters (read only as far as the
/// header says, so that neither trailing data nor an endless input, a stream
/// followed by /dev/zero, is read into memory). Refuses at once a first few
/// bytes that are no ebac header (e.g. /dev/zero), a header that does not
/// hold together, and a stream that decodes to more than max_output bytes.
std::vector<std::byte> read_stream_prefix(ebac_cli::input_file& in, std::uint64_t max_output, std::uint64_t& total) {
  using ebac::detail::load_le;
  std::vector<std::byte> buf;
  total = 0;
  constexpr std::size_t magic_and_version = 8;
  if (!in.read_to(buf, magic_and_version)) return buf;  // too short: the caller's inspect says so
  ebac::stream_header h;
  const char* what = "invalid stream header";
  // With only these bytes the header reader can judge nothing but the
  // magic and the version; "truncated" means they passed.
  ebac::status s =
      ebac::read_stream_header_fields(buf.data(), magic_and_version, std::numeric_limits<std::size_t>::max(), h, &what);
  if (s != ebac::status::ok && s != ebac::status::truncated_stream) ebac::detail::fail(s, what);
  if (!in.read_to(buf, ebac::stream_fixed_header_bytes)) return buf;
  const int rank = static_cast<int>(buf[11]);
  const std::size_t header = ebac::stream_fixed_header_bytes + 8 * static_cast<std::size_t>(std::clamp(rank, 1, ebac::max_rank));
  const bool more = in.read_to(buf, header);
  // The size the header gives the whole stream (sections, checksum); a sum
  // that overflows is no stream's.
  constexpr std::uint64_t implausible = std::uint64_t{1} << 62;
  total = header;
  for (int k = 0; k < ebac::section_count; ++k)
    total = std::min(implausible, total + std::min(implausible, load_le<std::uint64_t>(buf.data() + 64 + 8 * k)));
  if (static_cast<std::uint8_t>(buf[10]) & ebac::stream_flag_checksum) total += 8;
  if (!more || total >= implausible) {
    // Too short for its header, or sizes no stream has: the header reader names what is wrong.
    s = ebac::read_stream_header_fields(buf.data(), buf.size(), more ? std::numeric_limits<std::size_t>::max() : buf.size(), h,
                                        &what);
    ebac::detail::fail(s != ebac::status::ok ? s : ebac::status::corrupt_stream,
                       s != ebac::status::ok ? what : "section sizes overflow");
  }
  // The stage parameters follow the header; then the header is checked
  // against the size it gives, before the body is read.
  const bool whole = in.read_to(buf, std::min<std::uint64_t>(total, ebac::max_stream_prefix_bytes)) &&
                     buf.size() >= std::min<std::uint64_t>(total, ebac::max_stream_prefix_bytes);
  s = ebac::read_stream_header_fields(buf.data(), buf.size(), static_cast<std::size_t>(total), h, &what);
  if (s != ebac::status::ok && !(s == ebac::status::truncated_stream && !whole)) ebac::detail::fail(s, what);
  if (s == ebac::status::ok) {
    const std::uint64_t bytes = ebac::element_count(h) * ebac::size_of(h.type);
    // No writer makes a stream larger than its header, the raw elements and
    // a checksum (it stores them raw instead; format/max_compressed_bytes.hpp):
    // a header that claims more is forged, and its size is not read.
    const std::uint64_t most = h.header_bytes() + bytes + 8;
    if (total > most)
      throw input_error("input " + in.name() + ": the stream header claims " + std::to_string(total) +
                        " bytes, more than any stream of " + std::to_string(ebac::element_count(h)) + " " +
                        std::string(ebac::to_string(h.type)) + " elements takes (" + std::to_string(most) +
                        "): not an ebac writer's stream");
    if (bytes > max_output)
      throw input_error("the stream decodes to " + format_bytes(bytes) + ", more than --max-output " + format_bytes(max_output) +
                        "; give a larger --max-output to decode it");
  }
  return buf;
}

void refuse_trailing_data(ebac_cli::input_file& in, std::uint64_t total) {
  throw input_error("input " + in.name() + " goes on after the " + std::to_string(total) +
                    "-byte stream its header describes: trailing data is refused (one stream per input)");
}

// --- which build of the codec runs (ebac/host/isa_codec.hpp) -------------------

namespace {

/// The x86-64-v3 build when it is the one chosen (EBAC_HOST_ISA, the CPU),
/// else null: the CLI's own build. An EBAC_HOST_ISA it cannot honour is a
/// usage error.
const ebac::isa::codec* chosen_codec() {
  try {
    return ebac::host::chosen_codec<EBAC_CLI_X86_64_V3 != 0>();
  } catch (const std::invalid_argument& e) { throw usage_error(e.what()); }
}

}  // namespace

/// The build of the host codec that compress_any and decompress_into run
/// for floating-point tensors. Throws usage_error for an EBAC_HOST_ISA it
/// does not know or cannot honour.
const char* host_isa_name() { return ebac::host::name_of(chosen_codec()); }

std::vector<std::byte> compress_any(const std::vector<std::byte>& raw, ebac::dtype t, const ebac::extents& e,
                                    const ebac::pipeline_spec& spec, const ebac::compress_options& opt) {
  return ebac::host::compress_dynamic(chosen_codec(), raw.data(), t, e, spec, opt);
}

void decompress_stream_any(const ebac::isa::stream_io& io, ebac::dtype t, int threads, std::uint64_t max_output) {
  ebac::host::decompress_stream_dynamic(chosen_codec(), io, t, threads, max_output);
}

/// Decompresses into raw little-endian bytes of the stream's dtype.
std::vector<std::byte> decompress_any(const std::vector<std::byte>& stream, int threads, std::uint64_t max_output) {
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
  decompress_into(stream.data(), stream.size(), h.type, out.data(), n, threads, max_output);
  return out;
}

void decompress_into(const std::byte* stream, std::size_t size, ebac::dtype t, void* out, std::uint64_t count, int threads,
                     std::uint64_t max_output) {
  ebac::host::decompress_dynamic(chosen_codec(), stream, size, t, out, count, threads, max_output);
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

}  // namespace ebac_cli
