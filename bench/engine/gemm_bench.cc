// GEMM microbenchmark for the CPU backend's decode paths: CpuBackend::Linear on
// the 135M model's layer shapes for a given number of rows, weights uploaded
// once (so the panel cache is warm, as in serving), against two ceilings
// measured in the same run: the FMA peak of the cores (a register-only FMA
// loop on every thread) and, for one row, the streaming read bandwidth.
//
//   gemm_bench [--rows 1,8,32,64] [--dtypes bf16,f32] [--threads 0] [--seconds 1]

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/engine/ceilings.h"
#include "core/common/flags.h"
#include "kernels/cpu/cpu_backend.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Shape {
  const char* name;
  int64_t n, k;
};
// One layer of SmolLM-135M (hidden 576, 9 heads / 3 KV heads of 64, ffn 1536) and its LM head.
constexpr Shape kShapes[] = {{"q/o 576x576", 576, 576},
                             {"k/v 192x576", 192, 576},
                             {"gate/up 1536x576", 1536, 576},
                             {"down 576x1536", 576, 1536},
                             {"lm_head 49152x576", 49152, 576}};

struct Args {
  std::vector<std::string> rows{"1", "8", "32", "64"};
  std::vector<std::string> dtypes{"bf16", "f32"};
  int64_t threads = 0;
  double seconds = 1.0;
  bool hot = false;
  bool model_pass = true;
  bool layers = true;
};

