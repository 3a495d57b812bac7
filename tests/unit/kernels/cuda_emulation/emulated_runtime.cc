// A host emulation of the CUDA runtime, device builtins and cublasGemmEx,
// just enough to run the CUDA backend (kernels/cuda, compiled as C++ with
// ORCA_CUDA_EMULATION) and its test suite on a machine without a GPU.
//
// What it checks: kernel indexing and tiling, barrier and shuffle placement
// (a barrier or full-warp shuffle not reached by every thread deadlocks and
// aborts), reads of shared memory never written (it starts as NaN), reads of
// device memory never written (cudaMalloc returns NaN bytes) or already freed
// (cudaFree poisons it and keeps it out of reuse for a while), launch shapes,
// shared-memory limits, what a stream capture records (and that nothing inside
// it makes the host wait), and the GEMM operand layout against cuBLAS's
// documented column-major semantics.
// What it cannot check: performance, races that need real concurrency (the
// fibers interleave only at barriers), the CUDA memory model, real cuBLAS.
//
// Streams are synchronous here: every queued operation runs at once, so
// stream order holds trivially. A capturing stream (cudaStreamBeginCapture)
// records its operations instead, and a graph launch runs them in order.

#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/common/dtype.h"
#include "cublas_v2.h"
#include "cuda_runtime.h"

dim3 threadIdx;
dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace {

// Enough for a PP 2 x TP 2 engine with one device per rank, as NCCL requires.
constexpr int kDevices = 8;
constexpr size_t kSharedDefault = 48 * 1024;
constexpr size_t kSharedOptIn = 99 * 1024;  // sm_86 / sm_89: the tightest current GPUs
constexpr size_t kMaxAllocation = size_t{1} << 40;
constexpr size_t kFiberStack = 128 * 1024;
// Freed device memory is poisoned and kept out of reuse until this much more has been freed,
// so that a stale pointer (a graph replaying onto buffers reallocated since its capture) reads
// NaN instead of whatever the allocator put at the same address.
constexpr size_t kFreedQuarantine = size_t{256} << 20;

enum class Wait { kNone, kBlock, kWarp };

struct Fiber {
  ucontext_t context;
  Wait wait = Wait::kNone;
  bool done = false;
};

struct Emulator {
  std::mutex launch_mu;  // host threads (tensor-parallel shards) launch one at a time
  size_t shared_limit = kSharedDefault;
  std::vector<float> dynamic_shared;
  std::vector<float> shuffle;
  ucontext_t scheduler;
  std::vector<Fiber> fibers;
  std::vector<std::vector<char>> stacks;
  unsigned current = 0;
  const std::function<void()>* body = nullptr;
  std::mutex memory_mu;
  std::map<void*, size_t> device_allocations;  // pointer -> bytes
  std::deque<std::pair<void*, size_t>> quarantine;
  size_t quarantine_bytes = 0;
  std::atomic<long> host_waits[kDevices] = {};
  std::atomic<long> graph_launches[kDevices] = {};
  std::atomic<long> captured_nodes[kDevices] = {};
};

Emulator& E() {
  static Emulator* emulator = new Emulator();
  return *emulator;
}

thread_local int g_current_device = 0;
thread_local CUstream_st* g_capturing = nullptr;  // the stream this thread captures (not Relaxed mode)

// One operation of a stream, run now or recorded by a capture.
using Op = std::function<cudaError_t()>;

}  // namespace

struct EmulatedCapture {
  std::vector<Op> ops;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  bool invalidated = false;
};
struct CUgraph_st {
  std::vector<Op> ops;
};
struct CUgraphExec_st {
  std::vector<Op> ops;
};

