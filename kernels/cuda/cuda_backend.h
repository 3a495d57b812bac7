#pragma once
/// The CUDA backend: one device and one CUDA stream per instance (one per
/// tensor-parallel shard). GEMMs go through cuBLAS (f32 activations; bf16/f16
/// weights run as reduced-precision × reduced-precision → f32 after the
/// activations are rounded in a scratch buffer); attention is one fused
/// launch per layer for the whole selectively batched iteration (paper §5);
/// the other ops are small hand-written kernels (cuda_kernels.h).
///
/// Every op and copy is queued on the backend's stream in call order, so ops
/// see each other's results without synchronisation; Synchronize() waits for
/// the stream. Methods may be called from any thread (the backend makes its
/// device current first), but not from two threads at once.
///
/// Errors: Create, Allocate and UploadWeight return statuses (no device, out
/// of memory). A failing CUDA or cuBLAS call inside an op or copy is an
/// internal invariant broken (the engine validates every input first) or a
/// device fault that leaves the CUDA context unusable, so it aborts the
/// process with the call, the error and the device in the message.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/include/backend.h"

struct CUstream_st;
struct cublasContext;

namespace orca::kernels {
namespace cuda {
struct CublasApi;
}  // namespace cuda

class PinnedStaging;

class CudaBackend final : public Backend {
 public:
  /// GPUs visible to this process; 0 when there is none or no usable driver.
  static int DeviceCount();
  /// Unavailable when `device_index` is not a visible GPU.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(int device_index);
  ~CudaBackend() override;

  std::string name() const override;
  int device_index() const { return device_; }
  /// The stream every op is queued on; collectives (NCCL) join it so that they
  /// are ordered with the surrounding ops.
  CUstream_st* stream() const { return stream_; }
  /// Makes this backend's GPU current on the calling thread (ops do it themselves).
  void MakeCurrent() const;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void Prefault(void* ptr, size_t bytes) override;
  /// Asynchronous: `src` may be reused as soon as this returns.
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  /// Waits for the queued work and the copy: `dst` holds the data on return.
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  /// Copies the (possibly strided) host view into a contiguous device buffer,
  /// returned in `*storage` for the caller to Free.
  absl::StatusOr<WeightView> UploadWeight(const WeightView& host, void** storage, WeightUse use) override;
  void Synchronize() override;

  void Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate) override;
  void Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) override;
  void AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) override;
  void SumSquares(const float* x, int64_t m, int64_t h, float* sums) override;
  void RmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h, int64_t total_h,
                       float eps, float* y) override;
  void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                 float* y) override;
  void Add(float* y, const float* x, int64_t n) override;
  void AddRmsNorm(float* residual, const float* x, const float* weight, int64_t m, int64_t h, float eps,
                  float* y) override;
  void SiluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) override;
  void GeluTanh(float* x, int64_t n) override;
  void GeluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) override;
  void Scale(float* x, int64_t n, float s) override;
  void Softcap(float* x, int64_t n, float cap) override;
  void AttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                            int32_t floor) override;
  void Rope(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads, int32_t num_kv_heads,
            int32_t head_dim, const RopeParams& rope) override;
  void KvWrite(const KvWriteParams& params) override;
  void RopeKvWrite(float* q, float* k, const int32_t* positions, int32_t num_q_heads, const RopeParams& rope,
                   const KvWriteParams& write) override;
  void Attention(const AttentionParams& params) override;
  void GatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst) override;

  /// CUDA Graphs: stream capture of this backend's stream (cudaStreamCaptureModeThreadLocal:
  /// the capturing thread may make no call that can synchronize the device; other threads,
  /// other backends' shards, are unaffected). cuBLAS GEMMs are captured with the stream; run
  /// the same shapes once outside a capture first, so that cuBLAS and this backend's scratch
  /// buffers have allocated what they need (an allocation inside a capture breaks it).
  bool SupportsGraphs() const override { return true; }
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<OpGraph>> EndCapture() override;
  absl::Status Replay(const OpGraph& graph) override;
  void StageAttention(const AttentionParams& params) override;

 private:
  explicit CudaBackend(int device);
  absl::Status Init();
  absl::StatusOr<WeightView> UploadQuantizedWeight(const WeightView& host, void** storage);
  /// A device scratch buffer of at least `bytes` (grown geometrically).
  void* Scratch(void** buffer, size_t* capacity, size_t bytes);
  /// Attention's per-sequence descriptors for `p` (tiles of `rows_per_tile` query rows) into
  /// attn_host_; returns the grid's thread blocks (0: nothing to launch).
  int64_t BuildAttentionDescs(const AttentionParams& p, int32_t rows_per_tile);
  /// Puts attn_host_ on the device unless it is there already.
  void UploadAttentionDescs();

  int device_;
  std::string device_name_;
  int compute_capability_ = 0;
  size_t total_memory_ = 0;
  size_t max_shared_per_block_ = 0;  ///< opt-in limit for dynamic shared memory
  CUstream_st* stream_ = nullptr;
  const cuda::CublasApi* cublas_api_ = nullptr;  ///< loaded by Init (kernels/cuda/cublas_library.h)
  cublasContext* cublas_ = nullptr;
  std::unique_ptr<PinnedStaging> staging_;

  void* lowp_x_ = nullptr;  ///< activations rounded to the weight dtype
  size_t lowp_x_bytes_ = 0;
  /// Bumped when a scratch buffer is reallocated: a graph captured before reads the old one.
  uint64_t scratch_generation_ = 0;
  bool capturing_ = false;
  // Attention's per-sequence descriptors: the last upload is kept so the
  // layers of one iteration (identical descriptors) upload them once.
  void* attn_seqs_ = nullptr;
  size_t attn_seqs_bytes_ = 0;
  std::vector<uint8_t> attn_host_;
  std::vector<uint8_t> attn_uploaded_;
};

}  // namespace orca::kernels
