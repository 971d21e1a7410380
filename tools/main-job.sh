#!/usr/bin/env bash
# The project's main job (README): compare ebac with SZ3, ZFP and a
# quantize+zstd baseline on the bundled activation corpus. On a fresh Debian 12
# machine, as root, it:
#   1. installs the Debian packages it needs (only the missing ones) and pysz
#      (SZ3's Python binding) into build/pydeps without dependencies, so it can
#      never shadow Debian's numpy;
#   2. builds the ebac CLI (Release, build/main) and studies/peers' zfp_runner
#      (build/peers);
#   3. runs studies/compare.py at rel 1e-2,1e-3,1e-4 and prints the table
#      (out/compare.md, out/compare.json);
#   4. runs it again on the training-size corpus (saved tensors at batch >= 32,
#      8 MB and more: the bundled slice data/training-corpus, or the full corpus
#      of studies/make_training_corpus.py with TRAINING_CORPUS=DIR) at rel
#      1e-1,1e-2,1e-3,1e-4, one thread, with quantize+zstd at levels 1 and 19
#      (the zstd CLI's -1 and -19) beside SZ3 and ZFP, and prints that table
#      (out/training/compare.md, compare.json);
#   5. runs a 9-point bound sweep, 1e-1..1e-5, for the plots (ratio and PSNR
#      only, so one timed run per measurement: out/sweep/compare.json) and
#      draws them with studies/plot_rd.py (out/rd_*.png).
#
#   JOBS=N          build parallelism (default: nproc)
#   MIN_TIME=S      seconds of repetitions per timing in step 3 (default 0.1,
#                   half compare.py's own default, to stay well under 10 minutes on 2 cores)
#   TRAINING=0      skip step 4
#   TRAINING_CORPUS=DIR  the corpus of step 4 (default data/training-corpus, the bundled slice;
#                   /usr/bin/python3 studies/make_training_corpus.py --out DIR makes the full one)
#   SWEEP=0         skip step 5
#   EBAC_SKIP_APT=1 never touch apt (report missing packages instead)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS=${JOBS:-$(nproc)}
MIN_TIME=${MIN_TIME:-0.1}
SWEEP=${SWEEP:-1}
TRAINING=${TRAINING:-1}
TRAINING_CORPUS=${TRAINING_CORPUS:-data/training-corpus}
PY=/usr/bin/python3
OUT=out
BOUNDS=1e-2,1e-3,1e-4
TRAINING_BOUNDS=1e-1,1e-2,1e-3,1e-4
SWEEP_BOUNDS=1e-1,3e-2,1e-2,3e-3,1e-3,3e-4,1e-4,3e-5,1e-5

packages=(
  cmake make g++                       # build
  libcli11-dev nlohmann-json3-dev      # the ebac CLI (argument parsing, JSON output; header-only)
  python3 python3-numpy python3-pip    # compare.py (Debian's numpy) and pip for pysz
  python3-matplotlib                   # plot_rd.py
  libzfp-dev zfp                       # ZFP for studies/peers/zfp_runner
  libzstd-dev python3-zstandard        # the quantize+zstd baseline
  libbenchmark-dev                     # bench/ (EBAC_BUILD_BENCHMARKS=ON)
)

stage_start=$SECONDS
timings=()
stage() {  # stage NAME: closes the previous stage's timer, opens a new one
  if [[ -n "${stage_name:-}" ]]; then timings+=("$(printf '%-30s %5ss' "$stage_name" $((SECONDS - stage_start)))"); fi
  stage_name=$1
  stage_start=$SECONDS
  [[ -n "$1" ]] && printf '\n==== %s ====\n' "$1" >&2
  return 0
}
summary() {
  stage ""
  printf '\n==== timings ====\n' >&2
  printf '%s\n' "${timings[@]}" >&2
  printf '%-30s %5ss\n' total "$SECONDS" >&2
}
trap 'rc=$?; summary; if [[ $rc -ne 0 ]]; then echo "tools/main-job.sh: FAILED in stage: ${stage_name:-?}" >&2; fi' EXIT

stage "packages"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "all ${#packages[@]} packages already installed" >&2
elif [[ "${EBAC_SKIP_APT:-0}" == 1 ]]; then
  echo "missing packages: ${missing[*]} (EBAC_SKIP_APT=1)" >&2
  exit 1
else
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "not root and no sudo: install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q >&2
  available=()
  for p in "${missing[@]}"; do  # python3-zstandard is optional: compare.py reports the baseline as skipped
    if apt-cache show "$p" >/dev/null 2>&1; then available+=("$p"); else echo "not in this distribution: $p" >&2; fi
  done
  echo "installing: ${available[*]}" >&2
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${available[@]}" >&2
fi
mkdir -p build/pydeps
if ! PYTHONPATH=build/pydeps "$PY" -c 'import pysz' 2>/dev/null; then
  echo "installing pysz into build/pydeps" >&2
  "$PY" -m pip install -q --no-deps --target build/pydeps pysz >&2
fi

stage "build: ebac CLI + zfp_runner"
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DEBAC_BUILD_TOOLS=ON -DEBAC_BUILD_TESTS=OFF \
  -DEBAC_BUILD_HEADER_CHECKS=OFF -DEBAC_INSTALL=OFF >&2
cmake -S studies/peers -B build/peers -DCMAKE_BUILD_TYPE=Release >&2
# Both in parallel: each is one translation unit.
cmake --build build/main -j "$JOBS" --target ebac_cli >&2 &
build_cli=$!
cmake --build build/peers -j "$JOBS" >&2
wait "$build_cli"

[[ -f data/corpus/manifest.tsv ]] || { echo "data/corpus/manifest.tsv is missing (studies/make_corpus.py builds the corpus)" >&2; exit 1; }
mkdir -p "$OUT"
common=(--ebac build/main/bin/ebac --zfp-runner build/peers/zfp_runner --corpus data/corpus)

stage "compare: rel $BOUNDS"
"$PY" studies/compare.py "${common[@]}" --bounds "$BOUNDS" --min-time "$MIN_TIME" --out "$OUT"

if [[ "$TRAINING" != 0 ]]; then
  stage "compare: training-size corpus"
  [[ -f "$TRAINING_CORPUS/manifest.tsv" ]] || { echo "$TRAINING_CORPUS/manifest.tsv is missing (studies/make_training_corpus.py builds the corpus)" >&2; exit 1; }
  "$PY" studies/compare.py "${common[@]}" --corpus "$TRAINING_CORPUS" --bounds "$TRAINING_BOUNDS" \
    --zstd-levels 1,19 --single-thread --min-time "$MIN_TIME" --out "$OUT/training"
fi

if [[ "$SWEEP" != 0 ]]; then
  stage "sweep: 9 bounds + plots"
  "$PY" studies/compare.py "${common[@]}" --bounds "$SWEEP_BOUNDS" --ratios-only --out "$OUT/sweep" > /dev/null
  "$PY" studies/plot_rd.py "$OUT/sweep/compare.json" --out "$OUT" >&2
fi
echo "tools/main-job.sh: results in $OUT/ (compare.md, compare.json, training/, sweep/, rd_*.png)" >&2
