#pragma once
/// The weights one worker shard needs: a contiguous layer range (pipeline
/// stage, paper's inter-layer partition) and one tensor-parallel slice
/// (Megatron-style intra-layer partition) of a checkpoint. Weights whose
/// on-disk dtype is the compute dtype are used in place from the mapping
/// (strided views, zero copy) or, when the backend lays GEMM weights out its
/// own way (the CPU backend's panels), repacked once here, at load, with the
/// mapped pages let go afterwards; others are converted once at load.
/// Quantized GGUF tensors keep their block type; a tensor-parallel slice must
/// keep blocks whole, and blocks with non-finite scales are refused.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/checkpoint.h"
#include "kernels/include/backend.h"

namespace orca::engine {

/// Which part of the model a shard holds.
struct Partition {
  int32_t layer_begin = 0;  ///< first layer (inclusive)
  int32_t layer_end = 0;    ///< last layer (exclusive)
  int32_t tp_rank = 0;
  int32_t tp_size = 1;
  bool has_embedding = true;  ///< first stage: token (and position) embeddings
  bool has_head = true;       ///< last stage: final norm and LM head

  /// Even split of `num_layers` over `num_stages` (earlier stages take the remainder).
  static Partition ForStage(int32_t stage, int32_t num_stages, int32_t num_layers, int32_t tp_rank = 0,
                            int32_t tp_size = 1);
  static Partition Whole(int32_t num_layers) { return ForStage(0, 1, num_layers); }
};

/// The rows [begin, begin + size) of a vocabulary-parallel LM head one
/// tensor-parallel rank holds: `vocab` split over `tp_size` ranks as evenly
/// as possible, the first vocab % tp_size ranks taking one row more (so a
/// vocabulary the group does not divide gives uneven shards, none larger than
/// MaxRows). A row is one token's weights, whole quantized blocks included.
struct VocabShard {
  int64_t begin = 0;
  int64_t size = 0;

  static VocabShard For(int64_t vocab, int32_t tp_rank, int32_t tp_size);
  /// The largest shard's rows: ceil(vocab / tp_size).
  static int64_t MaxRows(int64_t vocab, int32_t tp_size) { return (vocab + tp_size - 1) / tp_size; }
};

struct LayerWeights {
  const float* attn_norm = nullptr;
  const float* attn_norm_bias = nullptr;
  const float* ffn_norm = nullptr;
  const float* ffn_norm_bias = nullptr;
  const float* post_attn_norm = nullptr;  ///< RMSNorm of the attention output before the residual add (Gemma)
  const float* post_ffn_norm = nullptr;   ///< RMSNorm of the MLP output before the residual add
  kernels::WeightView q, k, v, o;  ///< q/k/v column-parallel, o row-parallel
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* q_norm = nullptr;       ///< per-head RMSNorm weights (head_dim values; Qwen3)
  const float* k_norm = nullptr;
  const float* o_bias = nullptr;       ///< only on tp rank 0 (added once after the all-reduce)
  kernels::WeightView gate, up, down;  ///< gate/up column-parallel, down row-parallel; GPT-2: up=c_fc, down=c_proj
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;  ///< only on tp rank 0
};

class ModelWeights {
 public:
  struct Options {
    Partition partition;
    /// Convert every matrix to f32 or bf16 (quantized ones dequantized).
    /// nullopt = the checkpoint's: float checkpoints in the embedding's dtype
    /// (f16 becomes bf16), quantized ones each tensor in its own type.
    std::optional<DType> dtype;
    /// With tensor parallelism on the last stage, every rank holds a
    /// VocabShard of the LM head's rows and computes those logits; the slices
    /// are gathered on rank 0, which samples. Off: rank 0 holds the whole head
    /// (the other ranks none) and computes every logit.
    bool vocab_parallel_head = true;
  };

  /// Loads and validates every tensor of the partition. Errors name the file,
  /// the tensor, its shape/dtype and what was expected.
  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(const Checkpoint& checkpoint, const Options& options,
                                                            kernels::Backend* backend);
  ~ModelWeights();

  const ModelConfig& config() const { return config_; }
  const Partition& partition() const { return partition_; }
  /// The matrices' dtype (f32/bf16), or for quantized checkpoints the embedding's type.
  DType dtype() const { return dtype_; }
  int32_t num_local_layers() const { return static_cast<int32_t>(layers_.size()); }
  const LayerWeights& layer(int32_t local_index) const { return layers_[local_index]; }
  int32_t local_q_heads() const { return config_.num_heads / partition_.tp_size; }
  int32_t local_kv_heads() const { return config_.num_kv_heads / partition_.tp_size; }
  int32_t local_intermediate() const { return config_.intermediate_size / partition_.tp_size; }

  const kernels::WeightView& token_embedding() const { return token_embedding_; }
  const kernels::WeightView& position_embedding() const { return position_embedding_; }
  const float* final_norm() const { return final_norm_; }
  const float* final_norm_bias() const { return final_norm_bias_; }
  /// This shard's rows of the LM head (output projection; the token
  /// embedding's rows when tied): rows head_vocab().begin.. of the
  /// vocabulary. Empty on shards that compute no logits (not the last stage,
  /// or ranks > 0 without a vocabulary-parallel head).
  const kernels::WeightView& lm_head() const { return lm_head_; }
  /// The vocabulary rows lm_head() covers (size 0 when it is empty).
  const VocabShard& head_vocab() const { return head_vocab_; }
  /// Every rank of the last stage holds a slice of the head and takes part in
  /// gathering the logits (tp_size > 1 and Options::vocab_parallel_head).
  bool vocab_parallel_head() const { return vocab_parallel_head_; }
  const float* rope_inv_freq() const { return rope_inv_freq_; }
  /// The RoPE table of layer `layer` (global index): the local layers' own when the model has one.
  const float* rope_inv_freq(int32_t layer) const {
    return rope_inv_freq_local_ != nullptr && config_.IsLocalLayer(layer) ? rope_inv_freq_local_ : rope_inv_freq_;
  }

  /// Bytes used in place from the mapping, bytes converted into owned memory,
  /// and bytes the backend holds in its own (packed) layout.
  size_t mapped_bytes() const { return mapped_bytes_; }
  size_t owned_bytes() const { return owned_bytes_; }
  size_t packed_bytes() const { return packed_bytes_; }
  /// Wall time of Load (reading, checking, converting and packing).
  double load_seconds() const { return load_seconds_; }

 private:
  class Loader;
  ModelWeights() = default;

  ModelConfig config_;
  Partition partition_;
  DType dtype_ = DType::kF32;
  std::optional<DType> convert_to_;  // matrices not already in this dtype are converted
  kernels::Backend* backend_ = nullptr;
  std::vector<LayerWeights> layers_;
  kernels::WeightView token_embedding_;
  kernels::WeightView position_embedding_;
  kernels::WeightView lm_head_;
  VocabShard head_vocab_;
  bool vocab_parallel_head_ = false;
  const float* final_norm_ = nullptr;
  const float* final_norm_bias_ = nullptr;
  const float* rope_inv_freq_ = nullptr;
  const float* rope_inv_freq_local_ = nullptr;
  std::vector<std::vector<uint8_t>> host_buffers_;  // converted matrices (host)
  std::vector<void*> device_buffers_;               // backend allocations
  size_t mapped_bytes_ = 0;
  size_t owned_bytes_ = 0;
  size_t packed_bytes_ = 0;
  double load_seconds_ = 0;
};

}  // namespace orca::engine
