// Engine microbenchmark, the paper's Fig. 9 analog on this machine: time per
// iteration and tokens/s for prefill (initiation) and decode (increment)
// iterations over batch sizes, on synthetic Llama-shaped models, each figure
// reported against the machine's ceilings measured in the same run (memory
// read bandwidth; oneDNN GEMM peak per dtype).
//
//   engine_bench [--models 25m,135m] [--dtypes bf16,f32] [--batches 1,2,4,8,16,32,64]
//                [--prompts 32,128] [--gen 32] [--model-dir DIR]

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/engine/ceilings.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/engine/engine.h"
#include "core/engine/synthetic_checkpoint.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Ceilings {
  double read_gbps = 0;
  double gemm_gflops_f32 = 0;
  double gemm_gflops_bf16 = 0;
  std::string bf16_impl;
};

// oneDNN matmul on large shapes, the best GFLOP/s this machine gives per dtype.
double MeasureGemmPeak(dnnl::memory::data_type dt, int threads, std::string* impl) {
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  double best = 0;
  for (int64_t m : {1024, 2048}) {
    const int64_t k = 2048, n = 2048;
    dnnl::memory::desc a({m, k}, dt, dnnl::memory::format_tag::ab), b({k, n}, dt, dnnl::memory::format_tag::ab),
        c({m, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng);
    dnnl::matmul mm(pd);
    dnnl::memory A(a, eng), B(b, eng), C(c, eng);
    std::memset(A.get_data_handle(), 0, a.get_size());
    std::memset(B.get_data_handle(), 0, b.get_size());
    auto run = [&] { mm.execute(stream, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}}); };
    run();
    stream.wait();
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = Clock::now();
      for (int i = 0; i < 3; ++i) run();
      stream.wait();
      best = std::max(best, 3 * 2.0 * m * n * k / Seconds(t0, Clock::now()) / 1e9);
    }
    *impl = pd.impl_info_str();
  }
  return best;
}

struct ModelShape {
  std::string name;
  engine::SyntheticModelOptions options;
};

ModelShape Shape(const std::string& name) {
  ModelShape s{name, {}};
  auto& o = s.options;
  o.arch = engine::ModelArch::kLlama;
  o.max_position = 2048;
  o.tie_word_embeddings = true;
  if (name == "25m") {
    o.hidden_size = 512, o.num_layers = 8, o.num_heads = 8, o.num_kv_heads = 4, o.intermediate_size = 1408,
    o.vocab_size = 8192;
  } else {  // 135m: SmolLM-135M's shape
    o.hidden_size = 576, o.num_layers = 30, o.num_heads = 9, o.num_kv_heads = 3, o.intermediate_size = 1536,
    o.vocab_size = 49152;
  }
  return s;
}

int64_t ResidentKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  return 0;
}

// The process's resident memory without the bandwidth probe's buffer.
double ResidentMiBWithoutProbe() { return ResidentKiB("VmRSS:") / 1024.0 - BandwidthProbe::kBytes / 1048576.0; }

// Matmul FLOPs of one forward over `tokens` tokens of which `samples` reach the LM head, plus attention.
double ForwardFlops(const engine::ModelConfig& c, double tokens, double samples, double attn_pairs) {
  const double h = c.hidden_size, q = 1.0 * c.num_heads * c.head_dim, kv = 1.0 * c.num_kv_heads * c.head_dim;
  const double per_token = 2 * (h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size) * c.num_layers;
  const double attention = 4 * attn_pairs * c.head_dim * c.num_heads * c.num_layers;
  return per_token * tokens + 2 * samples * c.vocab_size * h + attention;
}

struct Args {
  std::vector<std::string> models{"25m", "135m"};
  std::vector<std::string> dtypes{"bf16", "f32"};
  std::vector<std::string> batches{"1", "2", "4", "8", "16", "32", "64"};
  std::vector<std::string> prompts{"32", "128"};
  int64_t gen = 32;
  int64_t threads = 0;
  int64_t small_gemm_max_rows = -1;  // -1: the engine's default
  int64_t panel_gemm_max_rows = -1;
  std::string model_dir;
};

