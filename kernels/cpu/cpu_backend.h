#pragma once
/// The CPU backend: GEMM weights packed once at load (UploadWeight) into
/// panel layouts that one family of kernels serves at every batch size —
/// quantized GGUF types through int8 dot products (quant_gemm.h: AVX512-VNNI,
/// AVX-VNNI or portable, chosen from CPUID), bf16 through AVX512-BF16 dot
/// products (bf16_dot_gemm.h) where the CPU has them, f32 (and bf16
/// elsewhere) through AVX-512 FMA panels — plus oneDNN (bf16 on AMX hosts, transposed weights, CPUs without
/// AVX-512), hand-written AVX-512 paged attention, and OpenMP-parallel
/// elementwise ops. One instance per compute thread (a tensor-parallel shard);
/// `num_threads` OpenMP threads work inside each op.
///
/// Packing happens in UploadWeight, never inside a request, and replaces the
/// weight's row-major copy (the caller drops the mapped pages): resident
/// memory stays one copy of the weights.

#include <memory>
#include <optional>
#include <vector>

#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/quant_gemm.h"
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
    /// UploadWeight packs f32/bf16 GEMM weights into [k][32] panels (with
    /// AVX-512, except bf16 on AMX hosts, where oneDNN's tiles win) and every
    /// GEMM on them runs the panel kernel; false keeps them row-major for the
    /// thresholds above (tests of those paths, comparisons). Quantized weights
    /// are always packed (their kernels read only the packed layout).
    bool pack_weights = true;
    /// AVX512-BF16 dot products where the CPU has them: packed bf16 weights
    /// become bf16dot:: pair panels, and attention over a bf16 KV cache rounds
    /// queries and probabilities to bf16 (bf16_dot_attention.h); false keeps
    /// the [k][32] panels and the f32-FMA kernels for both (tests of those
    /// paths, comparisons).
    bool bf16_dot = true;
    /// The quantized GEMM implementation; nullopt = the fastest this CPU runs.
    std::optional<quant::Isa> quant_isa;
    /// The quantized decode kernels' software prefetch for every call;
    /// nullopt = the measured choice for this CPU, the call's row count and the weight's type
    /// (quant::DecodePrefetchFor). For paired comparisons.
    std::optional<quant::DecodePrefetch> decode_prefetch;
    /// Most rows a quantized GEMM runs on the AVX-512 decode kernels, for every
    /// type (quant::GemmArgs::direct_max_rows); nullopt = the measured choice
    /// per type for this CPU (quant::AvxDirectMaxRowsFor). For paired comparisons.
    std::optional<int64_t> quant_direct_max_rows;
  };
  static std::unique_ptr<CpuBackend> Create(const Options& options);
  ~CpuBackend() override;
  quant::Isa quant_isa() const { return quant_isa_; }

  std::string name() const override;
  int num_threads() const { return num_threads_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void Prefault(void* ptr, size_t bytes) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  absl::StatusOr<WeightView> UploadWeight(const WeightView& host, void** storage, WeightUse use) override;
  void Synchronize() override {}

  void Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate) override;
  void LinearMany(const float* x, int64_t m, const LinearOut* outs, int count) override;
  void Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) override;
  void AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) override;
  void SumSquares(const float* x, int64_t m, int64_t h, float* sums) override;
  void RmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h, int64_t total_h,
                       float eps, float* y) override;
  void LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                 float* y) override;
  void Add(float* y, const float* x, int64_t n) override;
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
  /// GEMMs on packed weights sharing x (same k): one parallel region; quantized
  /// ones share one quantization of x.
  void PackedLinears(const float* x, int64_t m, const StreamJob* jobs, int count);
  /// Row `row` of any weight view (packed or not, any dtype) as f32.
  void DecodeRow(const WeightView& t, int64_t row, float* out) const;

  int num_threads_;
  int64_t small_gemm_max_rows_;
  int64_t panel_gemm_max_rows_;
  bool pack_weights_;
  bool avx512_;
  bool amx_;
  bool bf16_dot_;  ///< packed bf16 weights are bf16dot pair panels; bf16-cache attention on bf16 dots
  quant::Isa quant_isa_;
  std::optional<quant::DecodePrefetch> decode_prefetch_;
  int64_t quant_direct_max_rows_;  // 0: per type
  OnednnGemm onednn_;
  std::vector<float> packed_x_;
  quant::QuantizedRows quantized_x_;
  std::vector<uint16_t> bf16_x_;  ///< activations rounded to bf16 for bf16dot::Gemm
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
