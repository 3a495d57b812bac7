#pragma once
/// What the host CPU can run (checked once at startup).

namespace orca::kernels {

struct CpuFeatures {
  bool avx512 = false;       ///< AVX-512 F/BW/VL/DQ: the hand-written kernels
  bool avx512_bf16 = false;  ///< vdpbf16ps
  bool amx_bf16 = false;     ///< AMX tiles (oneDNN uses them for bf16 GEMMs)
};

const CpuFeatures& GetCpuFeatures();

}  // namespace orca::kernels
