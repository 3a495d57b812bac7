#!/usr/bin/env bash
# The ThreadSanitizer stage of the tests (scripts/test.sh runs it after scripts/sanitize.sh;
# ORCA_SKIP_TSAN=1 skips it; alone: scripts/tsan.sh, after scripts/bootstrap.sh).
#
#  1. Abseil with -fsanitize=thread: Debian's own source of the installed libabsl-dev (same
#     version, same Debian patches, so the same inline namespace and options), fetched with
#     apt-get source from the archive libabsl-dev came from, built static with clang into
#     build-tsan/absl/ (once per tree: a stamp; ccache makes another clone's build quick).
#     Its installed headers must be byte-identical to /usr/include/absl, which gRPC was built
#     against: checked, the stage fails otherwise.
#  2. A clang TSan build of Orca (build-tsan/, -DORCA_SANITIZE=thread) linked against that
#     Abseil. The executables export their symbols (-rdynamic), so the absl::Mutex calls of
#     Debian's libgrpc.so bind to the instrumented copy in the executable instead of
#     libabsl_synchronization.so (ELF interposition; checked below with LD_DEBUG): gRPC's
#     locks are then visible to TSan as well as Orca's.
#  3. The threading tests of the scheduler, the worker and the gateway (the *_TESTS arrays
#     below), with the real orca-scheduler / orca-worker processes the integration tests
#     start built the same way. Every report of every process is kept and sorted by
#     tests/tsan/triage.awk: a race or lock-order inversion in which Orca's code takes part
#     fails the stage; one about gRPC's internal state only (gRPC's own atomics are invisible
#     to TSan) is counted and kept, not failed. A self-check (tests/tsan/tsan_canary.cc) first
#     proves that races are seen and absl::Mutex / OpenMP barriers are not taken for races.
#
# docs/DEVELOPING.md says what runs here, what is not failed, and why.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TSAN_DIR="${ORCA_TSAN_BUILD_DIR:-$ROOT/build-tsan}"
ABSL_DIR="$TSAN_DIR/absl"
say() { printf '\033[1;34m[tsan]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[tsan]\033[0m %s\n' "$*" >&2; exit 1; }

# Paths relative to the checkout in ccache's keys, so a clean clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
command -v clang++ >/dev/null || die "clang++ is not installed (scripts/bootstrap.sh installs clang and libclang-rt-14-dev)"
command -v dpkg-source >/dev/null || die "dpkg-source is not installed (scripts/bootstrap.sh installs dpkg-dev)"
# The sanitizer runtimes symbolize reports with llvm-symbolizer (package llvm-14, installed by
# scripts/bootstrap.sh); without it every frame is "<null>".
SYMBOLIZER="$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)"
[ -z "$SYMBOLIZER" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ] && SYMBOLIZER=/usr/lib/llvm-14/bin/llvm-symbolizer
[ -n "$SYMBOLIZER" ] || die "llvm-symbolizer is not installed (scripts/bootstrap.sh installs llvm-14): reports would name no function or file"
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# ---- 1. Abseil with -fsanitize=thread --------------------------------------------------
# Debian builds its libabsl with CMAKE_BUILD_TYPE=None (no NDEBUG) and C++17: so does this.
ABSL_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -O2 -gline-tables-only"
ABSL_VERSION="$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null)" \
  || die "libabsl-dev is not installed (scripts/bootstrap.sh installs it)"
ABSL_PREFIX="$ABSL_DIR/install"
absl_stamp="$ABSL_VERSION|$(clang++ --version | sed -n 1p)|$ABSL_FLAGS"

