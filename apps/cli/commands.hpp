// apps/cli/commands.hpp - the ebac commands main() dispatches to. Each takes
// main's argc/argv (argv[1] is the command), returns the exit status, and
// throws usage_error, input_error or ebac::error with a one-line message.
#pragma once

namespace ebac_cli {

int cmd_compress(int argc, char** argv);    // codec_commands.cpp
int cmd_decompress(int argc, char** argv);  // codec_commands.cpp
int cmd_info(int argc, char** argv);        // codec_commands.cpp
int cmd_eval(int argc, char** argv);        // codec_commands.cpp
int cmd_grad_error(int argc, char** argv);  // grad_error.cpp

/// The host codec build that runs: "x86-64-v3" or "baseline" (command_line.cpp).
const char* host_isa_name();

}  // namespace ebac_cli
