#include "core/engine/model_weights.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/dtype.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/engine/models/model_family.h"

namespace orca::engine {

using kernels::WeightView;

Partition Partition::ForStage(int32_t stage, int32_t num_stages, int32_t num_layers, int32_t tp_rank, int32_t tp_size) {
  Partition p;
  const int32_t base = num_layers / num_stages, extra = num_layers % num_stages;
  p.layer_begin = stage * base + std::min(stage, extra);
  p.layer_end = p.layer_begin + base + (stage < extra ? 1 : 0);
  p.tp_rank = tp_rank;
  p.tp_size = tp_size;
  p.has_embedding = stage == 0;
  p.has_head = stage == num_stages - 1;
  return p;
}

VocabShard VocabShard::For(int64_t vocab, int32_t tp_rank, int32_t tp_size) {
  const int64_t base = vocab / tp_size, extra = vocab % tp_size;
  VocabShard v;
  v.begin = tp_rank * base + std::min<int64_t>(tp_rank, extra);
  v.size = base + (tp_rank < extra ? 1 : 0);
  return v;
}

namespace {

// The layer range must lie inside the model, and tensor parallelism must split the attention heads, the KV heads
// and the FFN evenly.
absl::Status CheckPartition(const ModelConfig& c, const Partition& p) {
  if (p.layer_begin < 0 || p.layer_end > c.num_layers || p.layer_begin > p.layer_end)
    return absl::InvalidArgumentError(absl::StrCat("layer range [", p.layer_begin, ", ", p.layer_end,
                                                   ") is outside the model's ", c.num_layers, " layers"));
  if (p.tp_size < 1 || p.tp_rank < 0 || p.tp_rank >= p.tp_size)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", p.tp_rank, " of ", p.tp_size, " is invalid"));
  if (c.num_heads % p.tp_size || c.num_kv_heads % p.tp_size || c.intermediate_size % p.tp_size)
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism ", p.tp_size,
                                                   " must divide the attention heads (", c.num_heads, "), KV heads (",
                                                   c.num_kv_heads, ") and FFN size (", c.intermediate_size, ")"));
  return absl::OkStatus();
}

// The sizes of one layer's matrices, whole and as this tensor-parallel rank's slice (heads and FFN columns are
// split evenly over the group).
struct LayerShapes {
  int64_t hidden = 0;
  int64_t rank = 0;
  int64_t q_total = 0, kv_total = 0, ffn_total = 0;  // the whole projections' outputs
  int64_t q_local = 0, kv_local = 0, ffn_local = 0;  // this rank's share of them

  static LayerShapes For(const ModelConfig& c, const Partition& p) {
    LayerShapes s;
    const int64_t D = c.head_dim, T = p.tp_size;
    s.hidden = c.hidden_size;
    s.rank = p.tp_rank;
    s.q_total = static_cast<int64_t>(c.num_heads) * D;
    s.kv_total = static_cast<int64_t>(c.num_kv_heads) * D;
    s.ffn_total = c.intermediate_size;
    s.q_local = c.num_heads / T * D;
    s.kv_local = c.num_kv_heads / T * D;
    s.ffn_local = c.intermediate_size / T;
    return s;
  }
};

}  // namespace

// Loads tensors role by role, checking shapes and slicing for tensor parallelism. Load runs its steps in order:
// the dtypes, then the tensor groups (each layer's, as its family composes them from the LayerLoader blocks; the
// embeddings; the head: final norm and LM head, shared with the token embedding when tied; and the RoPE table),
// one method per group, so that which tensors a group needs and how they are sliced is stated in one place.
class ModelWeights::Loader : public LayerLoader {
 public:
  Loader(const Checkpoint& ckpt, ModelWeights* out)
      : ckpt_(ckpt), out_(out), shapes_(LayerShapes::For(out->config_, out->partition_)) {}

  // The matrices' dtype: `dtype` when asked for; otherwise float checkpoints in one dtype (f16 becomes bf16) and
  // quantized ones in each tensor's own type.
  absl::Status ChooseDTypes(const std::optional<DType>& dtype);

