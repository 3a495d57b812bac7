#!/usr/bin/env bash
# Orca issue 4 benchmark: the §6.2 trace through 2 pipeline stages (separate orca-worker
# processes) with 1 vs 2 batches in flight, and the control-plane overhead per iteration,
# on the ~3.7M model and on the 0.13M tiny model (compute negligible: overhead exposed).
#
#   scripts/bench/pipeline.sh [OUT_DIR] [extra orca_pipeline_bench flags...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:-$ROOT/bench-out/pipeline}"
shift || true
require_bins orca orca-gateway orca-scheduler orca-worker orca_pipeline_bench
machine_note
run "$BIN/orca_pipeline_bench" --preset 4m --stages 2 --n-workers 1,2 --rates 4,12,30 \
  --num-requests 120 --max-duration 90 --threads 1 --out "$OUT/4m" "$@"
run "$BIN/orca_pipeline_bench" --preset tiny --stages 2 --n-workers 1,2 --rates 8 \
  --num-requests 60 --max-duration 60 --threads 1 --out "$OUT/tiny" "$@"
# References without a pipeline: one worker process holding every layer.
run "$BIN/orca_pipeline_bench" --preset 4m --stages 1 --n-workers 1 --rates 4,30 \
  --num-requests 120 --max-duration 90 --threads 1 --out "$OUT/4m-1stage" "$@"
run "$BIN/orca_pipeline_bench" --preset tiny --stages 1 --n-workers 1 --rates 8 \
  --num-requests 60 --max-duration 60 --threads 1 --out "$OUT/tiny-1stage" "$@"
