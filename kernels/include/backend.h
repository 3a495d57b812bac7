#pragma once
/// The device-neutral kernel API every backend implements (CPU here; CUDA in
/// kernels/cuda). The engine's forward pass is written only against this
/// interface, so a backend plugs in without touching core/engine.
///
/// Conventions: activations are f32, row-major and contiguous unless a stride
/// is given; pointers are device pointers of the backend (host memory for the
/// CPU backend). Weights keep their storage dtype (f32, bf16, or a GGUF block
/// type: core/common/dtype.h) — in place, or in a backend's own layout built
/// once by UploadWeight; norms/biases are f32.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/dtype.h"

namespace orca::kernels {

/// A weight matrix for y = x · Wᵀ, logically [n, k] (out_features, in_features).
/// Row-major [n, k] with row stride `ld` values (Linear / GGUF layout), or, when
/// `transposed`, stored [k, n] with row stride `ld` (GPT-2 Conv1D layout). The
/// stride lets a tensor-parallel shard view a slice of a mapped file in place.
/// Quantized types are never transposed; their k and any column offset are
/// whole blocks (DTypeBlockElems), and a row starts DTypeRowBytes(dtype, ld)
/// bytes after the previous one.
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t n = 0;
  int64_t k = 0;
  int64_t ld = 0;
  bool transposed = false;
  /// Set by a backend's UploadWeight when `data` is in that backend's own
  /// layout (the CPU backend's panels): only that backend reads it.
  bool packed = false;
  /// Bytes of that layout (0: not packed).
  size_t packed_bytes = 0;

  bool empty() const { return data == nullptr; }
  /// Bytes a full pass over the weight reads.
  size_t ReadBytes() const {
    return packed_bytes != 0 ? packed_bytes : static_cast<size_t>(n) * DTypeRowBytes(dtype, k);
  }
};

/// What a weight is uploaded for: GEMMs (y = x · Wᵀ), row lookups (Embedding,
/// AddPositionEmbedding), or both (a tied embedding / LM head). A backend may
/// lay a weight out for its use (the CPU backend packs GEMM weights into
/// panels and leaves lookup tables as they are).
enum class WeightUse : uint8_t { kMatmul, kGather, kMatmulAndGather };

enum class RopeStyle : uint8_t {
  kNeox,         ///< rotate-half pairs (i, i + d/2): Hugging Face Llama/Qwen
  kInterleaved,  ///< adjacent pairs (2i, 2i + 1): GGUF llama (weights permuted), GPT-J
};

struct RopeParams {
  RopeStyle style = RopeStyle::kNeox;
  int32_t rotary_dim = 0;  ///< leading dims of each head that rotate (= head_dim usually)
  /// Inverse frequencies, rotary_dim / 2 of them (scaling already applied). Device memory.
  const float* inv_freq = nullptr;
  float attention_factor = 1.0f;  ///< cos/sin multiplier (YaRN-style scalings); 1 otherwise
};

/// One layer's slice of the paged KV pool, laid out per block and KV head so
/// that decode attention vectorises across the keys of a block:
///   K: [num_blocks][num_kv_heads][head_dim][block_size]  (transposed in the block)
///   V: [num_blocks][num_kv_heads][block_size][head_dim]
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
};

/// One request of a selectively batched iteration, as attention sees it.
struct AttentionSeq {
  int32_t q_offset = 0;                  ///< first row of this request in q/k/v/out
  int32_t num_tokens = 0;                ///< L: tokens of this iteration
  int32_t start_pos = 0;                 ///< position of its first token; it attends to [0, start_pos + t]
  const int32_t* block_table = nullptr;  ///< device pointer: KV blocks in position order
};

struct AttentionParams {
  const float* q = nullptr;  ///< [N, num_q_heads * head_dim]
  float* out = nullptr;      ///< [N, num_q_heads * head_dim]
  int32_t num_q_heads = 0;
  float scale = 1.0f;
  /// Sliding window: a query at position p sees the keys at positions (p - window, p]. 0: every earlier key.
  int32_t window = 0;
  /// Scores soft-capped as softcap · tanh(score / softcap) after scaling (Gemma 2). 0: none.
  float softcap = 0.0f;
  KvLayerView kv;
  const AttentionSeq* seqs = nullptr;  ///< host array
  int32_t num_seqs = 0;
};

