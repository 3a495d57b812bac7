#!/usr/bin/env bash
# One command on a GPU machine (issue 16): build Orca with CUDA and NCCL, run every CTest
# labelled `gpu`, then the engine microbenchmark and a Fig. 10 sweep on the CUDA backend, and
# write the results where bench/README.md ("On a GPU") describes them.
#
#   scripts/gpu-check.sh                  # the whole check; needs a GPU
#   scripts/gpu-check.sh --quick          # the same with a smaller benchmark grid
#   scripts/gpu-check.sh --allow-no-gpu   # dry mode without a GPU: configure and build only
#   scripts/gpu-check.sh --verify-test-log FILE   # only judge a `ctest -V` log (its test;
#                                                 # ORCA_GPU_CHECK_GPUS: the GPUs, default 1)
#
# Environment: ORCA_BUILD_DIR (default build-cuda), ORCA_CUDA_ARCHITECTURES (default: the
# compute capabilities nvidia-smi reports), ORCA_GPU_CHECK_OUT (default: the bench/*/results/cuda
# folders), ORCA_NVIDIA_SMI (default nvidia-smi), ORCA_GPU_CHECK_NO_BOOTSTRAP=1 (skip
# scripts/bootstrap.sh, which otherwise installs the packages and test tools first).
#
# It fails (exit 1, the reason on stderr) rather than skip: when a GPU is present, a gpu test
# that fails or skips, a benchmark that fails or does not run on the GPU is a failure. Without a
# GPU it refuses (exit 2) unless --allow-no-gpu, which checks that the CUDA build builds and
# registers its gpu tests and runs nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ORCA_BUILD_DIR:-$ROOT/build-cuda}"
NVIDIA_SMI="${ORCA_NVIDIA_SMI:-nvidia-smi}"
say() { printf '\033[1;34m[gpu-check]\033[0m %s\n' "$*"; }
fail() {
  printf '\033[1;31m[gpu-check] FAILED:\033[0m %s\n' "$*" >&2
  exit 1
}

usage() { sed -n '2,/^set /{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

# skipped_tests LOG: one line per test that skipped, "NAME<TAB>REASON" (the message line after
# gtest's "...: Skipped"; ctest -V prefixes every line with the test's number).
skipped_tests() {
  sed -E 's/^[0-9]+: //' "$1" | awk '
    /: Skipped$/ { want = 1; reason = ""; next }
    want == 1 { reason = $0; want = 0; next }
    /^\[  SKIPPED \] [A-Za-z_].* \([0-9]+ ms\)$/ {
      name = $4
      printf "%s\t%s\n", name, reason
      reason = ""
    }'
}

# verify_test_log LOG STATUS GPUS: the verdict on a `ctest -V -L gpu` run. Every gpu test must
# have run and passed: a failing status, a test that skipped (GTEST_SKIP exits 0, so ctest counts
# it as passed) or a test binary that ran no test at all is a failure. The one skip allowed is a
# test saying "needs N GPUs" on a machine with fewer than N (listed in the output).
verify_test_log() {
  local log="$1" status="$2" gpus="$3" skips bad="" allowed="" name reason
  [ -s "$log" ] || fail "no ctest output in $log"
  if grep -q 'No tests were found' "$log"; then
    fail "ctest found no test labelled gpu in $BUILD_DIR (was it configured with CUDA and NCCL?)"
  fi
  skips="$(skipped_tests "$log")"
  while IFS=$'\t' read -r name reason; do
    [ -n "$name" ] || continue
    if [[ "$reason" =~ needs\ ([0-9]+)\ GPUs ]] && ((BASH_REMATCH[1] > gpus)); then
      allowed+="$name ($reason; this machine has $gpus)"$'\n'
    else
      bad+="$name: ${reason:-no reason given}"$'\n'
    fi
  done <<<"$skips"
  if [ -n "$bad" ]; then
    printf '%s' "$bad" >&2
    fail "$(printf '%s' "$bad" | wc -l) gpu test(s) skipped with a GPU present (listed above; full log: $log)"
  fi
  if grep -qE '\[  PASSED  \] 0 tests' "$log"; then
    fail "a gpu test binary ran no test (full log: $log)"
  fi
  local failed
  failed="$(grep -E '\*\*\*(Failed|Timeout|Exception)|\((Failed|Timeout|SEGFAULT|Subprocess aborted)\)|\[  FAILED  \] [A-Za-z_]' "$log" |
    sed -E 's/^[0-9]+: //' | sort -u || true)"
  if [ "$status" -ne 0 ] || [ -n "$failed" ]; then
    [ -z "$failed" ] || printf '%s\n' "$failed" >&2
    fail "gpu tests failed (ctest exit $status; full log: $log)"
  fi
  grep -q 'tests passed' "$log" || fail "no ctest summary in $log"
  [ -z "$allowed" ] || printf 'not run for lack of GPUs: %s\n' "$(printf '%s' "$allowed" | paste -sd';')"
  grep -E 'tests passed' "$log" | tail -1
}

