#pragma once
// Host emulation of the CUDA runtime API subset the CUDA backend uses, for
// kernels_cuda_emulated_test (see emulated_runtime.cc). Not the real header:
// it is only on the include path of that test.

#include <cstddef>
#include <cstdint>

struct CUstream_st {
  int id;
  int device;  ///< current device when the stream was created
};
struct CUevent_st {
  bool recorded;
  int device;  ///< device of the stream it was last recorded on
};
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600,
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
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
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