/// Where each new token's K/V row goes: slot = block * block_size + offset.
struct KvWriteParams {
  const float* k = nullptr;  ///< [N, num_kv_heads * head_dim]
  const float* v = nullptr;
  const int32_t* slots = nullptr;  ///< [N] device pointer
  int32_t num_tokens = 0;
  KvLayerView kv;
};

/// Ops recorded by Backend::BeginCapture / EndCapture (a CUDA Graph), replayed with
/// Backend::Replay. It holds the buffers and launch shapes of its capture: a replay reads
/// whatever those buffers hold when it runs, so a caller refreshes their contents (the step's
/// ids, positions, slots, block tables, StageAttention) before each replay.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- Memory (device) ----------------------------------------------------
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  /// Makes `bytes` of an allocation resident now and zeroes them, so that the first op to
  /// use it does not take its page faults (at load, not inside the first request). Device
  /// memory is resident from Allocate: nothing to do but zero it.
  virtual void Prefault(void* ptr, size_t bytes) = 0;
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  /// Makes a weight usable on the device, once, at load. A GPU backend uploads
  /// it into `*storage`; the CPU backend returns lookup tables as they are
  /// (memory-mapped, zero copy) and packs GEMM weights into its panel layouts
  /// in `*storage` (the caller may then drop the host pages: the result does
  /// not refer to them). `*storage` (or nullptr) is freed with Free.
  virtual absl::StatusOr<WeightView> UploadWeight(const WeightView& host, void** storage,
                                                  WeightUse use = WeightUse::kMatmul) = 0;
  /// Waits until all queued work is done (no-op on CPU).
  virtual void Synchronize() = 0;

  // ---- Ops ----------------------------------------------------------------
  /// y[m, n] = x[m, k] · Wᵀ (+ bias[n]) (+ y if accumulate).
  virtual void Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y,
                      bool accumulate = false) = 0;
  /// One GEMM of the same x against several weights (Q/K/V, gate/up): ys[i] =
  /// x · ws[i]ᵀ (+ biases[i]). Backends may run them as one launch; the
  /// default runs them one by one.
  struct LinearOut {
    const WeightView* w;
    const float* bias;
    float* y;
  };
  virtual void LinearMany(const float* x, int64_t m, const LinearOut* outs, int count) {
    for (int i = 0; i < count; ++i) Linear(x, m, *outs[i].w, outs[i].bias, outs[i].y, false);
  }
  /// Rows of an embedding table (any dtype) to f32: out[i] = table[ids[i]]. ids are device pointers.
  virtual void Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) = 0;
  /// out[i, :] += table[positions[i], :] (GPT-2 learned positions).
  virtual void AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) = 0;
  virtual void RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) = 0;
  /// sums[i] = Σ_j x[i, j]² over rows of h: one shard's part of a norm whose row a tensor-parallel group
  /// holds in slices (OLMo 2's q/k norms); the group all-reduces the sums, then RmsNormFromSums.
  virtual void SumSquares(const float* x, int64_t m, int64_t h, float* sums) = 0;
  /// y[i, :] = x[i, :] · weight / sqrt(sums[i] / total_h + eps): RmsNorm of rows whose squares over all
  /// `total_h` values of the whole row are `sums` (y may alias x).
  virtual void RmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h,
                               int64_t total_h, float eps, float* y) = 0;
  virtual void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                         float* y) = 0;
  /// y += x, elementwise over n values.
  virtual void Add(float* y, const float* x, int64_t n) = 0;
  /// residual += x, then y = RmsNorm(residual) (rows of h; y may alias residual): a tensor-parallel
  /// all-reduce's residual add and the next norm, which a backend may fuse. Default: the two ops.
  virtual void AddRmsNorm(float* residual, const float* x, const float* weight, int64_t m, int64_t h, float eps,
                          float* y) {
    Add(residual, x, m * h);
    RmsNorm(residual, weight, m, h, eps, y);
  }
  /// out[m, n] = silu(gate) * up.
  virtual void SiluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) = 0;
  /// x = gelu_tanh(x) (GPT-2's "gelu_new"), in place over n values.
  virtual void GeluTanh(float* x, int64_t n) = 0;
  /// out[m, n] = gelu_tanh(gate) * up (GeGLU: Gemma's gated MLP).
  virtual void GeluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) = 0;
  /// x *= s, in place over n values.
  virtual void Scale(float* x, int64_t n, float s) = 0;
  /// x = cap · tanh(x / cap), in place over n values (Gemma 2's final-logit soft-capping).
  virtual void Softcap(float* x, int64_t n, float cap) = 0;
  /// x[i, :] *= 1 + scale · ln(1 + ⌊positions[i] / floor⌋), in place over m rows of n values: Llama 4's
  /// attention temperature of the queries (Mistral 3), a factor per row computed from its position on the
  /// device, so a recorded decode graph reads each step's positions. floor > 0; positions ≥ 0 (device pointer).
  virtual void AttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                                    int32_t floor) = 0;
  /// Rotates q [m, num_q_heads, head_dim] and k [m, num_kv_heads, head_dim] in place.
  virtual void Rope(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads, int32_t num_kv_heads,
                    int32_t head_dim, const RopeParams& rope) = 0;
  virtual void KvWrite(const KvWriteParams& params) = 0;
  /// Rope of q, then KvWrite of the rotated k (`write.k` must be `k`) and `write.v`: the decode
  /// step's pair, which a backend may fuse into one pass (CUDA: one launch, k rotated on its way
  /// into the cache). Afterwards q is rotated and the cache holds the rotated k; the k rows
  /// themselves are unspecified. Default: the two ops.
  virtual void RopeKvWrite(float* q, float* k, const int32_t* positions, int32_t num_q_heads, const RopeParams& rope,
                           const KvWriteParams& write) {
    Rope(q, k, positions, write.num_tokens, num_q_heads, write.kv.num_kv_heads, write.kv.head_dim, rope);
    KvWrite(write);
  }
  /// Causal attention of each sequence against its own cached K/V (paper §4.1:
  /// the only op split per request).
  virtual void Attention(const AttentionParams& params) = 0;
  /// Copies rows `rows[i]` of src [*, h] into dst [i, h].
  virtual void GatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst) = 0;

  // ---- Graphs: one recorded launch for a sequence of ops (CUDA Graphs) -----
  /// True when BeginCapture works (CUDA); the others then return Unimplemented.
  virtual bool SupportsGraphs() const { return false; }
  /// From here to EndCapture, ops (and only ops: no copies, Allocate, Free or Synchronize,
  /// which would make the host wait inside the capture) are recorded instead of run. An
  /// Attention recorded here reads the sequences StageAttention put on the device last.
  virtual absl::Status BeginCapture() { return absl::UnimplementedError(name() + " cannot record graphs"); }
  /// The ops recorded since BeginCapture, none of them run yet. Internal when the capture
  /// was broken (an operation that waits for the device happened inside it).
  virtual absl::StatusOr<std::unique_ptr<OpGraph>> EndCapture() {
    return absl::UnimplementedError(name() + " cannot record graphs");
  }
  /// Queues the graph's ops, in their recorded order, after the work queued so far.
  /// FailedPrecondition when a buffer the backend owns and the graph uses (a scratch buffer)
  /// was reallocated since the capture: nothing ran; capture again.
  virtual absl::Status Replay(const OpGraph& /*graph*/) {
    return absl::UnimplementedError(name() + " cannot record graphs");
  }
  /// Puts the per-sequence description Attention(params) reads on the device now (queued in
  /// order), so that a recorded Attention with the same batch shape reads this step's
  /// sequences when it is replayed. Attention stages what it needs itself outside a capture.
  virtual void StageAttention(const AttentionParams& /*params*/) {}
};

}  // namespace orca::kernels
