#pragma once
/// cuBLAS, loaded by the first CudaBackend instead of by the dynamic linker at process start.
///
/// Why: every program that contains the CUDA backend (the worker, the scheduler with its
/// in-process engine, the `orca` CLI) would otherwise map libcublas and, through it,
/// libcublasLt at start, whose initialisation leaves ~145 MiB resident (about 60 MiB of
/// its code and 85 MiB of its zero-initialised data) in every such process, including
/// those that never touch a GPU (measured: bench/results/2026-11-24_issue12-stack-memory.md). The backend
/// calls five cuBLAS functions; they are looked up here, once, when a CudaBackend starts.

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace orca::kernels::cuda {

/// The cuBLAS entry points CudaBackend calls.
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasGetStatusString) get_status_string = nullptr;
  /// The C entry point (cuBLAS 12+ headers add a C++ overload taking a cudaDataType compute type).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

/// Loads libcublas (the major version the build was compiled against) and resolves the
/// entry points, once per process and thread-safely; later calls return the same result.
/// UNAVAILABLE naming the library or the symbol and the loader's reason when missing.
/// The library stays loaded for the life of the process (handles outlive any backend).
absl::StatusOr<const CublasApi*> LoadCublas();

}  // namespace orca::kernels::cuda
