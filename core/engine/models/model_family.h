#pragma once
/// Where a model family lives. Each architecture is one file in this directory (llama.cc, gpt2.cc, qwen3.cc, ...)
/// defining one ModelFamily: the config.json `model_type` / `architectures` and GGUF `general.architecture` it
/// answers to, its configuration keys, its tensors' names, which of them one layer loads and how they are split
/// for tensor parallelism (composed from LayerLoader's building blocks), its layer forward (composed from
/// LayerOps, which run over kernels::Backend ops), and its shape for `orca model synth` and GGUF export.
/// registry.cc lists the families; nothing else in the engine names one. llama.cpp's `src/models/*.cpp` and
/// vLLM's `model_executor/models/*.py` are the same idea.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/model_config.h"
#include "core/engine/tensor_role.h"

namespace orca::formats {
class GgufFile;
class GgufWriter;
}  // namespace orca::formats

namespace orca::engine {

struct LayerWeights;

/// The loader's building blocks, for a family's `load_layer`. Every matrix is checked against the shape the
/// configuration implies and sliced for this shard's tensor-parallel rank (column-parallel: this rank's heads
/// or FFN columns; row-parallel: its input columns, with the bias on rank 0 only). Errors name the tensor.
class LayerLoader {
 public:
  virtual ~LayerLoader() = default;
  /// A vector of `size` values every rank holds whole (a norm's weight or bias), as f32, `add` added to each
  /// (ModelConfig::norm_weight_offset); nullptr when `optional` and the checkpoint has no such tensor.
  virtual absl::StatusOr<const float*> Replicated(TensorRole role, int32_t layer, int64_t size, bool optional = false,
                                                  float add = 0.0f) = 0;
  /// The tensor-parallel group's size (a family whose layer cannot be split yet refuses > 1 by name).
  virtual int32_t tp_size() const = 0;
  /// This rank's heads' part of a vector of per-head values [heads × head_dim] (q heads, or KV heads when
  /// `kv_heads`), as f32: what a norm over the whole projection weights this shard's slice of it with.
  virtual absl::StatusOr<const float*> HeadSliced(TensorRole role, int32_t layer, bool kv_heads) = 0;
  /// Q, K and V as three tensors (column-parallel by heads), with their biases when ModelConfig::attention_bias.
  virtual absl::Status SeparateQkv(int32_t layer, LayerWeights* lw) = 0;
  /// Q, K and V as row ranges [Q | K | V] of one fused tensor, with one fused bias when `biases` (GPT-2's
  /// c_attn, Phi-3's qkv_proj).
  virtual absl::Status FusedQkv(int32_t layer, bool biases, LayerWeights* lw) = 0;
  /// A gated MLP whose gate and up are the halves [gate | up] of one tensor (Phi-3's gate_up_proj, role kUp),
  /// and down.
  virtual absl::Status FusedGateUp(int32_t layer, LayerWeights* lw) = 0;
  /// The attention output projection (row-parallel), with its bias when `bias`.
  virtual absl::Status AttentionOutput(int32_t layer, bool bias, LayerWeights* lw) = 0;
  /// The MLP: gate (when `gated`) and up (column-parallel), down (row-parallel); up's and down's biases when
  /// `biases`.
  virtual absl::Status Mlp(int32_t layer, bool gated, bool biases, LayerWeights* lw) = 0;
};

enum class NormKind : uint8_t {
  kRms,    ///< x / rms(x) · w
  kLayer,  ///< (x − mean) / std · γ + β
  kNone,   ///< none: the block reads the residual stream itself (OLMo 2)
};

/// The forward pass's building blocks over one iteration's flattened rows, for a family's `forward_layer`.
/// The runner holds the residual stream x [rows, hidden], the normed input h, the attention's q, k, v and
/// output, and the MLP's activations; with tensor parallelism the output projections all-reduce their partial
/// sums before adding them to x.
class LayerOps {
 public:
  virtual ~LayerOps() = default;
  virtual const ModelConfig& config() const = 0;
  /// h = norm(x) (a pending all-reduced residual is added to x first).
  virtual void Norm(NormKind kind, const float* weight, const float* bias) = 0;
  /// q, k, v = h · W_q, W_k, W_v (+ biases).
  virtual void QkvProjection(const LayerWeights& lw) = 0;
  /// RMSNorm of every head of q and of k over its head_dim values (weights of head_dim values each).
  virtual void QkNorm(const float* q_weight, const float* k_weight) = 0;
  /// RMSNorm of each token's whole q projection and whole k projection (OLMo 2; weights of this shard's heads ×
  /// head_dim, HeadSliced): with tensor parallelism the shards all-reduce their rows' sums of squares.
  virtual absl::Status QkNormWhole(const float* q_weight, const float* k_weight) = 0;
  /// RoPE on q and k at their positions when `rotary` (the layer's table: local layers may have their own),
  /// then k and v into this layer's KV cache.
  virtual void PositionAndCache(int32_t local_layer, bool rotary) = 0;
  /// q *= 1 + ModelConfig::attn_temperature_scale · ln(1 + ⌊position / attn_temperature_floor⌋), each token's
  /// row by its own position (Llama 4's attention temperature; Mistral 3), after PositionAndCache's RoPE.
  virtual void QueryTemperature() = 0;
  /// attn = softmax(q kᵀ · scale) v per sequence, over its cached keys and values: scale
  /// ModelConfig::attention_scale (default 1/√head_dim), scores soft-capped by attn_softcap, and a local layer's
  /// queries seeing only the sliding window.
  virtual void Attend(int32_t local_layer) = 0;
  /// x += attn · W_o (+ bias); with `post_norm`, x += RMSNorm(attn · W_o) (Gemma's sandwich).
  virtual absl::Status AttentionOutput(const LayerWeights& lw, const float* post_norm = nullptr) = 0;
  /// ff = silu(h · W_gate) ⊙ (h · W_up + b_up).
  virtual void SwiGlu(const LayerWeights& lw) = 0;
  /// ff = gelu_tanh(h · W_gate) ⊙ (h · W_up) (GeGLU).
  virtual void GeGlu(const LayerWeights& lw) = 0;
  /// ff = gelu_tanh(h · W_up + b_up).
  virtual void GeluUp(const LayerWeights& lw) = 0;
  /// x += ff · W_down (+ bias); with `post_norm`, x += RMSNorm(ff · W_down).
  virtual absl::Status MlpOutput(const LayerWeights& lw, const float* post_norm = nullptr) = 0;
};

/// One tensor of a synthetic checkpoint, Hugging Face name and shape ([out, in] matrices; GPT-2's Conv1D
/// [in, out]), and how its values are drawn.
struct SynthTensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  enum class Init : uint8_t {
    kNormal,
    kOnes,
    kZeros,
    kAroundOne
  } init = Init::kNormal;  ///< kAroundOne: 1 + N(0, stddev)
  double stddev = 0.02;
};

