#!/usr/bin/env bash
# The sanitizer stage of the tests (scripts/test.sh runs it after the main suite;
# alone: scripts/sanitize.sh, after scripts/bootstrap.sh has installed everything).
#
#  1. An ASan + UBSan build of Orca with clang (build-asan/; every UBSan finding and
#     every leak is fatal), in which the unit and integration tests run.
#  2. Every libFuzzer target (tests/fuzz) replays its regressions, then fuzzes
#     ORCA_FUZZ_SECONDS (default 30) each.
#
# Not in it: the e2e and deploy tests (node and helm drive the same binaries the
# integration tests already run under ASan), the GPU tests, benchmarks. TSan is not
# run: Debian's Abseil and gRPC are not TSan-instrumented, so every absl::Mutex would
# look like no synchronization at all (see docs/DEVELOPING.md).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SAN_DIR="${ORCA_SAN_BUILD_DIR:-$ROOT/build-asan}"
say() { printf '\033[1;34m[sanitize]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[sanitize]\033[0m %s\n' "$*" >&2; exit 1; }

# Paths relative to the checkout in ccache's keys, so a clean clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
command -v clang++ >/dev/null || die "clang++ is not installed (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)"
say "configuring the ASan+UBSan build in $SAN_DIR"
mkdir -p "$SAN_DIR"
if ! CC=clang CXX=clang++ cmake -S "$ROOT" -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS=-gline-tables-only -DCMAKE_CXX_FLAGS=-gline-tables-only \
  -DORCA_SANITIZE=address,undefined -DORCA_FUZZ=ON -DORCA_FUZZ_SECONDS="${ORCA_FUZZ_SECONDS:-30}" \
  -DORCA_ENABLE_CUDA=OFF -DORCA_BUILD_BENCH=OFF >"$SAN_DIR/configure.log" 2>&1; then
  tail -40 "$SAN_DIR/configure.log" >&2
  die "configure failed (log: $SAN_DIR/configure.log)"
fi
say "building ($(nproc) cores)"
ninja -C "$SAN_DIR"

# Leaks are findings; third-party one-time allocations are suppressed by name only.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$ROOT/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
say "unit and integration tests under ASan+UBSan"
ctest --test-dir "$SAN_DIR" --output-on-failure -j2 --timeout 900 -L 'unit|integration' "$@"
say "fuzzing (${ORCA_FUZZ_SECONDS:-30} s per target)"
ctest --test-dir "$SAN_DIR" --output-on-failure -j2 -L fuzz
