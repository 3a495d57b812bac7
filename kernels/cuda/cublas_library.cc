#include "kernels/cuda/cublas_library.h"

#include <string>

#include "absl/strings/str_cat.h"

#ifndef ORCA_CUDA_EMULATION
#include <dlfcn.h>
#endif

namespace orca::kernels::cuda {
namespace {

#ifndef ORCA_CUDA_EMULATION
/// dlsym(`symbol`) into `*fn`; UNAVAILABLE with the loader's reason when it is missing.
template <typename Fn>
absl::Status Resolve(void* library, const std::string& library_name, const char* symbol, Fn* fn) {
  dlerror();
  void* address = dlsym(library, symbol);
  if (address == nullptr) {
    const char* reason = dlerror();
    return absl::UnavailableError(
        absl::StrCat(library_name, " has no ", symbol, ": ", reason != nullptr ? reason : "null symbol"));
  }
  *fn = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}
#endif

absl::StatusOr<CublasApi> Load() {
  CublasApi api;
#ifdef ORCA_CUDA_EMULATION
  // The host emulation's cuBLAS is linked into the test itself.
  api.create = &cublasCreate;
  api.destroy = &cublasDestroy;
  api.set_stream = &cublasSetStream;
  api.get_status_string = &cublasGetStatusString;
  api.gemm_ex = &cublasGemmEx;
#else
  // The versioned name: the ABI the headers describe (CUDA 13 → libcublas.so.13).
  const std::string name = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return absl::UnavailableError(absl::StrCat("cannot load cuBLAS (", name, "): ", reason != nullptr ? reason : "?"));
  }
  // The _v2 names are what the cublas_v2.h macros (cublasCreate → cublasCreate_v2) call.
  absl::Status s = Resolve(library, name, "cublasCreate_v2", &api.create);
  if (s.ok()) s = Resolve(library, name, "cublasDestroy_v2", &api.destroy);
  if (s.ok()) s = Resolve(library, name, "cublasSetStream_v2", &api.set_stream);
  if (s.ok()) s = Resolve(library, name, "cublasGetStatusString", &api.get_status_string);
  if (s.ok()) s = Resolve(library, name, "cublasGemmEx", &api.gemm_ex);
  if (!s.ok()) {
    dlclose(library);
    return s;
  }
#endif
  return api;
}

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  static const absl::StatusOr<CublasApi>* const api = new absl::StatusOr<CublasApi>(Load());
  if (!api->ok()) return api->status();
  return &**api;
}

}  // namespace orca::kernels::cuda