namespace {

// Runs `op` now, or appends it to the capture of `stream`.
cudaError_t Enqueue(cudaStream_t stream, Op op) {
  if (stream != nullptr && stream->capture != nullptr) {
    if (stream->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    stream->capture->ops.push_back(std::move(op));
    return cudaSuccess;
  }
  return op();
}

// An operation the capture of `stream` cannot hold (it would make the host wait): the
// runtime fails it and invalidates the capture, which then ends without a graph.
cudaError_t Unsupported(cudaStream_t stream) {
  stream->capture->invalidated = true;
  return cudaErrorStreamCaptureUnsupported;
}

// cudaMalloc / cudaFree may synchronize the device: unsafe while this thread captures.
cudaError_t CheckUnsafeCall() {
  if (g_capturing == nullptr || g_capturing->capture == nullptr) return cudaSuccess;
  return Unsupported(g_capturing);
}

void FiberMain() {
  Emulator& e = E();
  (*e.body)();
  e.fibers[e.current].done = true;  // uc_link returns to the scheduler
}

void Park(Wait wait) {
  Emulator& e = E();
  e.fibers[e.current].wait = wait;
  swapcontext(&e.fibers[e.current].context, &e.scheduler);
}

// Releases the warps whose 32 lanes all wait at a shuffle, and the block when
// every live thread waits at __syncthreads. False when nothing was released.
bool ReleaseBarriers(unsigned block) {
  Emulator& e = E();
  bool released = false;
  for (unsigned w = 0; w < block / 32; ++w) {
    bool all = true;
    for (unsigned l = 0; l < 32; ++l) all = all && e.fibers[w * 32 + l].wait == Wait::kWarp;
    if (!all) continue;
    for (unsigned l = 0; l < 32; ++l) e.fibers[w * 32 + l].wait = Wait::kNone;
    released = true;
  }
  bool block_waits = true;
  for (const Fiber& f : e.fibers) block_waits = block_waits && (f.done || f.wait == Wait::kBlock);
  if (block_waits) {
    for (Fiber& f : e.fibers) f.wait = Wait::kNone;
    released = true;
  }
  return released;
}

void RunBlock(unsigned b, unsigned block, size_t shared) {
  Emulator& e = E();
  e.dynamic_shared.assign(shared / sizeof(float), std::numeric_limits<float>::quiet_NaN());
  blockIdx = {b, 1, 1};
  e.fibers.assign(block, Fiber{});
  for (unsigned t = 0; t < block; ++t) {
    Fiber& f = e.fibers[t];
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = e.stacks[t].data();
    f.context.uc_stack.ss_size = kFiberStack;
    f.context.uc_link = &e.scheduler;
    makecontext(&f.context, FiberMain, 0);
  }
  while (true) {
    bool live = false, ran = false;
    for (unsigned t = 0; t < block; ++t) {
      Fiber& f = e.fibers[t];
      if (f.done) continue;
      live = true;
      if (f.wait != Wait::kNone) continue;
      e.current = t;
      threadIdx = {t, 1, 1};
      swapcontext(&e.scheduler, &f.context);
      ran = true;
    }
    if (!live) return;
    if (!ReleaseBarriers(block) && !ran) {
      std::fprintf(stderr, "emulated CUDA: deadlock in block %u: a barrier or shuffle is not reached by all threads\n",
                   b);
      std::abort();
    }
  }
}

float Load(const void* p, cudaDataType type, long i) {
  switch (type) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16BF:
      return orca::Bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    case CUDA_R_16F:
      return orca::F16ToF32(static_cast<const uint16_t*>(p)[i]);
  }
  std::abort();
}

}  // namespace

// ---- Device side ---------------------------------------------------------------------

void EmulatedBlockBarrier() { Park(Wait::kBlock); }

float EmulatedShuffleXor(float value, int lane_mask) {
  Emulator& e = E();
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  e.shuffle[threadIdx.x] = value;
  Park(Wait::kWarp);
  const float other = e.shuffle[warp * 32 + (lane ^ static_cast<unsigned>(lane_mask))];
  Park(Wait::kWarp);
  return other;
}

