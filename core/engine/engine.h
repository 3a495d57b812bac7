#pragma once
/// One pipeline stage of the execution engine (the whole model when
/// num_stages == 1): its tensor-parallel shards (one thread each, all-reducing
/// over the data plane), their KV caches, and — on the last stage — the
/// per-request samplers. `Step` runs ONE iteration of a selectively batched
/// batch in any mix of phases; releases and first-time reservations travel
/// with it, as in the paper's control messages (§4.1).
///
/// Thread-compatible: one caller at a time (the worker's or scheduler's
/// engine thread).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/common/sampling_params.h"
#include "core/engine/model_config.h"
#include "core/engine/model_runner.h"
#include "core/engine/model_weights.h"
#include "core/engine/sampler.h"
#include "core/engine/step_records.h"

namespace gloo::rendezvous {
class Store;
}
namespace orca::structured {
class MatcherFactory;
}

namespace orca::engine {

class Engine {
 public:
  struct Options {
    std::string model_path;         ///< HF directory or .gguf
    std::optional<DType> dtype;     ///< weight storage; nullopt = checkpoint's (f16 → bf16)
    std::optional<DType> kv_dtype;  ///< nullopt = bf16 for bf16 weights, else f32
    std::string device = "cpu";     ///< kernel backend: cpu or cuda (TP rank r uses GPU first_device + r)
    /// cuda: the GPU of TP rank 0. Stages sharing a machine need GPUs of their own (NCCL
    /// refuses one GPU for two ranks of a link): stage s of a TP t pipeline takes s * t.
    int32_t first_device = 0;
    int32_t stage = 0;
    int32_t num_stages = 1;
    int32_t tp_size = 1;
    int64_t n_slots = 8192;  ///< KV slots (tokens) per shard
    /// Iteration size (tokens, capped by n_slots) whose activation buffers are allocated and
    /// made resident at load, with the KV pool, so that the first request up to this size
    /// runs as fast as later ones (no allocation or page fault inside it). 0: grow them lazily.
    int64_t reserve_tokens = 512;
    int32_t kv_block_size = 16;
    /// Sliding-window layers (the model's local ones) keep only their window: their KV lives
    /// in a pool of its own of this many slots per shard, a request holding there just the
    /// blocks its window and current iteration cover (KvCache::Options::n_local_slots). 0: as
    /// many as n_slots (never the tighter limit). Unused when the model has no such layers.
    int64_t kv_local_slots = 0;
    /// Sliding-window layers keep every position in the main pool instead (llama.cpp's
    /// --swa-full): what prefix caching needs, a cached prefix's window being gone otherwise.
    bool swa_full = false;
    int32_t num_threads = 0;            ///< compute threads in total (0 = all cores), split over shards
    int64_t small_gemm_max_rows = 4;    ///< see CpuBackend::Options
    int64_t panel_gemm_max_rows = 128;  ///< see CpuBackend::Options
    bool cpu_bf16_dot = true;           ///< see CpuBackend::Options::bf16_dot
    bool keep_logits = false;           ///< copy logits into StepOutput (tests)
    bool fused_kernels = true;          ///< see ModelRunner::Options::fused_kernels
    /// cuda only: decode iterations recorded once per batch shape as CUDA Graphs and replayed
    /// (ModelRunner::Options::decode_graphs). Implemented for one stage with tp_size 1; Create
    /// refuses it on the CPU backend and for pipeline or tensor parallelism.
    bool cuda_graphs = false;
    /// With tp_size > 1 on the last stage: every shard computes the logits of
    /// its vocabulary slice and shard 0 gathers them (ModelWeights::Options).
    /// Off: shard 0 holds the whole LM head and computes every logit.
    bool vocab_parallel_head = true;
    /// Data plane for tensor parallelism: a rendezvous store shared by the
    /// shards (nullptr: an in-process store, the shards being our threads).
    gloo::rendezvous::Store* tp_store = nullptr;
    std::string tp_group = "tp";
    std::string data_plane_host = "127.0.0.1";
    int64_t peer_timeout_ms = 10000;
  };

  static absl::StatusOr<std::unique_ptr<Engine>> Create(const Options& options);
  ~Engine();

