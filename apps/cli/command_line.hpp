// apps/cli/command_line.hpp - what every ebac command shares: its options as
// parsed (args), the checks that turn option values into library types with a
// one-line usage_error naming the option, and reading raw arrays and streams
// and dispatching them on their element type. Definitions: command_line.cpp.
#pragma once

#include "io.hpp"

#include <ebac/ebac.hpp>
#include <ebac/host/isa_codec.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace ebac_cli {

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

inline const option_def input_option{"input", "input,--input,-i", "input file, or - for standard input"};
inline const option_def output_option{"output", "-o,--output", "output file, or - for standard output (the default)"};
inline const option_def threads_option{"threads", "--threads", "threads: 0 = every core"};

/// The --dtype names the CLI takes (each one ebac::visit_dtype handles).
inline constexpr const char* cli_dtypes = "f32, f16, bf16, bool, u8, i8, i16, i32 or i64";

/// Parses `ebac COMMAND ...` with CLI11: options take one value each
/// ("--eb 1e-3" or "--eb=1e-3"), none may repeat, unknown ones are refused.
/// Values are checked by the command, which knows what they mean.
args parse_command(int argc, char** argv, std::initializer_list<option_def> defs, bool json_flag = false);

/// Parses a double, telling apart garbage, overflow and underflow.
double parse_double(const std::string& s, const char* what);
long parse_int(const std::string& s, const char* what, long lo, long hi);
/// "4096", "512K", "64M", "4G", "1T" (powers of 1024; also KiB, MiB, ... and KB, MB, ...).
std::uint64_t parse_size(const std::string& s, const char* what);
std::string format_bytes(std::uint64_t b);
ebac::extents parse_dims(const std::string& s, const std::string& option = "--dims");
ebac::dtype parse_dtype_arg(const std::string& s);
/// --eb and --mode.
ebac::error_bound parse_bound(const args& a);
/// The error bound for dtype t: required for floating-point data; integer
/// and bool data are coded losslessly and take none (a given one is ignored).
ebac::error_bound bound_for(const args& a, ebac::dtype t);
/// --pool IN:K:S[:P[:D]]: a max-pool index tensor's geometry.
ebac::pool_geometry parse_pool(const std::string& s, const ebac::extents& shape);
ebac::pipeline_spec parse_pipeline_arg(const std::string& name);
int threads_arg(const args& a, int def);
/// The input path: positional or --input.
const std::string& input_arg(const args& a);

/// Bytes of a tensor the format can hold (refused before any input is read).
std::uint64_t byte_size(const ebac::extents& e, ebac::dtype t, const std::string& option = "--dims");
/// Reads a raw array of exactly the size dims and dtype describe.
std::vector<std::byte> read_array(const std::string& path, const ebac::extents& e, ebac::dtype t,
                                  const std::string& option = "--dims");
/// The first bytes of a stream, through its stage parameters: refuses a
/// first few bytes that are no ebac header, a header that claims more bytes
/// than any writer's stream of its elements, and a stream that decodes to
/// more than max_output bytes, before anything else is read; `total`:
/// the size the header gives the stream (0 where it could not be read).
/// Shorter than the prefix where the input ends first or the header is
/// invalid: the library's header reader then says why.
std::vector<std::byte> read_stream_prefix(input_file& in, std::uint64_t max_output, std::uint64_t& total);
/// Refuses an input that goes on after the `total`-byte stream it holds.
[[noreturn]] void refuse_trailing_data(input_file& in, std::uint64_t total);

/// Compresses raw little-endian bytes of element type t with the pipeline spec.
std::vector<std::byte> compress_any(const std::vector<std::byte>& raw, ebac::dtype t, const ebac::extents& e,
                                    const ebac::pipeline_spec& spec, const ebac::compress_options& opt);
/// Decompresses into raw little-endian bytes of the stream's dtype.
std::vector<std::byte> decompress_any(const std::vector<std::byte>& stream, int threads,
                                      std::uint64_t max_output = ebac::unlimited_output);
/// host::decompress_stream of a stream of element type t through io, in
/// the build decompress_into runs.
void decompress_stream_any(const ebac::isa::stream_io& io, ebac::dtype t, int threads, std::uint64_t max_output);

/// Decodes `count` elements of type t (the stream's dtype) into out.
void decompress_into(const std::byte* stream, std::size_t size, ebac::dtype t, void* out, std::uint64_t count, int threads,
                     std::uint64_t max_output = ebac::unlimited_output);
/// A JSON number, or null where there is none (infinite PSNR, NaN).
nlohmann::ordered_json json_number(double v);
/// One JSON object on one line; names that are not UTF-8 get U+FFFD.
void print_json_line(const nlohmann::ordered_json& j);

}  // namespace ebac_cli
