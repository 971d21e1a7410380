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
#include "commands.hpp"
#include "io.hpp"

#include <ebac/ebac.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <string_view>

namespace {

using ebac_cli::usage_error;

constexpr const char* usage_text =
    "usage:\n"
    "  ebac compress   [INPUT] [-o OUTPUT] --dtype T --dims D0,D1,... --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME] [--pool IN:K:S[:P[:D]]] [--threads N]\n"
    "  ebac decompress [INPUT] [-o OUTPUT] [--max-output SIZE] [--threads N]\n"
    "  ebac eval       ([INPUT] --dtype T --dims D0,... [--pool ...] | --manifest M.tsv) --eb X\n"
    "                  [--mode abs|rel] [--pipeline NAME|all] [--json] [--threads N] [--min-time S]\n"
    "  ebac info       [INPUT]\n"
    "  ebac grad-error --activation A --grad-output D --layer linear|conv2d|batchnorm2d|layernorm|matmul|gelu|silu|tanh|sigmoid "
    "--input-shape N,C[,H,W] [--weight-shape O,C[,KH,KW] (layernorm: D; matmul: K,N; none for gelu|silu|tanh|sigmoid)] [--stride "
    "S] [--padding P] [--dilation D] [--groups G] (--eb X [--mode abs|rel] | --target-rel T) [--producer-input X "
    "--producer-features I] [--pipeline NAME] [--trials K] [--json]\n"
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
    "pipelines: fast, ratio, ratio-flat, rle, plain, max, max-bound, balanced, balanced-bound\n"
    "  (the last four host only; max-bound and balanced-bound may quantize linearly: the bound,\n"
    "  not zeros and signs), or PREDICTOR:QUANTIZER:ENCODER with\n"
    "  PREDICTOR none|lorenzo|lorenzo1|lorenzo2|lorenzo3, QUANTIZER sign|linear,\n"
    "  ENCODER bitpack|rle|huffman|ans|striped (e.g. lorenzo2:sign:huffman; striped: host only).\n"
    "  lorenzoK predicts along the last min(K, rank-1) axes of a tensor of rank >= 3 and\n"
    "  along the flattened tensor below rank 3 (lorenzo1: the last axis); 'ebac info'\n"
    "  shows the axes a stream used.\n"
    "EBAC_HOST_ISA=auto|baseline|x86-64-v3 (environment) chooses the build of the codec\n"
    "  for f32, f16 and bf16: auto (default) takes x86-64-v3 (AVX2, FMA, BMI2) where the\n"
    "  CPU has it; the streams are the same. --version names the one that runs.\n";

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
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (cmd == "--version") {
      std::printf("ebac %d.%d.%d (stream format %d, host codec %s)\n", EBAC_VERSION_MAJOR, EBAC_VERSION_MINOR, EBAC_VERSION_PATCH,
                  EBAC_FORMAT_VERSION, ebac_cli::host_isa_name());
      return 0;
    }
    if (cmd == "compress") return ebac_cli::cmd_compress(argc, argv);
    if (cmd == "decompress") return ebac_cli::cmd_decompress(argc, argv);
    if (cmd == "eval") return ebac_cli::cmd_eval(argc, argv);
    if (cmd == "info") return ebac_cli::cmd_info(argc, argv);
    if (cmd == "grad-error") return ebac_cli::cmd_grad_error(argc, argv);
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
