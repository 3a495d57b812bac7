#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/pinned_staging.h"

namespace orca::kernels {
namespace {

// Small host→device copies (token ids, positions, slots, block tables,
// attention descriptors) go through 4 pinned segments of 1 MiB.
constexpr size_t kStagingSegmentBytes = size_t{1} << 20;
constexpr int kStagingSegments = 4;
constexpr size_t kMinAllocation = 256;

// A failed CUDA/cuBLAS call inside an op: see the header for why this aborts.
void CheckCuda(cudaError_t e, const char* what, int device, const char* file, int line) {
  if (e == cudaSuccess) return;
  LogMessage(LogLevel::kFatal, file, line).stream() << "CUDA error on device " << device << " in " << what << ": "
                                                    << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ")";
}

void CheckCublas(const cuda::CublasApi& api, cublasStatus_t s, const char* what, int device, const char* file,
                 int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  LogMessage(LogLevel::kFatal, file, line).stream()
      << "cuBLAS error on device " << device << " in " << what << ": " << api.get_status_string(s);
}

#define ORCA_CUDA_CHECK(expr) CheckCuda((expr), #expr, device_, __FILE__, __LINE__)
#define ORCA_CUBLAS_CHECK(expr) CheckCublas(*cublas_api_, (expr), #expr, device_, __FILE__, __LINE__)

absl::Status CudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(absl::StrCat(what, ": out of device memory"));
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

cudaDataType CudaType(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      // Only types whose traits row says CudaGemm::kCublas reach cuBLAS: UploadWeight sends
      // block types to the decoding kernels or refuses them.
      ORCA_LOG(FATAL) << "cuBLAS has no type for " << DTypeName(t) << " weights";
      break;
  }
  return CUDA_R_32F;
}

// Whether weights of `t` keep their blocks on the device and go through quant_kernels.cu.
bool DecodesBlocks(DType t) { return TraitsOf(t).cuda_gemm == CudaGemm::kDequant; }

static_assert(sizeof(cuda::AttentionSeqDesc) == sizeof(void*) + 4 * sizeof(int32_t),
              "AttentionSeqDesc must have no padding: descriptors are compared bytewise");

cuda::KvCacheDesc ToDesc(const KvLayerView& kv) {
  ORCA_CHECK(kv.dtype == DType::kF32 || kv.dtype == DType::kBF16) << "KV cache dtype " << DTypeName(kv.dtype);
  cuda::KvCacheDesc d;
  d.k = kv.k;
  d.v = kv.v;
  d.bf16 = kv.dtype == DType::kBF16;
  d.block_size = kv.block_size;
  d.num_kv_heads = kv.num_kv_heads;
  d.head_dim = kv.head_dim;
  return d;
}

}  // namespace

int CudaBackend::DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error for the caller
    return 0;
  }
  return count;
}

CudaBackend::CudaBackend(int device) : device_(device) {}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device_index) {
  const int count = DeviceCount();
  if (device_index < 0 || device_index >= count)
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device_index, " is not available (", count, " GPU(s) visible)"));
  std::unique_ptr<CudaBackend> b(new CudaBackend(device_index));
  ORCA_RETURN_IF_ERROR(b->Init());
  return b;
}

absl::Status CudaBackend::Init() {
  const std::string where = absl::StrCat("CUDA device ", device_);
  ORCA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), where));
  cudaDeviceProp prop;
  ORCA_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&prop, device_), where));
  device_name_ = prop.name;
  compute_capability_ = prop.major * 10 + prop.minor;
  total_memory_ = prop.totalGlobalMem;
  max_shared_per_block_ = prop.sharedMemPerBlockOptin;
  if (cudaError_t e = cuda::ProbeKernelImage(); e != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(where, " (", device_name_, ", sm_", compute_capability_,
                                               ") cannot run this build's kernels: ", cudaGetErrorString(e),
                                               "; rebuild with ORCA_CUDA_ARCHITECTURES including it"));
  }
  cudaStream_t stream = nullptr;
  ORCA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), where));
  stream_ = stream;
  ORCA_ASSIGN_OR_RETURN(cublas_api_, cuda::LoadCublas());
  const cuda::CublasApi& api = *cublas_api_;
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t s = api.create(&handle); s != CUBLAS_STATUS_SUCCESS)
    return absl::InternalError(absl::StrCat(where, ": cublasCreate: ", api.get_status_string(s)));
  cublas_ = handle;
  if (cublasStatus_t s = api.set_stream(cublas_, stream_); s != CUBLAS_STATUS_SUCCESS)
    return absl::InternalError(absl::StrCat(where, ": cublasSetStream: ", api.get_status_string(s)));
  ORCA_ASSIGN_OR_RETURN(staging_, PinnedStaging::Create(stream_, kStagingSegmentBytes, kStagingSegments));
  return absl::OkStatus();
}