  /// Runs one iteration. `hidden_in` ([ΣL, H], host) is required on stages > 0, unless the
  /// activations arrive over the device links (ConnectPipeline; then nullptr).
  /// The whole iteration is validated before anything changes: unknown or
  /// duplicate request ids, reservations that do not fit, block tables that
  /// are malformed, in another block size or do not cover the positions,
  /// positions past a reservation or the context, token ids outside the
  /// vocabulary are errors and leave the engine as it was (apart from the
  /// releases). A sequence with `sample` false (a prompt chunk) gets no sample.
  /// On the last stage, a request whose sampling asks for prompt_logprobs gets
  /// logits at every prompt position its steps cover and a
  /// StepOutput::prompt_logprobs record per step; other requests cost nothing more.
  absl::Status Step(const StepInput& input, const float* hidden_in, StepOutput* output);

  /// Options of the device-to-device links between stages (ConnectPipeline).
  struct PipelineLinkOptions {
    gloo::rendezvous::Store* store = nullptr;  ///< where the NCCL ids meet (the scheduler's store)
    std::string prefix;                        ///< unique per session; each shard adds "/tp<rank>"
    std::chrono::milliseconds timeout{60000};  ///< for forming the links
    std::chrono::milliseconds op_timeout{0};   ///< for the last stage's wait on its logits; 0 = timeout
  };
  /// True when this engine can move activations between stages device to device (GPU shards
  /// and a build with NCCL); otherwise they travel through host buffers (Step's hidden_in and
  /// StepOutput::hidden).
  bool CanLinkDevices() const;
  /// Forms one stream-ordered NCCL link per tensor-parallel shard with the same shard of every
  /// other stage (paper §4.1: activations never pass through the host): rank = stage, shard r
  /// of stage s receives from shard r of stage s - 1 and sends to shard r of stage s + 1. From
  /// then on Step takes a non-first stage's activations from the links (hidden_in nullptr)
  /// and leaves a non-last stage's on them (StepOutput::hidden empty). Blocks until every
  /// stage has joined (DeadlineExceeded after `timeout`). FailedPrecondition without
  /// CanLinkDevices(). Replaces earlier links.
  absl::Status ConnectPipeline(const PipelineLinkOptions& options);
  /// Drops the links; Step goes back to host buffers.
  void DisconnectPipeline();
  /// Aborts the links (a session that is over): a wait on them returns, and later steps fail
  /// until the next ConnectPipeline. Any thread, but not during Connect/DisconnectPipeline.
  void AbortPipeline();

  /// Frees a request's KV and sampler now (also done by StepInput::released_ids), and the
  /// KV of its prompt padding if it had any (PaddingSequenceId).
  /// Unknown ids are ignored: a release is idempotent.
  void Release(uint64_t request_id);
  /// Frees every request's KV and sampler (a new session of the engine master).
  void ReleaseAll();

  const ModelConfig& config() const;
  const Partition& partition() const;
  bool is_last_stage() const { return partition().has_head; }
  int64_t kv_slots_total() const;
  int64_t kv_slots_used() const;
  /// Sliding-window layers' window (0: the model has none) and their own pool's slots and the
  /// slots requests hold there (0 when they have no pool of their own: none, or swa_full).
  int32_t sliding_window() const;
  int64_t kv_local_slots_total() const;
  int64_t kv_local_slots_used() const;
  int64_t num_requests() const;
  /// Weight bytes read per full forward pass (all shards), KV pool bytes, and
  /// bytes of converted (non-mapped) weights.
  size_t weight_bytes() const;
  size_t kv_bytes() const;
  size_t owned_weight_bytes() const;
  /// Bytes of weights the backend packed into its own layout at load (all
  /// shards), which replaced their row-major copies.
  size_t packed_weight_bytes() const;
  /// The weights' type: f32 or bf16, or for a quantized checkpoint its embedding's block type.
  DType weight_dtype() const;
  std::string backend_name() const;
  /// Options::cuda_graphs: decode graphs recorded so far, and iterations that ran as graph
  /// launches (shard 0; zeros without the option).
  int64_t graphs_captured() const;
  int64_t graph_launches() const;
  /// Mask-cache statistics of structured-output requests so far (zeros before the first).
  structured::GrammarRuntime::Stats structured_stats() const;