float* EmulatedDynamicShared() { return E().dynamic_shared.data(); }

namespace {
cudaError_t RunKernel(unsigned grid, unsigned block, size_t shared, const std::function<void()>& body) {
  Emulator& e = E();
  std::lock_guard<std::mutex> lock(e.launch_mu);
  if (grid == 0 || block == 0 || block > 1024 || block % 32 != 0) return cudaErrorInvalidConfiguration;
  if (shared > e.shared_limit) return cudaErrorInvalidValue;
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  e.shuffle.assign(block, 0.0f);
  while (e.stacks.size() < block) e.stacks.emplace_back(kFiberStack);
  e.body = &body;
  for (unsigned b = 0; b < grid; ++b) RunBlock(b, block, shared);
  e.body = nullptr;
  return cudaSuccess;
}
}  // namespace

cudaError_t EmulatedRun(unsigned grid, unsigned block, size_t shared, cudaStream_t stream, std::function<void()> body) {
  // A launch's shape is checked when it is queued, captured or not.
  if (grid == 0 || block == 0 || block > 1024 || block % 32 != 0) return cudaErrorInvalidConfiguration;
  return Enqueue(stream,
                 [grid, block, shared, body = std::move(body)] { return RunKernel(grid, block, shared, body); });
}

cudaError_t EmulatedSetSharedLimit(int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kSharedOptIn) return cudaErrorInvalidValue;
  Emulator& e = E();
  std::lock_guard<std::mutex> lock(e.launch_mu);
  e.shared_limit = std::max(e.shared_limit, static_cast<size_t>(bytes));
  return cudaSuccess;
}