CudaBackend::~CudaBackend() {
  if (stream_ == nullptr) return;  // Init failed before anything was queued
  MakeCurrent();
  if (capturing_) {  // an abandoned capture: end it so the stream can be synchronised
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess) cudaGraphDestroy(graph);
  }
  cudaStreamSynchronize(stream_);
  staging_.reset();
  if (lowp_x_ != nullptr) cudaFree(lowp_x_);
  if (attn_seqs_ != nullptr) cudaFree(attn_seqs_);
  if (cublas_ != nullptr) cublas_api_->destroy(cublas_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  return absl::StrCat("cuda:", device_, " (", device_name_, ", sm_", compute_capability_, ", ", total_memory_ >> 30,
                      " GiB)");
}

void CudaBackend::MakeCurrent() const { ORCA_CUDA_CHECK(cudaSetDevice(device_)); }

// ---- Memory ------------------------------------------------------------------

absl::StatusOr<void*> CudaBackend::Allocate(size_t bytes) {
  MakeCurrent();
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, std::max(bytes, kMinAllocation)); e != cudaSuccess)
    return CudaStatus(e, absl::StrCat("allocating ", bytes, " bytes on CUDA device ", device_));
  return p;
}

void CudaBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  MakeCurrent();
  // Queued work may still read the buffer.
  ORCA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ORCA_CUDA_CHECK(cudaFree(ptr));
}