  // Tensor groups. One layer's weights (as its family loads them), appended to the layers.
  absl::Status Layer(int32_t layer);
  // LayerLoader: the blocks a family's layer is made of.
  absl::StatusOr<const float*> Replicated(TensorRole role, int32_t layer, int64_t size, bool optional,
                                          float add) override {
    return Vector(role, layer, size, 0, size, optional, add);
  }
  int32_t tp_size() const override { return out_->partition_.tp_size; }
  absl::StatusOr<const float*> HeadSliced(TensorRole role, int32_t layer, bool kv_heads) override {
    const int64_t total = kv_heads ? shapes_.kv_total : shapes_.q_total;
    const int64_t local = kv_heads ? shapes_.kv_local : shapes_.q_local;
    return Vector(role, layer, total, shapes_.rank * local, local);
  }
  absl::Status SeparateQkv(int32_t layer, LayerWeights* lw) override;
  absl::Status FusedQkv(int32_t layer, bool biases, LayerWeights* lw) override;
  absl::Status FusedGateUp(int32_t layer, LayerWeights* lw) override;
  absl::Status AttentionOutput(int32_t layer, bool bias, LayerWeights* lw) override;
  absl::Status Mlp(int32_t layer, bool gated, bool biases, LayerWeights* lw) override;
  // Which rows of the LM head this rank holds: a vocabulary slice on every rank, or all of them on rank 0.
  void PlanHead(bool vocab_parallel_head);
  // Tied embeddings: a head over the whole vocabulary shares the token embedding's upload; a slice of a tied head
  // is loaded on its own (the lookup table stays whole: every rank embeds every token). After PlanHead.
  bool HeadSharesEmbedding() const;
  // The token embedding (first stage, or for a head that shares it) and the learned position embedding (GPT-2).
  absl::Status Embeddings();
  // Last stage: the final norm and this rank's rows of the LM head. After Embeddings (a tied head shares it).
  absl::Status Head();
  // The RoPE inverse frequencies (rotary models).
  absl::Status RopeTables();

