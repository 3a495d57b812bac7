#!/usr/bin/env bash
# Idle memory of an `orca serve` stack, per process (issue 12): starts the stack on loopback,
# waits for /ready, lets it settle, then prints VmRSS / RssAnon / RssFile / VmHWM / threads
# of the supervisor and each child from /proc, the largest mappings of each (smaps), and the
# /ready memory each service reports. Stops the stack. A few seconds plus the model's load.
#
#   scripts/bench/stack_memory.sh [MODEL] [extra orca serve flags...]
#   (MODEL empty or absent: the default synthetic model.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
require_bins orca orca-gateway orca-scheduler orca-worker
MODEL="${1:-}"
shift || true
PORT="${ORCA_MEMORY_PORT:-18391}"
machine_note
grep -m1 'model name' /proc/cpuinfo
args=(serve --port "$PORT" --grpc-port 0 --threads 2)
[ -n "$MODEL" ] && args+=(--model "$MODEL")
LOG="$(mktemp)"
printf '$ %q' "$BIN/orca"; printf ' %q' "${args[@]}" "$@"; printf '\n'
"$BIN/orca" "${args[@]}" "$@" >"$LOG" 2>&1 &
SERVE=$!
trap 'kill -TERM $SERVE 2>/dev/null; wait $SERVE 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
  kill -0 $SERVE 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.5
done
sleep "${ORCA_MEMORY_SETTLE_S:-3}"

kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$2/status"; }
printf '%-12s %8s %8s %8s %8s %8s %7s\n' process "RSS MiB" "anon" "file" "PSS" "peak" threads
# PSS splits each shared page (libraries mapped by several processes) among them: the
# stack's PSS total is what it really occupies; RSS totals count shared pages once per process.
report() {  # name pid
  pss=$(awk '$1 == "Pss:" {print $2}' "/proc/$2/smaps_rollup")
  awk -v name="$1" -v pss="$pss" '$1 == "VmRSS:" {r=$2} $1 == "RssAnon:" {a=$2} $1 == "RssFile:" {f=$2}
    $1 == "VmHWM:" {h=$2} $1 == "Threads:" {t=$2}
    END {printf "%-12s %8.1f %8.1f %8.1f %8.1f %8.1f %7d\n", name, r/1024, a/1024, f/1024, pss/1024, h/1024, t}' \
    "/proc/$2/status"
}
total=0
total_pss=0
for pid in $SERVE $(cat /proc/$SERVE/task/*/children); do
  name="$(basename "$(readlink /proc/$pid/exe)")"
  [ "$pid" = "$SERVE" ] && name="orca serve"
  report "${name#orca-}" "$pid"
  total=$((total + $(kib VmRSS "$pid")))
  total_pss=$((total_pss + $(awk '$1 == "Pss:" {print $2}' "/proc/$pid/smaps_rollup")))
done
awk -v r=$total -v p=$total_pss 'BEGIN {printf "%-12s %8.1f %8s %8s %8.1f\n", "total", r/1024, "", "", p/1024}'
echo
echo "# largest mappings (RSS KiB) per process"
for pid in $SERVE $(cat /proc/$SERVE/task/*/children); do
  echo "## $(basename "$(readlink /proc/$pid/exe)") ($pid)"
  awk '/^[0-9a-f]+-[0-9a-f]+ /{name=($6 == "" ? "[anon]" : $6)} /^Rss:/{rss[name]+=$2}
       END{for (n in rss) if (rss[n] >= 1024) print rss[n], n}' "/proc/$pid/smaps" | sort -rn | sed -n 1,6p
done
echo
echo "# /ready memory as the gateway reports it"
curl -s "http://127.0.0.1:$PORT/ready" | grep -o '"memory":{[^}]*}' || echo "(none: an older build)"
