// ebac/host/x86_64_v3_begin.hpp - opens a region of one unit in which ebac
// is compiled for x86-64-v3 (AVX2, FMA, BMI2, LZCNT, F16C, MOVBE) while the
// rest of the program keeps the flags it was built with, so that one binary
// runs everywhere and takes the faster code where the CPU has it.
//
//   #include <ebac/host/x86_64_v3_begin.hpp>  // before any other ebac header of the unit
//   #include <ebac/ebac.hpp>
//   ...functions that call ebac::host::compress/decompress...
//   #include <ebac/host/x86_64_v3_end.hpp>
//   ...functions that call those, reached only when
//      __builtin_cpu_supports("x86-64-v3") says the CPU has it...
//
// Three things make this safe, and each is done here:
//  - ebac lives in its own ABI namespace in this unit (EBAC_ABI_TAG
//    x86_64_v3, config.hpp): the linker keeps one copy of each inline
//    function for the whole program, and without the tag that copy could be
//    this unit's AVX2 code, run on a CPU without AVX2.
//  - Every standard header ebac uses is included before the region: a
//    standard-library function defined inside it would be compiled for AVX2
//    under its usual name and have the same problem (std::vector's members,
//    say). Those functions stay baseline and are inlined into the AVX2 code
//    as usual.
//  - The target is a list of ISA extensions, not arch=: a function compiled
//    for another arch= cannot inline the (baseline) standard-library
//    functions, and the codec's loops would then not vectorize.
// ebac's types in the region are not the program's ebac types (another
// namespace): pass standard types between the region and the rest of the
// program. An ebac::error thrown in the region is likewise its own type,
// ebac::v_..._abi_x86_64_v3::error (a std::runtime_error): catch it inside.
//
// GCC on x86-64 only (Clang has no `#pragma GCC target`); the alternative is
// a whole unit compiled with -march=x86-64-v3 and -DEBAC_ABI_TAG=..., which
// also compiles the standard library's inline functions for AVX2 (tests/isa
// does that, in a test that only runs where the CPU has AVX2).
#pragma once

#if !defined(__GNUC__) || defined(__clang__) || !defined(__x86_64__)
#error "ebac/host/x86_64_v3_begin.hpp needs GCC on x86-64 (#pragma GCC target)"
#endif
#if defined(EBAC_NAMESPACE_BEGIN)
#error "ebac/host/x86_64_v3_begin.hpp must come before every other ebac header of the unit"
#endif
#if defined(EBAC_ABI_TAG)
#error "ebac/host/x86_64_v3_begin.hpp sets EBAC_ABI_TAG itself"
#endif

// Every standard header ebac's host headers include (a test compares this
// list with the headers' #include lines).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <immintrin.h>  // ebac/encoder/context_ans_x8.hpp, which the region compiles in
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__linux__)  // ebac/host/large_buffer.hpp: huge-page mappings
#include <sys/mman.h>
#include <unistd.h>
#endif

#define EBAC_ABI_TAG x86_64_v3
// What the region compiles for. GCC's C++ front end sees the pragma below
// after the preprocessor has run, so __AVX2__ stays undefined in the region:
// code written for AVX2 (ebac/encoder/context_ans_x8.hpp) tests this macro.
#define EBAC_X86_64_V3_REGION 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,bmi,bmi2,lzcnt,popcnt,f16c,movbe")