 private:
  struct Shard;
  class ShardPool;
  Engine() = default;
  // Create's steps: one shard's backend, weights and KV cache; every shard's tensor-parallel group; the summary line.
  absl::StatusOr<std::unique_ptr<Shard>> LoadShard(int rank, int num_threads) const;
  absl::Status ConnectShards();
  void LogReady() const;
  // A request's grammar matcher. The vocabulary is built from the checkpoint's tokenizer at the first structured
  // request; when that tokenizer or the spec cannot be loaded the request fails (it never runs unconstrained).
  absl::StatusOr<std::unique_ptr<structured::GrammarMatcher>> NewMatcher(const StructuredOutputSpec& spec);
  // The last stage's sampler for a request it sees for the first time, or its failure in `out`.
  void AddSampler(const StepSequence& seq, StepOutput* out);
  // Checks every sequence of `input` (ids, lengths, positions, vocabulary) and reserves or extends its KV on every
  // shard, appending what it reserved to `reserved` so that a failure can be rolled back.
  absl::Status ValidateAndReserve(const StepInput& input, std::vector<uint64_t>* reserved);
  // Reserves or assigns a new sequence's KV on every shard, or appends its new blocks; on the last stage, notes a
  // new sequence that asks for prompt logprobs.
  absl::Status SetUpKv(const StepSequence& seq, std::vector<uint64_t>* reserved);
  // Undoes what a rejected step set up: appended blocks, then new reservations.
  void RollBack(const std::vector<uint64_t>& reserved);
  // Step's phases after ValidateAndReserve. A rejected step: rolled back, and with pipeline links the previous
  // stage's activations taken off them (DiscardInput), so that the links stay matched.
  void Reject(const StepInput& input, const float* hidden_in, const std::vector<uint64_t>& reserved);
  // The runner's view of the step: seq_specs_ (with prompt-logprobs rows) and the flattened token_ids_. Returns the
  // rows of logits the last stage computes.
  int64_t PlanForward(const StepInput& input);
  // Forward on every shard at once (logits_ on the last stage, StepOutput::hidden or the link on others), then the
  // KV writes committed. On error nothing is committed (the caller rolls back).
  absl::Status RunForward(const float* hidden_in, int64_t samples, StepOutput* out);
  // Last stage: the prompt-logprobs records of the step's logits, and a SampleJob per sequence that samples.
  void CollectLogits(const StepInput& input, StepOutput* out);
  // The SampleJob of a sampling sequence whose row of logits is `logits` (greedy for a request never announced
  // here), or its failure again when no sampler could be made for it.
  void AddSampleJob(const StepSequence& seq, float* logits, StepOutput* out);
  // Last stage: every SampleJob's token into its StepOutput::samples entry.
  void DrawSamples(int32_t vocab, StepOutput* out);

  Options options_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<gloo::rendezvous::Store> local_store_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<ShardPool> pool_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Sampler>> samplers_;
  // Requests that cannot be served (no sampler could be made): reported again every step until released.
  absl::flat_hash_map<uint64_t, absl::Status> failed_;
  // Last stage: the requests that asked for prompt logprobs, with their prompts and how many alternatives.
  struct PromptLogprobsState {
    std::vector<int32_t> prompt;
    int32_t top_k = 0;
  };
  absl::flat_hash_map<uint64_t, PromptLogprobsState> prompt_logprobs_;
  std::vector<std::pair<float, int32_t>> logprob_scratch_;
  std::unique_ptr<structured::MatcherFactory> structured_;
  absl::Status structured_unavailable_;  // why the tokenizer could not be loaded (logged once)
  std::vector<SeqSpec> seq_specs_;
  std::vector<int32_t> token_ids_;
  std::vector<float> logits_;
  // The step's draws: a sampler, its row of logits, its entry of StepOutput::samples.
  struct SampleJob {
    Sampler* sampler;
    float* logits;
    size_t out;
  };
  std::vector<SampleJob> sample_jobs_;
  int sample_threads_ = 1;  // the engine's compute threads, which also draw the step's samples
  // Per-iteration scratch, reused so a steady state does not allocate.
  absl::flat_hash_set<uint64_t> seen_;
  std::vector<uint64_t> reserved_;
  std::vector<std::pair<uint64_t, size_t>> appended_;  // (request, blocks appended) this step
  std::vector<ForwardTimings> timings_;
  bool pipeline_connected_ = false;
};

/// Sets `options->dtype` and `options->device` from the --dtype (auto, f32, bf16)
/// and --device (cpu, cuda) flags every program with an in-process engine takes.
/// InvalidArgument naming the flag and its choices.
absl::Status SetDTypeAndDeviceFromFlags(const std::string& dtype, const std::string& device, Engine::Options* options);

}  // namespace orca::engine