ALLOW_NO_GPU=0
QUICK=0
while (($#)); do
  case "$1" in
    --allow-no-gpu) ALLOW_NO_GPU=1 ;;
    --quick) QUICK=1 ;;
    --verify-test-log)
      [ $# -ge 2 ] || { echo "--verify-test-log needs a file" >&2; exit 2; }
      verify_test_log "$2" 0 "${ORCA_GPU_CHECK_GPUS:-1}"
      exit 0
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "gpu-check.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
  shift
done

# The GPUs: nvidia-smi's list. A device node without nvidia-smi still counts as a GPU (the
# check then must not quietly become a dry run).
GPUS=""
NO_GPU_REASON="$NVIDIA_SMI is not installed and there is no /dev/nvidia*"
if command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
  GPUS="$("$NVIDIA_SMI" -L 2>/dev/null | grep -E '^GPU [0-9]+:' || true)"
  NO_GPU_REASON="$NVIDIA_SMI -L lists none"
elif compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
  fail "/dev/nvidia* exists but $NVIDIA_SMI is not installed: cannot tell which GPUs to check (install the driver's utilities)"
fi
NUM_GPUS=0
[ -n "$GPUS" ] && NUM_GPUS="$(printf '%s\n' "$GPUS" | wc -l)"

if ((NUM_GPUS == 0)); then
  if ((ALLOW_NO_GPU == 0)); then
    echo "[gpu-check] no GPU on this machine ($NO_GPU_REASON): nothing was checked." >&2
    echo "[gpu-check] Run this on a machine with an NVIDIA GPU, or with --allow-no-gpu to only check the CUDA build." >&2
    exit 2
  fi
  say "no GPU ($NO_GPU_REASON): dry mode, the CUDA build only; no test or benchmark runs"
else
  ((ALLOW_NO_GPU == 0)) || say "--allow-no-gpu ignored: a GPU is present, so everything runs"
  ALLOW_NO_GPU=0
  say "GPUs:"
  printf '  %s\n' "$GPUS"
fi

# ---- configure and build ------------------------------------------------------------------
# A fresh machine gets the project's packages and test tools first (idempotent; configure only).
if [ -z "${ORCA_GPU_CHECK_NO_BOOTSTRAP:-}" ]; then
  ORCA_BUILD_DIR="$BUILD_DIR" ORCA_CONFIGURE_ONLY=1 "$ROOT/scripts/bootstrap.sh" ||
    fail "scripts/bootstrap.sh failed (packages or tools missing)"
fi
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDA_HOME:-}" ] ||
  fail "no CUDA toolkit: nvcc is neither on PATH nor in /usr/local/cuda/bin (set CUDA_HOME or CMAKE_CUDA_COMPILER)"
