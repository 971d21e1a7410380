#!/bin/sh
# Runs its arguments where the CPU has AVX2; where it has not, says so and
# exits 77, which the ebac_fuzz_*_avx2 tests declare as ctest's skip code.
if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  echo "SKIPPED: this CPU has no AVX2" >&2
  exit 77
fi
exec "$@"
