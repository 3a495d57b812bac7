#!/usr/bin/env bash
# The results page's tools read what they are given:
# 1. scripts/bench/vs_llama_cpp.sh against llama.cpp 84f7129's own output formats (llama-bench's
#    markdown table, llama-batched-bench's table, run with `-fa off` and `-fa on`: that llama.cpp
#    refuses a bare `-fa`) and engine_bench's rows. The peers and engine_bench are stand-ins that
#    replay real outputs kept in data/vs_llama_cpp/ (stories260K, made with the commands in its
#    README) and refuse arguments the real programs refuse; the summary must carry their numbers.
# 2. bench/plots/plot_results.mjs draws both plots from such a summary and from a sweep's output.
#
#   bench_scripts_test.sh REPO_ROOT
set -euo pipefail
ROOT="${1:?usage: $0 REPO_ROOT}"
DATA="$ROOT/tests/scripts/data/vs_llama_cpp"
WORK="$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/bench-scripts.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/llama" "$WORK/orca/bin"
# llama-bench: -fa takes a value since mid-2025; the output is the md table.
cat >"$WORK/llama/llama-bench" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do [ "\$a" = "-o" ] && md=1; done
[ -n "\${md:-}" ] || { echo "expected -o md" >&2; exit 1; }
cat "$DATA/llama-bench-84f7129.md"
EOF
# llama-batched-bench: a bare -fa (followed by another flag or nothing) is an error, as in 84f7129.
cat >"$WORK/llama/llama-batched-bench" <<EOF
#!/usr/bin/env bash
fa=""
while [ \$# -gt 0 ]; do
  if [ "\$1" = "-fa" ]; then
    case "\${2:-}" in on|off|auto) fa="\$2"; shift ;; *) echo "error: invalid argument: -fa" >&2; exit 1 ;; esac
  fi
  shift
done
[ -n "\$fa" ] || fa=auto
[ "\$fa" = auto ] && fa=off
cat "$DATA/llama-batched-bench-fa-\$fa-84f7129.md"
EOF
# engine_bench: the single-request run (--prompts 1,PP) or the batched one (--prompts 32).
cat >"$WORK/orca/bin/engine_bench" <<EOF
#!/usr/bin/env bash
case " \$* " in
  *" --prompts 1,"*) cat "$DATA/engine-bench-single.txt" ;;
  *" --prompts 32 "*) cat "$DATA/engine-bench-batched.txt" ;;
  *) echo "unexpected arguments: \$*" >&2; exit 1 ;;
esac
EOF
chmod +x "$WORK/llama/"* "$WORK/orca/bin/engine_bench"
touch "$WORK/model.gguf"

LLAMA_BIN="$WORK/llama" LLAMA_COMMIT=84f7129 ORCA_BUILD_DIR="$WORK/orca" ROUNDS=1 PP=64 TG=16 NPL=1 \
  bash "$ROOT/scripts/bench/vs_llama_cpp.sh" "$WORK/out" "$WORK/model.gguf" >"$WORK/run.log" 2>&1 ||
  { cat "$WORK/run.log" >&2; fail "vs_llama_cpp.sh exited with an error"; }
grep -q '^# llama.cpp at 84f7129$' "$WORK/run.log" || fail "the run does not name the llama.cpp commit"

# round file measure llama.cpp orca ratio load
want() {  # MEASURE LLAMA ORCA
  local row
  row=$(awk -F'\t' -v m="$1" '$3 == m { print $4 " " $5 }' "$WORK/out/summary.tsv")
  [ "$row" = "$2 $3" ] || { cat "$WORK/out/summary.tsv" >&2; fail "$1: want llama.cpp $2, orca $3; got '$row'"; }
}
want "prefill pp64" 1154.08 67214
want "decode B=1 tg16" 418.43 16131
# Batched: the better of -fa off (534.94) and -fa on (337.97).
want "batched decode B=1" 534.94 19690
ratio=$(awk -F'\t' '$3 == "prefill pp64" { print $6 }' "$WORK/out/summary.tsv")
[ "$ratio" = "58.24" ] || fail "prefill ratio: want 58.24 (67214 / 1154.08), got $ratio"

# Both plots, from this summary and from a sweep's printed output and its CSV.
node "$ROOT/bench/plots/plot_results.mjs" batch "$WORK/out/summary.tsv" "$WORK/batch.svg" "test" ||
  fail "plot_results.mjs batch failed"
grep -q '<path d="M' "$WORK/batch.svg" || fail "the batch plot has no line"
grep -q 'model llama.cpp' "$WORK/batch.svg" || fail "the batch plot has no llama.cpp series"
node "$ROOT/bench/plots/plot_results.mjs" load "$DATA/sweep-printed.txt" "$DATA/sweep.csv" "$WORK/load.svg" \
  --title "test" || fail "plot_results.mjs load failed"
for label in 'orca(max_bs=32)' 'llama-server(np=32)'; do
  grep -qF ">$label<" "$WORK/load.svg" || fail "the load plot has no series $label"
done
[ "$(grep -c '<circle' "$WORK/load.svg")" -eq 8 ] || fail "the load plot should have 8 points (6 printed + 2 CSV)"
echo "PASS"
