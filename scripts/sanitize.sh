#!/usr/bin/env bash
# The sanitizer stage of the tests (scripts/test.sh runs it after the main suite;
# alone: scripts/sanitize.sh, after scripts/bootstrap.sh has installed everything).
#
#  1. An ASan + UBSan build with clang (build-asan/; every UBSan finding and every
#     leak is fatal) in which the unit and integration tests in the *_TESTS arrays
#     below run, with the real orca-scheduler / orca-worker processes the integration
#     tests start built the same way (docs/DEVELOPING.md says what runs there, what
#     does not, and why). A report from any process (a test or a process it started)
#     fails the stage and is printed.
#  2. Every libFuzzer target (tests/fuzz) replays its regressions, then explores:
#     ORCA_FUZZ_SECONDS each (default 30), or with ORCA_FUZZ_SECONDS=0 a reproducible
#     ORCA_FUZZ_RUNS inputs from random seed ORCA_FUZZ_SEED (scripts/test.sh: CI).
#
# TSan runs in its own stage, scripts/tsan.sh (after this one in scripts/test.sh): it needs
# an Abseil built with -fsanitize=thread, which it builds from Debian's source.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SAN_DIR="${ORCA_SAN_BUILD_DIR:-$ROOT/build-asan}"
say() { printf '\033[1;34m[sanitize]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[sanitize]\033[0m %s\n' "$*" >&2; exit 1; }

# Paths relative to the checkout in ccache's keys, so a clean clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
command -v clang++ >/dev/null || die "clang++ is not installed (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)"
# The sanitizer runtimes symbolize reports with llvm-symbolizer (package llvm-14, installed by
# scripts/bootstrap.sh); without it every frame is "<null>".
SYMBOLIZER="$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)"
[ -z "$SYMBOLIZER" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ] && SYMBOLIZER=/usr/lib/llvm-14/bin/llvm-symbolizer
[ -n "$SYMBOLIZER" ] || die "llvm-symbolizer is not installed (scripts/bootstrap.sh installs llvm-14): reports would name no function or file"
say "configuring the ASan+UBSan build in $SAN_DIR"
mkdir -p "$SAN_DIR"
if ! CC=clang CXX=clang++ cmake -S "$ROOT" -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS=-gline-tables-only -DCMAKE_CXX_FLAGS=-gline-tables-only \
  -DORCA_SANITIZE=address,undefined -DORCA_FUZZ=ON -DORCA_FUZZ_SECONDS="${ORCA_FUZZ_SECONDS:-30}" \
  -DORCA_FUZZ_RUNS="${ORCA_FUZZ_RUNS:-0}" -DORCA_FUZZ_SEED="${ORCA_FUZZ_SEED:-1}" \
  -DORCA_ENABLE_CUDA=OFF -DORCA_BUILD_BENCH=OFF -DORCA_TEST_TIMEOUT_SCALE=4 >"$SAN_DIR/configure.log" 2>&1; then
  tail -40 "$SAN_DIR/configure.log" >&2
  die "configure failed (log: $SAN_DIR/configure.log)"
fi
# What runs under ASan + UBSan: the C++ tests labelled unit or integration, except those
# in NOT_RUN below. The text parity tests also run their fixtures (write_synthetic_tokenizers
# and node reference scripts), which ctest pulls in by itself.
PARSER_TESTS=(formats_test tokenizer_test chat_template_test jinja_budget_test gguf_tokenizer_test incremental_detokenizer_test
  stop_matcher_test regex_test regex_limits_test json_parse_test synthetic_tokenizer_test gateway_protocol_test loadgen_test
  tokenizer_parity_test chat_template_parity_test)
CORE_TESTS=(common_test sched_test sim_test engine_test gloo_communicator_test prompt_logprobs_test kernels_test
  kernels_cuda_emulated_test structured_test structured_sampling_test structured_limits_test metrics_test metrics_promtool_test
  grafana_dashboard_metrics_test)
SERVICE_TESTS=(admin_http_server_test scheduler_service_test sampling_proto_test results_writer_test
  remote_engine_client_test control_convert_test gateway_pipeline_test gateway_http_test gateway_grpc_test
  gateway_drain_test gateway_json_depth_test operator_render_test operator_api_test)
