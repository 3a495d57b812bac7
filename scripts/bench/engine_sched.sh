#!/usr/bin/env bash
# Orca issue 3, benchmark part 2: the §6.2 trace on the REAL CPU engine (in process, the
# simulation loop's virtual clock advanced by each measured Step()), orca(max_bs) vs the
# request-level baseline. Two traces:
#   paper/      prompt U(32,512), output U(1,128): the paper's trace exactly;
#   gpu-ratio/  prompt U(2,32): on this CPU a 272-token prefill costs ~30 decode steps, on
#               the paper's A100 ~2-3; prompts 1/16 as long restore a GPU's prefill:decode
#               cost ratio, so the scheduling effect the paper measures is what varies.
# About 6 + 4 minutes on 2 cores.
#
#   scripts/bench/engine_sched.sh [OUT_DIR] [extra orca_engine_sched_bench flags...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:-$ROOT/bench-out/engine-sched}"
shift || true
require_bins orca orca_engine_sched_bench
machine_note
run "$BIN/orca_engine_sched_bench" --preset 4m --threads 1 --num-requests 150 \
  --configs orca:8,orca:32,request-level:1,request-level:8 --rates 2,4,6,8,11,15,20 \
  --saturation-latency-ms 200 --out "$OUT/paper" "$@"
machine_note
run "$BIN/orca_engine_sched_bench" --preset 4m --threads 1 --num-requests 400 \
  --min-prompt-tokens 2 --max-prompt-tokens 32 \
  --configs orca:8,orca:32,request-level:1,request-level:8 --rates 10,20,30,40,50,60,80,100,130 \
  --saturation-latency-ms 5 --out "$OUT/gpu-ratio" "$@"
