#pragma once
/// The forward pass of one shard over one selectively batched iteration
/// (paper §4.2, Fig. 5): every non-attention op runs once on the flattened
/// [ΣL, H] tensor holding all tokens of all requests — prompts of requests in
/// the initiation phase and single tokens of those in the increment phase —
/// while attention is split per request against that request's cached keys
/// and values. The LM head runs only on the last token of requests that
/// sample, and on every token of those that ask for all their logits
/// (prompt logprobs). With tensor parallelism the head is vocabulary-parallel:
/// each rank computes the logits of its VocabShard and rank 0 gathers them
/// (exact: sampling sees the same full rows). Buffers grow to the largest batch seen, so a steady state does no
/// allocation.
///
/// Host synchronisation (paper §4.1: no stage waits on its host): with stream-ordered
/// communicators (NCCL) for the tensor-parallel group and the pipeline link, Forward only
/// queues work on the backend's stream — activations arrive from the previous stage and
/// leave for the next one device to device on that stream — and the host waits for the
/// device once per iteration, on the last stage's rank 0, for the logits it samples from
/// (a bounded wait that reports a failed or hung peer, Communicator::Drain). With
/// host-ordered ones (Gloo) the device is synchronised before each collective. (A buffer
/// growing past the largest batch so far also waits once, when the old one is freed.)

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/engine/communicator.h"
#include "core/engine/kv_cache.h"
#include "core/engine/model_weights.h"
#include "core/engine/models/model_family.h"
#include "core/engine/step_records.h"
#include "kernels/include/backend.h"

namespace orca::engine {

/// One request's share of an iteration.
struct SeqSpec {
  uint64_t request_id = 0;
  int32_t num_tokens = 0;  ///< L: all prompt tokens (initiation) or 1 (increment)
  int32_t start_pos = 0;   ///< position of its first token this iteration
  bool sample = true;      ///< produce logits for its last token
  /// Produce logits for every token of it this iteration (prompt logprobs), not
  /// only the last; its sample row, if any, is the last of them.
  bool all_logits = false;
  /// Rows of logits Forward writes for it.
  int32_t LogitRows() const { return all_logits ? num_tokens : (sample ? 1 : 0); }
};

struct ForwardInput {
  absl::Span<const SeqSpec> seqs;
  absl::Span<const int32_t> token_ids;  ///< flattened ΣL ids (first stage only)
  /// Host [ΣL, H] from the previous stage (other stages), or nullptr when they arrive over
  /// Options::pipeline.
  const float* hidden_in = nullptr;
};

class ModelRunner {
 public:
  struct Options {
    const ModelWeights* weights = nullptr;
    KvCache* kv = nullptr;
    kernels::Backend* backend = nullptr;
    Communicator* tp = nullptr;  ///< the tensor-parallel group (nullptr when tp_size == 1)
    /// This shard's link to the same tensor-parallel rank of every other stage (member rank =
    /// stage), stream-ordered (NCCL): when set, a non-first stage receives its activations from
    /// the previous stage over it (ForwardInput::hidden_in nullptr) and a non-last stage sends
    /// them to the next one, device to device. nullptr: activations travel through host
    /// buffers (hidden_in / hidden_out) and the caller moves them (Gloo). May be replaced
    /// between iterations (SetPipeline).
    Communicator* pipeline = nullptr;
    /// Use the backend's fused pairs: RoPE + KV write, and (tensor parallel) the all-reduce's
    /// residual add + the next RMSNorm. Same results; fewer launches/passes where the backend
    /// fuses them (CUDA), the same ops where it does not (CPU).
    bool fused_kernels = true;
    /// Decode iterations as graphs (CUDA Graphs; needs Backend::SupportsGraphs, one stage holding
    /// the whole model, no tensor-parallel group and no pipeline link): an iteration whose
    /// sequences all run one token (the increment phase) is recorded once per batch shape —
    /// B rows, S of them sampled — and replayed on later iterations of that shape, after its
    /// inputs (ids, positions, KV slots, block tables, attention's sequences, sample rows) are
    /// copied into the fixed device buffers the graph reads. The first iteration of a shape
    /// runs eagerly (it sizes the backend's scratch, which a capture cannot allocate), the
    /// second records and launches it, later ones replay; any other iteration runs eagerly.
    /// Same results as without graphs, bit for bit.
    bool decode_graphs = false;
  };
  static absl::StatusOr<std::unique_ptr<ModelRunner>> Create(const Options& options);
  ~ModelRunner();

