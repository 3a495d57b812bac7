#pragma once
/// Iteration cost of a GPU engine running a selectively batched GPT-style iteration.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sched/scheduler_output.h"

namespace orca::sim {

/// Decoder-only Transformer dimensions (GPT-3 family).
struct TransformerShape {
  std::string name;
  double num_params = 0;
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
};

/// One GPU and how efficiently an engine uses it. Defaults: A100-SXM4-40GB (the paper's
/// Azure ND96asr_v4 nodes), fp16 weights and KV.
struct GpuSpec {
  double hbm_bytes_per_second = 1.555e12;
  double peak_flops = 312e12;                 ///< Dense fp16 tensor-core peak.
  double memory_bytes = 40e9;                 ///< HBM capacity.
  double memory_utilization = 0.9;            ///< Left after the runtime and activations.
  double hbm_efficiency = 0.8;                ///< Achieved fraction of HBM bandwidth.
  double gemm_efficiency = 0.5;               ///< Achieved fraction of peak in large GEMMs.
  double attention_efficiency = 0.3;          ///< Fused attention kernels do worse.
  double kernel_launch_seconds = 2e-6;        ///< Per kernel (launch + tail).
  int32_t kernels_per_layer = 12;             ///< LN, QKV, attention, out-proj, MLP, adds...
  double allreduce_latency_seconds = 15e-6;   ///< Per tensor-parallel all-reduce (NVLink).
  double allreduce_bytes_per_second = 250e9;  ///< Ring all-reduce bus bandwidth.
};

/// How the weight streaming and the GEMM work of one iteration combine.
enum class CostShape : uint8_t {
  /// Sum: weights are streamed, then the GEMMs run (no overlap). An upper bound; the shape
  /// the ORCA issue asks for (a + b · tokens).
  kLinear,
  /// Roofline: a GEMM costs the larger of its weight traffic and its arithmetic, so up to
  /// ~weights/(2·params/token) tokens ride along almost for free. A lower bound.
  kRoofline,
};

/// Iteration time of one batch, summed over the pipeline stages:
///
///   linear:    t = f + w + b · T + k · T + c · Σ_increment context + d · Σ_initiation L(L+1)/2
///   roofline:  t = f + max(w, b · T) + k · T + (same attention terms)
///
///  T  tokens in the flattened batch (selective batching: one [ΣL, H] pass for all), padding
///     tokens included (ScheduledRequest::num_padding_tokens, the FasterTransformer
///     baseline: a padded prompt costs its padded length L + pad, also in d's L(L+1)/2);
///  f  fixed overhead: kernel launches and the latency of tensor-parallel all-reduces (two
///     per layer);
///  w  streaming the weight shard of every stage from HBM once (decoding is memory-bound);
///  b  GEMM time per token: 2 · params FLOPs at GEMM efficiency;
///  k  all-reduce bytes per token over NVLink (tensor parallelism only);
///  c  per key/value an increment-phase token attends to: attention reads the KV cache of
///     every earlier position (2 · layers · hidden · 2 bytes) at HBM speed;
///  d  per (query, key) pair of an initiation-phase causal prompt: 4 · hidden · layers FLOPs
///     at attention efficiency.
///
/// The GPT-3 13B preset (linear) gives ~22 ms for a lone decode step, ~28 ms for 16 decodes
/// at 300 tokens of context and ~68 ms for a 272-token prompt: tens of ms per iteration,
/// like the paper's A100s. The cost depends only on the plan, never on which policy made it.
struct CostModel {
  std::string description;
  CostShape shape = CostShape::kLinear;
  int32_t num_stages = 1;
  double fixed_seconds = 0;            ///< f
  double weight_seconds = 0;           ///< w
  double per_token_seconds = 0;        ///< b
  double per_token_comm_seconds = 0;   ///< k
  double per_context_seconds = 0;      ///< c
  double per_prompt_pair_seconds = 0;  ///< d
  /// KV slots (tokens) the modeled GPUs hold beside the weights: the engine's n_slots.
  int64_t kv_slots = 0;

  /// Derives the coefficients for `shape` split over tensor_parallel × pipeline_stages GPUs.
  static absl::StatusOr<CostModel> ForGpus(const TransformerShape& shape, const GpuSpec& gpu, int32_t tensor_parallel,
                                           int32_t pipeline_stages);
  /// Presets of the paper's §6 setups: "gpt3-13b" (1 GPU), "gpt3-101b" (8 GPUs, TP 8),
  /// "gpt3-175b" (16 GPUs, TP 8 × PP 2), "gpt3-341b" (32 GPUs, TP 8 × PP 4).
  static absl::StatusOr<CostModel> Preset(const std::string& name);

  /// Time of one iteration through all stages.
  absl::Duration IterationTime(const sched::IterationPlan& plan) const;
};

/// "linear" or "roofline".
const char* CostShapeName(CostShape shape);
std::optional<CostShape> ParseCostShape(const std::string& name);

}  // namespace orca::sim
