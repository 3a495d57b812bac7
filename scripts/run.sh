#!/usr/bin/env bash
# README command (a): set everything up on a fresh Debian 12 machine and run
# the whole stack (gateway, scheduler, worker) on loopback on the default
# model (a synthetic ~25M-parameter Llama, written on first run). Extra
# arguments go to `orca serve` (e.g. --model PATH --pipeline-parallel 2).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ORCA_BUILD_DIR:-$ROOT/build}"
ORCA_NINJA_TARGETS="orca orca-gateway orca-scheduler orca-worker" "$ROOT/scripts/bootstrap.sh"
exec "$BUILD_DIR/bin/orca" serve "$@"
