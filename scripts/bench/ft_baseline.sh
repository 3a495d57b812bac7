#!/usr/bin/env bash
# Issue 16 item 6: the paper's Fig. 10 with its FasterTransformer baseline curves
# ft(max_bs, mbs), and Fig. 11 (homogeneous trace), with `orca bench sweep`:
#   1. on the simulated A100 engine (sim/, cost model; fast and deterministic): GPT-3 13B on
#      one GPU and GPT-3 175B on 16 GPUs (TP 8 x PP 2, n_workers 2, so mbs matters);
#   2. on the CPU engine here, over real `orca serve` stacks (HTTP), with the synthetic 3.5M
#      Llama and few requests per point (bounded: the machine is shared).
#
#   scripts/bench/ft_baseline.sh [OUT_DIR] [sim|cpu|all]
#   (CPU_RATES, default 2,4,8 req/s; CPU_REQUESTS, default 30, and CPU_MAX_DURATION seconds,
#    default 30, per point of the CPU sweeps)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
OUT="${1:-$ROOT/bench-out/ft}"
WHAT="${2:-all}"
require_bins orca
machine_note

# The paper's curves: orca(max_bs) against ft(max_bs, mbs) = the request-level baseline with
# --faster-transformer (prompts padded, finished members computing until the batch ends) and
# --microbatches mbs. Only orca and ft curves per sweep: the ratio tables compare the best of
# each policy, and the selective request-level baseline would be the better "baseline".
SIM_RATES=0.1,0.2,0.3,0.5,0.75,1,1.5,2,3,4,5,6,8,10,12,16,20,24,32
FT13=orca:8,orca:16,orca:32,ft:1,ft:8,ft:16,ft:32
FT175=orca:8,orca:16,orca:32,ft:8:mbs=1,ft:8:mbs=2,ft:16:mbs=2,ft:32:mbs=2,ft:32:mbs=4
sim() {  # NAME PRESET TRACE CONFIGS [extra flags]
  local name=$1 preset=$2 trace=$3 configs=$4
  shift 4
  run "$BIN/orca" bench sweep --simulate "$preset" --trace "$trace" --prompt-tokens 272 --output-tokens 64 \
    --configs "$configs" --rates "$SIM_RATES" --num-requests 1000 --saturation-latency-ms 1000 \
    --out "$OUT/$name" "$@"
}
if [ "$WHAT" = sim ] || [ "$WHAT" = all ]; then
  # Fig. 10 (paper trace) and Fig. 11 (homogeneous: every request 272 prompt + 64 output
  # tokens, the paper trace's mean lengths).
  for TRACE in paper homogeneous; do
    sim "sim-13b-$TRACE" gpt3-13b "$TRACE" "$FT13"
    sim "sim-175b-$TRACE" gpt3-175b "$TRACE" "$FT175"
  done
  sim sim-13b-paper-roofline gpt3-13b paper "$FT13" --cost-shape roofline
  sim sim-175b-paper-roofline gpt3-175b paper "$FT175" --cost-shape roofline
  # The selective (default) request-level baseline on the same trace, for comparison.
  sim sim-13b-paper-selective gpt3-13b paper orca:8,orca:16,orca:32,request-level:1,request-level:8,request-level:16,request-level:32
  sim sim-175b-paper-selective gpt3-175b paper orca:8,orca:16,orca:32,request-level:8,request-level:16,request-level:32
fi

if [ "$WHAT" = cpu ] || [ "$WHAT" = all ]; then
  require_bins orca orca-gateway orca-scheduler orca-worker
  MODEL_DIR="${ORCA_BENCH_MODEL_DIR:-/tmp/orca-bench-models}/llama-4m"
  if [ ! -f "$MODEL_DIR/tokenizer.json" ]; then
    run "$BIN/orca" model synth --out "$MODEL_DIR" --preset tiny --hidden-size 256 --num-layers 4 \
      --num-heads 4 --num-kv-heads 2 --intermediate-size 704 --vocab-size 2048
  fi
  for TRACE in paper homogeneous; do
    machine_note
    run "$BIN/orca" bench sweep --model "$MODEL_DIR" --trace "$TRACE" --prompt-tokens 272 --output-tokens 64 \
      --configs orca:8,ft:8 --rates "${CPU_RATES:-2,4,8}" --num-requests "${CPU_REQUESTS:-30}" --max-duration "${CPU_MAX_DURATION:-30}" \
      --threads 1 --saturation-latency-ms 200 --no-progress --out "$OUT/cpu-$TRACE"
  done
  machine_note
fi
