#pragma once
/// Creates the kernel backend for a device: "cpu" always, "cuda" in builds
/// with the CUDA backend (ORCA_WITH_CUDA) on a machine with a GPU.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/include/backend.h"

namespace orca::kernels {

struct BackendOptions {
  std::string device = "cpu";         ///< "cpu" or "cuda"
  int device_index = 0;               ///< GPU ordinal (cuda); a TP shard uses its rank's GPU
  int num_threads = 0;                ///< CPU: OpenMP threads per op (0 = all cores)
  int64_t small_gemm_max_rows = 4;    ///< CPU: see CpuBackend::Options
  int64_t panel_gemm_max_rows = 128;  ///< CPU: see CpuBackend::Options
  bool cpu_bf16_dot = true;           ///< CPU: see CpuBackend::Options::bf16_dot
};

/// Unavailable when the device is not compiled in or not present; InvalidArgument for an unknown name.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);
/// True when this build has the CUDA backend and a GPU is visible.
bool CudaAvailable();

}  // namespace orca::kernels