ARCHS="${ORCA_CUDA_ARCHITECTURES:-}"
if [ -z "$ARCHS" ] && ((NUM_GPUS > 0)); then
  # "8.6" -> "86"; one entry per distinct GPU kind.
  ARCHS="$("$NVIDIA_SMI" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -u | paste -sd';' || true)"
fi
CMAKE_ARGS=(-S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DORCA_ENABLE_CUDA=ON -DORCA_ENABLE_NCCL=ON)
if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc"); fi
[ -n "$ARCHS" ] && CMAKE_ARGS+=(-DORCA_CUDA_ARCHITECTURES="$ARCHS")
mkdir -p "$BUILD_DIR"
say "configuring $BUILD_DIR (CUDA and NCCL required${ARCHS:+, architectures $ARCHS})"
if ! cmake "${CMAKE_ARGS[@]}" >"$BUILD_DIR/gpu-check-configure.log" 2>&1; then
  grep -E -A6 'CMake Error' "$BUILD_DIR/gpu-check-configure.log" | sed -n 1,40p >&2 || tail -40 "$BUILD_DIR/gpu-check-configure.log" >&2
  fail "CMake configure with -DORCA_ENABLE_CUDA=ON -DORCA_ENABLE_NCCL=ON failed (log: $BUILD_DIR/gpu-check-configure.log)"
fi
grep -E '^-- Orca ' "$BUILD_DIR/gpu-check-configure.log" || true
say "building everything (ninja -C $BUILD_DIR)"
ninja -C "$BUILD_DIR" || fail "the CUDA build failed"

REGISTERED="$(ctest --test-dir "$BUILD_DIR" -N -L gpu | sed -n 's/^Total Tests: //p')"
((${REGISTERED:-0} > 0)) || fail "the CUDA build registers no test labelled gpu"
say "$REGISTERED gpu test(s) registered: $(ctest --test-dir "$BUILD_DIR" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p' | paste -sd' ')"

if ((NUM_GPUS == 0)); then
  say "dry mode done: the CUDA build builds and registers its gpu tests. NOTHING RAN: this is not a GPU check."
  exit 0
fi