void CudaBackend::Prefault(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  MakeCurrent();
  ORCA_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  MakeCurrent();
  if (bytes <= staging_->segment_bytes()) {
    ORCA_CUDA_CHECK(staging_->CopyToDevice(dst, src, bytes));
    return;
  }
  // Large copies (activations from the previous stage) start the iteration
  // anyway: a direct copy and a wait keep `src` safe to reuse on return.
  ORCA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  ORCA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  MakeCurrent();
  ORCA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  ORCA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

absl::StatusOr<WeightView> CudaBackend::UploadWeight(const WeightView& host, void** storage, WeightUse /*use*/) {
  *storage = nullptr;
  if (host.empty()) return host;
  if (host.packed)
    return absl::InvalidArgumentError(
        absl::StrCat("a ", DTypeName(host.dtype), " weight in another backend's packed layout cannot be uploaded"));
  if (TraitsOf(host.dtype).cuda_gemm == CudaGemm::kNone)
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA backend has no GEMM for ", DTypeName(host.dtype), " weights"));
  if (DecodesBlocks(host.dtype)) return UploadQuantizedWeight(host, storage);
  const int64_t rows = host.transposed ? host.k : host.n, cols = host.transposed ? host.n : host.k;
  if (rows <= 0 || cols <= 0 || host.ld < cols)
    return absl::InvalidArgumentError(
        absl::StrCat("weight view [", host.n, ", ", host.k, "] has row stride ", host.ld, " < ", cols, " columns"));
  if (host.n > INT_MAX || host.k > INT_MAX)
    return absl::InvalidArgumentError(absl::StrCat("weight [", host.n, ", ", host.k, "] exceeds cuBLAS's int32 dims"));
  const size_t es = DTypeSize(host.dtype);
  const size_t row_bytes = static_cast<size_t>(cols) * es;
  ORCA_ASSIGN_OR_RETURN(void* dev, Allocate(row_bytes * static_cast<size_t>(rows)));
  cudaError_t e = cudaMemcpy2DAsync(dev, row_bytes, host.data, static_cast<size_t>(host.ld) * es, row_bytes,
                                    static_cast<size_t>(rows), cudaMemcpyHostToDevice, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);  // the host view may be unmapped after return
  if (e != cudaSuccess) {
    cudaFree(dev);
    return CudaStatus(e, absl::StrCat("uploading a [", host.n, ", ", host.k, "] weight to CUDA device ", device_));
  }
  WeightView out = host;
  out.data = dev;
  out.ld = cols;
  *storage = dev;
  return out;
}

// Block-quantized weights keep their file's bytes (quant_kernels.cu decodes them in the GEMM):
// rows of whole blocks, copied without their padding (ld becomes k).
absl::StatusOr<WeightView> CudaBackend::UploadQuantizedWeight(const WeightView& host, void** storage) {
  const int64_t block = DTypeBlockElems(host.dtype);
  if (host.transposed || host.n <= 0 || host.k <= 0 || host.k % block != 0 || host.ld < host.k || host.ld % block != 0)
    return absl::InvalidArgumentError(absl::StrCat("a ", DTypeName(host.dtype), " weight [", host.n, ", ", host.k,
                                                   "] (row stride ", host.ld, host.transposed ? ", transposed" : "",
                                                   ") is not row-major whole ", block, "-value blocks per row"));
  if (host.n > INT_MAX) return absl::InvalidArgumentError(absl::StrCat("weight rows ", host.n, " exceed int32"));
  const size_t row_bytes = DTypeRowBytes(host.dtype, host.k), pitch = DTypeRowBytes(host.dtype, host.ld);
  ORCA_ASSIGN_OR_RETURN(void* dev, Allocate(row_bytes * static_cast<size_t>(host.n)));
  cudaError_t e = cudaMemcpy2DAsync(dev, row_bytes, host.data, pitch, row_bytes, static_cast<size_t>(host.n),
                                    cudaMemcpyHostToDevice, stream_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);  // the host view may be unmapped after return
  if (e != cudaSuccess) {
    cudaFree(dev);
    return CudaStatus(e, absl::StrCat("uploading a ", DTypeName(host.dtype), " [", host.n, ", ", host.k,
                                      "] weight to CUDA device ", device_));
  }
  WeightView out = host;
  out.data = dev;
  out.ld = host.k;
  *storage = dev;
  return out;
}

void CudaBackend::Synchronize() {
  MakeCurrent();
  ORCA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void* CudaBackend::Scratch(void** buffer, size_t* capacity, size_t bytes) {
  if (bytes <= *capacity) return *buffer;
  const size_t want = std::max(bytes, *capacity + *capacity / 2);
  if (*buffer != nullptr) {
    ORCA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued ops may still use the old buffer
    ORCA_CUDA_CHECK(cudaFree(*buffer));
    *buffer = nullptr;
    *capacity = 0;
  }
  ++scratch_generation_;
  ORCA_CUDA_CHECK(cudaMalloc(buffer, want));
  *capacity = want;
  return *buffer;
}

// ---- GEMM ----------------------------------------------------------------------

// Row-major y[m, n] = x[m, k] · Wᵀ is column-major yᵀ[n, m] = op(W) · xᵀ, where
// the row-major [n, k] weight read column-major is Wᵀ (so op = T) and the
// transposed [k, n] layout read column-major is W itself (op = N).
void CudaBackend::Linear(const float* x, int64_t m, const WeightView& w, const float* bias, float* y, bool accumulate) {
  if (m <= 0 || w.n <= 0) return;
  MakeCurrent();
  if (DecodesBlocks(w.dtype)) {
    ORCA_CUDA_CHECK(cuda::LaunchQuantLinear(x, m, w.data, w.dtype, w.n, w.k, w.ld, bias, y, accumulate, stream_));
    return;
  }
  ORCA_CHECK(m <= INT_MAX && w.n <= INT_MAX && w.k <= INT_MAX && w.ld <= INT_MAX)
      << "GEMM [" << m << " x " << w.k << "] · [" << w.n << " x " << w.k << "]ᵀ exceeds int32 dimensions";
  const cudaDataType type = CudaType(w.dtype);
  const void* xb = x;
  if (w.dtype != DType::kF32) {
    // cuBLAS has no mixed f32 × bf16 inputs: round the activations like the CPU's oneDNN path.
    const size_t elems = static_cast<size_t>(m * w.k);
    void* lowp = Scratch(&lowp_x_, &lowp_x_bytes_, elems * DTypeSize(w.dtype));
    ORCA_CUDA_CHECK(cuda::LaunchConvertFromF32(x, static_cast<int64_t>(elems), w.dtype, lowp, stream_));
    xb = lowp;
  }
  const float alpha = 1.0f;
  float beta = accumulate ? 1.0f : 0.0f;
  if (bias != nullptr) {
    ORCA_CUDA_CHECK(cuda::LaunchBroadcastBias(y, bias, m, w.n, accumulate, stream_));
    beta = 1.0f;
  }
  ORCA_CUBLAS_CHECK(cublas_api_->gemm_ex(
      cublas_, w.transposed ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.n), static_cast<int>(m),
      static_cast<int>(w.k), &alpha, w.data, type, static_cast<int>(w.ld), xb, type, static_cast<int>(w.k), &beta, y,
      CUDA_R_32F, static_cast<int>(w.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- Row and elementwise ops -------------------------------------------------------

void CudaBackend::Embedding(const int32_t* ids, int64_t m, const WeightView& table, float* out) {
  MakeCurrent();
  if (DecodesBlocks(table.dtype)) {
    ORCA_CUDA_CHECK(
        cuda::LaunchGatherQuantRows(ids, m, table.data, table.dtype, table.k, table.ld, /*add=*/false, out, stream_));
    return;
  }
  ORCA_CUDA_CHECK(
      cuda::LaunchGatherTableRows(ids, m, table.data, table.dtype, table.k, table.ld, /*add=*/false, out, stream_));
}

void CudaBackend::AddPositionEmbedding(const int32_t* positions, int64_t m, const WeightView& table, float* out) {
  MakeCurrent();
  if (DecodesBlocks(table.dtype)) {
    ORCA_CUDA_CHECK(cuda::LaunchGatherQuantRows(positions, m, table.data, table.dtype, table.k, table.ld, /*add=*/true,
                                                out, stream_));
    return;
  }
  ORCA_CUDA_CHECK(cuda::LaunchGatherTableRows(positions, m, table.data, table.dtype, table.k, table.ld, /*add=*/true,
                                              out, stream_));
}

void CudaBackend::RmsNorm(const float* x, const float* weight, int64_t m, int64_t h, float eps, float* y) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchRmsNorm(x, weight, m, h, eps, y, stream_));
}

void CudaBackend::LayerNorm(const float* x, const float* gamma, const float* beta, int64_t m, int64_t h, float eps,
                            float* y) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchLayerNorm(x, gamma, beta, m, h, eps, y, stream_));
}

void CudaBackend::Add(float* y, const float* x, int64_t n) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchAdd(y, x, n, stream_));
}