  /// Runs this shard's layers. The caller has validated the sequences against
  /// the KV cache (KvCache::CheckWrite). On a non-last stage, writes the hidden
  /// states [ΣL, H] to `hidden_out`; on the last stage (rank 0), the logits
  /// [Σ LogitRows(), vocab] to `logits_out`, in batch order (other ranks pass
  /// nullptr). Host pointers. With a pipeline link, hidden_out is not written (the
  /// activations went to the next stage).
  absl::Status Forward(const ForwardInput& input, float* hidden_out, float* logits_out, ForwardTimings* timings);
  /// A non-first stage with a pipeline link whose iteration was rejected before Forward: takes
  /// the previous stage's activations for `num_tokens` tokens off the link and drops them, so
  /// that the link stays matched (every frame the previous stage sent is received).
  absl::Status DiscardInput(int64_t num_tokens);
  /// Sizes the activation buffers for an iteration of `tokens` tokens and makes them resident
  /// (Backend::Prefault), so that the first iterations up to that size take no allocation or
  /// page fault; larger ones still grow them. The buffers of sampled rows (logits) are left
  /// to the first iteration that samples. At load.
  absl::Status Reserve(int64_t tokens);
  /// Sets or clears (nullptr) the pipeline link; see Options::pipeline.
  void SetPipeline(Communicator* pipeline) { o_.pipeline = pipeline; }

  /// Options::decode_graphs: graphs recorded so far, and iterations that ran as a graph launch
  /// (the recording iteration's launch included).
  int64_t graphs_captured() const { return graphs_captured_; }
  int64_t graph_launches() const { return graph_launches_; }

 private:
  explicit ModelRunner(const Options& options) : o_(options), family_(FamilyOf(options.weights->config().arch)) {}
  absl::Status EnsureCapacity(int64_t tokens, int64_t samples, int64_t blocks);

  // Forward's phases. The iteration's layout (positions, KV slots, block tables, attention's
  // sequences, sampled rows) staged on the host and copied to the device; its rows and
  // sampled rows in *n and *samples.
  absl::Status StageBatch(const ForwardInput& in, int64_t* n, int64_t* samples);
  // A decode iteration through its graph (GraphEligible): the graph's inputs copied into its
  // fixed buffers, RunDecodeGraph, and the logits copied to the host.
  absl::Status ForwardDecodeGraph(const ForwardInput& in, int64_t n, int64_t samples, float* logits_out,
                                  ForwardTimings* timings);
  // x_ = this stage's input: the embedded tokens (first stage), the previous stage's
  // activations off the pipeline link, or `hidden_in` copied to the device.
  absl::Status TakeInput(const ForwardInput& in, int64_t n, ForwardTimings* timings);
  // This stage's output: the activations to the next stage (link or `hidden_out`), or on the
  // last stage the logits of the sampled rows (Head).
  absl::Status HandOn(int64_t n, int64_t samples, float* hidden_out, float* logits_out, ForwardTimings* timings);

