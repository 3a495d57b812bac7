#pragma once
/// The CPU backend: oneDNN GEMMs (bf16 on AVX512-BF16/AMX, f32 otherwise),
/// hand-written AVX-512 kernels for few-row GEMMs and paged attention, and
/// OpenMP-parallel elementwise ops. One instance per compute thread (a
/// tensor-parallel shard); `num_threads` OpenMP threads work inside each op.

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cpu/onednn_gemm.h"
#include "kernels/include/backend.h"

namespace orca::kernels {

class CpuBackend final : public Backend {
 public:
  struct Options {
    /// OpenMP threads per op; 0 = all cores.
    int num_threads = 0;
    /// GEMMs with at most this many rows use the AVX-512 streaming kernel
    /// (decode at small batch: bound by reading W). 0 = never. At 8 rows the
    /// panel kernel is faster (135M bf16 decode at batch 8: 19 ms vs 25 ms).
    int64_t small_gemm_max_rows = 4;
    /// Up to this many rows, GEMMs use the AVX-512 panel kernel (decode
    /// batches); larger ones (prefill) go to oneDNN, and so do bf16 ones on
    /// CPUs with AMX.
    int64_t panel_gemm_max_rows = 128;
    /// Memory for uploaded weights (UploadWeight) prepacked into panels the
    /// first time a decode batch uses them (a second, panel-ordered copy: packing on every iteration
    /// costs as much as the arithmetic at batch 16). Beyond it, panels are
    /// packed on the fly. 0 disables the cache.
    size_t panel_cache_bytes = size_t{2} << 30;
  };
  static std::unique_ptr<CpuBackend> Create(const Options& options);
  ~CpuBackend() override;
  /// Bytes held by prepacked weight panels.
  size_t panel_cache_bytes_used() const { return panel_cache_used_; }

  std::string name() const override;
  int num_threads() const { return num_threads_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::StatusOr<WeightView> UploadWeight(const WeightView& host, void** storage) override;
  void Synchronize() override {}

  void Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate) override;
  void LinearMany(const float* x, int64_t m, const LinearOut* outs, int count) override;
  void Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) override;
  void AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) override;
  void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                 float* y) override;
  void Add(float* y, const float* x, int64_t n) override;
  void SiluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) override;
  void GeluTanh(float* x, int64_t n) override;
  void Rope(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads, int32_t num_kv_heads,
            int32_t head_dim, const RopeParams& rope) override;
  void KvWrite(const KvWriteParams& params) override;
  void Attention(const AttentionParams& params) override;
  void GatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst) override;

 private:
  explicit CpuBackend(const Options& options);
  void SmallLinear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate);
  /// Few-row GEMMs sharing x, k and W's dtype, streamed by every thread (see the .cc).
  struct StreamJob {
    const WeightView* w;
    const float* bias;
    float* y;
    bool accumulate;
  };
  static constexpr int kMaxStreamJobs = 8;
  void StreamLinears(const float* x, int64_t m, const StreamJob* jobs, int count);
  void PanelLinear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate);

  int num_threads_;
  int64_t small_gemm_max_rows_;
  int64_t panel_gemm_max_rows_;
  size_t panel_cache_bytes_;
  struct PackedWeight {
    void* data = nullptr;
    bool ready = false;
  };
  using PanelKey = std::tuple<const void*, int64_t, int64_t, int64_t, int>;
  std::map<PanelKey, PackedWeight> panel_cache_;
  size_t panel_cache_used_ = 0;
  bool avx512_;
  bool amx_;
  OnednnGemm onednn_;
  std::vector<float> packed_x_;
  struct RopeTable {
    std::vector<float> inv_freq;  // the key: frequencies, factor and positions
    float factor = 0;
    std::vector<int32_t> positions;
    std::vector<float> cos, sin;  // [token][frequency]
  };
  RopeTable rope_table_;
  struct AttentionItem {
    int32_t seq;
    int32_t kv_head;
    int32_t t_begin;
    int32_t t_end;
  };
  std::vector<AttentionItem> attention_items_;
};

}  // namespace orca::kernels
