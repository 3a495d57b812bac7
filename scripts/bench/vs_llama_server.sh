#!/usr/bin/env bash
# Issue 12: `orca serve` against llama.cpp's `llama-server -np NP -cb` on the same GGUF file,
# as a user would run either, under `orca bench` (HTTP, SSE, token-id prompts).
#  1. memory under load: each server in turn serves the same bounded burst of the paper
#     trace; then the total RSS / PSS / peak RSS of its processes (orca serve: the supervisor,
#     gateway, scheduler and worker; llama-server: one process) is read from /proc;
#  2. serving: `orca bench sweep` with an Orca curve and a llama-server curve, rate by rate,
#     each on a fresh server (interleaved), paper trace and a decode-heavy trace; the ratio
#     is Orca's throughput over llama-server's at equal median normalized latency.
# llama.cpp is not part of Orca: build it yourself outside the repository and pass its
# llama-server binary.
#
#   LLAMA_SERVER=/path/to/llama-server scripts/bench/vs_llama_server.sh MODEL.gguf [OUT_DIR]
#   (RATES, DECODE_RATES, NUM_REQUESTS, MAX_DURATION, NP, SLOT_CTX, MAX_BS, THREADS, SKIP_MEMORY=1,
#    SKIP_SWEEP=1 override the defaults below)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
MODEL="${1:?usage: LLAMA_SERVER=... $0 MODEL.gguf [OUT_DIR]}"
OUT="${2:-$ROOT/bench-out/vs_llama_server}"
LLAMA_SERVER="${LLAMA_SERVER:-llama-server}"
NP="${NP:-32}"
# llama-server gives each of its NP slots a fixed SLOT_CTX tokens of KV (-c NP*SLOT_CTX, allocated
# at start); orca serve shares --n-slots tokens (default 8192) among all requests, block by block.
SLOT_CTX="${SLOT_CTX:-1024}"
MAX_BS="${MAX_BS:-32}"
THREADS="${THREADS:-2}"
NUM_REQUESTS="${NUM_REQUESTS:-30}"
MAX_DURATION="${MAX_DURATION:-180}"
require_bins orca orca-gateway orca-scheduler orca-worker
command -v "$LLAMA_SERVER" >/dev/null || { echo "LLAMA_SERVER=$LLAMA_SERVER is not executable" >&2; exit 1; }
mkdir -p "$OUT"
grep -m1 'model name' /proc/cpuinfo
machine_note
ls -l "$MODEL"

PORT="${ORCA_VS_PORT:-18493}"
# tree_pids PID: PID and its descendants.
tree_pids() {
  local p
  echo "$1"
  for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_pids "$p"; done
}
# mem_row NAME PID: total VmRSS, PSS and VmHWM (peak) of the process tree, MiB.
mem_row() {
  local rss=0 pss=0 hwm=0 n=0 p
  for p in $(tree_pids "$2"); do
    rss=$((rss + $(awk '$1 == "VmRSS:" {print $2}' /proc/"$p"/status)))
    hwm=$((hwm + $(awk '$1 == "VmHWM:" {print $2}' /proc/"$p"/status)))
    pss=$((pss + $(awk '$1 == "Pss:" {print $2}' /proc/"$p"/smaps_rollup)))
    n=$((n + 1))
  done
  awk -v name="$1" -v r=$rss -v p=$pss -v h=$hwm -v n=$n \
    'BEGIN {printf "%-14s %9.1f %9.1f %9.1f %9d\n", name, r/1024, p/1024, h/1024, n}'
}
# serve_and_measure NAME READY_PATH CMD...: start, wait, burst, measure, stop.
serve_and_measure() {
  local name="$1" ready="$2"
  shift 2
  printf '$'; printf ' %q' "$@"; printf '\n'
  "$@" >"$OUT/memory-$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$PORT$ready" >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || { tail -20 "$OUT/memory-$name.log"; exit 1; }
    sleep 0.5
  done
  # llama-server's /health can say ok while completions still answer 503 "Loading model".
  for _ in $(seq 1 600); do
    curl -sf -m 60 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt": [1], "max_tokens": 1}' >/dev/null 2>&1 && break
    sleep 0.5
  done
  mem_row "$name (idle)" $pid
  "$BIN/orca" bench --url "http://127.0.0.1:$PORT" --trace paper --rate 4 --num-requests "$NUM_REQUESTS" \
    --max-duration "$MAX_DURATION" --no-progress --out "$OUT/memory-$name-bench" >"$OUT/memory-$name-bench.txt" 2>&1 ||
    { echo "orca bench against $name failed:"; tail -20 "$OUT/memory-$name-bench.txt"; }
  grep -E 'completed|throughput' "$OUT/memory-$name-bench.txt" | sed -n 1,3p || true
  mem_row "$name (loaded)" $pid
  kill -TERM $pid
  wait $pid || true
}

if [ -z "${SKIP_MEMORY:-}" ]; then
  echo "# memory: $NUM_REQUESTS paper-trace requests at 4 req/s, then the process tree"
  printf '%-14s %9s %9s %9s %9s\n' server "RSS MiB" "PSS MiB" "peak MiB" processes
  serve_and_measure orca /ready "$BIN/orca" serve --model "$MODEL" --port "$PORT" --grpc-port 0 \
    --threads "$THREADS" --max-bs "$MAX_BS"
  serve_and_measure llama-server /health "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$PORT" \
    -np "$NP" -cb -c $((NP * SLOT_CTX)) -t "$THREADS" -tb "$THREADS"
  machine_note
fi

if [ -z "${SKIP_SWEEP:-}" ]; then
  sweep=(--model "$MODEL" --configs "orca:$MAX_BS,llama-server:$NP" --llama-server "$(command -v "$LLAMA_SERVER")"
         --llama-server-slot-ctx "$SLOT_CTX"
         --threads "$THREADS" --num-requests "$NUM_REQUESTS" --max-duration "$MAX_DURATION"
         --saturation-latency-ms 2000 --no-progress)
  run "$BIN/orca" bench sweep "${sweep[@]}" --out "$OUT/paper" --trace paper --rates "${RATES:-0.1,0.25,0.5,1}"
  machine_note
  # Decode-heavy: short prompts, long outputs.
  run "$BIN/orca" bench sweep "${sweep[@]}" --out "$OUT/decode" --trace homogeneous --prompt-tokens 32 \
    --output-tokens 128 --rates "${DECODE_RATES:-0.1,0.25,0.5,1}"
  machine_note
fi