  // A [n_total, k_total] matrix; returns rows [n0, n0+n) × cols [k0, k0+k), uploaded for `use`.
  absl::StatusOr<WeightView> Matrix(TensorRole role, int32_t layer, int64_t n_total, int64_t k_total, int64_t n0,
                                    int64_t n, int64_t k0, int64_t k,
                                    kernels::WeightUse use = kernels::WeightUse::kMatmul) {
    ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* t, ckpt_.Find(role, layer));
    const bool transposed = ckpt_.IsTransposed(role);
    std::vector<int64_t> want =
        transposed ? std::vector<int64_t>{k_total, n_total} : std::vector<int64_t>{n_total, k_total};
    if (t->shape != want) return ShapeError(*t, want);
    WeightView v;
    v.dtype = t->dtype;
    v.n = n;
    v.k = k;
    v.transposed = transposed;
    v.ld = transposed ? n_total : k_total;
    if (IsQuantized(t->dtype)) {
      ORCA_RETURN_IF_ERROR(CheckBlocks(*t, n0, n, k0, k));
      v.data = t->data + static_cast<size_t>(n0) * DTypeRowBytes(t->dtype, v.ld) + DTypeRowBytes(t->dtype, k0);
    } else {
      const size_t es = DTypeSize(t->dtype);
      const int64_t offset = transposed ? k0 * v.ld + n0 : n0 * v.ld + k0;
      v.data = t->data + static_cast<size_t>(offset) * es;
    }
    return Finish(v, *t, use);
  }

  // A vector of `total` values; returns [offset, offset+len) as device f32.
  absl::StatusOr<const float*> Vector(TensorRole role, int32_t layer, int64_t total, int64_t offset, int64_t len,
                                      bool optional = false, float add = 0.0f) {
    ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* t, ckpt_.FindOptional(role, layer));
    if (t == nullptr) {
      if (optional) return nullptr;
      return absl::NotFoundError(
          absl::StrCat(ckpt_.tensors().Describe(), ": tensor '", ckpt_.TensorName(role, layer), "' is missing"));
    }
    if (t->shape != std::vector<int64_t>{total}) return ShapeError(*t, {total});
    const int64_t block = DTypeSplitElems(t->dtype);  // the type's tensor-parallel rule: whole blocks
    if (offset % block != 0 || len % block != 0)
      return absl::InvalidArgumentError(absl::StrCat(t->file, ": tensor '", t->name, "' (", DTypeName(t->dtype),
                                                     "): this shard's values [", offset, ", ", offset + len,
                                                     ") would split a ", block, "-value block"));
    std::vector<float> host(static_cast<size_t>(len));
    DequantizeRow(t->dtype, t->data + DTypeRowBytes(t->dtype, offset), host.data(), len);
    if (add != 0.0f)
      for (float& v : host) v += add;
    return UploadF32(host);
  }

  absl::StatusOr<const float*> UploadF32(const std::vector<float>& host) {
    ORCA_ASSIGN_OR_RETURN(void* dev, out_->backend_->Allocate(host.size() * sizeof(float)));
    out_->device_buffers_.push_back(dev);
    out_->backend_->CopyToDevice(dev, host.data(), host.size() * sizeof(float));
    out_->owned_bytes_ += host.size() * sizeof(float);
    return static_cast<const float*>(dev);
  }

 private:
  absl::Status ShapeError(const formats::TensorInfo& t, const std::vector<int64_t>& want) {
    formats::TensorInfo w;
    w.shape = want;
    return absl::InvalidArgumentError(absl::StrCat(t.file, ": tensor '", t.name, "' has shape ", t.ShapeString(), " ",
                                                   DTypeName(t.dtype), ", expected ", w.ShapeString(), " for ",
                                                   ckpt_.config().Summary()));
  }

  // A quantized slice must follow its type's tensor-parallel rule (DTypeSplitElems: whole
  // blocks, since a split inside a block cannot be computed), and its blocks must have finite scales.
  absl::Status CheckBlocks(const formats::TensorInfo& t, int64_t n0, int64_t n, int64_t k0, int64_t k) {
    const int64_t block = DTypeBlockElems(t.dtype), row = t.shape.back(), split = DTypeSplitElems(t.dtype);
    if (k0 % split != 0 || k % split != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          t.file, ": tensor '", t.name, "' (", DTypeName(t.dtype), ", ", block,
          "-value blocks): this shard's columns [", k0, ", ", k0 + k, ") of ", row,
          " would split a block; tensor parallelism ", out_->partition_.tp_size, " needs every shard's share of ", row,
          " to be a multiple of ", split, " (choose a size that divides ", row / split, ")"));
    const size_t row_bytes = DTypeRowBytes(t.dtype, row);
    const int64_t blocks_per_row = row / block;
    const char* field = nullptr;
    const int64_t bad =
        FindCorruptBlock(t.dtype, t.data + static_cast<size_t>(n0) * row_bytes, n * blocks_per_row, &field);
    if (bad >= 0) {
      const int64_t r = n0 + bad / blocks_per_row, c = bad % blocks_per_row * block;
      return absl::DataLossError(absl::StrCat(t.file, ": tensor '", t.name, "' (", DTypeName(t.dtype),
                                              ") is corrupt: the block of row ", r, ", values [", c, ", ", c + block,
                                              ") has a non-finite '", field, "' scale"));
    }
    return absl::OkStatus();
  }

  // Converts to the requested dtype when needed (into a contiguous owned copy),
  // then hands the view to the backend. When the backend repacks the weight
  // (its own layout in its own memory), the row-major copy is let go: an owned
  // one is freed, mapped pages are dropped from the process — one resident copy.
  absl::StatusOr<WeightView> Finish(WeightView v, const formats::TensorInfo& t, kernels::WeightUse use) {
    const size_t source_bytes = static_cast<size_t>(v.transposed ? v.k : v.n) * DTypeRowBytes(v.dtype, v.ld);
    bool owned = false;
    // A quantized file's f16 matrices (rows that are not whole blocks fall back to
    // f16) are computed in bf16, like f16 checkpoints.
    const std::optional<DType> convert_to = out_->convert_to_.has_value() ? out_->convert_to_
                                            : v.dtype == DType::kF16      ? std::optional<DType>(DType::kBF16)
                                                                          : std::nullopt;
    if (convert_to.has_value() && v.dtype != *convert_to) {
      const DType to = *convert_to;
      const int64_t rows = v.transposed ? v.k : v.n, cols = v.transposed ? v.n : v.k;
      const size_t src_row = DTypeRowBytes(v.dtype, v.ld), dst_es = DTypeSize(to);
      std::vector<uint8_t> buf(static_cast<size_t>(rows * cols) * dst_es);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(v.dtype, static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * src_row, row.data(),
                      cols);
        ConvertFromF32(row.data(), to, buf.data() + static_cast<size_t>(r * cols) * dst_es, row.size());
      }
      v.data = buf.data();
      v.dtype = to;
      v.ld = cols;
      out_->owned_bytes_ += buf.size();
      out_->host_buffers_.push_back(std::move(buf));
      owned = true;
    }
    void* storage = nullptr;
    absl::StatusOr<WeightView> uploaded = out_->backend_->UploadWeight(v, &storage, use);
    if (!uploaded.ok()) return Annotate(uploaded.status(), absl::StrCat(t.file, ": tensor '", t.name, "'"));
    const WeightView dev = *uploaded;
    if (storage != nullptr) out_->device_buffers_.push_back(storage);
    if (dev.packed) {
      out_->packed_bytes_ += dev.packed_bytes;
      if (owned) {
        out_->owned_bytes_ -= out_->host_buffers_.back().size();
        out_->host_buffers_.pop_back();
      } else {
        ReleaseMappedPages(v.data, source_bytes);
      }
    } else if (!owned) {
      out_->mapped_bytes_ += v.ReadBytes();
    }
    return dev;
  }

  const Checkpoint& ckpt_;
  ModelWeights* out_;
  const LayerShapes shapes_;
};

