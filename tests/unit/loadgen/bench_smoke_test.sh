#!/usr/bin/env bash
# e2e smoke test of `orca bench`: a tiny synthetic model behind `orca serve` on loopback,
# a handful of streamed requests, then the CSV/JSON outputs and a replay of the saved trace.
# Usage: bench_smoke_test.sh BIN_DIR
set -euo pipefail
BIN="${1:?usage: $0 BIN_DIR}"
TMP="$(mktemp -d)"
SERVE_PID=""
cleanup() {
  if [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID" || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$TMP/serve.log" ] && tail -20 "$TMP/serve.log" >&2; exit 1; }

"$BIN/orca" model synth --preset tiny --out "$TMP/model" >/dev/null

# A port nobody listens on (connect refused). Another test running in parallel may bind it
# between this check and the gateway's bind: then start again on another port (3 tries).
start_serve() {
  for _ in $(seq 50); do
    PORT=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || break
  done
  rm -rf "$TMP/logs"
  "$BIN/orca" serve --model "$TMP/model" --port "$PORT" --grpc-port 0 --threads 1 \
    --log-dir "$TMP/logs" >"$TMP/serve.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 300); do
    grep -q "Orca is ready" "$TMP/serve.log" && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  fail "orca serve not ready after 30 s"
}
for attempt in 1 2 3; do
  start_serve && break
  wait "$SERVE_PID" || true
  SERVE_PID=""
  grep -qi "address already in use" "$TMP"/logs/* 2>/dev/null && [ "$attempt" -lt 3 ] && continue
  tail -20 "$TMP"/logs/* >&2 2>/dev/null || true
  fail "orca serve exited"
done

URL="http://127.0.0.1:$PORT"
"$BIN/orca" bench --url "$URL" --trace homogeneous --prompt-tokens 16 --output-tokens 8 \
  --rate 20 --num-requests 5 --max-duration 20 --out "$TMP/out" --save-trace --no-progress \
  >"$TMP/bench.txt" || fail "orca bench failed: $(cat "$TMP/bench.txt")"
grep -q "requests: 5 completed, 0 failed" "$TMP/bench.txt" || fail "unexpected summary: $(cat "$TMP/bench.txt")"
grep -q "POST /tokenize" "$TMP/bench.txt" || fail "prompts were not calibrated with /tokenize"

[ "$(wc -l <"$TMP/out/requests.csv")" -eq 6 ] || fail "requests.csv should have a header and 5 rows"
[ "$(grep -c ',ok,200,length,8,1,' "$TMP/out/requests.csv")" -eq 5 ] || fail "rows: $(cat "$TMP/out/requests.csv")"
grep -q '"num_completed": 5' "$TMP/out/summary.json" || fail "summary.json: num_completed"
grep -q '"throughput_rps"' "$TMP/out/summary.json" || fail "summary.json: throughput"
[ "$(wc -l <"$TMP/out/trace.jsonl")" -eq 5 ] || fail "trace.jsonl should have 5 requests"

# The saved trace replays through the file-trace path.
"$BIN/orca" bench --url "$URL" --trace "$TMP/out/trace.jsonl" --max-duration 20 --no-progress \
  --out "$TMP/replay" >"$TMP/replay.txt" || fail "replay failed: $(cat "$TMP/replay.txt")"
grep -q "requests: 5 completed, 0 failed" "$TMP/replay.txt" || fail "replay summary: $(cat "$TMP/replay.txt")"

# Bad input is a precise error, not a crash.
if "$BIN/orca" bench --url "$URL" --trace "$TMP/missing.jsonl" >"$TMP/err.txt" 2>&1; then fail "missing trace accepted"; fi
grep -q "missing.jsonl" "$TMP/err.txt" || fail "error does not name the file: $(cat "$TMP/err.txt")"
echo "PASS"
