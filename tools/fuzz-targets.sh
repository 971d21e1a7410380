# Sourced by tools/fuzz.sh and tools/fuzz-campaign.sh: which libFuzzer
# targets run by default, and where each target's seeds are.
#
# Needs $build (the fuzz preset's build directory) and $regressions (inputs
# that once failed) set by the caller.

# fuzz_default_targets: decompress, inspect and compress; decompress_avx2
# and compress_avx2 (the same targets compiled for x86-64-v3: the eight-lane
# context-ANS coders) where the CPU has AVX2, which tests/fuzz/run_if_avx2.sh
# decides, as it does for their seed tests. Elsewhere it says on stderr that
# they were skipped.
fuzz_default_targets() {
  local targets="decompress inspect compress"
  if sh tests/fuzz/run_if_avx2.sh true 2>/dev/null; then
    targets+=" decompress_avx2 compress_avx2"
  else
    echo "$(basename "$0"): SKIPPED: decompress_avx2 and compress_avx2 (this CPU has no AVX2)" >&2
  fi
  echo "$targets"
}

# fuzz_seeds_of TARGET: the read-only seed directories of a target.
fuzz_seeds_of() {
  case $1 in
    compress | compress_avx2) echo "$build/tests/fuzz/compress-seeds" ;;
    *) echo "$build/tests/fuzz/seeds"; [[ -d $regressions ]] && echo "$regressions" ;;
  esac
  return 0
}
