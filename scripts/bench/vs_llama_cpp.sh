#!/usr/bin/env bash
# Issue 12: Orca's engine against llama.cpp's own benchmarks on the same GGUF files, interleaved
# in one run (this machine is shared and noisy: every comparison is made from measurements taken
# minutes apart, and each round alternates which engine goes first).
#
# Per file and round:
#   prefill and batch-1 decode:  llama-bench -p PP -n TG        vs  engine_bench --batches 1 --prompts 1,PP --gen TG
#     (llama-bench's tg test decodes from an empty context, so Orca's decode figure is the
#     1-token prompt's row, and its prefill figure the PP row's; the PP row's decode, after a
#     PP-token prompt, is kept in the log)
#   batched decode:              llama-batched-bench -npl NPL (-fa off, then -fa on)
#                                                               vs  engine_bench --batches NPL --prompts 32 --gen 32
# then one summary table: tokens/s of each side and Orca's ratio; batched decode against the
# better of llama.cpp's two runs ("llama.cpp's best").
#
# llama.cpp is not part of Orca: build it yourself outside the repository (CMake,
# -DLLAMA_CURL=OFF) and point LLAMA_BIN at its bin/ folder.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin [LLAMA_COMMIT=84f7129] scripts/bench/vs_llama_cpp.sh OUT_DIR MODEL.gguf [MODEL.gguf ...]
#   (ROUNDS=2, THREADS=2, PP=512, TG=128, REPS=2, NPL=1,4,16,64, SKIP_BATCHED=1 override the defaults)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:?usage: LLAMA_BIN=... $0 OUT_DIR MODEL.gguf [MODEL.gguf ...]}"
shift
[ $# -ge 1 ] || { echo "no model files given" >&2; exit 2; }
LLAMA_BIN="${LLAMA_BIN:?set LLAMA_BIN to the bin folder of a llama.cpp build}"
ROUNDS="${ROUNDS:-2}"
THREADS="${THREADS:-2}"
PP="${PP:-512}"
TG="${TG:-128}"
REPS="${REPS:-2}"
NPL="${NPL:-1,4,16,64}"
require_bins engine_bench
for b in llama-bench llama-batched-bench; do
  [ -x "$LLAMA_BIN/$b" ] || { echo "missing $LLAMA_BIN/$b" >&2; exit 1; }
done
for f in "$@"; do [ -f "$f" ] || { echo "no such model file: $f" >&2; exit 1; }; done
mkdir -p "$OUT"
SUMMARY="$OUT/summary.tsv"
printf 'round\tfile\tmeasure\tllama.cpp\torca\tratio\tload_start\n' >"$SUMMARY"

# Each step's full output goes to its own log; the parsed numbers to the summary.
log_for() { echo "$OUT/r$1-$(basename "$2" .gguf)-$3.log"; }

# llama-bench's markdown table: the t/s column ("61.60 ± 0.20") of the pp/tg rows.
llama_bench_ts() {  # LOG TEST
  awk -F'|' -v t="$2" '{ for (i = 1; i <= NF; ++i) { f = $i; gsub(/ /, "", f); if (f == t) { split($(i + 1), a, "±"); gsub(/ /, "", a[1]); print a[1] } } }' "$1" | tail -1
}
# llama-batched-bench's table: S_TG (decode tokens/s of all sequences) of the row with B.
batched_bench_stg() {  # LOG B
  awk -F'|' -v b="$2" 'NF >= 11 { f = $4; gsub(/ /, "", f); if (f == b) { s = $9; gsub(/ /, "", s); print s } }' "$1" | tail -1
}
# engine_bench's result rows: "batch prompt | prefill_ms prefill_tok/s %gemm | decode_ms decode_tok/s ...".
engine_bench_col() {  # LOG BATCH PROMPT COLUMN(prefill|decode)
  awk -v b="$2" -v p="$3" -v c="$4" '$1 == b && $2 == p && $3 == "|" && $7 == "|" { print (c == "prefill" ? $5 : $9) }' "$1" | tail -1
}
record() {  # ROUND FILE MEASURE LLAMA ORCA LOAD
  local ratio
  ratio=$(awk -v l="$4" -v o="$5" 'BEGIN { if (l > 0 && o > 0) printf "%.2f", o / l; else print "-" }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$(basename "$2")" "$3" "${4:--}" "${5:--}" "$ratio" "$6" >>"$SUMMARY"
}

run_llama_single() {  # ROUND FILE
  run "$LLAMA_BIN/llama-bench" -m "$2" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" -o md >"$(log_for "$1" "$2" llama-bench)" 2>&1
}
run_orca_single() {
  run "$BIN/engine_bench" --model-file "$2" --batches 1 --prompts "1,$PP" --gen "$TG" --threads "$THREADS" \
    --first-requests 2 >"$(log_for "$1" "$2" engine-single)" 2>&1
}
run_llama_batched() {
  # llama.cpp since mid-2025 takes `-fa on|off|auto` (a bare `-fa` is refused); both are run.
  local fa
  for fa in off on; do
    run "$LLAMA_BIN/llama-batched-bench" -m "$2" -t "$THREADS" -c 4096 -b 2048 -ub 512 -npp 32 -ntg 32 \
      -npl "$NPL" -fa "$fa" >"$(log_for "$1" "$2" "llama-batched-fa-$fa")" 2>&1
  done
}
run_orca_batched() {
  run "$BIN/engine_bench" --model-file "$2" --batches "$NPL" --prompts 32 --gen 32 --threads "$THREADS" \
    --first-requests 0 >"$(log_for "$1" "$2" engine-batched)" 2>&1
}

grep -m1 'model name' /proc/cpuinfo
grep -m1 -o -w 'amx_tile\|avx512_bf16\|avx512_vnni\|avx_vnni' /proc/cpuinfo | sort -u | paste -sd' ' | sed 's/^/# CPU features: /'
machine_note
git -C "$ROOT" log --oneline -1 | sed 's/^/# orca at /'
# A llama.cpp unpacked with `git archive` has no history: LLAMA_COMMIT names it then.
if [ -n "${LLAMA_COMMIT:-}" ]; then echo "# llama.cpp at $LLAMA_COMMIT"
else git -C "$LLAMA_BIN/../.." log --oneline -1 2>/dev/null | sed 's/^/# llama.cpp at /' || true; fi
for round in $(seq 1 "$ROUNDS"); do
  for f in "$@"; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    machine_note
    # Alternate which engine goes first, so a drift in the machine's speed does not favour one.
    if [ $((round % 2)) -eq 1 ]; then
      run_llama_single "$round" "$f"; run_orca_single "$round" "$f"
    else
      run_orca_single "$round" "$f"; run_llama_single "$round" "$f"
    fi
    lb=$(log_for "$round" "$f" llama-bench) es=$(log_for "$round" "$f" engine-single)
    record "$round" "$f" "prefill pp$PP" "$(llama_bench_ts "$lb" "pp$PP")" "$(engine_bench_col "$es" 1 "$PP" prefill)" "$load"
    record "$round" "$f" "decode B=1 tg$TG" "$(llama_bench_ts "$lb" "tg$TG")" "$(engine_bench_col "$es" 1 1 decode)" "$load"
    [ -n "${SKIP_BATCHED:-}" ] && continue
    if [ $((round % 2)) -eq 1 ]; then
      run_llama_batched "$round" "$f"; run_orca_batched "$round" "$f"
    else
      run_orca_batched "$round" "$f"; run_llama_batched "$round" "$f"
    fi
    for b in ${NPL//,/ }; do
      plain=$(batched_bench_stg "$(log_for "$round" "$f" llama-batched-fa-off)" "$b")
      fa=$(batched_bench_stg "$(log_for "$round" "$f" llama-batched-fa-on)" "$b")
      best=$(awk -v a="${plain:-0}" -v b="${fa:-0}" 'BEGIN { print (a > b ? a : b) }')
      record "$round" "$f" "batched decode B=$b" "$best" "$(engine_bench_col "$(log_for "$round" "$f" engine-batched)" "$b" 32 decode)" "$load"
    done
  done
done
machine_note
echo
echo "# tokens/s; ratio = Orca / llama.cpp (batched: against the better of llama-batched-bench with and without -fa)"
# Aligned columns with awk (util-linux's `column` is not on a fresh machine).
awk -F'\t' '{ for (i = 1; i <= NF; ++i) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
               if (NF > nf) nf = NF }
             END { for (r = 1; r <= NR; ++r) { line = ""
                     for (i = 1; i <= nf; ++i) line = line (i < nf ? sprintf("%-" w[i] "s  ", cell[r, i]) : cell[r, i])
                     print line } }' "$SUMMARY"
