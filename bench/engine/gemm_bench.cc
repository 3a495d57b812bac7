// GEMM microbenchmark for the CPU backend: CpuBackend::Linear on a model's
// layer shapes for a given number of rows, weights uploaded (packed) once as
// in serving, in f32, bf16 or any GGUF block type, against ceilings measured
// in the same run: the FMA peak and the int8 (VNNI) peak of the cores
// (register-only loops on every thread) and the streaming read bandwidth.
//
//   gemm_bench [--rows 1,8,32,64] [--dtypes bf16,f32,q8_0,q4_K] [--model 135m|1.1b|8b]
//              [--threads 0] [--seconds 1] [--onednn-s8]
//
// --onednn-s8 adds a measured int8 GEMM ceiling next to the instruction peak: oneDNN's
// matmul of u8 activations by s8 weights (its own packed layout, reordered once) into s32,
// on the same shapes and rows, with no quantization, dequantization or scales at all.

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/engine/ceilings.h"
#include "core/common/flags.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Shape {
  std::string name;
  int64_t n, k;
};
struct ModelShape {
  const char* name;
  int64_t hidden, kv, ffn, vocab, layers;
};
// SmolLM-135M, TinyLlama-1.1B, Llama-3.1-8B.
constexpr ModelShape kModels[] = {
    {"135m", 576, 192, 1536, 49152, 30}, {"1.1b", 2048, 256, 5632, 32000, 22}, {"8b", 4096, 1024, 14336, 128256, 32}};

std::vector<Shape> LayerShapes(const ModelShape& m) {
  auto dims = [](int64_t n, int64_t k) { return std::to_string(n) + "x" + std::to_string(k); };
  return {{"q/o " + dims(m.hidden, m.hidden), m.hidden, m.hidden},
          {"k/v " + dims(m.kv, m.hidden), m.kv, m.hidden},
          {"gate/up " + dims(m.ffn, m.hidden), m.ffn, m.hidden},
          {"down " + dims(m.hidden, m.ffn), m.hidden, m.ffn},
          {"lm_head " + dims(m.vocab, m.hidden), m.vocab, m.hidden}};
}

// Host bytes of an [n, k] weight of random values (|w| ≤ 0.05) in `dtype`.
void* RandomWeight(DType dtype, int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  const size_t bytes = static_cast<size_t>(n) * DTypeRowBytes(dtype, k);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(dtype, row.data(), static_cast<uint8_t*>(p) + r * DTypeRowBytes(dtype, k), k);
  }
  return p;
}

struct Args {
  std::vector<std::string> rows{"1", "8", "32", "64"};
  std::vector<std::string> dtypes{"bf16", "f32"};
  std::string model = "135m";
  int64_t threads = 0;
  double seconds = 1.0;
  bool hot = false;
  bool model_pass = true;
  bool layers = true;
  bool bf16_dot = true;
  bool onednn_s8 = false;
  std::string decode_prefetch = "auto";
  std::string compare_decode_prefetch;  // "L1:L2,L1:L2,...": the paired comparison instead of the table
  int64_t direct_max_rows = 0;          // 0: per type for this CPU (quant::AvxDirectMaxRowsFor)
  std::string compare_direct_max_rows;  // "R,R,...": the paired comparison instead of the table
};

// Parses "L1:L2,L1:L2,..." (bytes ahead, >= 0); false if malformed.
bool ParseSchemes(const std::string& list, std::vector<kernels::quant::DecodePrefetch>* out) {
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    std::vector<std::string> d = absl::StrSplit(item, ':');
    kernels::quant::DecodePrefetch p;
    if (d.size() != 2 || !absl::SimpleAtoi(d[0], &p.l1_bytes) || !absl::SimpleAtoi(d[1], &p.l2_bytes) ||
        p.l1_bytes < 0 || p.l2_bytes < 0)
      return false;
    out->push_back(p);
  }
  return !out->empty();
}