INTEGRATION_TESTS=(pipeline_test failure_test operator_binary_test operator_rbac_test)
# Built too: the processes the integration tests start, and the parity tests' fixture.
HELPERS=(orca-scheduler orca-worker orca-operator write_synthetic_tokenizers)
# NOT_RUN (labelled unit or integration, not run under sanitizers), and why:
#  - netns_harness_test, kube_emulation_test, rendered_layout_test, rendered_layout_keyed_test:
#    node scripts that start whole stacks (gateway, scheduler, workers, operator) in network
#    namespaces. Left out for the CI time budget: they would add orca-gateway, the orca CLI
#    and every other binary to this build and start several stacks each at ASan speed (not
#    tried). The same code runs here in-process (gateway_*, scheduler_service_test,
#    remote_engine_client_test) and as real processes (pipeline_test, failure_test,
#    operator_binary_test, operator_rbac_test).
#  - grafana_dashboards_typecheck, text_parity_*_reference, bench_scripts_test,
#    include_floors_test: node or bash only, no Orca C++ code (the reference scripts still
#    run here as the parity tests' fixtures).
#  - docs_services_flags: node reading every binary's --help (the flag parser runs here in
#    common_test); it would add orca-gateway and the orca CLI to this build.
UNIT_TESTS=("${PARSER_TESTS[@]}" "${CORE_TESTS[@]}" "${SERVICE_TESTS[@]}" "${INTEGRATION_TESTS[@]}")
FUZZERS=(openai_request_fuzzer gguf_fuzzer safetensors_fuzzer tokenizer_json_fuzzer tokenize_text_fuzzer
  chat_template_fuzzer prometheus_text_fuzzer sse_parser_fuzzer structured_compile_fuzzer)
say "building ($(nproc) cores): ${#UNIT_TESTS[@]} tests, ${#FUZZERS[@]} fuzz targets"
build_start=$SECONDS
ninja -C "$SAN_DIR" "${UNIT_TESTS[@]}" "${HELPERS[@]}" "${FUZZERS[@]}"
say "built in $((SECONDS - build_start)) s"

# Leaks are findings; third-party one-time allocations are suppressed by name only.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
ASAN_OPTIONS="$ASAN_OPTIONS:external_symbolizer_path=$SYMBOLIZER"
export LSAN_OPTIONS="suppressions=$ROOT/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:external_symbolizer_path=$SYMBOLIZER"
# Scratch files under the build tree, as in scripts/test.sh.
export TEST_TMPDIR="$SAN_DIR/test-tmp" TMPDIR="$SAN_DIR/test-tmp"
rm -rf "$TEST_TMPDIR" && mkdir -p "$TEST_TMPDIR"
# The scheduler property tests run 20% of their randomized workloads here (each feature
# combination still runs; the full count runs in the main suite): ASan makes each one
# several times slower (all of them took 464 s at load 10-12, near the 480 s timeout).
export ORCA_PROPERTY_WORKLOADS_PERCENT=20
# Every sanitizer report, from a test or from a process it started (whose output goes to a
# log the test may never show), lands in REPORTS: any file there fails the stage.
REPORTS="$SAN_DIR/sanitizer-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
say "unit and integration tests under ASan+UBSan (timeouts x4)"
regex="^($(IFS='|'; echo "${UNIT_TESTS[*]}"))\$"
test_start=$SECONDS
status=0
ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$REPORTS/asan" UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$REPORTS/ubsan" \
  ctest --test-dir "$SAN_DIR" --output-on-failure -j2 --timeout 900 -R "$regex" || status=$?
say "tests ran in $((SECONDS - test_start)) s"
# A file with only a warning (kernels_cuda_emulated_test's fibers: "ASan doesn't fully
# support makecontext/swapcontext") is shown but is not a finding.
findings=0
for f in "$REPORTS"/*; do
  [ -e "$f" ] || continue
  if grep -qE 'ERROR: |runtime error|SUMMARY: ' "$f"; then
    findings=$((findings + 1))
    printf '\033[1;31m[sanitize]\033[0m finding %s:\n' "$f" >&2
  else
    printf '\033[1;34m[sanitize]\033[0m warning (not a finding) %s:\n' "$f" >&2
  fi
  cat "$f" >&2
done
[ "$findings" = 0 ] || die "$findings sanitizer report(s) above (from the tests or the processes they started)"
[ "$status" = 0 ] || die "tests failed under ASan+UBSan"
if [ "${ORCA_FUZZ_SECONDS:-30}" != 0 ]; then
  say "fuzzing (${ORCA_FUZZ_SECONDS:-30} s per target)"
else
  say "fuzzing (about ${ORCA_FUZZ_RUNS:-0} inputs per target from random seed ${ORCA_FUZZ_SEED:-1})"
fi
ctest --test-dir "$SAN_DIR" --output-on-failure -j2 -L fuzz
