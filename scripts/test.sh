#!/usr/bin/env bash
# README command (b): set everything up on a fresh Debian 12 machine and run
# every test (unit, integration, e2e; GPU tests skip without a device).
#
#   scripts/test.sh                 # everything, then the sanitizer and TSan stages
#   scripts/test.sh -L unit         # extra arguments go to ctest (no sanitizer stages)
#
# The sanitizer stage (scripts/sanitize.sh): unit and integration tests under ASan+UBSan,
# and every fuzz target on its regressions, then a bounded, reproducible exploration.
# ORCA_SKIP_SANITIZE=1 skips it. Then the TSan stage (scripts/tsan.sh): the scheduler's,
# worker's and gateway's threading tests under ThreadSanitizer; ORCA_SKIP_TSAN=1 skips it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ORCA_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/bootstrap.sh"
printf '\033[1;34m[test]\033[0m running ctest in %s\n' "$BUILD_DIR"
# Scratch files of tests (synthetic models, process logs, corrupt-file cases) go under the
# build tree, emptied on every run, never into the machine's /tmp.
export TEST_TMPDIR="$BUILD_DIR/test-tmp"
export TMPDIR="$TEST_TMPDIR"
rm -rf "$TEST_TMPDIR"
mkdir -p "$TEST_TMPDIR"
# Two at a time: this is a 2-core machine and the integration tests start real processes.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 --timeout 900 "$@"
if [ $# -eq 0 ] && [ -z "${ORCA_SKIP_SANITIZE:-}" ]; then
  # Fuzz targets replay their regressions, then explore ORCA_FUZZ_RUNS inputs (scaled per
  # target, tests/fuzz/CMakeLists.txt) from the fixed random seed ORCA_FUZZ_SEED: bounded
  # and reproducible. Exploring for a time is `ORCA_FUZZ_SECONDS=N scripts/sanitize.sh`.
  ORCA_FUZZ_SECONDS="${ORCA_FUZZ_SECONDS:-0}" ORCA_FUZZ_RUNS="${ORCA_FUZZ_RUNS:-8000}" \
    ORCA_FUZZ_SEED="${ORCA_FUZZ_SEED:-1}" "$ROOT/scripts/sanitize.sh"
fi
if [ $# -eq 0 ] && [ -z "${ORCA_SKIP_TSAN:-}" ]; then
  "$ROOT/scripts/tsan.sh"
fi
