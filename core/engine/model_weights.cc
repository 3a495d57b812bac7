#include "core/engine/model_weights.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"

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

// Loads tensors role by role, checking shapes and slicing for tensor parallelism.
class ModelWeights::Loader {
 public:
  Loader(const Checkpoint& ckpt, ModelWeights* out) : ckpt_(ckpt), out_(out) {}

  // A [n_total, k_total] matrix; returns rows [n0, n0+n) × cols [k0, k0+k).
  absl::StatusOr<WeightView> Matrix(TensorRole role, int32_t layer, int64_t n_total, int64_t k_total, int64_t n0,
                                    int64_t n, int64_t k0, int64_t k) {
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
    const size_t es = DTypeSize(t->dtype);
    const int64_t offset = transposed ? k0 * v.ld + n0 : n0 * v.ld + k0;
    v.data = t->data + static_cast<size_t>(offset) * es;
    return Finish(v);
  }

  // A vector of `total` values; returns [offset, offset+len) as device f32.
  absl::StatusOr<const float*> Vector(TensorRole role, int32_t layer, int64_t total, int64_t offset, int64_t len,
                                      bool optional = false) {
    ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* t, ckpt_.FindOptional(role, layer));
    if (t == nullptr) {
      if (optional) return nullptr;
      return absl::NotFoundError(
          absl::StrCat(ckpt_.tensors().Describe(), ": tensor '", ckpt_.TensorName(role, layer), "' is missing"));
    }
    if (t->shape != std::vector<int64_t>{total}) return ShapeError(*t, {total});
    std::vector<float> host(static_cast<size_t>(len));
    ConvertToF32(t->data + static_cast<size_t>(offset) * DTypeSize(t->dtype), t->dtype, host.data(), host.size());
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

  // Converts to the storage dtype when needed (into a contiguous owned copy),
  // then hands the view to the backend.
  absl::StatusOr<WeightView> Finish(WeightView v) {
    if (v.dtype != out_->dtype_) {
      const int64_t rows = v.transposed ? v.k : v.n, cols = v.transposed ? v.n : v.k;
      const size_t src_es = DTypeSize(v.dtype), dst_es = DTypeSize(out_->dtype_);
      std::vector<uint8_t> buf(static_cast<size_t>(rows * cols) * dst_es);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        ConvertToF32(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r * v.ld) * src_es, v.dtype, row.data(),
                     row.size());
        ConvertFromF32(row.data(), out_->dtype_, buf.data() + static_cast<size_t>(r * cols) * dst_es, row.size());
      }
      v.data = buf.data();
      v.dtype = out_->dtype_;
      v.ld = cols;
      out_->owned_bytes_ += buf.size();
      out_->host_buffers_.push_back(std::move(buf));
    } else {
      out_->mapped_bytes_ += v.ReadBytes();
    }
    void* storage = nullptr;
    ORCA_ASSIGN_OR_RETURN(WeightView dev, out_->backend_->UploadWeight(v, &storage));
    if (storage != nullptr) out_->device_buffers_.push_back(storage);
    return dev;
  }

  const Checkpoint& ckpt_;
  ModelWeights* out_;
};

