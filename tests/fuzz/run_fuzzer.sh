#!/usr/bin/env bash
# One libFuzzer target as a CTest test (see CMakeLists.txt):
#   run_fuzzer.sh BINARY NAME FUZZ_SOURCE_DIR WORK_DIR SECONDS [EXTRA_SEED ...]
# Replays regressions/NAME/* (each must pass), then fuzzes SECONDS from a fresh corpus
# made of seeds/NAME/ and the extra seeds (files or directories; absent ones skipped).
# SECONDS 0: no exploration, only every seed run once (a deterministic regression check).
set -euo pipefail
bin=$1 name=$2 src=$3 work=$4 seconds=$5
shift 5
corpus="$work/corpus/$name" artifacts="$work/artifacts/$name"
rm -rf "$corpus"
mkdir -p "$corpus" "$artifacts"
regressions=("$src/regressions/$name"/*)
if [ -e "${regressions[0]}" ]; then
  echo "== replaying ${#regressions[@]} regression input(s)"
  "$bin" -timeout=30 "${regressions[@]}"
fi
cp "$src/seeds/$name"/* "$corpus"/
for seed in "$@"; do
  if [ -d "$seed" ]; then cp "$seed"/* "$corpus"/; elif [ -f "$seed" ]; then cp "$seed" "$corpus"/; fi
done
if [ "$seconds" = 0 ]; then
  echo "== running $name on its $(ls "$corpus" | wc -l) seed(s)"
  exec "$bin" -runs=0 -timeout=10 -rss_limit_mb=2048 "$corpus"
fi
echo "== fuzzing $name for ${seconds}s from $(ls "$corpus" | wc -l) seed(s)"
# -timeout: one input taking > 10 s is a finding (a hang); -rss_limit_mb: so is > 2 GiB.
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus"