void CudaBackend::SumSquares(const float* x, int64_t m, int64_t h, float* sums) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchSumSquares(x, m, h, sums, stream_));
}

void CudaBackend::RmsNormFromSums(const float* x, const float* weight, const float* sums, int64_t m, int64_t h,
                                  int64_t total_h, float eps, float* y) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchRmsNormFromSums(x, weight, sums, m, h, total_h, eps, y, stream_));
}

void CudaBackend::AddRmsNorm(float* residual, const float* x, const float* weight, int64_t m, int64_t h, float eps,
                             float* y) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchAddRmsNorm(residual, x, weight, m, h, eps, y, stream_));
}

void CudaBackend::SiluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchSiluMul(gate, up, m * n, out, stream_));
}

void CudaBackend::GeluTanh(float* x, int64_t n) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchGeluTanh(x, n, stream_));
}

void CudaBackend::GeluMul(const float* gate, const float* up, int64_t m, int64_t n, float* out) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchGeluMul(gate, up, m * n, out, stream_));
}

void CudaBackend::Scale(float* x, int64_t n, float s) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchScale(x, n, s, stream_));
}

void CudaBackend::Softcap(float* x, int64_t n, float cap) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchSoftcap(x, n, cap, stream_));
}

void CudaBackend::AttentionTemperature(float* x, const int32_t* positions, int64_t m, int64_t n, float scale,
                                       int32_t floor) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchAttentionTemperature(x, positions, m, n, scale, floor, stream_));
}