int Run(const Args& args) {
  const int threads = args.threads > 0 ? static_cast<int>(args.threads) : omp_get_num_procs();
  std::printf("# Orca engine microbenchmark (paper Fig. 9 analog), %d threads\n", threads);
  Ceilings ceil;
  BandwidthProbe bandwidth(threads);
  ceil.read_gbps = bandwidth.Measure();
  std::string f32_impl;
  ceil.gemm_gflops_f32 = MeasureGemmPeak(dnnl::memory::data_type::f32, threads, &f32_impl);
  ceil.gemm_gflops_bf16 = MeasureGemmPeak(dnnl::memory::data_type::bf16, threads, &ceil.bf16_impl);
  std::printf("# ceilings: read bandwidth %.1f GB/s; oneDNN GEMM peak f32 %.0f GFLOP/s (%s), bf16 %.0f GFLOP/s (%s)\n",
              ceil.read_gbps, ceil.gemm_gflops_f32, f32_impl.c_str(), ceil.gemm_gflops_bf16, ceil.bf16_impl.c_str());
  std::fflush(stdout);
  std::vector<int> batches, prompts;
  for (const auto& b : args.batches) batches.push_back(std::stoi(b));
  for (const auto& p : args.prompts) prompts.push_back(std::stoi(p));
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int max_prompt = *std::max_element(prompts.begin(), prompts.end());

  for (const auto& model_name : args.models) {
    for (const auto& dtype_name : args.dtypes) {
      ModelShape shape = Shape(model_name);
      DType dt;
      if (!ParseDType(dtype_name, &dt)) {
        std::fprintf(stderr, "unknown dtype %s\n", dtype_name.c_str());
        return 2;
      }
      shape.options.dtype = dt;
      const std::string dir = args.model_dir + "/bench-llama-" + model_name + "-" + dtype_name;
      if (!std::filesystem::exists(dir + "/model.safetensors")) {
        std::printf("# writing %s\n", dir.c_str());
        if (absl::Status s = WriteSyntheticCheckpoint(shape.options, dir); !s.ok()) {
          std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
          return 1;
        }
      }
      engine::Engine::Options eo;
      eo.model_path = dir;
      eo.num_threads = threads;
      eo.n_slots = static_cast<int64_t>(max_batch) * (max_prompt + args.gen + 16);
      if (args.small_gemm_max_rows >= 0) eo.small_gemm_max_rows = args.small_gemm_max_rows;
      if (args.panel_gemm_max_rows >= 0) eo.panel_gemm_max_rows = args.panel_gemm_max_rows;
      auto engine_or = engine::Engine::Create(eo);
      if (!engine_or.ok()) {
        std::fprintf(stderr, "%s\n", std::string(engine_or.status().message()).c_str());
        return 1;
      }
      engine::Engine& engine = **engine_or;
      const engine::ModelConfig& c = engine.config();
      const double weight_gb = engine.weight_bytes() / 1e9;
      const double gemm_peak = dt == DType::kBF16 ? ceil.gemm_gflops_bf16 : ceil.gemm_gflops_f32;
      std::printf("\n## %s %s: %.1fM params, %.0f MB weights read per decode step, KV %.0f MiB, RSS %.0f MiB\n",
                  model_name.c_str(), dtype_name.c_str(), c.NumParameters() / 1e6, weight_gb * 1e3,
                  engine.kv_bytes() / 1048576.0, ResidentMiBWithoutProbe());
      std::printf("%-6s %-6s | %-10s %-10s %-8s | %-10s %-10s %-9s %-8s | %-8s %-9s\n", "batch", "prompt", "prefill_ms",
                  "prefill_tok/s", "%gemm", "decode_ms", "decode_tok/s", "%bw_roof", "x_b1", "bw_now", "%bw_now");
      std::mt19937 rng(1);
      uint64_t next_id = 1;
      {  // Warm-up: page in the mapped weights and create the GEMM primitives of small shapes.
        engine::StepInput warm;
        warm.seqs.push_back({next_id++, std::vector<int32_t>(8, 1), 0, true, engine::SequenceSetup{16, {}, {}}});
        engine::StepOutput out;
        absl::Status s = engine.Step(warm, nullptr, &out);
        warm.seqs[0] = {warm.seqs[0].request_id, {1}, 8, true, std::nullopt};
        if (s.ok()) s = engine.Step(warm, nullptr, &out);
        if (!s.ok()) {
          std::fprintf(stderr, "warm-up failed: %s\n", std::string(s.message()).c_str());
          return 1;
        }
        engine.Release(warm.seqs[0].request_id);
      }
      for (int prompt : prompts) {
        double b1_tps = 0;
        for (int batch : batches) {
          engine::StepInput in;
          for (int r = 0; r < batch; ++r) {
            std::vector<int32_t> ids(prompt);
            for (auto& t : ids) t = std::uniform_int_distribution<int>(0, c.vocab_size - 1)(rng);
            in.seqs.push_back(
                {next_id++, ids, 0, true, engine::SequenceSetup{static_cast<int32_t>(prompt + args.gen), {}, {}}});
          }
          engine::StepOutput out;
          auto t0 = Clock::now();
          if (absl::Status s = engine.Step(in, nullptr, &out); !s.ok()) {
            std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
            return 1;
          }
          const double prefill_s = Seconds(t0, Clock::now());
          const double prefill_flops =
              ForwardFlops(c, 1.0 * batch * prompt, batch, batch * prompt * (prompt + 1) / 2.0);
          // Decode: gen - 1 increment iterations, one token per request at its own position,
          // between two probes of the bandwidth available at the time.
          const double bw_before = bandwidth.Measure(3);
          std::vector<double> step_s;
          for (int g = 1; g < args.gen; ++g) {
            engine::StepInput next;
            for (size_t r = 0; r < in.seqs.size(); ++r)
              next.seqs.push_back(
                  {in.seqs[r].request_id, {out.samples[r].sample.token_id}, prompt + g - 1, true, std::nullopt});
            auto t1 = Clock::now();
            if (absl::Status s = engine.Step(next, nullptr, &out); !s.ok()) {
              std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
              return 1;
            }
            step_s.push_back(Seconds(t1, Clock::now()));
            in.seqs = std::move(next.seqs);
          }
          const double bw_now = std::max(bw_before, bandwidth.Measure(3));
          for (const auto& s : in.seqs) engine.Release(s.request_id);
          std::sort(step_s.begin(), step_s.end());
          const double decode_s = step_s[step_s.size() / 2];  // median iteration
          const double decode_tps = batch / decode_s;
          if (batch == 1) b1_tps = decode_tps;
          const double roofline_s = weight_gb / ceil.read_gbps;
          std::printf("%-6d %-6d | %-10.1f %-13.0f %-5.0f%% | %-10.2f %-12.0f %-8.0f%% %-8.1f | %-8.1f %-5.0f%%\n",
                      batch, prompt, prefill_s * 1e3, batch * prompt / prefill_s,
                      100 * prefill_flops / prefill_s / 1e9 / gemm_peak, decode_s * 1e3, decode_tps,
                      100 * roofline_s / decode_s, b1_tps > 0 ? decode_tps / b1_tps : 0.0, bw_now,
                      100 * weight_gb / bw_now / decode_s);
          std::fflush(stdout);
        }
      }
      std::printf("# resident memory after the runs: %.0f MiB (weights are mapped: shared, clean pages)\n",
                  ResidentMiBWithoutProbe());
    }
  }
  std::printf(
      "\n# %%gemm: model FLOPs of the prefill iteration / time / measured GEMM peak of the dtype.\n"
      "# %%bw_roof: (weight bytes / measured bandwidth) / decode iteration time (median).\n"
      "# bw_now, %%bw_now: the same against the higher of two bandwidth probes taken right before and\n"
      "#   right after this row's decode iterations (the bandwidth available at the time).\n"
      "# x_b1: decode tokens/s relative to batch 1 at the same prompt length.\n");
  return 0;
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  orca::bench::Args args;
  orca::FlagSet flags("engine_bench",
                      "Engine microbenchmark: prefill and decode iterations against the machine's ceilings.");
  flags.AddStringList("models", &args.models, "Model shapes: 25m, 135m");
  flags.AddStringList("dtypes", &args.dtypes, "Weight dtypes: bf16, f32");
  flags.AddStringList("batches", &args.batches, "Batch sizes");
  flags.AddStringList("prompts", &args.prompts, "Prompt lengths");
  flags.AddInt("gen", &args.gen, "Generated tokens per request");
  flags.AddInt("threads", &args.threads, "Threads (0 = all cores)");
  flags.AddInt("small-gemm-max-rows", &args.small_gemm_max_rows,
               "GEMMs up to this many rows use the AVX-512 streaming kernel (-1 = default)");
  flags.AddInt("panel-gemm-max-rows", &args.panel_gemm_max_rows,
               "GEMMs up to this many rows use the AVX-512 panel kernel (-1 = default)");
  args.model_dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache/orca/models";
  flags.AddString("model-dir", &args.model_dir, "Where synthetic benchmark models are written and reused");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  std::filesystem::create_directories(args.model_dir);
  orca::SetLogLevel(orca::LogLevel::kWarning);
  return orca::bench::Run(args);
}
