#!/usr/bin/env bash
# Issue 14: the scheduling options beyond the paper against the paper's policy, over real
# `orca serve` stacks (HTTP, SSE), with the same sweep machinery as fig10.sh: rate by rate,
# each configuration on a fresh stack (interleaved), the same synthetic ~3.5M Llama.
#  1. paper trace: orca (Algorithm 1), orca + chunked prefill, paged + chunked (a fixed
#     32-token budget, and that budget with the time budget --max-prefill-slowdown 2 and
#     1.5), request-level baseline -- throughput at equal median normalized latency, TTFT
#     and ITL p50/p99, KV usage, preemptions;
#  2. chat trace (shared 200-500-token system prompt, multi-turn conversations): the same
#     paper policy with and without prefix caching, paged + chunked + prefix caching, the
#     baseline -- TTFT and the hit rate.
#
#   scripts/bench/beyond_paper.sh [OUT_DIR] [extra `orca bench sweep` flags...]
#
# Environment: PAPER_RATES, CHAT_RATES (req/s, increasing), NUM_REQUESTS (per point).
# CHAT_CLOSED_LOOP=1 runs the chat sweep closed loop (`--chat-closed-loop`): a conversation
# starts per Poisson arrival (CHAT_RATES are then conversations/s), each next turn is sent when
# the previous one completed (plus CHAT_THINK_TIME seconds, default 0) and carries the token
# ids the server generated (return_token_ids), so replies hit their decode-filled cached blocks.
# Every point runs to completion: a point's time bound is what its requests need to be sent
# at the lowest rate plus 60 s for the last ones to finish (CHAT_MAX_DURATION /
# PAPER_MAX_DURATION override it); a rate beyond saturation is the last of its curve
# (--saturation-latency-ms), so the bound does not hold the sweep for long there.
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
NUM_REQUESTS="${NUM_REQUESTS:-40}"
PAPER_RATES="${PAPER_RATES:-4,8,12}"
CHAT_RATES="${CHAT_RATES:-2,6,12,24,48}"
# Seconds to send NUM_REQUESTS at the lowest of the rates "$1", plus 60.
bound_for() { awk -v n="$NUM_REQUESTS" -v rates="$1" 'BEGIN { split(rates, r, ","); print int(n / r[1] + 0.999) + 60 }'; }
PAPER_MAX_DURATION="${PAPER_MAX_DURATION:-$(bound_for "$PAPER_RATES")}"
CHAT_MAX_DURATION="${CHAT_MAX_DURATION:-$(bound_for "$CHAT_RATES")}"
CHAT_LOOP_FLAGS=()
if [ "${CHAT_CLOSED_LOOP:-0}" = 1 ]; then
  CHAT_LOOP_FLAGS=(--chat-closed-loop --chat-think-time "${CHAT_THINK_TIME:-0}")
fi
grep -m1 'model name' /proc/cpuinfo
machine_note
run "$BIN/orca" bench sweep --model "$MODEL_DIR" --out "$OUT/paper" --trace paper \
  --configs orca:8,orca:16:chunk=32,paged:16:chunk=32,paged:16:chunk=32:slowdown=2,paged:16:chunk=32:slowdown=1.5,request-level:8 \
  --rates "$PAPER_RATES" --num-requests "$NUM_REQUESTS" --max-duration "$PAPER_MAX_DURATION" --threads 1 \
  --saturation-latency-ms 200 --no-progress "$@"
machine_note
run "$BIN/orca" bench sweep --model "$MODEL_DIR" --out "$OUT/chat" --trace chat \
  --configs orca:16,orca:16:prefix,paged:16:chunk=32:prefix,request-level:8 \
  --rates "$CHAT_RATES" --num-requests "$NUM_REQUESTS" --max-duration "$CHAT_MAX_DURATION" --threads 1 \
  --min-new-tokens 16 --max-new-tokens 64 --saturation-latency-ms 200 --no-progress "${CHAT_LOOP_FLAGS[@]}" "$@"
machine_note