// CpuBackend options shared by every measurement of a run.
kernels::CpuBackend::Options BackendOptions(const Args& args, int threads) {
  kernels::CpuBackend::Options o;
  o.num_threads = threads;
  o.bf16_dot = args.bf16_dot;
  std::vector<kernels::quant::DecodePrefetch> fixed;
  if (args.decode_prefetch != "auto" && ParseSchemes(args.decode_prefetch, &fixed)) o.decode_prefetch = fixed[0];
  if (args.direct_max_rows > 0) o.quant_direct_max_rows = args.direct_max_rows;
  return o;
}

// oneDNN's u8 x s8 -> s32 matmul on [m, k] x [k, n]: the best plain int8 GEMM this machine
// runs, as a measured ceiling for the quantized kernels (which also unpack blocks and apply
// per-block scales). Weights in oneDNN's preferred layout, several copies unless --hot, as
// for the kernels. Prints one row per row count, in gemm_bench's columns.
void OnednnS8(const Args& args, const Shape& shape, int threads, double vnni, double bw) {
  using dt = dnnl::memory::data_type;
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(-127, 127);
  const size_t wbytes = static_cast<size_t>(shape.n) * shape.k;
  const int copies = args.hot ? 1 : static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / wbytes));
  for (const std::string& r : args.rows) {
    int64_t m = 0;
    if (!absl::SimpleAtoi(r, &m) || m < 1) return;
    dnnl::memory::desc src_md({m, shape.k}, dt::u8, dnnl::memory::dims{shape.k, 1});
    dnnl::memory::desc wei_any({shape.k, shape.n}, dt::s8, dnnl::memory::format_tag::any);
    dnnl::memory::desc dst_md({m, shape.n}, dt::s32, dnnl::memory::dims{shape.n, 1});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), engine);
    dnnl::matmul prim(pd);
    std::vector<int8_t> plain(wbytes);
    for (int8_t& v : plain) v = static_cast<int8_t>(byte(rng));
    dnnl::memory::desc wei_plain({shape.k, shape.n}, dt::s8, dnnl::memory::dims{1, shape.k});  // [n][k] rows
    dnnl::memory plain_mem(wei_plain, engine, plain.data());
    std::vector<dnnl::memory> ws;
    for (int c = 0; c < copies; ++c) {
      ws.emplace_back(pd.weights_desc(), engine);
      dnnl::reorder(plain_mem, ws.back()).execute(stream, plain_mem, ws.back());
    }
    std::vector<uint8_t> x(static_cast<size_t>(m * shape.k));
    for (uint8_t& v : x) v = static_cast<uint8_t>(byte(rng) + 127);
    std::vector<int32_t> y(static_cast<size_t>(m * shape.n));
    dnnl::memory src(src_md, engine, x.data()), dst(dst_md, engine, y.data());
    auto call = [&](int64_t i) {
      prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, ws[i % ws.size()]}, {DNNL_ARG_DST, dst}});
      stream.wait();
    };
    for (size_t c = 0; c < ws.size(); ++c) call(static_cast<int64_t>(c));
    int64_t calls = 0;
    const auto t0 = Clock::now();
    double s = 0;
    do {
      call(calls++);
      s = Seconds(t0, Clock::now());
    } while (s < args.seconds);
    const double us = s / calls * 1e6;
    const double gops = 2.0 * m * shape.n * shape.k / (us * 1e3);
    const double gbps = static_cast<double>(wbytes) / (us * 1e3);
    std::printf("%-6s %-22s %5lld %10.1f %10.1f %7.0f%% %10.2f %7.0f%%   %s\n", "s8dnnl", shape.name.c_str(),
                static_cast<long long>(m), us, gops, 100 * gops / vnni, gbps, 100 * gbps / bw, pd.impl_info_str());
  }
}

