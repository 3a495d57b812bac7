#include "kernels/include/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef ORCA_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace orca::kernels {

bool CudaAvailable() {
#ifdef ORCA_WITH_CUDA
  return CudaBackend::DeviceCount() > 0;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& o) {
  if (o.device == "cpu") {
    CpuBackend::Options co;
    co.num_threads = o.num_threads;
    co.small_gemm_max_rows = o.small_gemm_max_rows;
    co.panel_gemm_max_rows = o.panel_gemm_max_rows;
    co.bf16_dot = o.cpu_bf16_dot;
    return std::unique_ptr<Backend>(CpuBackend::Create(co));
  }
  if (o.device == "cuda") {
#ifdef ORCA_WITH_CUDA
    auto b = CudaBackend::Create(o.device_index);
    if (!b.ok()) return b.status();
    return std::unique_ptr<Backend>(std::move(*b));
#else
    return absl::UnavailableError("this build has no CUDA backend (configure with nvcc on PATH)");
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", o.device, "' (cpu or cuda)"));
}

}  // namespace orca::kernels