  // The model's blocks over kernels::Backend ops, on the flattened [n, H] rows of x_ (the
  // residual stream). x_ = the token embeddings of ids_ (+ learned position embeddings, GPT-2).
  void Embed(int64_t n);
  // Every local layer in turn, starting and ending with no residual pending.
  absl::Status Layers(int64_t n, ForwardTimings* timings);
  // One layer, as its family composes it (ModelFamily::forward_layer) from the blocks below, which Ops
  // (a LayerOps over this runner and one iteration's rows) exposes.
  absl::Status Layer(int32_t local_layer, int64_t n, ForwardTimings* timings);
  class Ops;
  // q_, k_, v_ = h_ · W_q, W_k, W_v (+ biases), in one pass over h_.
  void QkvProjection(const LayerWeights& lw, int64_t n);
  // RMSNorm of every local head of q_ and k_ (head_dim values each) with the given weights.
  void QkNorm(const float* q_weight, const float* k_weight, int64_t n);
  // RMSNorm of each token's whole q and whole k projection (OLMo 2), the weights this shard's heads' slice; with
  // tensor parallelism the group all-reduces each row's sum of squares.
  absl::Status QkNormWhole(const float* q_weight, const float* k_weight, int64_t n, ForwardTimings* timings);
  // Rotates q_ and k_ at their positions when `rotary` (fused with the write when Options::fused_kernels) and
  // writes k_ and v_ into this layer's KV slots.
  void RopeAndKvWrite(int32_t local_layer, int64_t n, bool rotary);
  // attn_ = softmax(q_ kᵀ · scale) v per sequence, over its cached keys and values (the local layers'
  // sliding window and the scores' soft-capping as the config says).
  void Attend(int32_t local_layer);
  // ff1_ = silu(h_ · W_gate) ⊙ (h_ · W_up + b_up) (SwiGLU; ff2_ is scratch).
  void GatedMlp(const LayerWeights& lw, int64_t n, bool gelu);
  // ff1_ = gelu_tanh(h_ · W_up + b_up) (GPT-2's c_fc).
  void GeluMlp(const LayerWeights& lw, int64_t n);
  // q_ rows × the attention temperature of their positions (ModelConfig::attn_temperature_scale).
  void QueryTemperature(int64_t n);
  // The final norm and LM head over the rows `samples` of x_; writes host logits on rank 0.
  absl::Status Head(int64_t samples, float* logits_out, ForwardTimings* timings);
  // The head's vocabulary-parallel tail: this rank's slice of the logits, gathered on rank 0.
  absl::Status GatherVocabSlices(int64_t samples, float* logits_out, ForwardTimings* timings);
  // The device part of a single-stage iteration whose inputs are on the device: embedding,
  // layers, and the head's GatherRows, final norm and GEMM into logits_. Queues ops only (no
  // copy, allocation or host wait), so that it can be recorded as a graph.
  absl::Status DeviceBody(int64_t n, int64_t samples, ForwardTimings* timings);
  // last_ = the final norm of rows sample_rows_ of x_.
  void FinalNorm(int64_t samples);
  // logits_ = last_ · this rank's rows of the LM head.
  void LmHead(int64_t samples);
  // True when Options::decode_graphs applies to this iteration (every sequence decodes one token).
  bool GraphEligible(const ForwardInput& in) const;
  // Runs DeviceBody for a decode iteration of n rows (`samples` sampled) through its graph:
  // eagerly the first time, recording and launching it the second, replaying it afterwards.
  absl::Status RunDecodeGraph(int64_t n, int64_t samples, ForwardTimings* timings);
  // Before the host reads the logits: waits for the stream through a stream-ordered communicator
  // (bounded, reporting a failed peer); nothing to do with host-ordered ones.
  absl::Status WaitForDevice();
  // x_ += in · w (+ bias), the partial sums all-reduced across the tensor-parallel group; with `post_norm`,
  // x_ += RMSNorm(in · w) (the norm applied to the all-reduced sum).
  absl::Status RowParallelOutput(const float* in, int64_t n, const kernels::WeightView& w, const float* bias,
                                 const float* post_norm, ForwardTimings* timings);
  // out = norm(x_) of `kind` with the layer's weights; first adds a pending all-reduced residual (fused with an
  // RMSNorm).
  void NormInto(NormKind kind, const float* weight, const float* bias, int64_t n, float* out);
  // x_ += tmp_ if an all-reduced partial sum is still pending.
  void FlushResidual(int64_t n);

  // Tensor parallel with fused kernels: tmp_ holds an all-reduced sum not yet added to x_.
  bool residual_pending_ = false;
  struct Buffer;
  // What the layer's projections read: h_ (the normed residual stream) or x_ itself (NormKind::kNone).
  const Buffer* block_input_ = nullptr;
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  absl::Status Grow(Buffer& b, size_t bytes);
  // Bumped when Grow reallocates a buffer: graphs recorded before read the old one.
  uint64_t buffers_generation_ = 0;
  // Options::decode_graphs: one entry per (rows, sampled rows) shape seen.
  struct DecodeGraph {
    bool warmed_up = false;  // ran eagerly once
    std::unique_ptr<kernels::OpGraph> graph;
    uint64_t buffers_generation = 0;  // of the buffers the graph reads
  };
  std::map<std::pair<int64_t, int64_t>, DecodeGraph> decode_graphs_;
  int64_t graphs_captured_ = 0;
  int64_t graph_launches_ = 0;
  float* F(const Buffer& b) const { return static_cast<float*>(b.ptr); }
  int32_t* I(const Buffer& b) const { return static_cast<int32_t*>(b.ptr); }

  Options o_;
  const ModelFamily& family_;  // resolved once: the layer loop and the embedding/head read it every step
  Buffer x_, h_, q_, k_, v_, attn_, ff1_, ff2_, tmp_, last_, logits_, gathered_;
  Buffer ids_, positions_, slots_, block_tables_, sample_rows_;
  std::array<Buffer*, 17> Buffers() {
    return {&x_,    &h_,      &q_,        &k_,   &v_,         &attn_,  &ff1_,          &ff2_,        &tmp_,
            &last_, &logits_, &gathered_, &ids_, &positions_, &slots_, &block_tables_, &sample_rows_};
  }
  // Host staging, reused across iterations.
  std::vector<int32_t> h_positions_, h_slots_, h_block_tables_, h_sample_rows_;
  std::vector<float> h_gathered_;  // rank 0: every rank's logit slice, before they are interleaved
  std::vector<kernels::AttentionSeq> attention_seqs_;
  // With a local KV pool (KvCache::has_local_pool): slots_ and block_tables_ hold the local
  // pool's slots and tables after the main ones, and the sliding-window layers attend over these.
  std::vector<kernels::AttentionSeq> local_attention_seqs_;
};

}  // namespace orca::engine