// One decode step's GEMMs for the whole 135M model, in the engine's order and
// grouping (Q/K/V and gate/up fused), every layer its own weights: the GEMM
// time a decode step cannot go below with these kernels, and the bandwidth it
// reaches, without attention, norms or anything else between the GEMMs.
void ModelPass(const Args& args, int threads, double bw, DType dtype, int64_t m) {
  constexpr int kLayers = 30;
  constexpr int64_t kH = 576, kKv = 192, kF = 1536, kVocab = 49152;
  kernels::CpuBackend::Options o;
  o.num_threads = threads;
  auto cpu = kernels::CpuBackend::Create(o);
  const size_t es = DTypeSize(dtype);
  std::vector<void*> storage;
  auto make = [&](int64_t n, int64_t k) {
    void* p = std::aligned_alloc(64, (static_cast<size_t>(n * k) * es + 63) / 64 * 64);
    std::memset(p, 0x3c, static_cast<size_t>(n * k) * es);  // small finite values in both dtypes
    storage.push_back(p);
    void* dev = nullptr;
    return *cpu->UploadWeight(kernels::WeightView{p, dtype, n, k, k, false}, &dev);
  };
  struct Layer {
    kernels::WeightView q, k, v, o, gate, up, down;
  };
  std::vector<Layer> layers;
  for (int l = 0; l < kLayers; ++l)
    layers.push_back(
        {make(kH, kH), make(kKv, kH), make(kKv, kH), make(kH, kH), make(kF, kH), make(kF, kH), make(kH, kF)});
  const kernels::WeightView head = make(kVocab, kH);
  size_t bytes = head.ReadBytes();
  for (const Layer& l : layers)
    for (const auto* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) bytes += w->ReadBytes();
  std::vector<float> x(static_cast<size_t>(m * kF), 0.01f), q(m * kH), k(m * kKv), v(m * kKv), f1(m * kF), f2(m * kF),
      logits(static_cast<size_t>(m * kVocab));
  auto step = [&] {
    for (const Layer& l : layers) {
      const kernels::Backend::LinearOut qkv[] = {
          {&l.q, nullptr, q.data()}, {&l.k, nullptr, k.data()}, {&l.v, nullptr, v.data()}};
      cpu->LinearMany(x.data(), m, qkv, 3);
      cpu->Linear(q.data(), m, l.o, nullptr, x.data(), true);
      const kernels::Backend::LinearOut gu[] = {{&l.gate, nullptr, f1.data()}, {&l.up, nullptr, f2.data()}};
      cpu->LinearMany(x.data(), m, gu, 2);
      cpu->Linear(f1.data(), m, l.down, nullptr, x.data(), true);
    }
    cpu->Linear(x.data(), m, head, nullptr, logits.data(), false);
  };
  step();  // warm: panels packed
  std::vector<double> times;
  const auto t0 = Clock::now();
  while (Seconds(t0, Clock::now()) < std::max(args.seconds, 1.0)) {
    const auto a = Clock::now();
    step();
    times.push_back(Seconds(a, Clock::now()));
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  std::printf("%-6s %-20s %5lld %10.1f %10.1f %8s %10.2f %7.0f%%   (median of %zu steps, %.0f MB)\n",
              dtype == DType::kBF16 ? "bf16" : "f32", "model pass 135M", static_cast<long long>(m), med * 1e6,
              2.0 * m * bytes / es / med / 1e9, "", bytes / med / 1e9, 100 * bytes / med / 1e9 / bw, times.size(),
              bytes / 1e6);
  for (void* p : storage) std::free(p);
}

int Run(const Args& args) {
  const int threads = args.threads > 0 ? static_cast<int>(args.threads) : omp_get_num_procs();
  const double fma = MeasureFmaPeak(threads), bw = BandwidthProbe(threads).Measure();
  std::printf("# %d threads; ceilings: FMA peak %.0f GFLOP/s (f32), read bandwidth %.1f GB/s\n", threads, fma, bw);
  std::printf("%-6s %-20s %5s %10s %10s %8s %10s %8s\n", "dtype", "shape", "rows", "us/call", "GFLOP/s", "%fma", "GB/s",
              "%bw");
  kernels::CpuBackend::Options o;
  o.num_threads = threads;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const std::string& dt : args.dtypes) {
    const DType dtype = dt == "bf16" ? DType::kBF16 : DType::kF32;
    for (const Shape& shape : kShapes) {
      if (!args.layers) break;
      auto cpu = kernels::CpuBackend::Create(o);  // fresh panel cache per shape
      // Weights of this shape, several copies so one call's bytes come from memory, not cache
      // (unless --hot).
      const size_t bytes = static_cast<size_t>(shape.n * shape.k) * DTypeSize(dtype);
      const int copies = args.hot ? 1 : static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / bytes));
      std::vector<kernels::WeightView> ws;
      std::vector<void*> storage;
      for (int c = 0; c < copies; ++c) {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        auto* u = static_cast<uint16_t*>(p);
        auto* f = static_cast<float*>(p);
        for (int64_t i = 0; i < shape.n * shape.k; ++i) {
          const float v = dist(rng) * 0.05f;
          if (dtype == DType::kBF16)
            u[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16);
          else
            f[i] = v;
        }
        storage.push_back(p);
        kernels::WeightView host{p, dtype, shape.n, shape.k, shape.k, false};
        void* dev = nullptr;
        ws.push_back(*cpu->UploadWeight(host, &dev));
      }
      for (const std::string& r : args.rows) {
        int64_t m = 0;
        if (!absl::SimpleAtoi(r, &m) || m < 1) return 2;
        std::vector<float> x(static_cast<size_t>(m * shape.k)), y(static_cast<size_t>(m * shape.n));
        for (float& v : x) v = dist(rng);
        for (const auto& w : ws) cpu->Linear(x.data(), m, w, nullptr, y.data(), false);  // warm: packs panels
        int64_t calls = 0;
        const auto t0 = Clock::now();
        double s = 0;
        do {
          cpu->Linear(x.data(), m, ws[calls % ws.size()], nullptr, y.data(), false);
          ++calls;
          s = Seconds(t0, Clock::now());
        } while (s < args.seconds);
        const double us = s / calls * 1e6;
        const double gflops = 2.0 * m * shape.n * shape.k / (us * 1e3);
        const double gbps = bytes / (us * 1e3);
        std::printf("%-6s %-20s %5lld %10.1f %10.1f %7.0f%% %10.2f %7.0f%%\n", dt.c_str(), shape.name,
                    static_cast<long long>(m), us, gflops, 100 * gflops / fma, gbps, 100 * gbps / bw);
      }
      for (void* p : storage) std::free(p);
    }
    if (args.model_pass)
      for (const std::string& r : args.rows) {
        int64_t m = 0;
        if (absl::SimpleAtoi(r, &m) && m >= 1) ModelPass(args, threads, bw, dtype, m);
      }
  }
  return 0;
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  orca::bench::Args args;
  orca::FlagSet flags(
      "gemm_bench",
      "GEMM microbenchmark of the CPU backend's decode paths on SmolLM-135M's layer shapes, against the "
      "FMA peak and read bandwidth measured in the same run.");
  flags.AddStringList("rows", &args.rows, "Rows of x (tokens in the batch)");
  flags.AddStringList("dtypes", &args.dtypes, "Weight dtypes: bf16, f32");
  flags.AddInt("threads", &args.threads, "Threads (0 = all cores)");
  flags.AddDouble("seconds", &args.seconds, "Seconds per measurement");
  flags.AddBool("model-pass", &args.model_pass, "Also time a whole decode step's GEMMs (30 layers + LM head)");
  flags.AddBool("layers", &args.layers, "Time each layer shape on its own");
  flags.AddBool("hot", &args.hot,
                "One copy of each weight, so it stays in cache: the kernels' compute ceiling, not serving conditions");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "gemm_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  return orca::bench::Run(args);
}