# fetch_absl_source DIR: Debian's source package of the installed libabsl-dev, unpacked
# (patches applied) under DIR. apt runs with its own lists under DIR: the machine's
# sources.list is not changed. The deb-src lines are the archives apt-cache policy names
# for libabsl-dev; apt checks the files against the archive's signed index.
fetch_absl_source() {
  local dir="$1" apt="$1/apt" keyring=/usr/share/keyrings/debian-archive-keyring.gpg signed=""
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d"
  [ -f "$keyring" ] && signed="[signed-by=$keyring] "
  apt-cache policy libabsl-dev | awk -v s="$signed" \
    '$2 ~ /^https?:/ { n = split($3, a, "/"); if (n == 2) print "deb-src " s $2 " " a[1] " " a[2] }' \
    | sort -u >"$apt/sources.list"
  [ -s "$apt/sources.list" ] || die "apt-cache policy libabsl-dev names no archive to fetch Abseil's source from"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root -q)
  apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || { cat "$apt/update.log" >&2; die "apt-get update (deb-src) failed"; }
  # The installed version; if the archive moved on to another Debian revision of the same
  # upstream release, that one (the header check below decides whether it is usable).
  local version="$ABSL_VERSION"
  local versions
  versions="$(apt-cache "${opts[@]}" showsrc abseil 2>/dev/null | awk '/^Version:/ { print $2 }')"
  if ! grep -qxF "$version" <<<"$versions"; then
    version="$(grep -F "${ABSL_VERSION%%-*}-" <<<"$versions" | sort -V | tail -1)"
    [ -n "$version" ] || die "no Debian source of abseil ${ABSL_VERSION%%-*} in $(cat "$apt/sources.list")"
    say "source of abseil $ABSL_VERSION is gone from the archive; using $version"
  fi
  rm -rf "$dir/src" && mkdir -p "$dir/src"
  (cd "$dir/src" && apt-get "${opts[@]}" source "abseil=$version" >"$apt/source.log" 2>&1) \
    || { cat "$apt/source.log" >&2; die "apt-get source abseil=$version failed"; }
}

if [ "$(cat "$ABSL_PREFIX/.orca-stamp" 2>/dev/null)" != "$absl_stamp" ]; then
  absl_start=$SECONDS
  say "fetching Debian's source of abseil $ABSL_VERSION"
  fetch_absl_source "$ABSL_DIR"
  src="$(find "$ABSL_DIR/src" -mindepth 1 -maxdepth 1 -type d -name 'abseil-*' | sed -n 1p)"
  [ -n "$src" ] || die "apt-get source unpacked no abseil-* directory in $ABSL_DIR/src"
  say "building Abseil with -fsanitize=thread (static, $ABSL_PREFIX)"
  rm -rf "$ABSL_DIR/build" "$ABSL_PREFIX"
  if ! CC=clang CXX=clang++ cmake -S "$src" -B "$ABSL_DIR/build" -G Ninja "${LAUNCHER[@]}" \
      -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_C_FLAGS="$ABSL_FLAGS" -DCMAKE_CXX_FLAGS="$ABSL_FLAGS" \
      -DCMAKE_INSTALL_PREFIX="$ABSL_PREFIX" >"$ABSL_DIR/configure.log" 2>&1; then
    tail -40 "$ABSL_DIR/configure.log" >&2
    die "configuring Abseil failed (log: $ABSL_DIR/configure.log)"
  fi
  ninja -C "$ABSL_DIR/build" >"$ABSL_DIR/build.log" 2>&1 || { tail -40 "$ABSL_DIR/build.log" >&2; die "building Abseil failed"; }
  cmake --install "$ABSL_DIR/build" >"$ABSL_DIR/install.log" 2>&1 || die "installing Abseil failed"
  # gRPC was compiled against /usr/include/absl: the executables mix its inline code with
  # this build's, which is sound only if the headers (options, inline namespace) are the same.
  if ! diff -r "$ABSL_PREFIX/include/absl" /usr/include/absl >"$ABSL_DIR/headers.diff"; then
    head -40 "$ABSL_DIR/headers.diff" >&2
    die "the TSan Abseil's headers differ from /usr/include/absl (libabsl-dev $ABSL_VERSION): see $ABSL_DIR/headers.diff"
  fi
  echo "$absl_stamp" >"$ABSL_PREFIX/.orca-stamp"
  say "Abseil built in $((SECONDS - absl_start)) s"
else
  say "Abseil with -fsanitize=thread: up to date ($ABSL_PREFIX)"
fi

