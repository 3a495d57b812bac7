#!/usr/bin/env bash
# One libFuzzer target as a CTest test (see CMakeLists.txt):
#   run_fuzzer.sh BINARY NAME FUZZ_SOURCE_DIR WORK_DIR SECONDS RUNS SEED [EXTRA_SEED ...]
# Replays regressions/NAME/* (each must pass), then explores from a fresh corpus made of
# seeds/NAME/ and the extra seeds (files or directories; absent ones skipped):
#   SECONDS > 0   fuzzes SECONDS (random seed: a new exploration every time);
#   RUNS > 0      (SECONDS 0) a bounded, reproducible exploration: RUNS inputs from the
#                 fixed random seed SEED, of at most 4 KiB, from the seeds in this
#                 repository only (not ../shared's models, which a machine may lack or
#                 hold other versions of): the same checkout gives the same inputs.
#                 Capped at 300 s in case the machine is far slower than expected;
#   both 0        no exploration, only every seed run once.
set -euo pipefail
bin=$1 name=$2 src=$3 work=$4 seconds=$5 runs=$6 seed=$7
shift 7
corpus="$work/corpus/$name" artifacts="$work/artifacts/$name"
rm -rf "$corpus"
mkdir -p "$corpus" "$artifacts"
regressions=("$src/regressions/$name"/*)
if [ -e "${regressions[0]}" ]; then
  echo "== replaying ${#regressions[@]} regression input(s)"
  "$bin" -timeout=30 "${regressions[@]}"
fi
cp "$src/seeds/$name"/* "$corpus"/
repo=$(cd "$src/../.." && pwd)
for extra in "$@"; do
  if [ "$seconds" = 0 ] && [ "$runs" != 0 ] && [[ "$(realpath -m "$extra")" != "$repo"/* ]]; then continue; fi
  if [ -d "$extra" ]; then cp "$extra"/* "$corpus"/; elif [ -f "$extra" ]; then cp "$extra" "$corpus"/; fi
done
# -timeout: one input taking > 10 s is a finding (a hang); -rss_limit_mb: so is > 2 GiB.
limits=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/")
if [ "$seconds" != 0 ]; then
  echo "== fuzzing $name for ${seconds}s from $(ls "$corpus" | wc -l) seed(s)"
  exec "$bin" -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 "$corpus"
fi
if [ "$runs" != 0 ]; then
  echo "== fuzzing $name: $runs inputs from random seed $seed and $(ls "$corpus" | wc -l) seed file(s)"
  # Same seed, same inputs only without address randomization: Abseil's hash seed (and
  # so flat_hash_map order, and so coverage) follows the addresses; two runs with ASLR
  # grew different corpora, two with setarch -R identical ones. -reload=0: no corpus
  # re-reads on a timer.
  norandom=()
  if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
  exec "${norandom[@]}" "$bin" -seed="$seed" -runs="$runs" -reload=0 -max_len=4096 -max_total_time=300 "${limits[@]}" -print_final_stats=1 "$corpus"
fi
echo "== running $name on its $(ls "$corpus" | wc -l) seed(s)"
exec "$bin" -runs=0 "${limits[@]}" "$corpus"
