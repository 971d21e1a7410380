// ebac/detail/host_avx2.hpp - EBAC_HOST_AVX2: 1 where host code may use
// AVX2 intrinsics (and <immintrin.h> is included), else 0.
//
// Where: GCC or Clang, not a CUDA unit, and AVX2 compiled in, either by
// -march=x86-64-v3 / -mavx2 (__AVX2__) or inside the x86-64-v3 region of
// ebac/host/x86_64_v3_begin.hpp (EBAC_X86_64_V3_REGION: GCC's C++ front end
// applies that region's #pragma GCC target after preprocessing, so
// __AVX2__ stays undefined there). Code under the macro has a portable
// twin that gives the same results; tests compare the two.
#pragma once

#if (defined(__AVX2__) || defined(EBAC_X86_64_V3_REGION)) && !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__))
#define EBAC_HOST_AVX2 1
#include <immintrin.h>
#else
#define EBAC_HOST_AVX2 0
#endif