# ---- 2. Orca with -fsanitize=thread ----------------------------------------------------
say "configuring the TSan build in $TSAN_DIR"
if ! CC=clang CXX=clang++ cmake -S "$ROOT" -B "$TSAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" \
  -DCMAKE_C_FLAGS=-gline-tables-only -DCMAKE_CXX_FLAGS=-gline-tables-only -DORCA_SANITIZE=thread \
  -Dabsl_DIR="$ABSL_PREFIX/lib/cmake/absl" -DORCA_ENABLE_CUDA=OFF -DORCA_BUILD_BENCH=OFF \
  -DORCA_TEST_TIMEOUT_SCALE=4 >"$TSAN_DIR/configure.log" 2>&1; then
  tail -40 "$TSAN_DIR/configure.log" >&2
  die "configure failed (log: $TSAN_DIR/configure.log)"
fi
grep -q "^absl_DIR:.*=$ABSL_PREFIX/lib/cmake/absl\$" "$TSAN_DIR/CMakeCache.txt" \
  || die "the TSan build did not take Abseil from $ABSL_PREFIX (absl_DIR in $TSAN_DIR/CMakeCache.txt)"
# What runs under TSan: the tests whose code runs on several threads (docs/DEVELOPING.md).
#  - the scheduler: core/sched (single-threaded by design, cheap here: 10% of its property
#    workloads), the SchedulerLoop, its gRPC service and the remote engine client;
#  - the worker: WorkerNode's forward/compute/heartbeat threads and ResultsWriter against a
#    real scheduler (remote_engine_client_test), the Gloo communicator, and real
#    orca-scheduler / orca-worker processes (pipeline_test, failure_test);
#  - the gateway: HTTP server and sessions, router and its poller, generation pipeline,
#    streams, drain, gRPC front end (against the FakeScheduler's loop thread), the admin server.
SCHEDULER_TESTS=(sched_test scheduler_service_test remote_engine_client_test)
WORKER_TESTS=(results_writer_test gloo_communicator_test pipeline_test failure_test)
GATEWAY_TESTS=(gateway_pipeline_test gateway_http_test gateway_grpc_test gateway_drain_test admin_http_server_test)
# Other code with threads, cheap here: the operator's controller workers, informers and
# leader election against a fake API server; the metrics registry; orca bench's load
# generator against its fake server; core/common.
OTHER_TESTS=(operator_api_test metrics_test loadgen_test common_test)
TESTS=("${SCHEDULER_TESTS[@]}" "${WORKER_TESTS[@]}" "${GATEWAY_TESTS[@]}" "${OTHER_TESTS[@]}")
# Built too: the processes the integration tests start, and the self-check.
HELPERS=(orca-scheduler orca-worker tsan_canary)
say "building ($(nproc) cores): ${#TESTS[@]} tests"
build_start=$SECONDS
ninja -C "$TSAN_DIR" "${TESTS[@]}" "${HELPERS[@]}"
say "built in $((SECONDS - build_start)) s"

# ---- 3. Run -------------------------------------------------------------------------------
# ignore_noninstrumented_modules: memory accesses that Debian's uninstrumented libraries (gRPC,
# protobuf, libomp, oneDNN) make through TSan's interceptors (malloc, memcpy, sendmsg...) are
# not race candidates; their locks, thread starts and fd hand-offs still count. Orca's code
# stays fully checked, also where gRPC calls it (the self-check's grpc-race).
# Every report is kept (halt_on_error=0, exitcode=0) and sorted by tests/tsan/triage.awk:
# one in which Orca's code takes part fails the stage; one about gRPC's internal state only
# (both sides on gRPC's side, one called from inside the uninstrumented libgrpc, whose atomics
# TSan cannot see) is counted and kept in the log, not failed. docs/DEVELOPING.md has the rule.
export TSAN_OPTIONS="halt_on_error=0:exitcode=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
TSAN_OPTIONS="$TSAN_OPTIONS:external_symbolizer_path=$SYMBOLIZER"
TRIAGE="$ROOT/tests/tsan/triage.awk"
# Scratch files under the build tree, as in scripts/test.sh.
export TEST_TMPDIR="$TSAN_DIR/test-tmp" TMPDIR="$TSAN_DIR/test-tmp"
rm -rf "$TEST_TMPDIR" && mkdir -p "$TEST_TMPDIR"
# core/sched has no threads: a tenth of its randomized property workloads (every feature
# combination still runs; the full count runs in the main suite).
export ORCA_PROPERTY_WORKLOADS_PERCENT=10