absl::Status ModelWeights::Loader::ChooseDTypes(const std::optional<DType>& dtype) {
  ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* emb, ckpt_.Find(TensorRole::kTokenEmbedding, 0));
  if (dtype.has_value() && *dtype != DType::kF32 && *dtype != DType::kBF16)
    return absl::InvalidArgumentError(absl::StrCat("weights can be converted to f32 or bf16 at load, not ",
                                                   DTypeName(*dtype), " (quantize with `orca model quantize`)"));
  // Float checkpoints: every matrix in one dtype (f16 becomes bf16). Quantized
  // ones keep each tensor's own type unless a conversion is asked for.
  if (dtype.has_value())
    out_->convert_to_ = dtype;
  else if (!IsQuantized(emb->dtype))
    out_->convert_to_ = emb->dtype == DType::kF32 ? DType::kF32 : DType::kBF16;
  else if (const auto* t = ckpt_.tensors().Find(ckpt_.TensorName(TensorRole::kQ, 0)); t && t->dtype == DType::kF16)
    out_->convert_to_ = DType::kBF16;
  out_->dtype_ = out_->convert_to_.value_or(emb->dtype);
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::Layer(int32_t l) {
  LayerWeights lw;
  const ModelConfig& c = out_->config_;
  ORCA_RETURN_IF_ERROR(FamilyOf(c.arch).load_layer(*this, c, l, &lw));
  out_->layers_.push_back(lw);
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::AttentionOutput(int32_t l, bool bias, LayerWeights* lw) {
  const LayerShapes& s = shapes_;
  const int64_t H = s.hidden, r = s.rank;
  ORCA_ASSIGN_OR_RETURN(lw->o, Matrix(TensorRole::kO, l, H, s.q_total, 0, H, r * s.q_local, s.q_local));
  if (bias && r == 0) {
    ORCA_ASSIGN_OR_RETURN(lw->o_bias, Vector(TensorRole::kOBias, l, H, 0, H));
  }
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::SeparateQkv(int32_t l, LayerWeights* lw) {
  const LayerShapes& s = shapes_;
  const int64_t H = s.hidden, r = s.rank, q_local = s.q_local, kv_local = s.kv_local;
  ORCA_ASSIGN_OR_RETURN(lw->q, Matrix(TensorRole::kQ, l, s.q_total, H, r * q_local, q_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->k, Matrix(TensorRole::kK, l, s.kv_total, H, r * kv_local, kv_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->v, Matrix(TensorRole::kV, l, s.kv_total, H, r * kv_local, kv_local, 0, H));
  if (out_->config_.attention_bias) {
    ORCA_ASSIGN_OR_RETURN(lw->q_bias, Vector(TensorRole::kQBias, l, s.q_total, r * q_local, q_local));
    ORCA_ASSIGN_OR_RETURN(lw->k_bias, Vector(TensorRole::kKBias, l, s.kv_total, r * kv_local, kv_local));
    ORCA_ASSIGN_OR_RETURN(lw->v_bias, Vector(TensorRole::kVBias, l, s.kv_total, r * kv_local, kv_local));
  }
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::FusedQkv(int32_t l, bool biases, LayerWeights* lw) {
  const LayerShapes& s = shapes_;
  const int64_t H = s.hidden, r = s.rank, q_local = s.q_local, kv_local = s.kv_local;
  const int64_t Q = s.q_total, KV = s.kv_total, rows = Q + 2 * KV;
  // One tensor of output rows [Q | K | V] (GPT-2's c_attn, Phi-3's qkv_proj), each part split by heads.
  ORCA_ASSIGN_OR_RETURN(lw->q, Matrix(TensorRole::kQkv, l, rows, H, r * q_local, q_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->k, Matrix(TensorRole::kQkv, l, rows, H, Q + r * kv_local, kv_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->v, Matrix(TensorRole::kQkv, l, rows, H, Q + KV + r * kv_local, kv_local, 0, H));
  if (!biases) return absl::OkStatus();
  ORCA_ASSIGN_OR_RETURN(lw->q_bias, Vector(TensorRole::kQkvBias, l, rows, r * q_local, q_local));
  ORCA_ASSIGN_OR_RETURN(lw->k_bias, Vector(TensorRole::kQkvBias, l, rows, Q + r * kv_local, kv_local));
  ORCA_ASSIGN_OR_RETURN(lw->v_bias, Vector(TensorRole::kQkvBias, l, rows, Q + KV + r * kv_local, kv_local));
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::FusedGateUp(int32_t l, LayerWeights* lw) {
  const LayerShapes& s = shapes_;
  const int64_t H = s.hidden, r = s.rank, F = s.ffn_total, f_local = s.ffn_local;
  // One tensor of output rows [gate | up] (Phi-3's gate_up_proj), each half split by columns of the FFN.
  ORCA_ASSIGN_OR_RETURN(lw->gate, Matrix(TensorRole::kUp, l, 2 * F, H, r * f_local, f_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->up, Matrix(TensorRole::kUp, l, 2 * F, H, F + r * f_local, f_local, 0, H));
  ORCA_ASSIGN_OR_RETURN(lw->down, Matrix(TensorRole::kDown, l, H, F, 0, H, r * f_local, f_local));
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::Mlp(int32_t l, bool gated, bool biases, LayerWeights* lw) {
  const LayerShapes& s = shapes_;
  const int64_t H = s.hidden, r = s.rank, F = s.ffn_total, f_local = s.ffn_local;
  if (gated) {
    ORCA_ASSIGN_OR_RETURN(lw->gate, Matrix(TensorRole::kGate, l, F, H, r * f_local, f_local, 0, H));
  }
  ORCA_ASSIGN_OR_RETURN(lw->up, Matrix(TensorRole::kUp, l, F, H, r * f_local, f_local, 0, H));
  if (biases) {
    ORCA_ASSIGN_OR_RETURN(lw->up_bias, Vector(TensorRole::kUpBias, l, F, r * f_local, f_local));
  }
  ORCA_ASSIGN_OR_RETURN(lw->down, Matrix(TensorRole::kDown, l, H, F, 0, H, r * f_local, f_local));
  if (biases && r == 0) {
    ORCA_ASSIGN_OR_RETURN(lw->down_bias, Vector(TensorRole::kDownBias, l, H, 0, H));
  }
  return absl::OkStatus();
}

void ModelWeights::Loader::PlanHead(bool vocab_parallel_head) {
  const ModelConfig& c = out_->config_;
  const Partition& p = out_->partition_;
  out_->vocab_parallel_head_ = p.has_head && p.tp_size > 1 && vocab_parallel_head;
  if (p.has_head)
    out_->head_vocab_ = out_->vocab_parallel_head_ ? VocabShard::For(c.vocab_size, p.tp_rank, p.tp_size)
                        : p.tp_rank == 0           ? VocabShard{0, c.vocab_size}
                                                   : VocabShard{};
}

bool ModelWeights::Loader::HeadSharesEmbedding() const {
  const ModelConfig& c = out_->config_;
  const bool whole_head = out_->partition_.has_head && out_->head_vocab_.size == c.vocab_size;
  return whole_head && c.tie_word_embeddings;
}

absl::Status ModelWeights::Loader::Embeddings() {
  const ModelConfig& c = out_->config_;
  const Partition& p = out_->partition_;
  const int64_t H = c.hidden_size;
  const bool head_uses_embedding = HeadSharesEmbedding();
  if (p.has_embedding || head_uses_embedding) {
    const kernels::WeightUse use = !head_uses_embedding ? kernels::WeightUse::kGather
                                   : p.has_embedding    ? kernels::WeightUse::kMatmulAndGather
                                                        : kernels::WeightUse::kMatmul;
    ORCA_ASSIGN_OR_RETURN(out_->token_embedding_,
                          Matrix(TensorRole::kTokenEmbedding, 0, c.vocab_size, H, 0, c.vocab_size, 0, H, use));
  }
  if (p.has_embedding && FamilyOf(c.arch).learned_positions) {
    ORCA_ASSIGN_OR_RETURN(out_->position_embedding_, Matrix(TensorRole::kPositionEmbedding, 0, c.max_position, H, 0,
                                                            c.max_position, 0, H, kernels::WeightUse::kGather));
  }
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::Head() {
  const ModelConfig& c = out_->config_;
  if (!out_->partition_.has_head) return absl::OkStatus();
  const int64_t H = c.hidden_size;
  ORCA_ASSIGN_OR_RETURN(out_->final_norm_, Vector(TensorRole::kFinalNorm, 0, H, 0, H, false, c.norm_weight_offset));
  if (FamilyOf(c.arch).norm == NormKind::kLayer) {
    ORCA_ASSIGN_OR_RETURN(out_->final_norm_bias_, Vector(TensorRole::kFinalNormBias, 0, H, 0, H));
  }
  const VocabShard& hv = out_->head_vocab_;
  if (HeadSharesEmbedding()) {
    out_->lm_head_ = out_->token_embedding_;
  } else if (hv.size > 0) {
    const TensorRole role = c.tie_word_embeddings ? TensorRole::kTokenEmbedding : TensorRole::kLmHead;
    ORCA_ASSIGN_OR_RETURN(out_->lm_head_, Matrix(role, 0, c.vocab_size, H, hv.begin, hv.size, 0, H));
  }
  return absl::OkStatus();
}

absl::Status ModelWeights::Loader::RopeTables() {
  if (out_->config_.rotary_dim == 0) return absl::OkStatus();
  ORCA_ASSIGN_OR_RETURN(out_->rope_inv_freq_, UploadF32(RopeInverseFrequencies(out_->config_)));
  if (out_->config_.rope_theta_local > 0) {
    ORCA_ASSIGN_OR_RETURN(out_->rope_inv_freq_local_, UploadF32(LocalRopeInverseFrequencies(out_->config_)));
  }
  return absl::OkStatus();
}

ModelWeights::~ModelWeights() {
  for (void* p : device_buffers_) backend_->Free(p);
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const Checkpoint& ckpt, const Options& options,
                                                                 kernels::Backend* backend) {
  const Partition& p = options.partition;
  ORCA_RETURN_IF_ERROR(CheckPartition(ckpt.config(), p));
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->config_ = ckpt.config();
  w->partition_ = p;
  w->backend_ = backend;
  Loader ld(ckpt, w.get());
  ORCA_RETURN_IF_ERROR(ld.ChooseDTypes(options.dtype));
  const auto load_start = std::chrono::steady_clock::now();
  for (int32_t l = p.layer_begin; l < p.layer_end; ++l) ORCA_RETURN_IF_ERROR(ld.Layer(l));
  ld.PlanHead(options.vocab_parallel_head);
  ORCA_RETURN_IF_ERROR(ld.Embeddings());
  ORCA_RETURN_IF_ERROR(ld.Head());
  ORCA_RETURN_IF_ERROR(ld.RopeTables());
  w->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  return w;
}

}  // namespace orca::engine
