// host_codec_x86_64_v3.cpp - the host codec for f32, f16 and bf16 compiled a
// second time, for x86-64-v3 (AVX2, FMA, BMI2); host_codec.cpp calls it
// where the CPU has it (ebac/host/isa_codec.hpp; EBAC_HOST_ISA). Nothing
// where the compiler cannot build it (not GCC on x86-64): host_codec.cpp
// then runs its own build only.
//
// The extension's flags define EBAC_HOST_CODEC_PREBUILT for every unit (the
// other units use the prebuilt baseline instances); this one instantiates
// its own codec.
#undef EBAC_HOST_CODEC_PREBUILT
#include <ebac/host/isa_codec.hpp>
#if EBAC_X86_64_V3_CODEC_BUILDABLE
#include <ebac/host/x86_64_v3_codec.ipp>
#endif
