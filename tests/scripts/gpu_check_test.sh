#!/usr/bin/env bash
# scripts/gpu-check.sh without a GPU and on ctest logs: it refuses to pass for a machine or a
# run where nothing (or not everything) ran on a GPU.
#
#   tests/scripts/gpu_check_test.sh scripts/gpu-check.sh
set -uo pipefail
SCRIPT="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
FAILURES=0
check() {  # check NAME WANT_STATUS WANT_OUTPUT_REGEX -- COMMAND...
  local name="$1" want="$2" pattern="$3" out status
  shift 4
  out="$("$@" 2>&1)"
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    printf 'FAIL %s: exit %s (want %s), output:\n%s\n(want a line matching /%s/)\n' "$name" "$status" "$want" "$out" "$pattern"
    FAILURES=$((FAILURES + 1))
  else
    printf 'ok   %s\n' "$name"
  fi
}

# The linter comes from scripts/bootstrap.sh (TEST_PACKAGES).
check "shellcheck is clean" 0 '' -- shellcheck "$SCRIPT"

# A machine whose nvidia-smi lists no GPU (a fake one, so this holds on GPU machines too).
printf '#!/bin/sh\nexit 0\n' >"$WORK/nvidia-smi"
chmod +x "$WORK/nvidia-smi"
check "no GPU: refuses, says so" 2 'no GPU on this machine.*nothing was checked' -- \
  env ORCA_NVIDIA_SMI="$WORK/nvidia-smi" bash "$SCRIPT"
check "unknown argument" 2 "unknown argument '--bogus'" -- bash "$SCRIPT" --bogus
check "help" 0 'allow-no-gpu' -- bash "$SCRIPT" --help

# Verdicts on `ctest -V -L gpu` logs (numbers prefix each test's lines, as ctest -V prints them).
cat >"$WORK/pass.log" <<'LOG'
1: [ RUN      ] CudaBackendTest.LinearMatchesCpu
1: [       OK ] CudaBackendTest.LinearMatchesCpu (12 ms)
1: [  PASSED  ] 1 test.
1/1 Test #1: kernels_cuda_test ................   Passed    0.50 sec
100% tests passed, 0 tests failed out of 1
LOG
check "all passed" 0 '100% tests passed' -- bash "$SCRIPT" --verify-test-log "$WORK/pass.log"

# A skip as gtest prints it under ctest -V: the location, the reason, then the test's line.
skip_log() {  # skip_log REASON > FILE
  printf '1: [ RUN      ] CudaBackendTest.LinearMatchesCpu\n1: ../tests/unit/kernels/cuda_backend_test.cc:68: Skipped\n'
  printf '1: %s\n1: [  SKIPPED ] CudaBackendTest.LinearMatchesCpu (0 ms)\n' "$1"
  printf '1: [  PASSED  ] 0 tests.\n1: [  SKIPPED ] 1 test, listed below:\n1: [  SKIPPED ] CudaBackendTest.LinearMatchesCpu\n'
  printf '1: [ RUN      ] CudaBackendTest.GeluMatchesCpu\n1: [       OK ] CudaBackendTest.GeluMatchesCpu (3 ms)\n'
  printf '1: [  PASSED  ] 1 test.\n100%% tests passed, 0 tests failed out of 1\n'
}
skip_log "no CUDA device visible" >"$WORK/skip.log"
check "a skipped test fails the check, with its reason" 1 \
  'CudaBackendTest.LinearMatchesCpu: no CUDA device visible' -- bash "$SCRIPT" --verify-test-log "$WORK/skip.log"
check "one skip counts once" 1 '1 gpu test\(s\) skipped with a GPU present' -- \
  bash "$SCRIPT" --verify-test-log "$WORK/skip.log"
skip_log "needs 2 GPUs" | grep -v 'PASSED  \] 0 tests' >"$WORK/needs2.log"
check "a test needing more GPUs than there are may skip, and is listed" 0 \
  'not run for lack of GPUs: CudaBackendTest.LinearMatchesCpu \(needs 2 GPUs; this machine has 1\)' -- \
  env ORCA_GPU_CHECK_GPUS=1 bash "$SCRIPT" --verify-test-log "$WORK/needs2.log"
check "with enough GPUs it may not" 1 'LinearMatchesCpu: needs 2 GPUs' -- \
  env ORCA_GPU_CHECK_GPUS=2 bash "$SCRIPT" --verify-test-log "$WORK/needs2.log"

cat >"$WORK/fail.log" <<'LOG'
1: [  FAILED  ] CudaBackendTest.LinearMatchesCpu (12 ms)
1/1 Test #1: kernels_cuda_test ................***Failed    0.50 sec
0% tests passed, 1 tests failed out of 1
LOG
check "a failed test fails the check" 1 'gpu tests failed' -- bash "$SCRIPT" --verify-test-log "$WORK/fail.log"

printf 'Test project /b\nNo tests were found!!!\n' >"$WORK/none.log"
check "no gpu tests fails the check" 1 'no test labelled gpu' -- bash "$SCRIPT" --verify-test-log "$WORK/none.log"

sed 's/\[  PASSED  \] 1 test./[  PASSED  ] 0 tests./' "$WORK/pass.log" >"$WORK/empty.log"
check "a binary running no test fails the check" 1 'ran no test' -- bash "$SCRIPT" --verify-test-log "$WORK/empty.log"

if ((FAILURES > 0)); then
  echo "$FAILURES check(s) failed"
  exit 1
fi
