#include "core/engine/model_runner.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

namespace orca::engine {
namespace {

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const Options& o) {
  if (o.weights == nullptr || o.kv == nullptr || o.backend == nullptr)
    return absl::InvalidArgumentError("ModelRunner needs weights, a KV cache and a backend");
  if (o.weights->partition().tp_size > 1 && o.tp == nullptr)
    return absl::InvalidArgumentError("tensor parallelism needs a communicator");
  if (o.decode_graphs) {
    if (!o.backend->SupportsGraphs())
      return absl::InvalidArgumentError(
          absl::StrCat("decode graphs need a backend that records graphs (cuda); ", o.backend->name(), " does not"));
    const Partition& p = o.weights->partition();
    // The captured region would have to hold the NCCL all-reduces and pipeline sends, which
    // this capture does not do yet (and a host-ordered Gloo collective cannot be captured).
    if (p.tp_size > 1 || !p.has_embedding || !p.has_head)
      return absl::InvalidArgumentError(absl::StrCat(
          "decode graphs are implemented for one stage holding the whole model with tensor parallelism 1; this "
          "shard is tensor-parallel rank ",
          p.tp_rank, " of ", p.tp_size, " holding layers [", p.layer_begin, ", ", p.layer_end, ")",
          p.has_embedding ? "" : " without the embedding", p.has_head ? "" : " without the LM head"));
  }
  return std::unique_ptr<ModelRunner>(new ModelRunner(o));
}

ModelRunner::~ModelRunner() {
  for (Buffer* b : Buffers())
    if (b->ptr) o_.backend->Free(b->ptr);
}

absl::Status ModelRunner::Grow(Buffer& b, size_t bytes) {
  if (bytes <= b.bytes) return absl::OkStatus();
  const size_t want = std::max(bytes, b.bytes + b.bytes / 2);
  if (b.ptr) o_.backend->Free(b.ptr);
  b.ptr = nullptr;
  b.bytes = 0;
  // Graphs read block tables only through attention's sequences, which are staged again
  // before every replay, so a new block_tables_ buffer does not make them stale.
  if (&b != &block_tables_) ++buffers_generation_;
  ORCA_ASSIGN_OR_RETURN(b.ptr, o_.backend->Allocate(want));
  b.bytes = want;
  return absl::OkStatus();
}

absl::Status ModelRunner::EnsureCapacity(int64_t n, int64_t s, int64_t blocks) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  const size_t f = sizeof(float), i = sizeof(int32_t);
  const size_t H = c.hidden_size, Q = static_cast<size_t>(w.local_q_heads()) * c.head_dim,
               KV = static_cast<size_t>(w.local_kv_heads()) * c.head_dim, F = w.local_intermediate();
  ORCA_RETURN_IF_ERROR(Grow(x_, n * H * f));
  ORCA_RETURN_IF_ERROR(Grow(h_, n * H * f));
  ORCA_RETURN_IF_ERROR(Grow(q_, n * Q * f));
  ORCA_RETURN_IF_ERROR(Grow(k_, n * KV * f));
  ORCA_RETURN_IF_ERROR(Grow(v_, n * KV * f));
  ORCA_RETURN_IF_ERROR(Grow(attn_, n * Q * f));
  ORCA_RETURN_IF_ERROR(Grow(ff1_, n * F * f));
  ORCA_RETURN_IF_ERROR(Grow(ff2_, n * F * f));
  ORCA_RETURN_IF_ERROR(Grow(tmp_, n * H * f));  // the all-reduced partial sums; a post-norm's output
  ORCA_RETURN_IF_ERROR(Grow(ids_, n * i));
  ORCA_RETURN_IF_ERROR(Grow(positions_, n * i));
  // With a local KV pool, its slots and tables follow the main pool's (StageBatch).
  const size_t pools = o_.kv->has_local_pool() ? 2 : 1;
  ORCA_RETURN_IF_ERROR(Grow(slots_, pools * n * i));
  ORCA_RETURN_IF_ERROR(Grow(block_tables_, pools * std::max<int64_t>(blocks, 1) * i));
  if (s > 0 && w.vocab_parallel_head()) {
    // Every rank's slice padded to the largest, so that the gather moves equal shares.
    const int32_t tp = w.partition().tp_size;
    const size_t share = s * static_cast<size_t>(VocabShard::MaxRows(c.vocab_size, tp));
    ORCA_RETURN_IF_ERROR(Grow(sample_rows_, s * i));
    ORCA_RETURN_IF_ERROR(Grow(last_, s * H * f));
    ORCA_RETURN_IF_ERROR(Grow(logits_, share * f));
    if (w.partition().tp_rank == 0) ORCA_RETURN_IF_ERROR(Grow(gathered_, share * tp * f));
  } else if (s > 0 && !w.lm_head().empty()) {
    ORCA_RETURN_IF_ERROR(Grow(sample_rows_, s * i));
    ORCA_RETURN_IF_ERROR(Grow(last_, s * H * f));
    ORCA_RETURN_IF_ERROR(Grow(logits_, s * static_cast<size_t>(c.vocab_size) * f));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::Reserve(int64_t tokens) {
  if (tokens <= 0) return absl::OkStatus();
  const int32_t bs = o_.kv->block_size();
  // Not the buffers of sampled rows (logits: a vocabulary's worth each): the first iteration
  // that samples sizes them, from nothing, so that no device buffer is replaced (a GPU
  // backend's Free waits for its stream) and no row count is guessed here.
  ORCA_RETURN_IF_ERROR(EnsureCapacity(tokens, 0, (tokens + bs - 1) / bs + 1));
  for (Buffer* b : Buffers())
    if (b->ptr) o_.backend->Prefault(b->ptr, b->bytes);
  return absl::OkStatus();
}

absl::Status ModelRunner::Forward(const ForwardInput& in, float* hidden_out, float* logits_out,
                                  ForwardTimings* timings) {
  const int64_t t0 = NowMicros();
  int64_t n = 0, samples = 0;
  ORCA_RETURN_IF_ERROR(StageBatch(in, &n, &samples));
  ForwardTimings local;
  if (GraphEligible(in)) {
    ORCA_RETURN_IF_ERROR(ForwardDecodeGraph(in, n, samples, logits_out, &local));
    if (timings) timings->compute_micros += NowMicros() - t0;
    return absl::OkStatus();
  }
  ORCA_RETURN_IF_ERROR(TakeInput(in, n, &local));
  ORCA_RETURN_IF_ERROR(Layers(n, &local));
  ORCA_RETURN_IF_ERROR(HandOn(n, samples, hidden_out, logits_out, &local));
  // No Synchronize: host outputs were copied synchronously, and queued work is ordered on the
  // stream before the next iteration's.
  if (timings) {
    timings->comm_micros += local.comm_micros;
    timings->compute_micros += NowMicros() - t0 - local.comm_micros;
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::StageBatch(const ForwardInput& in, int64_t* n_out, int64_t* samples_out) {
  const ModelWeights& w = *o_.weights;
  kernels::Backend& be = *o_.backend;
  const KvCache& kv = *o_.kv;
  const int32_t bs = kv.block_size();
  const int64_t pools = kv.has_local_pool() ? 2 : 1;
  int64_t n = 0, samples = 0, blocks = 0;
  for (const SeqSpec& s : in.seqs) {
    n += s.num_tokens;
    samples += s.LogitRows();
    blocks += (s.start_pos + s.num_tokens + bs - 1) / bs;
  }
  if (n == 0) return absl::InvalidArgumentError("empty iteration");
  if (w.partition().has_embedding && static_cast<int64_t>(in.token_ids.size()) != n)
    return absl::InvalidArgumentError(
        absl::StrCat("iteration has ", n, " positions but ", in.token_ids.size(), " token ids"));
  if (!w.partition().has_embedding && in.hidden_in == nullptr && o_.pipeline == nullptr)
    return absl::InvalidArgumentError("a non-first stage needs the previous stage's hidden states");
  ORCA_RETURN_IF_ERROR(EnsureCapacity(n, samples, blocks));

  h_positions_.resize(n);
  h_slots_.resize(pools * n);
  h_block_tables_.resize(pools * blocks);
  h_sample_rows_.clear();
  attention_seqs_.resize(in.seqs.size());
  local_attention_seqs_.resize(pools > 1 ? in.seqs.size() : 0);
  int64_t row = 0, block_off = 0;
  for (size_t si = 0; si < in.seqs.size(); ++si) {
    const SeqSpec& s = in.seqs[si];
    const std::vector<int32_t>* table = kv.BlockTable(s.request_id);
    if (table == nullptr)
      return absl::FailedPreconditionError(absl::StrCat("request ", s.request_id, " has no KV reservation"));
    for (int32_t t = 0; t < s.num_tokens; ++t) {
      h_positions_[row + t] = s.start_pos + t;
      h_slots_[row + t] = kv.Slot(s.request_id, s.start_pos + t);
    }
    const int64_t nb = (s.start_pos + s.num_tokens + bs - 1) / bs;
    std::copy(table->begin(), table->begin() + nb, h_block_tables_.begin() + block_off);
    attention_seqs_[si] = {static_cast<int32_t>(row), s.num_tokens, s.start_pos, I(block_tables_) + block_off};
    if (pools > 1) {
      const std::vector<int32_t>* local = kv.LocalBlockTable(s.request_id);
      if (static_cast<int64_t>(local->size()) < nb)
        return absl::FailedPreconditionError(
            absl::StrCat("request ", s.request_id, " has no sliding-window KV for its positions up to ",
                         s.start_pos + s.num_tokens - 1, " (KvCache::AllocateLocal was not called)"));
      for (int32_t t = 0; t < s.num_tokens; ++t) h_slots_[n + row + t] = kv.LocalSlot(s.request_id, s.start_pos + t);
      std::copy(local->begin(), local->begin() + nb, h_block_tables_.begin() + blocks + block_off);
      local_attention_seqs_[si] = {static_cast<int32_t>(row), s.num_tokens, s.start_pos,
                                   I(block_tables_) + blocks + block_off};
    }
    for (int32_t t = s.num_tokens - s.LogitRows(); t < s.num_tokens; ++t)
      h_sample_rows_.push_back(static_cast<int32_t>(row + t));
    row += s.num_tokens;
    block_off += nb;
  }
  be.CopyToDevice(positions_.ptr, h_positions_.data(), n * sizeof(int32_t));
  be.CopyToDevice(slots_.ptr, h_slots_.data(), pools * n * sizeof(int32_t));
  be.CopyToDevice(block_tables_.ptr, h_block_tables_.data(), pools * blocks * sizeof(int32_t));
  *n_out = n;
  *samples_out = samples;
  return absl::OkStatus();
}

absl::Status ModelRunner::ForwardDecodeGraph(const ForwardInput& in, int64_t n, int64_t samples, float* logits_out,
                                             ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  kernels::Backend& be = *o_.backend;
  // Every input the graph's ops read goes into its fixed device buffer first, queued
  // before the launch: the graph holds no copies, so a replay reads this step's values.
  be.CopyToDevice(ids_.ptr, in.token_ids.data(), n * sizeof(int32_t));
  if (samples > 0) be.CopyToDevice(sample_rows_.ptr, h_sample_rows_.data(), samples * sizeof(int32_t));
  kernels::AttentionParams attn;
  attn.num_q_heads = w.local_q_heads();
  attn.kv = o_.kv->Layer(0);  // every layer's attention has the same sequences and head layout
  attn.seqs = attention_seqs_.data();
  attn.num_seqs = static_cast<int32_t>(attention_seqs_.size());
  be.StageAttention(attn);
  ORCA_RETURN_IF_ERROR(RunDecodeGraph(n, samples, timings));
  if (samples > 0) {
    ORCA_RETURN_IF_ERROR(WaitForDevice());
    be.CopyToHost(logits_out, logits_.ptr, samples * static_cast<size_t>(w.config().vocab_size) * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::TakeInput(const ForwardInput& in, int64_t n, ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  kernels::Backend& be = *o_.backend;
  const int64_t H = w.config().hidden_size;
  if (w.partition().has_embedding) {
    be.CopyToDevice(ids_.ptr, in.token_ids.data(), n * sizeof(int32_t));
    Embed(n);
  } else if (in.hidden_in == nullptr) {
    // Queued on the stream: the layers wait for the activations on the device, not here.
    const int64_t t0 = NowMicros();
    ORCA_RETURN_IF_ERROR(o_.pipeline->Recv(o_.pipeline->rank() - 1, x_.ptr, n * H * sizeof(float)));
    timings->comm_micros += NowMicros() - t0;
  } else {
    be.CopyToDevice(x_.ptr, in.hidden_in, n * H * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::HandOn(int64_t n, int64_t samples, float* hidden_out, float* logits_out,
                                 ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  const int64_t H = w.config().hidden_size;
  if (!w.partition().has_head) {
    if (o_.pipeline != nullptr) {
      // Every rank holds the whole hidden state after the all-reduces: each sends its own copy
      // to the same rank of the next stage, so that stage needs no broadcast.
      const int64_t t0 = NowMicros();
      ORCA_RETURN_IF_ERROR(o_.pipeline->Send(o_.pipeline->rank() + 1, x_.ptr, n * H * sizeof(float)));
      timings->comm_micros += NowMicros() - t0;
    } else if (hidden_out != nullptr) {
      o_.backend->CopyToHost(hidden_out, x_.ptr, n * H * sizeof(float));
    }
  } else if (samples > 0 && (w.vocab_parallel_head() || !w.lm_head().empty())) {
    ORCA_RETURN_IF_ERROR(Head(samples, logits_out, timings));
  }
  return absl::OkStatus();
}

bool ModelRunner::GraphEligible(const ForwardInput& in) const {
  if (!o_.decode_graphs || o_.pipeline != nullptr || in.hidden_in != nullptr) return false;
  // A graph stages one attention table per step; sliding-window layers with a pool of their own need a second.
  if (o_.kv->has_local_pool()) return false;
  const ModelWeights& w = *o_.weights;
  const Partition& p = w.partition();
  if (p.tp_size > 1 || !p.has_embedding || !p.has_head || w.vocab_parallel_head() || w.lm_head().empty()) return false;
  for (const SeqSpec& s : in.seqs)
    if (s.num_tokens != 1 || s.all_logits) return false;  // a prompt (or its logprobs): not a decode step
  return true;
}

absl::Status ModelRunner::RunDecodeGraph(int64_t n, int64_t samples, ForwardTimings* timings) {
  kernels::Backend& be = *o_.backend;
  DecodeGraph& g = decode_graphs_[{n, samples}];
  if (g.graph != nullptr && g.buffers_generation == buffers_generation_) {
    const absl::Status replayed = be.Replay(*g.graph);
    if (replayed.ok()) {
      ++graph_launches_;
      return absl::OkStatus();
    }
    if (!absl::IsFailedPrecondition(replayed)) return replayed;
  }
  g.graph.reset();  // none yet, or it reads buffers since reallocated: record it (again)
  if (!g.warmed_up) {
    g.warmed_up = true;
    return DeviceBody(n, samples, timings);
  }
  ORCA_RETURN_IF_ERROR(be.BeginCapture());
  const absl::Status body = DeviceBody(n, samples, timings);
  absl::StatusOr<std::unique_ptr<kernels::OpGraph>> graph = be.EndCapture();
  ORCA_RETURN_IF_ERROR(body);
  ORCA_RETURN_IF_ERROR(graph.status());
  g.graph = std::move(*graph);
  g.buffers_generation = buffers_generation_;
  ++graphs_captured_;
  ORCA_RETURN_IF_ERROR(be.Replay(*g.graph));  // recording ran nothing
  ++graph_launches_;
  return absl::OkStatus();
}

absl::Status ModelRunner::DeviceBody(int64_t n, int64_t samples, ForwardTimings* timings) {
  Embed(n);
  ORCA_RETURN_IF_ERROR(Layers(n, timings));
  if (samples > 0) {
    FinalNorm(samples);
    LmHead(samples);
  }
  return absl::OkStatus();
}

void ModelRunner::Embed(int64_t n) {
  const ModelWeights& w = *o_.weights;
  kernels::Backend& be = *o_.backend;
  be.Embedding(I(ids_), n, w.token_embedding(), F(x_));
  if (family_.learned_positions) be.AddPositionEmbedding(I(positions_), n, w.position_embedding(), F(x_));
  if (w.config().embedding_scale > 0) be.Scale(F(x_), n * w.config().hidden_size, w.config().embedding_scale);
}

absl::Status ModelRunner::Layers(int64_t n, ForwardTimings* timings) {
  residual_pending_ = false;
  for (int32_t l = 0; l < o_.weights->num_local_layers(); ++l) ORCA_RETURN_IF_ERROR(Layer(l, n, timings));
  FlushResidual(n);
  return absl::OkStatus();
}

void ModelRunner::FinalNorm(int64_t samples) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::Backend& be = *o_.backend;
  const int64_t H = c.hidden_size;
  be.GatherRows(F(x_), I(sample_rows_), samples, H, F(last_));
  if (family_.norm == NormKind::kLayer)
    be.LayerNorm(F(last_), w.final_norm(), w.final_norm_bias(), samples, H, c.norm_eps, F(last_));
  else
    be.RmsNorm(F(last_), w.final_norm(), samples, H, c.norm_eps, F(last_));
}

void ModelRunner::LmHead(int64_t samples) {
  o_.backend->Linear(F(last_), samples, o_.weights->lm_head(), nullptr, F(logits_));
  const ModelConfig& c = o_.weights->config();
  const int64_t values = samples * o_.weights->head_vocab().size;
  if (c.logit_scale > 0) o_.backend->Scale(F(logits_), values, 1.0f / c.logit_scale);  // Granite's logits_scaling
  if (c.final_softcap > 0) o_.backend->Softcap(F(logits_), values, c.final_softcap);
}

absl::Status ModelRunner::Head(int64_t samples, float* logits_out, ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::Backend& be = *o_.backend;
  be.CopyToDevice(sample_rows_.ptr, h_sample_rows_.data(), samples * sizeof(int32_t));
  FinalNorm(samples);
  if (w.vocab_parallel_head()) return GatherVocabSlices(samples, logits_out, timings);
  LmHead(samples);
  ORCA_RETURN_IF_ERROR(WaitForDevice());
  be.CopyToHost(logits_out, logits_.ptr, samples * static_cast<size_t>(c.vocab_size) * sizeof(float));
  return absl::OkStatus();
}

absl::Status ModelRunner::GatherVocabSlices(int64_t samples, float* logits_out, ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  kernels::Backend& be = *o_.backend;
  const int64_t vocab = w.config().vocab_size;
  const int32_t tp = o_.tp->size(), rank = o_.tp->rank();
  if (rank == 0 && logits_out == nullptr)
    return absl::InvalidArgumentError("rank 0 of the last stage needs logits_out");
  // [samples, slice] here; a rank with no rows (a vocabulary smaller than the group) sends padding only.
  if (w.head_vocab().size > 0) LmHead(samples);
  const size_t share = static_cast<size_t>(samples * VocabShard::MaxRows(vocab, tp));
  if (!o_.tp->stream_ordered()) be.Synchronize();
  const int64_t t0 = NowMicros();
  ORCA_RETURN_IF_ERROR(o_.tp->Gather(F(logits_), share, /*root=*/0, rank == 0 ? F(gathered_) : nullptr));
  if (rank == 0) ORCA_RETURN_IF_ERROR(WaitForDevice());
  timings->comm_micros += NowMicros() - t0;
  if (rank != 0) return absl::OkStatus();
  // Rank q's share holds [samples, its slice]; each row goes to columns [begin, begin + size) of the full rows.
  h_gathered_.resize(share * tp);
  be.CopyToHost(h_gathered_.data(), gathered_.ptr, h_gathered_.size() * sizeof(float));
  for (int32_t q = 0; q < tp; ++q) {
    const VocabShard slice = VocabShard::For(vocab, q, tp);
    const float* src = h_gathered_.data() + q * share;
    for (int64_t s = 0; s < samples; ++s)
      std::memcpy(logits_out + s * vocab + slice.begin, src + s * slice.size, slice.size * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::RowParallelOutput(const float* in, int64_t n, const kernels::WeightView& wv,
                                            const float* bias, const float* post_norm, ForwardTimings* timings) {
  kernels::Backend& be = *o_.backend;
  const ModelConfig& c = o_.weights->config();
  const int64_t H = c.hidden_size;
  const bool parallel = o_.tp != nullptr && o_.tp->size() > 1;
  const bool scaled = c.residual_scale != 0 && c.residual_scale != 1;
  if (!parallel && post_norm == nullptr && !scaled) {
    be.Linear(in, n, wv, bias, F(x_), /*accumulate=*/true);
    return absl::OkStatus();
  }
  FlushResidual(n);  // tmp_ is about to be overwritten
  // Partial sums from every shard (bias only on rank 0), summed across the group.
  be.Linear(in, n, wv, bias, F(tmp_));
  if (parallel) {
    if (!o_.tp->stream_ordered()) be.Synchronize();  // a host-ordered all-reduce reads tmp_ now
    const int64_t t0 = NowMicros();
    ORCA_RETURN_IF_ERROR(o_.tp->AllReduceSum(F(tmp_), static_cast<size_t>(n * H)));
    timings->comm_micros += NowMicros() - t0;
  }
  if (post_norm != nullptr) be.RmsNorm(F(tmp_), post_norm, n, H, c.norm_eps, F(tmp_));
  if (scaled) be.Scale(F(tmp_), n * H, c.residual_scale);  // Granite's residual_multiplier
  if (o_.fused_kernels)
    residual_pending_ = true;  // added by the next norm (AddRmsNorm) or FlushResidual
  else
    be.Add(F(x_), F(tmp_), n * H);
  return absl::OkStatus();
}

absl::Status ModelRunner::WaitForDevice() {
  // The pipeline link first: a failed previous stage is the likelier cause of a stall, and
  // aborting that link (not the tensor-parallel group, formed once) lets the stream drain.
  if (o_.pipeline != nullptr && o_.pipeline->stream_ordered()) return o_.pipeline->Drain();
  if (o_.tp != nullptr && o_.tp->stream_ordered()) return o_.tp->Drain();
  return absl::OkStatus();
}

absl::Status ModelRunner::DiscardInput(int64_t num_tokens) {
  if (o_.pipeline == nullptr || o_.weights->partition().has_embedding || num_tokens <= 0) return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(num_tokens) * o_.weights->config().hidden_size * sizeof(float);
  ORCA_RETURN_IF_ERROR(Grow(x_, bytes));
  return o_.pipeline->Recv(o_.pipeline->rank() - 1, x_.ptr, bytes);
}

void ModelRunner::FlushResidual(int64_t n) {
  if (!residual_pending_) return;
  o_.backend->Add(F(x_), F(tmp_), n * o_.weights->config().hidden_size);
  residual_pending_ = false;
}

void ModelRunner::NormInto(NormKind kind, const float* weight, const float* bias, int64_t n, float* out) {
  const ModelConfig& c = o_.weights->config();
  kernels::Backend& be = *o_.backend;
  const int64_t H = c.hidden_size;
  if (kind == NormKind::kLayer) {
    FlushResidual(n);
    be.LayerNorm(F(x_), weight, bias, n, H, c.norm_eps, out);
  } else if (residual_pending_) {
    be.AddRmsNorm(F(x_), F(tmp_), weight, n, H, c.norm_eps, out);
    residual_pending_ = false;
  } else {
    be.RmsNorm(F(x_), weight, n, H, c.norm_eps, out);
  }
}

class ModelRunner::Ops : public LayerOps {
 public:
  Ops(ModelRunner* r, int64_t n, ForwardTimings* timings) : r_(*r), n_(n), timings_(timings) {}
  const ModelConfig& config() const override { return r_.o_.weights->config(); }
  void Norm(NormKind kind, const float* weight, const float* bias) override {
    if (kind == NormKind::kNone) {
      r_.FlushResidual(n_);
      r_.block_input_ = &r_.x_;  // the block reads the residual stream itself (OLMo 2)
      return;
    }
    r_.block_input_ = &r_.h_;
    r_.NormInto(kind, weight, bias, n_, r_.F(r_.h_));
  }
  void QkvProjection(const LayerWeights& lw) override { r_.QkvProjection(lw, n_); }
  void QkNorm(const float* q_weight, const float* k_weight) override { r_.QkNorm(q_weight, k_weight, n_); }
  absl::Status QkNormWhole(const float* q_weight, const float* k_weight) override {
    return r_.QkNormWhole(q_weight, k_weight, n_, timings_);
  }
  void PositionAndCache(int32_t l, bool rotary) override { r_.RopeAndKvWrite(l, n_, rotary); }
  void Attend(int32_t l) override { r_.Attend(l); }
  absl::Status AttentionOutput(const LayerWeights& lw, const float* post_norm) override {
    return r_.RowParallelOutput(r_.F(r_.attn_), n_, lw.o, lw.o_bias, post_norm, timings_);
  }
  void SwiGlu(const LayerWeights& lw) override { r_.GatedMlp(lw, n_, /*gelu=*/false); }
  void GeGlu(const LayerWeights& lw) override { r_.GatedMlp(lw, n_, /*gelu=*/true); }
  void GeluUp(const LayerWeights& lw) override { r_.GeluMlp(lw, n_); }
  void QueryTemperature() override { r_.QueryTemperature(n_); }
  absl::Status MlpOutput(const LayerWeights& lw, const float* post_norm) override {
    return r_.RowParallelOutput(r_.F(r_.ff1_), n_, lw.down, lw.down_bias, post_norm, timings_);
  }

 private:
  ModelRunner& r_;
  const int64_t n_;
  ForwardTimings* const timings_;
};

absl::Status ModelRunner::Layer(int32_t l, int64_t n, ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  Ops ops(this, n, timings);
  block_input_ = &h_;
  return family_.forward_layer(ops, l, w.layer(l));
}

void ModelRunner::QkvProjection(const LayerWeights& lw, int64_t n) {
  const kernels::Backend::LinearOut qkv[] = {
      {&lw.q, lw.q_bias, F(q_)}, {&lw.k, lw.k_bias, F(k_)}, {&lw.v, lw.v_bias, F(v_)}};
  o_.backend->LinearMany(F(*block_input_), n, qkv, 3);
}

absl::Status ModelRunner::QkNormWhole(const float* q_weight, const float* k_weight, int64_t n,
                                      ForwardTimings* timings) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::Backend& be = *o_.backend;
  const int64_t D = c.head_dim, qh = w.local_q_heads(), kh = w.local_kv_heads();
  if (o_.tp == nullptr || o_.tp->size() == 1) {  // one shard holds every head: one RMSNorm per row
    be.RmsNorm(F(q_), q_weight, n, qh * D, c.norm_eps, F(q_));
    be.RmsNorm(F(k_), k_weight, n, kh * D, c.norm_eps, F(k_));
    return absl::OkStatus();
  }
  // Each shard holds its heads' slice of the row: the squares of the whole row are the group's sum. The MLP's
  // second buffer (n × FFN share >= 2n floats) is free until the MLP.
  float* sums = F(ff2_);
  be.SumSquares(F(q_), n, qh * D, sums);
  be.SumSquares(F(k_), n, kh * D, sums + n);
  if (!o_.tp->stream_ordered()) be.Synchronize();  // a host-ordered all-reduce reads the sums now
  const int64_t t0 = NowMicros();
  ORCA_RETURN_IF_ERROR(o_.tp->AllReduceSum(sums, static_cast<size_t>(2 * n)));
  timings->comm_micros += NowMicros() - t0;
  be.RmsNormFromSums(F(q_), q_weight, sums, n, qh * D, int64_t{c.num_heads} * D, c.norm_eps, F(q_));
  be.RmsNormFromSums(F(k_), k_weight, sums + n, n, kh * D, int64_t{c.num_kv_heads} * D, c.norm_eps, F(k_));
  return absl::OkStatus();
}

void ModelRunner::QkNorm(const float* q_weight, const float* k_weight, int64_t n) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::Backend& be = *o_.backend;
  const int64_t D = c.head_dim, qh = w.local_q_heads(), kh = w.local_kv_heads();
  // [n, heads × head_dim] rows are [n × heads, head_dim] rows: one RMSNorm per head.
  be.RmsNorm(F(q_), q_weight, n * qh, D, c.norm_eps, F(q_));
  be.RmsNorm(F(k_), k_weight, n * kh, D, c.norm_eps, F(k_));
}

void ModelRunner::RopeAndKvWrite(int32_t l, int64_t n, bool rotary) {
  const kernels::KvLayerView kv = o_.kv->Layer(l);
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::Backend& be = *o_.backend;
  kernels::KvWriteParams write;
  write.k = F(k_);
  write.v = F(v_);
  write.slots = I(slots_) + (o_.kv->IsLocal(l) ? n : 0);  // the local pool's after the main pool's
  write.num_tokens = static_cast<int32_t>(n);
  write.kv = kv;
  if (!rotary) {
    be.KvWrite(write);
    return;
  }
  kernels::RopeParams rope;
  rope.style = c.rope_style;
  rope.rotary_dim = c.rotary_dim;
  rope.inv_freq = w.rope_inv_freq(w.partition().layer_begin + l);
  // YaRN's and LongRoPE's magnitude factor multiplies cos and sin: the rotated dimensions of q and k only.
  rope.attention_factor = static_cast<float>(c.RopeAttentionFactor());
  if (o_.fused_kernels) {
    be.RopeKvWrite(F(q_), F(k_), I(positions_), w.local_q_heads(), rope, write);
  } else {
    be.Rope(F(q_), F(k_), I(positions_), n, w.local_q_heads(), w.local_kv_heads(), c.head_dim, rope);
    be.KvWrite(write);
  }
}

void ModelRunner::Attend(int32_t l) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  kernels::AttentionParams attn;
  attn.q = F(q_);
  attn.out = F(attn_);
  attn.num_q_heads = w.local_q_heads();
  attn.scale = c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  attn.window = c.IsLocalLayer(w.partition().layer_begin + l) ? c.sliding_window : 0;
  attn.softcap = c.attn_softcap;
  attn.kv = o_.kv->Layer(l);
  attn.seqs = o_.kv->IsLocal(l) ? local_attention_seqs_.data() : attention_seqs_.data();
  attn.num_seqs = static_cast<int32_t>(attention_seqs_.size());
  o_.backend->Attention(attn);
}

void ModelRunner::GatedMlp(const LayerWeights& lw, int64_t n, bool gelu) {
  kernels::Backend& be = *o_.backend;
  const kernels::Backend::LinearOut gate_up[] = {{&lw.gate, nullptr, F(ff1_)}, {&lw.up, lw.up_bias, F(ff2_)}};
  be.LinearMany(F(*block_input_), n, gate_up, 2);
  if (gelu)
    be.GeluMul(F(ff1_), F(ff2_), n, o_.weights->local_intermediate(), F(ff1_));
  else
    be.SiluMul(F(ff1_), F(ff2_), n, o_.weights->local_intermediate(), F(ff1_));
}

void ModelRunner::GeluMlp(const LayerWeights& lw, int64_t n) {
  kernels::Backend& be = *o_.backend;
  be.Linear(F(*block_input_), n, lw.up, lw.up_bias, F(ff1_));
  be.GeluTanh(F(ff1_), n * o_.weights->local_intermediate());
}

void ModelRunner::QueryTemperature(int64_t n) {
  const ModelWeights& w = *o_.weights;
  const ModelConfig& c = w.config();
  o_.backend->AttentionTemperature(F(q_), I(positions_), n, static_cast<int64_t>(w.local_q_heads()) * c.head_dim,
                                   c.attn_temperature_scale, c.attn_temperature_floor);
}

}  // namespace orca::engine
