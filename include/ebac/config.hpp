// ebac/config.hpp - compiler and namespace plumbing shared by every header.
//
// One header decides how functions are annotated (host/device), how the
// versioned inline namespace is spelled, and which optional features exist.
// Every policy functor is written once and compiled by g++ for the host
// backend and by nvcc for the CUDA backend, so nothing here may assume nvcc.
#pragma once

#include <ebac/version.hpp>

#if defined(__CUDACC__)
#define EBAC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EBAC_HOST_DEVICE inline
#endif

// Before a host-device template whose execution depends on a policy
// argument (host-only for the host backend, device-only for a kernel): nvcc
// would otherwise warn about the instantiation that is never called (CCCL's
// _CCCL_EXEC_CHECK_DISABLE does the same).
#if defined(__CUDACC__) && defined(__NVCC__)
#define EBAC_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define EBAC_EXEC_CHECK_DISABLE
#endif

// After a lambda's parameter list: inline it wherever it is called. A
// decoder step called from four places (one per rANS state, so that each
// state is a register) is otherwise left a call by GCC, 10-16% slower.
#if defined(__GNUC__) || defined(__clang__)
#define EBAC_FORCE_INLINE_LAMBDA __attribute__((always_inline))
#else
#define EBAC_FORCE_INLINE_LAMBDA
#endif

// Before a function: the same for a helper that takes its caller's state by
// reference (the striped encoder's four bit writers, which stay in
// registers only once the helper is inlined).
#if defined(__GNUC__) || defined(__clang__)
#define EBAC_FORCE_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define EBAC_FORCE_INLINE __forceinline
#else
#define EBAC_FORCE_INLINE inline
#endif

// A pointer through which nothing else in its scope is accessed: lets the
// compiler vectorize a loop that writes bytes beside the words it reads (a
// byte store may otherwise alias them). GCC, Clang, nvcc and MSVC spell it so.
#define EBAC_RESTRICT __restrict

#if defined(_OPENMP)
#define EBAC_HAS_OPENMP() 1
#else
#define EBAC_HAS_OPENMP() 0
#endif

// The inline namespace carries the version so that two extensions built
// against different ebac versions can share one process without ODR clashes
// (CUB does the same with CUB_DETAIL_MAGIC_NS_BEGIN).
#define EBAC_DETAIL_CONCAT_(a, b, c) a##_##b##_##c
#define EBAC_DETAIL_ABI_NAME(a, b, c) EBAC_DETAIL_CONCAT_(a, b, c)
// EBAC_ABI_TAG, when defined, extends the name (v_0_1_0_abi_TAG): a unit
// compiled with other code-generation flags (another -march) then has its own
// copies of every inline function instead of sharing, by the linker's
// choice, the other units' (tests/isa compares two such builds in one
// program).
#define EBAC_DETAIL_ABI_VERSIONED_ \
  EBAC_DETAIL_ABI_NAME(EBAC_DETAIL_ABI_NAME(v, EBAC_VERSION_MAJOR, EBAC_VERSION_MINOR), EBAC_VERSION_PATCH, abi)
#if defined(EBAC_ABI_TAG)
#define EBAC_DETAIL_TAG_(a, b) a##_##b
#define EBAC_DETAIL_TAGGED_(a, b) EBAC_DETAIL_TAG_(a, b)
#define EBAC_ABI_NAMESPACE EBAC_DETAIL_TAGGED_(EBAC_DETAIL_ABI_VERSIONED_, EBAC_ABI_TAG)
#else
#define EBAC_ABI_NAMESPACE EBAC_DETAIL_ABI_VERSIONED_
#endif

#define EBAC_NAMESPACE_BEGIN \
  namespace ebac {           \
  inline namespace EBAC_ABI_NAMESPACE {
#define EBAC_NAMESPACE_END \
  }                        \
  }