/// Defaults of the ModelFamily fields most families share.
inline bool NoConv1D(TensorRole /*role*/) { return false; }
inline bool NoQkPermutation(const ModelConfig& /*c*/) { return false; }

struct ModelFamily {
  ModelArch arch;
  const char* name;
  /// What a checkpoint says to be of this family.
  std::vector<std::string> hf_model_types;
  std::vector<std::string> hf_architectures;
  std::vector<std::string> gguf_architectures;
  /// Where its tensors may live in a Hugging Face checkpoint, passed to hf_tensor_name as `prefix`: the first
  /// whose token embedding the checkpoint has is used (GPT-2: "transformer." or ""; Gemma 3's multimodal
  /// checkpoints: its language model under "language_model.model." or "model.language_model."). The first is
  /// what orca model synth writes.
  std::vector<std::string> hf_prefixes = {""};
  /// The final norm's kind (LayerNorm has a bias), and whether token embeddings add learned position
  /// embeddings (GPT-2).
  NormKind norm = NormKind::kRms;
  bool learned_positions = false;

  /// config.json → configuration (the common token ids are read by the caller). `model_type` as written.
  absl::Status (*parse_hf)(const nlohmann::json& j, const std::string& model_type, const std::string& src,
                           ModelConfig* out);
  /// GGUF metadata → configuration, after the keys every family shares (sizes, heads, context, vocabulary).
  absl::Status (*parse_gguf)(const formats::GgufFile& g, const std::string& arch, const std::string& src,
                             ModelConfig* out);
  /// A role's name in this family's Hugging Face checkpoints ("" when it has none), under `prefix` (one of
  /// hf_prefixes).
  std::string (*hf_tensor_name)(TensorRole role, int32_t layer, const std::string& prefix);
  /// Whether Hugging Face stores this role as a Conv1D [in, out] matrix (GPT-2).
  bool (*hf_conv1d)(TensorRole role) = NoConv1D;

  /// One layer's weights, from the loader's building blocks.
  absl::Status (*load_layer)(LayerLoader& ld, const ModelConfig& c, int32_t layer, LayerWeights* lw);
  /// One layer's forward pass, from the runner's building blocks.
  absl::Status (*forward_layer)(LayerOps& ops, int32_t local_layer, const LayerWeights& lw);

  /// GGUF export: `general.architecture`, whether llama.cpp's converter permutes Q/K rows for adjacent-pair RoPE
  /// (llama), and the family's own metadata keys beyond those every family shares.
  std::string (*gguf_architecture)(const ModelConfig& c);
  bool (*gguf_permutes_qk)(const ModelConfig& c) = NoQkPermutation;
  void (*write_gguf_keys)(const ModelConfig& c, formats::GgufWriter* w);

  /// `orca model synth`: the family's fixed features (model_type, q/k norms, ...) set on a config built from
  /// sizes; then the tensors (names, shapes, initialisation) and the config.json of a random-weight
  /// checkpoint of this family with configuration `c`.
  void (*synth_config)(ModelConfig* c);
  std::vector<SynthTensorSpec> (*synth_tensors)(const ModelConfig& c);
  void (*synth_config_json)(const ModelConfig& c, nlohmann::json* out);
};

/// The family of an architecture (every ModelArch has one).
const ModelFamily& FamilyOf(ModelArch arch);
/// The family a config.json names (by model_type, else by its first architectures entry); nullptr: none.
const ModelFamily* FindHfFamily(const std::string& model_type, const std::string& architecture);
/// The family of a GGUF `general.architecture`; nullptr: none.
const ModelFamily* FindGgufFamily(const std::string& arch);
/// "gpt2, llama, mistral, qwen2, qwen3": for errors naming what is supported.
std::string SupportedHfModelTypes();
std::string SupportedGgufArchitectures();
/// The family of `--arch NAME` (orca model synth): a family's name; nullptr: none.
const ModelFamily* FindFamilyByName(const std::string& name);
std::string FamilyNames();

}  // namespace orca::engine