# ---- gpu tests ------------------------------------------------------------------------------
ENGINE_OUT="${ORCA_GPU_CHECK_OUT:+$ORCA_GPU_CHECK_OUT/engine}"
ENGINE_OUT="${ENGINE_OUT:-$ROOT/bench/engine/results/cuda}"
FIG10_OUT="${ORCA_GPU_CHECK_OUT:+$ORCA_GPU_CHECK_OUT/fig10}"
FIG10_OUT="${FIG10_OUT:-$ROOT/bench/fig10/results/cuda}"
mkdir -p "$ENGINE_OUT" "$FIG10_OUT"
SUMMARY="$ENGINE_OUT/gpu-check-summary.txt"
{
  echo "# scripts/gpu-check.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  printf '# %s\n' "$GPUS"
  "$NVIDIA_SMI" --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | sed 's/^/# /' || true
  echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$SUMMARY"

export TEST_TMPDIR="$BUILD_DIR/test-tmp"
rm -rf "$TEST_TMPDIR"
mkdir -p "$TEST_TMPDIR"
TEST_LOG="$ENGINE_OUT/gpu-tests.log"
say "running the gpu tests (log: $TEST_LOG)"
set +e
TMPDIR="$TEST_TMPDIR" ctest --test-dir "$BUILD_DIR" -L gpu -V --timeout 900 >"$TEST_LOG" 2>&1
TEST_STATUS=$?
set -e
verify_test_log "$TEST_LOG" "$TEST_STATUS" "$NUM_GPUS" >>"$SUMMARY"
say "gpu tests: $(tail -1 "$SUMMARY")"

# ---- engine microbenchmark on the GPU -------------------------------------------------------
BIN="$BUILD_DIR/bin"
MODELS="${ORCA_BENCH_MODEL_DIR:-$BUILD_DIR/bench-models}"
if ((QUICK)); then
  ENGINE_ARGS=(--models 25m --dtypes bf16 --batches "1,8,32" --prompts 32 --gen 16 --first-requests 3)
else
  ENGINE_ARGS=(--models "25m,135m" --dtypes "bf16,f32" --batches "1,2,4,8,16,32,64" --prompts "32,128" --gen 32)
fi
# bench_engine TP OUTFILE [ARGS...]: one engine_bench run on the CUDA backend; it must report a
# cuda backend.
bench_engine() {
  local tp="$1" out="$2"
  shift 2
  say "engine microbenchmark, CUDA, tp $tp $* -> $out"
  "$BIN/engine_bench" --device cuda --tp "$tp" --model-dir "$MODELS" "${ENGINE_ARGS[@]}" "$@" >"$out" 2>&1 ||
    { tail -20 "$out" >&2; fail "engine_bench --device cuda --tp $tp $* failed (output: $out)"; }
  grep -q '; cuda:' "$out" || fail "engine_bench did not run on the CUDA backend (output: $out)"
  echo "engine_bench --tp $tp $*: $(grep -c '^[0-9]' "$out") rows in $out" >>"$SUMMARY"
}
mkdir -p "$MODELS"
bench_engine 1 "$ENGINE_OUT/engine_bench_cuda.txt"
# The same decode iterations recorded once per batch shape and replayed (issue 16 item 2).
bench_engine 1 "$ENGINE_OUT/engine_bench_cuda_graphs.txt" --cuda-graphs
grep -q 'decode as CUDA Graphs' "$ENGINE_OUT/engine_bench_cuda_graphs.txt" ||
  fail "engine_bench --cuda-graphs did not run with graphs (output: $ENGINE_OUT/engine_bench_cuda_graphs.txt)"
if ((NUM_GPUS >= 2)); then
  bench_engine 2 "$ENGINE_OUT/engine_bench_cuda_tp2.txt"
else
  echo "engine_bench --tp 2: not run (one GPU)" >>"$SUMMARY"
fi

# ---- Fig. 10 on the GPU ---------------------------------------------------------------------
# Workers log their backend ("engine ready: ... cuda:N (...)") at info level.
FIG10_ARGS=(--serve-arg=--device=cuda --serve-arg=--log-level=info)
((QUICK)) && FIG10_ARGS+=(--rates "4,11,20" --num-requests 50)
say "Fig. 10 sweep, workers on the CUDA backend -> $FIG10_OUT"
ORCA_BUILD_DIR="$BUILD_DIR" ORCA_BENCH_MODEL_DIR="$MODELS" "$ROOT/scripts/bench/fig10.sh" "$FIG10_OUT" \
  "${FIG10_ARGS[@]}" >"$FIG10_OUT/fig10_cuda.txt" 2>&1 ||
  { tail -30 "$FIG10_OUT/fig10_cuda.txt" >&2; fail "the Fig. 10 sweep on the CUDA backend failed (output: $FIG10_OUT/fig10_cuda.txt)"; }
# Every engine the sweep started must have run on a GPU (the workers log their backend when ready).
READY="$(grep -rh 'engine ready:' "$FIG10_OUT" 2>/dev/null || true)"
[ -n "$READY" ] || fail "no worker of the Fig. 10 sweep logged 'engine ready' under $FIG10_OUT"
if printf '%s\n' "$READY" | grep -v ', cuda:' >&2; then
  fail "a worker of the Fig. 10 sweep ran without the CUDA backend (lines above)"
fi
echo "fig10 sweep: $(printf '%s\n' "$READY" | wc -l) engines on the GPU; $FIG10_OUT/fig10_cuda.txt" >>"$SUMMARY"

say "all gpu tests passed and the benchmarks ran on the GPU; summary: $SUMMARY"
cat "$SUMMARY"