// ---- Runtime API -------------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  *count = kDevices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= kDevices) return cudaErrorInvalidDevice;
  g_current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = g_current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= kDevices) return cudaErrorInvalidDevice;
  std::snprintf(prop->name, sizeof(prop->name), "Emulated GPU");
  prop->major = 8;
  prop->minor = 6;
  prop->totalGlobalMem = size_t{24} << 30;
  prop->sharedMemPerBlockOptin = kSharedOptIn;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new CUstream_st{1, g_current_device};
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream->capture != nullptr) return Unsupported(stream);
  ++E().host_waits[stream->device];
  return cudaSuccess;
}
long EmulatedHostWaits(int device) { return device >= 0 && device < kDevices ? E().host_waits[device].load() : 0; }
long EmulatedGraphLaunches(int device) {
  return device >= 0 && device < kDevices ? E().graph_launches[device].load() : 0;
}
long EmulatedCapturedNodes(int device) {
  return device >= 0 && device < kDevices ? E().captured_nodes[device].load() : 0;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream->capture != nullptr) return Unsupported(stream);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
  if (stream->capture != nullptr) return cudaErrorIllegalState;
  stream->capture = new EmulatedCapture();
  stream->capture->mode = mode;
  stream->capture->thread = std::this_thread::get_id();
  if (mode != cudaStreamCaptureModeRelaxed) g_capturing = stream;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || stream->capture == nullptr) return cudaErrorIllegalState;
  EmulatedCapture* capture = stream->capture;
  if (capture->mode != cudaStreamCaptureModeRelaxed && capture->thread != std::this_thread::get_id())
    return cudaErrorStreamCaptureWrongThread;
  stream->capture = nullptr;
  if (g_capturing == stream) g_capturing = nullptr;
  *graph = nullptr;
  const bool invalidated = capture->invalidated;
  if (!invalidated) {
    E().captured_nodes[stream->device] += static_cast<long>(capture->ops.size());
    *graph = new CUgraph_st{std::move(capture->ops)};
  }
  delete capture;
  return invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = stream == nullptr || stream->capture == nullptr ? cudaStreamCaptureStatusNone
            : stream->capture->invalidated                  ? cudaStreamCaptureStatusInvalidated
                                                            : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr || stream == nullptr) return cudaErrorInvalidValue;
  if (stream->capture != nullptr) return Unsupported(stream);  // no graphs inside graphs here
  ++E().graph_launches[stream->device];
  for (const Op& op : exec->ops)
    if (cudaError_t e = op(); e != cudaSuccess) return e;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t e = CheckUnsafeCall(); e != cudaSuccess) return e;
  if (bytes > kMaxAllocation) return cudaErrorMemoryAllocation;
  *ptr = std::malloc(std::max<size_t>(bytes, 1));
  if (*ptr == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*ptr, 0xff, bytes);  // fresh device memory is garbage: all-ones bytes are NaN in f32 and bf16
  Emulator& e = E();
  std::lock_guard<std::mutex> lock(e.memory_mu);
  e.device_allocations.emplace(*ptr, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
  if (cudaError_t e = CheckUnsafeCall(); e != cudaSuccess) return e;
  if (ptr == nullptr) return cudaSuccess;
  Emulator& e = E();
  std::lock_guard<std::mutex> lock(e.memory_mu);
  auto it = e.device_allocations.find(ptr);
  if (it == e.device_allocations.end()) return cudaErrorInvalidValue;
  const size_t bytes = it->second;
  e.device_allocations.erase(it);
  std::memset(ptr, 0xff, bytes);  // NaN in f32 and bf16
  e.quarantine.emplace_back(ptr, bytes);
  e.quarantine_bytes += bytes;
  while (e.quarantine_bytes > kFreedQuarantine) {
    std::free(e.quarantine.front().first);
    e.quarantine_bytes -= e.quarantine.front().second;
    e.quarantine.pop_front();
  }
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(std::max<size_t>(bytes, 1));
  return *ptr == nullptr ? cudaErrorMemoryAllocation : cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
// A captured copy reads its source when the graph runs, as the real one does.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  return Enqueue(stream, [=] {
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  });
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return Enqueue(stream, [=] {
    std::memset(ptr, value, bytes);
    return cudaSuccess;
  });
}
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind, cudaStream_t stream) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
  return Enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
    return cudaSuccess;
  });
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  *event = new CUevent_st{false, g_current_device};
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->recorded = true;
  event->device = stream->device;
  event->captured = stream->capture != nullptr;  // a node of the capture: no host can wait for it
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event->captured) return cudaErrorCapturedEvent;
  ++E().host_waits[event->device];
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event->captured) return cudaErrorCapturedEvent;
  ++E().host_waits[event->device];  // complete: a host wait that ends here
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorCapturedEvent:
      return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t error) { return cudaGetErrorName(error); }

// ---- cuBLAS --------------------------------------------------------------------------------

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext{nullptr};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// C[m, n] = alpha · op(A)[m, k] · op(B)[k, n] + beta · C, column-major. The type
// combinations are the ones cuBLAS accepts with CUBLAS_COMPUTE_32F and an f32 C.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (c_type != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F || a_type != b_type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, transa == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, transb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  // Host-pointer scalars are read at the call, as cuBLAS does when it is captured.
  const double al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  float* out = static_cast<float*>(c);
  const cudaError_t e = Enqueue(handle->stream, [=] {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double acc = 0;
        for (int l = 0; l < k; ++l) {
          const float av = transa == CUBLAS_OP_N ? Load(a, a_type, i + static_cast<long>(l) * lda)
                                                 : Load(a, a_type, l + static_cast<long>(i) * lda);
          const float bv = transb == CUBLAS_OP_N ? Load(b, b_type, l + static_cast<long>(j) * ldb)
                                                 : Load(b, b_type, j + static_cast<long>(l) * ldb);
          acc += static_cast<double>(av) * bv;
        }
        float& y = out[i + static_cast<long>(j) * ldc];
        y = static_cast<float>(al * acc + (be != 0 ? be * y : 0.0));  // beta 0 ignores C, even NaN
      }
    return cudaSuccess;
  });
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
