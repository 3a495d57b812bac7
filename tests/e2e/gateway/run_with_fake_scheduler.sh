#!/usr/bin/env bash
# Runs the gateway e2e tests (node --test, official openai client) against
# orca-gateway in front of orca-fake-scheduler, both on loopback with
# ephemeral ports. For the real stack, point ORCA_BASE_URL at `orca serve`
# and run `node --test tests/e2e/gateway/` instead.
#
#   tests/e2e/gateway/run_with_fake_scheduler.sh <build-dir>/bin
set -euo pipefail

bin_dir=${1:?usage: $0 <build-dir>/bin}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits for a line matching $2 in log $1 and prints its last number.
wait_port() {
  for _ in $(seq 1 200); do
    if line=$(grep -m1 -E "$2" "$1" 2>/dev/null); then
      grep -oE '[0-9]+' <<<"${line##*$3}" | sed -n 1p
      return 0
    fi
    sleep 0.05
  done
  echo "timed out waiting for '$2' in $1:" >&2
  cat "$1" >&2
  return 1
}

"$bin_dir/orca-fake-scheduler" --listen 127.0.0.1:0 --max-context 1024 --iteration-us 5000 \
  --write-model-dir "$work/model" >"$work/scheduler.log" 2>&1 &
pids+=($!)
scheduler_port=$(wait_port "$work/scheduler.log" 'listening on' '127.0.0.1:')

api_key=sk-e2e-$RANDOM$RANDOM
max_body=65536
# The internal token the gateway sends to its scheduler (the fake one takes any caller).
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$work/internal-token")
# The byte-level test model ships no chat template: chat needs --chat-template.
"$bin_dir/orca-gateway" --model "$work/model" --served-model-name byte-model --chat-template chatml \
  --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --schedulers "127.0.0.1:$scheduler_port" \
  --internal-token-file "$work/internal-token" \
  --api-keys "$api_key" --max-body-bytes "$max_body" >"$work/gateway.log" 2>&1 &
pids+=($!)
gateway_port=$(wait_port "$work/gateway.log" 'on HTTP port' 'HTTP port ')

export ORCA_BASE_URL="http://127.0.0.1:$gateway_port"
export ORCA_API_KEY=$api_key
export ORCA_MAX_BODY_BYTES=$max_body
for _ in $(seq 1 200); do
  curl -sf "$ORCA_BASE_URL/ready" >/dev/null && break
  sleep 0.05
done

cd "$repo"
status=0
node --test --test-concurrency=1 "$here"/*.test.mjs || status=$?
if [[ $status -ne 0 ]]; then
  echo "---- gateway log" >&2; tail -50 "$work/gateway.log" >&2
  echo "---- scheduler log" >&2; tail -20 "$work/scheduler.log" >&2
fi
exit $status