namespace {
cuda::RopeLaunch ToRopeLaunch(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads,
                              int32_t num_kv_heads, int32_t head_dim, const RopeParams& rope) {
  ORCA_CHECK(rope.rotary_dim % 2 == 0 && rope.rotary_dim <= head_dim)
      << "rotary_dim " << rope.rotary_dim << " with head_dim " << head_dim;
  cuda::RopeLaunch p;
  p.q = q;
  p.k = k;
  p.positions = positions;
  p.num_tokens = m;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.rotary_dim = rope.rotary_dim;
  p.interleaved = rope.style == RopeStyle::kInterleaved;
  p.inv_freq = rope.inv_freq;
  p.attention_factor = rope.attention_factor;
  return p;
}
}  // namespace

void CudaBackend::Rope(float* q, float* k, const int32_t* positions, int64_t m, int32_t num_q_heads,
                       int32_t num_kv_heads, int32_t head_dim, const RopeParams& rope) {
  MakeCurrent();
  ORCA_CUDA_CHECK(
      cuda::LaunchRope(ToRopeLaunch(q, k, positions, m, num_q_heads, num_kv_heads, head_dim, rope), stream_));
}

void CudaBackend::RopeKvWrite(float* q, float* k, const int32_t* positions, int32_t num_q_heads, const RopeParams& rope,
                              const KvWriteParams& write) {
  MakeCurrent();
  ORCA_CHECK(write.k == k) << "RopeKvWrite writes the k it rotates";
  const cuda::RopeLaunch p =
      ToRopeLaunch(q, k, positions, write.num_tokens, num_q_heads, write.kv.num_kv_heads, write.kv.head_dim, rope);
  ORCA_CUDA_CHECK(cuda::LaunchRopeKvWrite(p, write.v, write.slots, ToDesc(write.kv), stream_));
}

void CudaBackend::KvWrite(const KvWriteParams& p) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchKvWrite(p.k, p.v, p.slots, p.num_tokens, ToDesc(p.kv), stream_));
}

void CudaBackend::GatherRows(const float* src, const int32_t* rows, int64_t num_rows, int64_t h, float* dst) {
  MakeCurrent();
  ORCA_CUDA_CHECK(cuda::LaunchGatherRows(src, rows, num_rows, h, dst, stream_));
}

// ---- Attention ----------------------------------------------------------------------

int64_t CudaBackend::BuildAttentionDescs(const AttentionParams& p, int32_t rows_per_tile) {
  const KvLayerView& kv = p.kv;
  ORCA_CHECK(kv.num_kv_heads > 0 && p.num_q_heads % kv.num_kv_heads == 0)
      << p.num_q_heads << " query heads over " << kv.num_kv_heads << " KV heads";
  const int32_t group = p.num_q_heads / kv.num_kv_heads;
  // Per-sequence descriptors with the prefix sum of thread blocks (one launch for all).
  attn_host_.resize(sizeof(cuda::AttentionSeqDesc) * static_cast<size_t>(p.num_seqs));
  uint8_t* descs = attn_host_.data();
  int64_t tiles = 0;
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const AttentionSeq& seq = p.seqs[s];
    cuda::AttentionSeqDesc d;
    d.block_table = seq.block_table;
    d.q_offset = seq.q_offset;
    d.num_tokens = seq.num_tokens;
    d.start_pos = seq.start_pos;
    d.tile_begin = static_cast<int32_t>(tiles);
    std::memcpy(descs + s * sizeof(d), &d, sizeof(d));  // no padding: byte comparison below is exact
    tiles += cuda::AttentionTilesForSeq(seq.num_tokens, group, kv.num_kv_heads, rows_per_tile);
    ORCA_CHECK(tiles <= INT_MAX) << "attention grid of " << tiles << " blocks";
  }
  return tiles;
}

void CudaBackend::UploadAttentionDescs() {
  // The layers of one iteration pass identical descriptors: upload them once.
  if (attn_host_ == attn_uploaded_) return;
  ORCA_CHECK(!capturing_) << "Attention recorded in a graph with sequences StageAttention did not stage";
  void* dev = Scratch(&attn_seqs_, &attn_seqs_bytes_, attn_host_.size());
  CopyToDevice(dev, attn_host_.data(), attn_host_.size());
  attn_uploaded_ = attn_host_;
}

