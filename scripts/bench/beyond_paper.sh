#!/usr/bin/env bash
# Issue 14: the scheduling options beyond the paper against the paper's policy, over real
# `orca serve` stacks (HTTP, SSE), with the same sweep machinery as fig10.sh: rate by rate,
# each configuration on a fresh stack (interleaved), the same synthetic ~3.5M Llama.
#  1. paper trace: orca (Algorithm 1), orca + chunked prefill, paged +
#     chunked, request-level baseline -- throughput at equal median normalized latency,
#     TTFT and ITL p50/p99, KV usage, preemptions;
#  2. chat trace (shared 200-500-token system prompt, multi-turn conversations): the same
#     paper policy with and without prefix caching, paged + chunked + prefix caching, the
#     baseline -- TTFT and the hit rate.
#
#   scripts/bench/beyond_paper.sh [OUT_DIR] [extra `orca bench sweep` flags...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:-$ROOT/bench-out/beyond_paper}"
shift || true
require_bins orca orca-gateway orca-scheduler orca-worker
MODEL_DIR="${ORCA_BENCH_MODEL_DIR:-/tmp/orca-bench-models}/llama-4m"
if [ ! -f "$MODEL_DIR/tokenizer.json" ]; then
  run "$BIN/orca" model synth --out "$MODEL_DIR" --preset tiny --hidden-size 256 --num-layers 4 \
    --num-heads 4 --num-kv-heads 2 --intermediate-size 704 --vocab-size 2048
fi
grep -m1 'model name' /proc/cpuinfo
machine_note
run "$BIN/orca" bench sweep --model "$MODEL_DIR" --out "$OUT/paper" --trace paper \
  --configs orca:8,orca:16:chunk=32,paged:16:chunk=32,request-level:8 \
  --rates ${PAPER_RATES:-4,8,12} --num-requests ${NUM_REQUESTS:-40} --max-duration 40 --threads 1 \
  --saturation-latency-ms 200 --no-progress "$@"
machine_note
run "$BIN/orca" bench sweep --model "$MODEL_DIR" --out "$OUT/chat" --trace chat \
  --configs orca:16,orca:16:prefix,paged:16:chunk=32:prefix,request-level:8 \
  --rates ${CHAT_RATES:-2,6} --num-requests ${NUM_REQUESTS:-40} --max-duration 40 --threads 1 \
  --min-new-tokens 16 --max-new-tokens 64 --saturation-latency-ms 200 --no-progress "$@"
machine_note
