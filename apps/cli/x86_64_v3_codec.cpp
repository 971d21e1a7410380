// apps/cli/x86_64_v3_codec.cpp - the host codec for f32, f16 and bf16
// compiled for x86-64-v3, beside the CLI's own build; command_line.cpp takes
// it where the CPU has it (ebac/host/isa_codec.hpp). CMakeLists.txt compiles
// this unit without EBAC_HOST_CODEC_PREBUILT and without -march=.
#include <ebac/host/x86_64_v3_codec.ipp>
