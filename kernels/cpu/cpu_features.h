#pragma once
/// What the host CPU can run (checked once at startup, from CPUID and the
/// OS-enabled register state), for runtime dispatch between kernel builds.

namespace orca::kernels {

struct CpuFeatures {
  bool avx2 = false;         ///< AVX2 + FMA + F16C (the 256-bit kernels' baseline)
  bool avx512 = false;       ///< AVX-512 F/BW/VL/DQ: the hand-written kernels
  bool avx512_bf16 = false;  ///< vdpbf16ps
  bool avx512_vnni = false;  ///< 512-bit vpdpbusd (int8 dot products)
  bool avx_vnni = false;     ///< VEX-encoded 256-bit vpdpbusd (AVX-VNNI)
  bool amx_bf16 = false;     ///< AMX tiles (oneDNN uses them for bf16 GEMMs)
  bool amd = false;          ///< vendor "AuthenticAMD" (for per-microarchitecture tuning)
  int family = 0;            ///< display family (base + extended): AMD Zen 4 0x19, Zen 5 0x1A
};

const CpuFeatures& GetCpuFeatures();

}  // namespace orca::kernels
