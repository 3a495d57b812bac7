#include "sim/cost_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orca::sim {
namespace {

constexpr double kBytesPerValue = 2.0;  // fp16 weights, activations and KV

}  // namespace

absl::StatusOr<CostModel> CostModel::ForGpus(const TransformerShape& shape, const GpuSpec& gpu, int32_t tensor_parallel,
                                             int32_t pipeline_stages) {
  if (tensor_parallel < 1 || pipeline_stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tensor_parallel and pipeline_stages must be >= 1 (got ",
                                                   tensor_parallel, ", ", pipeline_stages, ")"));
  }
  if (shape.num_params <= 0 || shape.num_layers < pipeline_stages || shape.hidden_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model shape '", shape.name,
                                                   "' needs params > 0, hidden_size >= 1 and at least one ",
                                                   "layer per pipeline stage"));
  }
  const double gpus = static_cast<double>(tensor_parallel) * pipeline_stages;
  const double hbm = gpu.hbm_bytes_per_second * gpu.hbm_efficiency;
  const double gemm_flops = gpu.peak_flops * gpu.gemm_efficiency;
  const double attention_flops = gpu.peak_flops * gpu.attention_efficiency;
  const double layers = shape.num_layers;
  const double hidden = shape.hidden_size;
  // Summed over stages, each stage doing its share of layers on its TP group in parallel:
  // total = stages × (per-stage work / TP) = (whole-model work) / TP.
  const double tp = tensor_parallel;
  const double allreduces = tensor_parallel > 1 ? 2.0 * layers : 0.0;

  CostModel model;
  model.num_stages = pipeline_stages;
  model.description = absl::StrFormat("simulated %s on %dx A100-40GB (TP %d, PP %d)", shape.name,
                                      static_cast<int>(gpus), tensor_parallel, pipeline_stages);
  const double launches = layers * gpu.kernels_per_layer * gpu.kernel_launch_seconds;
  model.fixed_seconds = launches + allreduces * gpu.allreduce_latency_seconds;
  model.weight_seconds = shape.num_params * kBytesPerValue / tp / hbm;
  model.per_token_seconds = 2.0 * shape.num_params / tp / gemm_flops;
  // Ring all-reduce moves 2(T-1)/T of the [tokens, hidden] activation per participant.
  const double allreduce_bytes_per_token = tensor_parallel > 1 ? 2.0 * (tp - 1.0) / tp * hidden * kBytesPerValue : 0.0;
  model.per_token_comm_seconds = allreduces * allreduce_bytes_per_token / gpu.allreduce_bytes_per_second;
  model.per_context_seconds = 2.0 * layers * hidden * kBytesPerValue / tp / hbm;
  model.per_prompt_pair_seconds = 4.0 * hidden * layers / tp / attention_flops;
  // HBM left after the weights, over the K and V of one token in every layer.
  const double free_bytes = gpus * gpu.memory_bytes * gpu.memory_utilization - shape.num_params * kBytesPerValue;
  if (free_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("the weights of '", shape.name, "' do not fit on ", gpus, " GPUs"));
  }
  model.kv_slots = static_cast<int64_t>(free_bytes / (2.0 * layers * hidden * kBytesPerValue));
  return model;
}

absl::StatusOr<CostModel> CostModel::Preset(const std::string& name) {
  // The GPT-3 configurations of the ORCA paper's evaluation (§6: layers, hidden size and
  // GPU layout per model); 101B and 341B are its scaled members of the GPT-3 family.
  GpuSpec a100;
  if (name == "gpt3-13b") return ForGpus({"GPT-3 13B", 13e9, 40, 5120}, a100, 1, 1);
  if (name == "gpt3-101b") return ForGpus({"GPT-3 101B", 101e9, 80, 10240}, a100, 8, 1);
  if (name == "gpt3-175b") return ForGpus({"GPT-3 175B", 175e9, 96, 12288}, a100, 8, 2);
  if (name == "gpt3-341b") return ForGpus({"GPT-3 341B", 341e9, 120, 15360}, a100, 8, 4);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown cost model '", name, "' (known: gpt3-13b, gpt3-101b, gpt3-175b, gpt3-341b)"));
}

absl::Duration CostModel::IterationTime(const sched::IterationPlan& plan) const {
  double tokens = 0;
  double context = 0;
  double prompt_pairs = 0;
  for (const sched::ScheduledRequest& request : plan.requests) {
    // Padding (the FasterTransformer baseline) is computed like the prompt it pads: its
    // tokens go through every GEMM and the padded prompt's causal attention.
    const double n = static_cast<double>(request.input_token_ids.size() + request.num_padding_tokens);
    tokens += n;
    if (request.phase == sched::Phase::kInitiation) {
      prompt_pairs += n * (n + 1.0) / 2.0;
    } else {
      // The new token attends to every earlier position and to itself.
      context += static_cast<double>(request.start_position) + n;
    }
  }
  const double gemm = per_token_seconds * tokens;
  const double weights_and_gemm =
      shape == CostShape::kRoofline ? std::max(weight_seconds, gemm) : weight_seconds + gemm;
  const double seconds = fixed_seconds + weights_and_gemm + per_token_comm_seconds * tokens +
                         per_context_seconds * context + per_prompt_pair_seconds * prompt_pairs;
  return absl::Seconds(seconds);
}

const char* CostShapeName(CostShape shape) {
  switch (shape) {
    case CostShape::kLinear:
      return "linear";
    case CostShape::kRoofline:
      return "roofline";
  }
  return "unknown";
}

std::optional<CostShape> ParseCostShape(const std::string& name) {
  if (name == "linear") return CostShape::kLinear;
  if (name == "roofline") return CostShape::kRoofline;
  return std::nullopt;
}

}  // namespace orca::sim
