#!/usr/bin/env bash
# The sanitizer stage of the tests (scripts/test.sh runs it after the main suite;
# alone: scripts/sanitize.sh, after scripts/bootstrap.sh has installed everything).
#
#  1. An ASan + UBSan build with clang (build-asan/; every UBSan finding and every
#     leak is fatal) in which the tests in the *_TESTS arrays below run
#     (docs/DEVELOPING.md says what runs there and what does not, and why): the code
#     that reads untrusted input (model files, tokenizers, chat templates, OpenAI
#     request parsing, the load generator's parsers).
#  2. Every libFuzzer target (tests/fuzz) replays its regressions, then explores:
#     ORCA_FUZZ_SECONDS each (default 30), or with ORCA_FUZZ_SECONDS=0 a reproducible
#     ORCA_FUZZ_RUNS inputs from random seed ORCA_FUZZ_SEED (scripts/test.sh: CI).
#
# TSan is not run: Debian's Abseil and gRPC are not TSan-instrumented, so every
# absl::Mutex would look like no synchronization at all (see docs/DEVELOPING.md).
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
  -DORCA_FUZZ_RUNS="${ORCA_FUZZ_RUNS:-0}" -DORCA_FUZZ_SEED="${ORCA_FUZZ_SEED:-1}" \
  -DORCA_ENABLE_CUDA=OFF -DORCA_BUILD_BENCH=OFF >"$SAN_DIR/configure.log" 2>&1; then
  tail -40 "$SAN_DIR/configure.log" >&2
  die "configure failed (log: $SAN_DIR/configure.log)"
fi
PARSER_TESTS=(formats_test tokenizer_test chat_template_test gguf_tokenizer_test incremental_detokenizer_test
  stop_matcher_test regex_test synthetic_tokenizer_test gateway_protocol_test loadgen_test)
UNIT_TESTS=("${PARSER_TESTS[@]}")
FUZZERS=(openai_request_fuzzer gguf_fuzzer safetensors_fuzzer tokenizer_json_fuzzer tokenize_text_fuzzer
  chat_template_fuzzer prometheus_text_fuzzer sse_parser_fuzzer)
say "building ($(nproc) cores): ${#UNIT_TESTS[@]} tests, ${#FUZZERS[@]} fuzz targets"
ninja -C "$SAN_DIR" "${UNIT_TESTS[@]}" "${FUZZERS[@]}"

# Leaks are findings; third-party one-time allocations are suppressed by name only.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$ROOT/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
say "unit tests under ASan+UBSan"
regex="^($(IFS='|'; echo "${UNIT_TESTS[*]}"))\$"
ctest --test-dir "$SAN_DIR" --output-on-failure -j2 --timeout 900 -R "$regex"
if [ "${ORCA_FUZZ_SECONDS:-30}" != 0 ]; then
  say "fuzzing (${ORCA_FUZZ_SECONDS:-30} s per target)"
else
  say "fuzzing (about ${ORCA_FUZZ_RUNS:-0} inputs per target from random seed ${ORCA_FUZZ_SEED:-1})"
fi
ctest --test-dir "$SAN_DIR" --output-on-failure -j2 -L fuzz
