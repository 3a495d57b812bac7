#!/usr/bin/env bash
# The paper's Fig. 10 on this machine, end to end over HTTP: for each (policy, max_bs),
# `orca serve` on loopback with a synthetic ~3.7M-parameter Llama, the §6.2 trace replayed
# by `orca bench` at each arrival rate, then fig10.png (gnuplot) and the throughput ratio at
# equal median normalized latency. About 10 minutes on 2 cores; every run is bounded.
#
#   scripts/bench/fig10.sh [OUT_DIR] [extra `orca bench sweep` flags...]
#   ORCA_BUILD_DIR=build-x scripts/bench/fig10.sh /tmp/fig10 --rates 2,4,8
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:-$ROOT/bench-out/fig10}"
shift || true
require_bins orca orca-gateway orca-scheduler orca-worker
MODEL_DIR="${ORCA_BENCH_MODEL_DIR:-/tmp/orca-bench-models}/llama-4m"
if [ ! -f "$MODEL_DIR/tokenizer.json" ]; then
  # hidden 256, 4 layers, 4 heads (2 KV), FFN 704, vocab 2048: ~3.7M parameters, bf16.
  run "$BIN/orca" model synth --out "$MODEL_DIR" --preset tiny --hidden-size 256 --num-layers 4 \
    --num-heads 4 --num-kv-heads 2 --intermediate-size 704 --vocab-size 2048
fi
machine_note
# One compute thread per worker: with 2 shared cores, a second OpenMP thread mostly waits.
run "$BIN/orca" bench sweep --model "$MODEL_DIR" --out "$OUT" \
  --configs orca:8,orca:32,request-level:1,request-level:8 \
  --rates 2,4,6,8,11,15,20 --num-requests 100 --max-duration 60 --threads 1 \
  --saturation-latency-ms 200 --no-progress "$@"
