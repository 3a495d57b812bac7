#pragma once
// Host emulation of the CUDA runtime API subset the CUDA backend uses, for
// kernels_cuda_emulated_test (see emulated_runtime.cc). Not the real header:
// it is only on the include path of that test.

#include <cstddef>
#include <cstdint>

struct EmulatedCapture;
struct CUstream_st {
  int id;
  int device;                          ///< current device when the stream was created
  EmulatedCapture* capture = nullptr;  ///< the capture sequence recording this stream's work, if any
};
struct CUevent_st {
  bool recorded;
  int device;             ///< device of the stream it was last recorded on
  bool captured = false;  ///< last recorded inside a capture sequence
};
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;
typedef CUgraph_st* cudaGraph_t;
typedef CUgraphExec_st* cudaGraphExec_t;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorCapturedEvent = 907,
  cudaErrorStreamCaptureWrongThread = 908,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
constexpr unsigned cudaStreamNonBlocking = 0x01;
constexpr unsigned cudaEventDisableTiming = 0x02;

struct cudaFuncAttributes {
  int maxThreadsPerBlock;
};
struct cudaDeviceProp {
  char name[256];
  int major;
  int minor;
  size_t totalGlobalMem;
  size_t sharedMemPerBlockOptin;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
// Stream capture and graphs (CUDA 13's signatures). While a stream captures, kernel launches,
// async copies and cuBLAS calls queued on it are recorded, not run; a graph launch runs them
// in order. A host wait on the capturing stream (cudaStreamSynchronize), a query or wait of an
// event recorded in the capture, and cudaMalloc/cudaFree by the capturing thread (modes Global
// and ThreadLocal: they may synchronize the device) fail as the real runtime's do and
// invalidate the capture, so cudaStreamEndCapture then returns
// cudaErrorStreamCaptureInvalidated and no graph.
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
/// Graph launches on `device`'s streams so far, and operations recorded by the captures that
/// ended on them (nodes of the graphs made). Tests count them to show what ran as a graph.
long EmulatedGraphLaunches(int device);
long EmulatedCapturedNodes(int device);
cudaError_t cudaGetLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

template <typename F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, F*) {
  attributes->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
cudaError_t EmulatedSetSharedLimit(int bytes);
/// Host waits on `device`'s streams so far: cudaStreamSynchronize, cudaEventSynchronize and a
/// cudaEventQuery that reports completion (every queued operation has run by then here). Tests
/// count them to show a path never makes the host wait for the GPU.
long EmulatedHostWaits(int device);
template <typename F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int value) {
  return EmulatedSetSharedLimit(value);
}