void CudaBackend::StageAttention(const AttentionParams& p) {
  if (p.num_seqs <= 0) return;
  MakeCurrent();
  ORCA_CHECK(!capturing_) << "StageAttention copies to the device: call it before BeginCapture";
  const cuda::AttentionTiling tiling = cuda::ChooseAttentionTiling(p.kv.head_dim, max_shared_per_block_);
  if (tiling.rows_per_tile <= 0 || BuildAttentionDescs(p, tiling.rows_per_tile) == 0) return;
  UploadAttentionDescs();
}

// The launch's grid is the sum of the sequences' tiles, which depends only on their token
// counts (and the model's head layout), never on their context lengths: each block loops over
// its sequence's keys on the device, reading start_pos from the descriptors. So a graph
// recorded for a batch of B decode rows (one token each) has the right grid for any contexts,
// and StageAttention refreshes the descriptors it reads (start_pos, block table) per step.
void CudaBackend::Attention(const AttentionParams& p) {
  if (p.num_seqs <= 0) return;
  MakeCurrent();
  const KvLayerView& kv = p.kv;
  const cuda::AttentionTiling tiling = cuda::ChooseAttentionTiling(kv.head_dim, max_shared_per_block_);
  ORCA_CHECK(tiling.rows_per_tile > 0) << "head_dim " << kv.head_dim << " needs more shared memory than the "
                                       << max_shared_per_block_ << " bytes a block of " << device_name_ << " has";
  const int64_t tiles = BuildAttentionDescs(p, tiling.rows_per_tile);
  if (tiles == 0) return;
  UploadAttentionDescs();
  cuda::AttentionLaunch launch;
  launch.q = p.q;
  launch.out = p.out;
  launch.num_q_heads = p.num_q_heads;
  launch.scale = p.scale;
  launch.window = p.window;
  launch.softcap = p.softcap;
  launch.kv = ToDesc(kv);
  launch.seqs = static_cast<const cuda::AttentionSeqDesc*>(attn_seqs_);
  launch.num_seqs = p.num_seqs;
  launch.total_tiles = static_cast<int32_t>(tiles);
  launch.tiling = tiling;
  ORCA_CUDA_CHECK(cuda::LaunchPagedAttention(launch, stream_));
}

// ---- Graphs ----------------------------------------------------------------------------

namespace {
class CudaGraph final : public OpGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, uint64_t scratch_generation) : exec_(exec), scratch_generation_(scratch_generation) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  cudaGraphExec_t exec() const { return exec_; }
  uint64_t scratch_generation() const { return scratch_generation_; }

 private:
  cudaGraphExec_t exec_;
  uint64_t scratch_generation_;
};
}  // namespace

absl::Status CudaBackend::BeginCapture() {
  if (capturing_) return absl::FailedPreconditionError("a capture is already under way");
  MakeCurrent();
  // ThreadLocal: this thread may not call what could synchronize the device (the runtime
  // fails such a call and the capture), while other threads' backends run as usual.
  ORCA_RETURN_IF_ERROR(CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                  absl::StrCat("beginning a graph capture on CUDA device ", device_)));
  capturing_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpGraph>> CudaBackend::EndCapture() {
  if (!capturing_) return absl::FailedPreconditionError("no capture is under way");
  MakeCurrent();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  ORCA_RETURN_IF_ERROR(CudaStatus(cudaStreamEndCapture(stream_, &graph),
                                  absl::StrCat("ending a graph capture on CUDA device ", device_,
                                               " (an operation inside it waited for the device)")));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  ORCA_RETURN_IF_ERROR(CudaStatus(e, absl::StrCat("instantiating a graph on CUDA device ", device_)));
  return std::unique_ptr<OpGraph>(new CudaGraph(exec, scratch_generation_));
}

absl::Status CudaBackend::Replay(const OpGraph& graph) {
  const auto& g = static_cast<const CudaGraph&>(graph);
  if (g.scratch_generation() != scratch_generation_)
    return absl::FailedPreconditionError("a scratch buffer the graph uses was reallocated since its capture");
  MakeCurrent();
  return CudaStatus(cudaGraphLaunch(g.exec(), stream_), absl::StrCat("launching a graph on CUDA device ", device_));
}

}  // namespace orca::kernels