# The self-check: a race is seen and judged Orca's (also on a gRPC thread); absl::Mutex and
# OpenMP's barriers are seen as synchronization. A wrong Abseil or no Archer fails here first.
canary="$TSAN_DIR/bin/tsan_canary"
CANARY_DIR="$TSAN_DIR/tsan-canary"
rm -rf "$CANARY_DIR" && mkdir -p "$CANARY_DIR"
for mode in race grpc-race mutex grpc-mutex omp; do
  TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$CANARY_DIR/$mode" "$canary" "$mode" >"$CANARY_DIR/$mode.out" 2>&1 \
    || { cat "$CANARY_DIR/$mode.out" >&2; die "self-check: tsan_canary $mode failed"; }
  verdicts=""
  if compgen -G "$CANARY_DIR/$mode.[0-9]*" >/dev/null; then
    verdicts="$(awk -f "$TRIAGE" "$CANARY_DIR/$mode".[0-9]* | awk '/^@@@/ { print $3 }' | sort -u | tr '\n' ' ')"
  fi
  case "$mode" in
    *race) want="ORCA " ;;
    *) want="" ;;
  esac
  if [ "$verdicts" != "$want" ]; then
    cat "$CANARY_DIR/$mode".* >&2
    die "self-check: tsan_canary $mode gave reports '${verdicts}', expected '${want}' (tests/tsan/tsan_canary.cc)"
  fi
done
say "self-check passed: races seen (also on gRPC threads); absl::Mutex and OpenMP barriers seen as synchronization"

# The interposition: gRPC's calls to absl::Mutex::Lock must bind to the executable's
# instrumented copy, not to Debian's libabsl_synchronization.so.
bindings="$CANARY_DIR/ld-bindings"
LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$bindings" "$canary" mutex >/dev/null 2>&1 || true
grep -hq 'libgrpc\.so[^ ]* \[0\] to [^ ]*tsan_canary \[0\]: normal symbol `_ZN4absl[^ ]*5Mutex4LockEv' "$bindings".* \
  || die "libgrpc.so's absl::Mutex::Lock does not bind to the instrumented copy in the executable (see $bindings.*)"
say "interposition checked: libgrpc's absl::Mutex::Lock binds to the executable's instrumented Abseil"

# Every report, from a test or from a process it started (whose output goes to a log the
# test may never show), lands in REPORTS.
REPORTS="$TSAN_DIR/sanitizer-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
say "threading tests under TSan (timeouts x4): ${TESTS[*]}"
regex="^($(IFS='|'; echo "${TESTS[*]}"))\$"
test_start=$SECONDS
status=0
TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$REPORTS/tsan" \
  ctest --test-dir "$TSAN_DIR" --output-on-failure -j2 --timeout 1200 -R "$regex" || status=$?
say "tests ran in $((SECONDS - test_start)) s"
triaged="$TSAN_DIR/tsan-triage.txt"
if compgen -G "$REPORTS/*" >/dev/null; then awk -f "$TRIAGE" "$REPORTS"/* >"$triaged"; else : >"$triaged"; fi
library="$(grep -c '^@@@ .* LIBRARY$' "$triaged" || true)"
findings="$(grep -c '^@@@ .* ORCA$' "$triaged" || true)"
if [ "$library" != 0 ]; then
  say "$library report(s) about gRPC's internal state only, not failed (all in $triaged); their top frames:"
  awk '/^@@@ .* LIBRARY$/ { p = 1; next } /^@@@/ { p = 0 } p && /^SUMMARY/' "$triaged" | sed 's/ (BuildId[^)]*)//' \
    | sort | uniq -c | sort -rn | sed -n 1,20p
fi
if [ "$findings" != 0 ]; then
  awk '/^@@@ .* ORCA$/ { p = 1; print; next } /^@@@/ { p = 0 } p' "$triaged" >&2
  die "$findings TSan report(s) in Orca's code above (from the tests or the processes they started)"
fi
[ "$status" = 0 ] || die "tests failed under TSan"
say "no data race or lock-order inversion in Orca's code"
