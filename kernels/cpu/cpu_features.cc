#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>

namespace orca::kernels {

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512 state.
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    unsigned a, b, c, d;
    if (__get_cpuid_count(0, 0, &a, &b, &c, &d)) f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;
    if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
      f.avx2 = f.avx2 && ((c >> 29) & 1);  // F16C
      const int base = static_cast<int>((a >> 8) & 0xF);
      f.family = base == 0xF ? base + static_cast<int>((a >> 20) & 0xFF) : base;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx512_vnni = f.avx512 && ((c >> 11) & 1);
      f.amx_bf16 = (d >> 22) & 1;
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      f.avx512_bf16 = f.avx512 && ((a >> 5) & 1);
      f.avx_vnni = f.avx2 && ((a >> 4) & 1);
    }
    return f;
  }();
  return features;
}

}  // namespace orca::kernels