ModelWeights::~ModelWeights() {
  for (void* p : device_buffers_) backend_->Free(p);
}

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const Checkpoint& ckpt, const Options& options,
                                                                 kernels::Backend* backend) {
  const ModelConfig& c = ckpt.config();
  const Partition& p = options.partition;
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
  std::unique_ptr<ModelWeights> w(new ModelWeights());
  w->config_ = c;
  w->partition_ = p;
  w->backend_ = backend;
  ORCA_ASSIGN_OR_RETURN(const formats::TensorInfo* emb, ckpt.Find(TensorRole::kTokenEmbedding, 0));
  w->dtype_ = options.dtype.value_or(emb->dtype == DType::kF32 ? DType::kF32 : DType::kBF16);
  if (w->dtype_ == DType::kF16) return absl::InvalidArgumentError("f16 compute is not supported; use bf16 or f32");
  Loader ld(ckpt, w.get());

  const int64_t H = c.hidden_size, D = c.head_dim, T = p.tp_size, r = p.tp_rank;
  const int64_t q_local = c.num_heads / T * D, kv_local = c.num_kv_heads / T * D, f_local = c.intermediate_size / T;
  const int64_t q_total = static_cast<int64_t>(c.num_heads) * D, kv_total = static_cast<int64_t>(c.num_kv_heads) * D;
  const bool gpt2 = c.arch == ModelArch::kGpt2;
  for (int32_t l = p.layer_begin; l < p.layer_end; ++l) {
    LayerWeights lw;
    ORCA_ASSIGN_OR_RETURN(lw.attn_norm, ld.Vector(TensorRole::kAttnNorm, l, H, 0, H));
    ORCA_ASSIGN_OR_RETURN(lw.ffn_norm, ld.Vector(TensorRole::kFfnNorm, l, H, 0, H));
    if (gpt2) {
      ORCA_ASSIGN_OR_RETURN(lw.attn_norm_bias, ld.Vector(TensorRole::kAttnNormBias, l, H, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.ffn_norm_bias, ld.Vector(TensorRole::kFfnNormBias, l, H, 0, H));
      // Fused c_attn: output columns [Q | K | V], each split by heads.
      ORCA_ASSIGN_OR_RETURN(lw.q, ld.Matrix(TensorRole::kQkv, l, 3 * H, H, r * q_local, q_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.k, ld.Matrix(TensorRole::kQkv, l, 3 * H, H, H + r * kv_local, kv_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.v, ld.Matrix(TensorRole::kQkv, l, 3 * H, H, 2 * H + r * kv_local, kv_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.q_bias, ld.Vector(TensorRole::kQkvBias, l, 3 * H, r * q_local, q_local));
      ORCA_ASSIGN_OR_RETURN(lw.k_bias, ld.Vector(TensorRole::kQkvBias, l, 3 * H, H + r * kv_local, kv_local));
      ORCA_ASSIGN_OR_RETURN(lw.v_bias, ld.Vector(TensorRole::kQkvBias, l, 3 * H, 2 * H + r * kv_local, kv_local));
      ORCA_ASSIGN_OR_RETURN(lw.up, ld.Matrix(TensorRole::kUp, l, c.intermediate_size, H, r * f_local, f_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.up_bias, ld.Vector(TensorRole::kUpBias, l, c.intermediate_size, r * f_local, f_local));
      if (r == 0) {
        ORCA_ASSIGN_OR_RETURN(lw.o_bias, ld.Vector(TensorRole::kOBias, l, H, 0, H));
        ORCA_ASSIGN_OR_RETURN(lw.down_bias, ld.Vector(TensorRole::kDownBias, l, H, 0, H));
      }
    } else {
      ORCA_ASSIGN_OR_RETURN(lw.q, ld.Matrix(TensorRole::kQ, l, q_total, H, r * q_local, q_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.k, ld.Matrix(TensorRole::kK, l, kv_total, H, r * kv_local, kv_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.v, ld.Matrix(TensorRole::kV, l, kv_total, H, r * kv_local, kv_local, 0, H));
      if (c.attention_bias) {
        ORCA_ASSIGN_OR_RETURN(lw.q_bias, ld.Vector(TensorRole::kQBias, l, q_total, r * q_local, q_local));
        ORCA_ASSIGN_OR_RETURN(lw.k_bias, ld.Vector(TensorRole::kKBias, l, kv_total, r * kv_local, kv_local));
        ORCA_ASSIGN_OR_RETURN(lw.v_bias, ld.Vector(TensorRole::kVBias, l, kv_total, r * kv_local, kv_local));
      }
      ORCA_ASSIGN_OR_RETURN(lw.gate,
                            ld.Matrix(TensorRole::kGate, l, c.intermediate_size, H, r * f_local, f_local, 0, H));
      ORCA_ASSIGN_OR_RETURN(lw.up, ld.Matrix(TensorRole::kUp, l, c.intermediate_size, H, r * f_local, f_local, 0, H));
      if (c.mlp_bias) {
        ORCA_ASSIGN_OR_RETURN(lw.up_bias, ld.Vector(TensorRole::kUpBias, l, c.intermediate_size, r * f_local, f_local));
        if (r == 0) {
          ORCA_ASSIGN_OR_RETURN(lw.down_bias, ld.Vector(TensorRole::kDownBias, l, H, 0, H));
        }
      }
    }
    ORCA_ASSIGN_OR_RETURN(lw.o, ld.Matrix(TensorRole::kO, l, H, q_total, 0, H, r * q_local, q_local));
    ORCA_ASSIGN_OR_RETURN(lw.down, ld.Matrix(TensorRole::kDown, l, H, c.intermediate_size, 0, H, r * f_local, f_local));
    w->layers_.push_back(lw);
  }
  const bool need_embedding = p.has_embedding || (p.has_head && c.tie_word_embeddings && r == 0);
  if (need_embedding) {
    ORCA_ASSIGN_OR_RETURN(w->token_embedding_,
                          ld.Matrix(TensorRole::kTokenEmbedding, 0, c.vocab_size, H, 0, c.vocab_size, 0, H));
  }
  if (p.has_embedding && gpt2) {
    ORCA_ASSIGN_OR_RETURN(w->position_embedding_,
                          ld.Matrix(TensorRole::kPositionEmbedding, 0, c.max_position, H, 0, c.max_position, 0, H));
  }
  if (p.has_head) {
    ORCA_ASSIGN_OR_RETURN(w->final_norm_, ld.Vector(TensorRole::kFinalNorm, 0, H, 0, H));
    if (gpt2) {
      ORCA_ASSIGN_OR_RETURN(w->final_norm_bias_, ld.Vector(TensorRole::kFinalNormBias, 0, H, 0, H));
    }
    if (r == 0) {
      if (c.tie_word_embeddings)
        w->lm_head_ = w->token_embedding_;
      else {
        ORCA_ASSIGN_OR_RETURN(w->lm_head_, ld.Matrix(TensorRole::kLmHead, 0, c.vocab_size, H, 0, c.vocab_size, 0, H));
      }
    }
  }
  if (c.arch == ModelArch::kLlama) {
    ORCA_ASSIGN_OR_RETURN(w->rope_inv_freq_, ld.UploadF32(RopeInverseFrequencies(c)));
  }
  return w;
}

}  // namespace orca::engine