// One decode step's GEMMs for the whole 135M model, in the engine's order and
// grouping (Q/K/V and gate/up fused), every layer its own weights: the GEMM
// time a decode step cannot go below with these kernels, and the bandwidth it
// reaches, without attention, norms or anything else between the GEMMs.
void ModelPass(const Args& args, const ModelShape& ms, int threads, double bw, DType dtype, int64_t m) {
  const int kLayers = static_cast<int>(ms.layers);
  const int64_t kH = ms.hidden, kKv = ms.kv, kF = ms.ffn, kVocab = ms.vocab;
  auto cpu = kernels::CpuBackend::Create(BackendOptions(args, threads));
  std::vector<void*> storage;
  std::mt19937 rng(3);
  auto make = [&](int64_t n, int64_t k) {
    void* p = RandomWeight(dtype, n, k, rng);
    void* dev = nullptr;
    kernels::Backend& be = *cpu;
    kernels::WeightView w = *be.UploadWeight(kernels::WeightView{p, dtype, n, k, k, false}, &dev);
    if (dev != nullptr) {
      storage.push_back(dev);
      std::free(p);
    } else {
      storage.push_back(p);
    }
    return w;
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
  double macs = static_cast<double>(kVocab) * kH;
  for (const Layer& l : layers)
    for (const auto* w : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) macs += static_cast<double>(w->n) * w->k;
  std::printf("%-6s %-22s %5lld %10.1f %10.1f %8s %10.2f %7.0f%%   (median of %zu steps, %.0f MB)\n", DTypeName(dtype),
              ("model pass " + std::string(ms.name)).c_str(), static_cast<long long>(m), med * 1e6,
              2.0 * m * macs / med / 1e9, "", bytes / med / 1e9, 100 * bytes / med / 1e9 / bw, times.size(),
              bytes / 1e6);
  for (void* p : storage) std::free(p);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One backend configuration of a paired comparison.
struct Variant {
  std::string label;
  kernels::CpuBackend::Options options;
};

// --compare-decode-prefetch and --compare-direct-max-rows: backend variants of the quantized
// GEMMs, paired. This host's read bandwidth changes within seconds, so variants timed in
// separate runs, or in separate rows of one table, meet different conditions. Here every round
// reads the bandwidth probe once, passes once over all copies of the layer's weights with each
// variant (the order rotated per round), and reads the probe again. Per shape and row count it
// prints each variant's median GB/s and GOP/s and its median per-round ratio to the first
// variant, over all rounds and over the rounds whose two probe readings were both >= 80 %
// ("fast") or both <= 65 % ("slow") of the best reading of the run so far (printed with each
// block). Rounds run for --seconds per shape and row count.
int CompareVariants(const Args& args, const ModelShape& ms, int threads, const std::string& what,
                    const std::vector<Variant>& variants) {
  BandwidthProbe probe(threads);
  double best = probe.Measure();  // the best probe reading of the run so far: "fast" and "slow" are relative to it
  std::printf("# paired %s, ratios against the first\n", what.c_str());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const std::string& dt : args.dtypes) {
    DType dtype;
    (void)ParseWeightDType(dt, &dtype);  // checked in Run
    if (!IsQuantized(dtype)) {
      std::printf("# %s: not a quantized type, nothing to compare\n", dt.c_str());
      continue;
    }
    for (const Shape& shape : LayerShapes(ms)) {
      std::vector<std::unique_ptr<kernels::CpuBackend>> cpus;
      for (const Variant& v : variants) cpus.push_back(kernels::CpuBackend::Create(v.options));
      const size_t bytes = static_cast<size_t>(shape.n) * DTypeRowBytes(dtype, shape.k);
      const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / bytes));
      std::vector<kernels::WeightView> ws;
      std::vector<void*> storage;
      for (int c = 0; c < copies; ++c) {
        void* p = RandomWeight(dtype, shape.n, shape.k, rng);
        void* dev = nullptr;
        kernels::Backend& be = *cpus[0];
        ws.push_back(*be.UploadWeight(kernels::WeightView{p, dtype, shape.n, shape.k, shape.k, false}, &dev));
        storage.push_back(dev != nullptr ? dev : p);
        if (dev != nullptr) std::free(p);
      }
      const double pass_bytes = static_cast<double>(ws[0].ReadBytes()) * copies;
      for (const std::string& r : args.rows) {
        int64_t m = 0;
        (void)absl::SimpleAtoi(r, &m);  // checked in Run
        std::vector<float> x(static_cast<size_t>(m * shape.k)), y(static_cast<size_t>(m * shape.n));
        for (float& v : x) v = dist(rng);
        struct Round {
          double bw_before, bw_after;
          std::vector<double> gbps;
        };
        std::vector<Round> rounds;
        const auto t0 = Clock::now();
        for (size_t rn = 0; rn == 0 || Seconds(t0, Clock::now()) < args.seconds; ++rn) {
          Round round{probe.Measure(1), 0, std::vector<double>(variants.size())};
          for (size_t j = 0; j < variants.size(); ++j) {
            const size_t i = (j + rn) % variants.size();
            const auto p0 = Clock::now();
            for (const auto& w : ws) cpus[i]->Linear(x.data(), m, w, nullptr, y.data(), false);
            round.gbps[i] = pass_bytes / Seconds(p0, Clock::now()) / 1e9;
          }
          round.bw_after = probe.Measure(1);
          rounds.push_back(std::move(round));
        }
        for (const Round& rd : rounds) best = std::max({best, rd.bw_before, rd.bw_after});
        auto summarize = [&](const char* label, auto keep) {
          std::vector<const Round*> sel;
          for (const Round& rd : rounds)
            if (keep(rd)) sel.push_back(&rd);
          std::printf("%-6s %-22s %5lld %-5s %4zu rounds", dt.c_str(), shape.name.c_str(), static_cast<long long>(m),
                      label, sel.size());
          if (sel.empty()) return (void)std::printf("\n");
          std::vector<double> probe_gbps;
          for (const Round* rd : sel) probe_gbps.push_back(std::max(rd->bw_before, rd->bw_after));
          std::printf(", probe %5.1f GB/s |", Median(probe_gbps));
          // GOP per GB of weights read: 2 m n k operations over n · ReadBytes / n bytes.
          const double gop_per_gb = 2.0 * m * shape.n * shape.k / static_cast<double>(ws[0].ReadBytes());
          for (size_t i = 0; i < variants.size(); ++i) {
            std::vector<double> g, ratio;
            for (const Round* rd : sel) g.push_back(rd->gbps[i]), ratio.push_back(rd->gbps[i] / rd->gbps[0]);
            std::printf(" %s %5.1f GB/s %5.0f GOP/s (%.2fx) |", variants[i].label.c_str(), Median(g),
                        Median(g) * gop_per_gb, Median(ratio));
          }
          std::printf("\n");
        };
        std::printf("# best probe reading so far %.1f GB/s: fast rounds >= %.1f, slow rounds <= %.1f\n", best,
                    0.8 * best, 0.65 * best);
        summarize("all", [](const Round&) { return true; });
        summarize("fast", [&](const Round& rd) { return std::min(rd.bw_before, rd.bw_after) >= 0.8 * best; });
        summarize("slow", [&](const Round& rd) { return std::max(rd.bw_before, rd.bw_after) <= 0.65 * best; });
        std::fflush(stdout);
      }
      for (void* p : storage) std::free(p);
    }
  }
  return 0;
}

int Run(const Args& args) {
  const int threads = args.threads > 0 ? static_cast<int>(args.threads) : omp_get_num_procs();
  const ModelShape* ms = nullptr;
  for (const ModelShape& candidate : kModels)
    if (args.model == candidate.name) ms = &candidate;
  if (ms == nullptr) {
    std::fprintf(stderr, "gemm_bench: --model must be 135m, 1.1b or 8b\n");
    return 2;
  }
  // Every argument is checked before the ceilings are measured (tens of seconds).
  for (const std::string& r : args.rows) {
    int64_t m = 0;
    if (!absl::SimpleAtoi(r, &m) || m < 1) {
      std::fprintf(stderr, "gemm_bench: --rows takes positive integers, got '%s'\n", r.c_str());
      return 2;
    }
  }
  for (const std::string& dt : args.dtypes) {
    DType dtype;
    if (!ParseWeightDType(dt, &dtype) || dtype == DType::kF16) {
      std::fprintf(stderr, "gemm_bench: unknown dtype %s\n", dt.c_str());
      return 2;
    }
    // A quantized weight holds whole blocks along k (the model pass uses the same k values).
    const int64_t block = DTypeBlockElems(dtype);
    for (const Shape& shape : LayerShapes(*ms)) {
      if (shape.k % block != 0) {
        std::fprintf(stderr, "gemm_bench: %s weights need k in whole %ld-value blocks; the %s shape %s has k = %ld\n",
                     dt.c_str(), static_cast<long>(block), ms->name, shape.name.c_str(), static_cast<long>(shape.k));
        return 2;
      }
    }
  }
  std::vector<kernels::quant::DecodePrefetch> schemes;
  if (!args.compare_decode_prefetch.empty()) {
    if (!ParseSchemes(args.compare_decode_prefetch, &schemes) || schemes.size() < 2) {
      std::fprintf(stderr,
                   "gemm_bench: --compare-decode-prefetch takes two or more L1:L2 schemes (bytes ahead, >= 0), "
                   "e.g. 4096:16384,8192:0; got %s\n",
                   args.compare_decode_prefetch.c_str());
      return 2;
    }
    std::printf("# %d threads\n", threads);
    std::vector<Variant> variants;
    for (const auto& p : schemes) {
      Variant v{absl::StrCat(p.l1_bytes, ":", p.l2_bytes), BackendOptions(args, threads)};
      v.options.decode_prefetch = p;
      variants.push_back(std::move(v));
    }
    return CompareVariants(args, *ms, threads,
                           "decode prefetch schemes (L1:L2 bytes ahead): " + args.compare_decode_prefetch, variants);
  }
  if (!args.compare_direct_max_rows.empty()) {
    std::vector<Variant> variants;
    for (absl::string_view item : absl::StrSplit(args.compare_direct_max_rows, ',')) {
      int64_t limit = -1;
      if (!absl::SimpleAtoi(item, &limit) || limit < 0) {
        std::fprintf(stderr, "gemm_bench: --compare-direct-max-rows takes row counts >= 0 (0: per type), got %s\n",
                     args.compare_direct_max_rows.c_str());
        return 2;
      }
      Variant v{limit == 0 ? std::string("per-type") : absl::StrCat("direct<=", limit), BackendOptions(args, threads)};
      if (limit > 0) v.options.quant_direct_max_rows = limit;
      variants.push_back(std::move(v));
    }
    if (variants.size() < 2) {
      std::fprintf(stderr, "gemm_bench: --compare-direct-max-rows takes two or more row counts\n");
      return 2;
    }
    return CompareVariants(
        args, *ms, threads,
        "direct-path limits (quantized GEMMs of up to R rows on the decode kernels): " + args.compare_direct_max_rows,
        variants);
  }
  const double fma = MeasureFmaPeak(threads), bf16 = MeasureBf16DotPeak(threads), vnni = MeasureVnniPeak(threads),
               bw = BandwidthProbe(threads).Measure();
  std::printf(
      "# %d threads; ceilings: FMA peak %.0f GFLOP/s (f32), bf16 dot peak %.0f GFLOP/s, int8 VNNI peak %.0f GOP/s, "
      "read bandwidth %.1f GB/s\n",
      threads, fma, bf16, vnni, bw);
  std::printf(
      "# %%peak: against the FMA peak (f32 weights; bf16 with --bf16-dot=false or without AVX512-BF16), the bf16 dot "
      "peak (bf16 weights on AVX512-BF16) or the VNNI peak (quantized weights); bf16 kernel: %s\n",
      args.bf16_dot && kernels::GetCpuFeatures().avx512_bf16 ? "vdpbf16ps pair panels" : "f32 FMA [k][32] panels");
  if (args.decode_prefetch == "auto") {
    const auto& f = kernels::GetCpuFeatures();
    std::printf("# quantized decode prefetch (L1:L2 bytes ahead) for this CPU (%s family %#x):",
                f.amd ? "AMD" : "not AMD", f.family);
    for (const std::string& dt : args.dtypes) {
      DType dtype;
      if (!ParseWeightDType(dt, &dtype) || !IsQuantized(dtype)) continue;
      const kernels::quant::DecodePrefetch one = kernels::quant::DecodePrefetchFor(1, dtype, f.amd, f.family),
                                           many = kernels::quant::DecodePrefetchFor(8, dtype, f.amd, f.family);
      std::printf(" %s 1 row %ld:%ld, 8 rows %ld:%ld;", dt.c_str(), static_cast<long>(one.l1_bytes),
                  static_cast<long>(one.l2_bytes), static_cast<long>(many.l1_bytes), static_cast<long>(many.l2_bytes));
    }
    std::printf("\n");
  } else {
    std::printf("# quantized decode prefetch (L1:L2 bytes ahead): %s for every call\n", args.decode_prefetch.c_str());
  }
  if (args.direct_max_rows > 0)
    std::printf("# quantized GEMMs of up to %lld rows on the AVX-512 decode kernels, every type\n",
                static_cast<long long>(std::max(args.direct_max_rows, kernels::quant::kBlockMinRows - 1)));
  std::printf("%-6s %-22s %5s %10s %10s %8s %10s %8s\n", "dtype", "shape", "rows", "us/call", "GFLOP/s", "%peak",
              "GB/s", "%bw");
  const kernels::CpuBackend::Options o = BackendOptions(args, threads);
  if (args.onednn_s8 && args.layers)
    for (const Shape& shape : LayerShapes(*ms)) OnednnS8(args, shape, threads, vnni, bw);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const std::string& dt : args.dtypes) {
    DType dtype;
    if (!ParseWeightDType(dt, &dtype) || dtype == DType::kF16) {
      std::fprintf(stderr, "gemm_bench: unknown dtype %s\n", dt.c_str());
      return 2;
    }
    const bool dot = dtype == DType::kBF16 && args.bf16_dot && bf16 > 0;
    const double peak = IsQuantized(dtype) ? vnni : dot ? bf16 : fma;
    for (const Shape& shape : LayerShapes(*ms)) {
      if (!args.layers) break;
      auto cpu = kernels::CpuBackend::Create(o);
      // Weights of this shape, several copies so one call's bytes come from memory, not cache
      // (unless --hot).
      const size_t bytes = static_cast<size_t>(shape.n) * DTypeRowBytes(dtype, shape.k);
      const int copies = args.hot ? 1 : static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / bytes));
      std::vector<kernels::WeightView> ws;
      std::vector<void*> storage;
      for (int c = 0; c < copies; ++c) {
        void* p = RandomWeight(dtype, shape.n, shape.k, rng);
        kernels::WeightView host{p, dtype, shape.n, shape.k, shape.k, false};
        void* dev = nullptr;
        kernels::Backend& be = *cpu;
        ws.push_back(*be.UploadWeight(host, &dev));
        if (dev != nullptr) {
          storage.push_back(dev);
          std::free(p);
        } else {
          storage.push_back(p);
        }
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
        const double gbps = ws[0].ReadBytes() / (us * 1e3);
        std::printf("%-6s %-22s %5lld %10.1f %10.1f %7.0f%% %10.2f %7.0f%%\n", dt.c_str(), shape.name.c_str(),
                    static_cast<long long>(m), us, gflops, 100 * gflops / peak, gbps, 100 * gbps / bw);
      }
      for (void* p : storage) std::free(p);
    }
    if (args.model_pass)
      for (const std::string& r : args.rows) {
        int64_t m = 0;
        if (absl::SimpleAtoi(r, &m) && m >= 1) ModelPass(args, *ms, threads, bw, dtype, m);
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
      "GEMM microbenchmark of the CPU backend on a model's layer shapes (decode and prefill row counts), "
      "against the FMA, bf16-dot and VNNI peaks and the read bandwidth measured in the same run.");
  flags.AddStringList("rows", &args.rows, "Rows of x (tokens in the batch)");
  flags.AddStringList("dtypes", &args.dtypes,
                      "Weight dtypes: bf16, f32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K");
  flags.AddString("model", &args.model, "Layer shapes of: 135m (SmolLM), 1.1b (TinyLlama), 8b (Llama-3.1)");
  flags.AddInt("threads", &args.threads, "Threads (0 = all cores)");
  flags.AddDouble("seconds", &args.seconds, "Seconds per measurement");
  flags.AddBool("model-pass", &args.model_pass, "Also time a whole decode step's GEMMs (every layer + LM head)");
  flags.AddBool("layers", &args.layers, "Time each layer shape on its own");
  flags.AddBool("bf16-dot", &args.bf16_dot,
                "bf16 weights on AVX512-BF16 dot products where the CPU has them (false: the f32-FMA panel kernel)");
  flags.AddBool("hot", &args.hot,
                "One copy of each weight, so it stays in cache: the kernels' compute ceiling, not serving conditions");
  flags.AddBool("onednn-s8", &args.onednn_s8,
                "Also time oneDNN's u8 x s8 -> s32 matmul on the same shapes: a measured int8 GEMM ceiling");
  flags.AddString("decode-prefetch", &args.decode_prefetch,
                  "Quantized decode kernels' software prefetch: auto (the measured choice for this CPU and row count) "
                  "or L1:L2 (bytes ahead, 0 = none) for every call, e.g. 4096:16384");
  flags.AddString("compare-decode-prefetch", &args.compare_decode_prefetch,
                  "Instead of the table: time these quantized decode prefetch schemes (L1:L2 bytes ahead, comma "
                  "separated, e.g. 4096:16384,8192:0) paired, in rounds between bandwidth probes, per shape and rows");
  flags.AddString("compare-direct-max-rows", &args.compare_direct_max_rows,
                  "Instead of the table: time these direct-path limits (rows, comma separated, 0 = per type, "
                  "e.g. 0,12,100000) paired, in rounds between bandwidth probes, per shape and rows");
  flags.AddInt("direct-max-rows", &args.direct_max_rows,
               "Quantized GEMMs of up to this many rows run the AVX-512 decode kernels, the rest the chunked ones, "
               "for every type (0 = the measured choice per type; at least " +
                   std::to_string(orca::kernels::quant::kBlockMinRows - 1) + ")");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  if (args.direct_max_rows < 0) {
    std::fprintf(stderr, "gemm_bench: --direct-max-rows must be >= 0, got %lld\n",
                 static_cast<long long>(args.direct_max_rows));
    return 2;
  }
  if (!(args.seconds > 0 && args.seconds <= 3600)) {
    std::fprintf(stderr, "gemm_bench: --seconds must be in (0, 3600], got %g\n", args.seconds);
    return 2;
  }
  if (args.threads < 0 || args.threads > 1024) {
    std::fprintf(stderr, "gemm_bench: --threads must be in [0, 1024] (0 = all cores), got %lld\n",
                 static_cast<long long>(args.threads));
    return 2;
  }
  std::vector<orca::kernels::quant::DecodePrefetch> fixed;
  if (args.decode_prefetch != "auto" &&
      (!orca::bench::ParseSchemes(args.decode_prefetch, &fixed) || fixed.size() != 1)) {
    std::fprintf(stderr, "gemm_bench: --decode-prefetch must be auto or L1:L2 (bytes ahead, >= 0), got %s\n",
                 args.decode_prefetch.c_str());
    return 2;
  }
  return orca::bench::Run(args);
}
