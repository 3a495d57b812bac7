// Engine microbenchmark, the paper's Fig. 9 analog on this machine: time per
// iteration and tokens/s for prefill (initiation) and decode (increment)
// iterations over batch sizes, on any model file or synthetic model shape in
// any weight type, each figure reported against the machine's ceilings
// measured in the same run (memory read bandwidth; oneDNN GEMM peak per type),
// plus load time, resident memory, and the first requests after load.
//
//   engine_bench [--models 25m,135m] [--dtypes bf16,q8_0,q4_k_m] [--batches 1,2,4,8,16,32,64]
//                [--prompts 32,128] [--gen 32] [--model-dir DIR]
//   engine_bench --model-file model.gguf [...]
//   engine_bench --device cuda [--tp 2] [...]   (GPU: the CPU's ceilings do not apply and are not measured)

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
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/engine/ceilings.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "core/convert/gguf_export.h"
#include "core/engine/engine.h"
#include "core/engine/synthetic_checkpoint.h"
#include "core/text/synthetic_tokenizer.h"
#include "core/text/tokenizer.h"

namespace orca::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Ceilings {
  double read_gbps = 0;
  double gemm_gflops_f32 = 0;
  double gemm_gflops_bf16 = 0;
  double gemm_gops_int8 = 0;
  std::string f32_impl, bf16_impl, int8_impl;
  /// The GEMM peak a model's matrices compute at: int8 for quantized weights.
  double PeakFor(DType weights) const {
    return IsQuantized(weights) ? gemm_gops_int8 : weights == DType::kBF16 ? gemm_gflops_bf16 : gemm_gflops_f32;
  }
};

// oneDNN matmul on large shapes, the best GFLOP/s (GOP/s for int8) this machine gives per type:
// f32 × f32, bf16 × bf16, or u8 activations × s8 weights (the int8 GEMM quantized weights compute as).
double MeasureGemmPeak(dnnl::memory::data_type src, dnnl::memory::data_type wei, int threads, std::string* impl) {
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const bool int8 = wei == dnnl::memory::data_type::s8;
  double best = 0;
  for (int64_t m : {1024, 2048}) {
    const int64_t k = 2048, n = 2048;
    dnnl::memory::desc a({m, k}, src, dnnl::memory::format_tag::ab), b({k, n}, wei, dnnl::memory::format_tag::ab),
        c({m, n}, int8 ? dnnl::memory::data_type::s32 : dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
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

Ceilings MeasureCeilings(int threads, BandwidthProbe& bandwidth) {
  using dt = dnnl::memory::data_type;
  Ceilings c;
  c.read_gbps = bandwidth.Measure();
  c.gemm_gflops_f32 = MeasureGemmPeak(dt::f32, dt::f32, threads, &c.f32_impl);
  c.gemm_gflops_bf16 = MeasureGemmPeak(dt::bf16, dt::bf16, threads, &c.bf16_impl);
  c.gemm_gops_int8 = MeasureGemmPeak(dt::u8, dt::s8, threads, &c.int8_impl);
  std::printf(
      "# ceilings: read bandwidth %.1f GB/s; oneDNN GEMM peak f32 %.0f GFLOP/s (%s), bf16 %.0f GFLOP/s (%s), "
      "int8 %.0f GOP/s (%s)\n",
      c.read_gbps, c.gemm_gflops_f32, c.f32_impl.c_str(), c.gemm_gflops_bf16, c.bf16_impl.c_str(), c.gemm_gops_int8,
      c.int8_impl.c_str());
  std::fflush(stdout);
  return c;
}

// Synthetic shapes (random weights): the engine bench's own and real models' (`orca model synth --preset`).
bool ShapeOptions(const std::string& name, engine::SyntheticModelOptions* o) {
  struct Shape {
    const char* name;
    int hidden, layers, heads, kv_heads, ffn, vocab;
    bool tied;
  };
  static constexpr Shape kShapes[] = {{"25m", 512, 8, 8, 4, 1408, 8192, true},
                                      {"135m", 576, 30, 9, 3, 1536, 49152, true},
                                      {"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, false},
                                      {"llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, true},
                                      {"llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, true},
                                      {"llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, false}};
  for (const Shape& s : kShapes)
    if (name == s.name) {
      o->arch = engine::ModelArch::kLlama;
      o->max_position = 2048;
      o->hidden_size = s.hidden, o->num_layers = s.layers, o->num_heads = s.heads, o->num_kv_heads = s.kv_heads;
      o->intermediate_size = s.ffn, o->vocab_size = s.vocab, o->tie_word_embeddings = s.tied;
      return true;
    }
  return false;
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
  std::vector<std::string> files;
  std::vector<std::string> batches{"1", "2", "4", "8", "16", "32", "64"};
  std::vector<std::string> prompts{"32", "128"};
  std::vector<int> batch_sizes, prompt_lengths;  // the two lists above, parsed and checked in main
  int64_t gen = 32;
  int64_t threads = 0;
  int64_t first_requests = 10;
  int64_t small_gemm_max_rows = -1;  // -1: the engine's default
  int64_t panel_gemm_max_rows = -1;
  int64_t reserve_tokens = -1;  // -1: the engine's default
  int64_t prefill_chunk = 0;    // 0: each prompt in one iteration
  int64_t kv_local_slots = 0;   // 0: the engine's default
  bool swa_full = false;
  double temperature = 0;  // every request's sampling (0: greedy)
  double top_p = 1;
  bool bf16_dot = true;
  bool fused_kernels = true;
  bool cuda_graphs = false;
  std::string device = "cpu";
  int64_t tp = 1;
  bool vocab_parallel_head = true;
  std::string model_dir;
};

// A percentage of a ceiling, or "-" where the ceiling was not measured (the GPU backend).
std::string Pct(double num, double ceiling) {
  if (!(ceiling > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100 * num / ceiling);
  return buf;
}

// The model files to run: --model-file as given, else each shape × type, written as GGUF (with the
// synthetic tokenizer, so llama.cpp loads the same file) the first time.
absl::StatusOr<std::vector<std::string>> ModelFiles(const Args& args) {
  if (!args.files.empty()) return args.files;
  std::vector<std::string> out;
  for (const auto& model : args.models)
    for (const auto& type : args.dtypes) {
      engine::SyntheticModelOptions o;
      if (!ShapeOptions(model, &o)) return absl::InvalidArgumentError("unknown model shape " + model);
      convert::ExportOptions eo;
      if (!convert::ParseQuantMix(type, &eo.mix)) return absl::InvalidArgumentError("unknown type " + type);
      const std::string path = args.model_dir + "/bench-" + model + "-" + type + ".gguf";
      out.push_back(path);
      if (std::filesystem::exists(path)) continue;
      std::printf("# writing %s\n", path.c_str());
      std::fflush(stdout);
      ORCA_ASSIGN_OR_RETURN(text::SyntheticTokenizerFiles tok, text::MakeSyntheticByteLevelTokenizer(o.vocab_size));
      ORCA_ASSIGN_OR_RETURN(auto t, text::Tokenizer::FromJson(tok.tokenizer_json, tok.tokenizer_config_json));
      o.bos_token_id = t->bos_id().value_or(-1);
      o.eos_token_id = t->eos_ids().empty() ? -1 : t->eos_ids().front();
      ORCA_RETURN_IF_ERROR(
          convert::WriteSyntheticGguf(o, tok.tokenizer_json, tok.tokenizer_config_json, path, eo).status());
    }
  return out;
}

// One prefill of `batch` new requests of `prompt` random tokens; returns its seconds (the requests stay).
absl::StatusOr<double> Prefill(engine::Engine& e, const Args& args, int batch, int prompt, int gen, uint64_t* next_id,
                               std::mt19937& rng, engine::StepInput* in, engine::StepOutput* out) {
  in->seqs.clear();
  SamplingParams sampling;
  sampling.temperature = static_cast<float>(args.temperature);
  sampling.top_p = static_cast<float>(args.top_p);
  for (int r = 0; r < batch; ++r) {
    std::vector<int32_t> ids(prompt);
    for (auto& t : ids) t = std::uniform_int_distribution<int>(0, e.config().vocab_size - 1)(rng);
    in->seqs.push_back({(*next_id)++, ids, 0, true, engine::SequenceSetup{prompt + gen, sampling, {}}});
  }
  const auto t0 = Clock::now();
  // In chunks of --prefill-chunk (what the scheduler's token budget makes of a long prompt): only the last samples.
  const int chunk = args.prefill_chunk > 0 ? static_cast<int>(args.prefill_chunk) : prompt;
  const std::vector<engine::StepSequence> whole = std::move(in->seqs);
  for (int start = 0; start < prompt; start += chunk) {
    const int n = std::min(chunk, prompt - start);
    in->seqs.clear();
    for (const engine::StepSequence& s : whole)
      in->seqs.push_back({s.request_id,
                          std::vector<int32_t>(s.token_ids.begin() + start, s.token_ids.begin() + start + n), start,
                          start + n == prompt, start == 0 ? s.new_request : std::nullopt});
    ORCA_RETURN_IF_ERROR(e.Step(*in, nullptr, out));
  }
  return Seconds(t0, Clock::now());
}

// The first request after load against the later ones: no layout work may hide in a request.
absl::Status FirstRequests(engine::Engine& e, const Args& args, int prompt, uint64_t* next_id, std::mt19937& rng) {
  std::vector<double> ms;
  for (int64_t i = 0; i < args.first_requests; ++i) {
    engine::StepInput in;
    engine::StepOutput out;
    ORCA_ASSIGN_OR_RETURN(double s, Prefill(e, args, 1, prompt, 1, next_id, rng, &in, &out));
    ms.push_back(s * 1e3);
    e.Release(in.seqs[0].request_id);
  }
  std::vector<double> later(ms.begin() + 1, ms.end());
  std::sort(later.begin(), later.end());
  std::printf(
      "# first requests after load, prefill of %d tokens: #1 %.1f ms, #%zu %.1f ms, median of #2-#%zu %.1f ms\n",
      prompt, ms.front(), ms.size(), ms.back(), ms.size(), later.empty() ? 0 : later[later.size() / 2]);
  return absl::OkStatus();
}

// One table row: a prefill of `batch` × `prompt`, then gen - 1 decode iterations (median) between two
// bandwidth probes.
absl::Status Row(engine::Engine& e, const Args& args, const Ceilings& ceil, BandwidthProbe& bandwidth, int batch,
                 int prompt, double* b1_tps, uint64_t* next_id, std::mt19937& rng) {
  const engine::ModelConfig& c = e.config();
  const double weight_gb = e.weight_bytes() / 1e9;
  engine::StepInput in;
  engine::StepOutput out;
  ORCA_ASSIGN_OR_RETURN(double prefill_s,
                        Prefill(e, args, batch, prompt, static_cast<int>(args.gen), next_id, rng, &in, &out));
  const double prefill_flops = ForwardFlops(c, 1.0 * batch * prompt, batch, batch * prompt * (prompt + 1) / 2.0);
  const bool cpu = args.device == "cpu";
  const double bw_before = cpu ? bandwidth.Measure(3) : 0;
  std::vector<double> step_s;
  for (int g = 1; g < args.gen; ++g) {
    engine::StepInput next;
    for (size_t r = 0; r < in.seqs.size(); ++r)
      next.seqs.push_back(
          {in.seqs[r].request_id, {out.samples[r].sample.token_id}, prompt + g - 1, true, std::nullopt});
    auto t1 = Clock::now();
    ORCA_RETURN_IF_ERROR(e.Step(next, nullptr, &out));
    step_s.push_back(Seconds(t1, Clock::now()));
    in.seqs = std::move(next.seqs);
  }
  const double bw_now = cpu ? std::max(bw_before, bandwidth.Measure(3)) : 0;
  const int64_t local_held = e.kv_local_slots_used();
  for (const auto& s : in.seqs) e.Release(s.request_id);
  std::sort(step_s.begin(), step_s.end());
  const double decode_s = step_s[step_s.size() / 2];  // median iteration
  const double decode_tps = batch / decode_s;
  if (batch == 1) *b1_tps = decode_tps;
  // Tokens/s with a decimal: whole tokens are too coarse for a ratio at 4-16 tok/s (a 4B BF16 decode).
  std::printf("%-6d %-6d | %-10.1f %-13.1f %-6s | %-10.2f %-12.1f %-9s %-8.1f | %-8.1f %-6s\n", batch, prompt,
              prefill_s * 1e3, batch * prompt / prefill_s,
              Pct(prefill_flops / prefill_s / 1e9, ceil.PeakFor(e.weight_dtype())).c_str(), decode_s * 1e3, decode_tps,
              Pct(weight_gb / decode_s, ceil.read_gbps).c_str(), *b1_tps > 0 ? decode_tps / *b1_tps : 0.0, bw_now,
              Pct(weight_gb / decode_s, bw_now).c_str());
  if (e.kv_local_slots_total() > 0)
    std::printf(
        "#   sliding-window KV held at the last decode step: %lld slots of %lld (window %d; every position: %d)\n",
        static_cast<long long>(local_held), static_cast<long long>(e.kv_local_slots_total()), c.sliding_window,
        batch * (prompt + static_cast<int>(args.gen) - 1));
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status BenchFile(const std::string& path, const Args& args, int threads, const Ceilings& ceil,
                       BandwidthProbe& bandwidth) {
  const std::vector<int>& batches = args.batch_sizes;
  const std::vector<int>& prompts = args.prompt_lengths;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int max_prompt = *std::max_element(prompts.begin(), prompts.end());
  engine::Engine::Options eo;
  eo.model_path = path;
  eo.num_threads = threads;
  eo.n_slots = static_cast<int64_t>(max_batch) * (max_prompt + args.gen + 16);
  if (args.small_gemm_max_rows >= 0) eo.small_gemm_max_rows = args.small_gemm_max_rows;
  if (args.panel_gemm_max_rows >= 0) eo.panel_gemm_max_rows = args.panel_gemm_max_rows;
  if (args.reserve_tokens >= 0) eo.reserve_tokens = args.reserve_tokens;
  eo.kv_local_slots = args.kv_local_slots;
  eo.swa_full = args.swa_full;
  eo.cpu_bf16_dot = args.bf16_dot;
  eo.fused_kernels = args.fused_kernels;
  eo.cuda_graphs = args.cuda_graphs;
  eo.device = args.device;
  eo.tp_size = static_cast<int32_t>(args.tp);
  eo.vocab_parallel_head = args.vocab_parallel_head;
  const auto t0 = Clock::now();
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e, engine::Engine::Create(eo));
  const double load_s = Seconds(t0, Clock::now());
  const engine::ModelConfig& c = e->config();
  std::printf(
      "\n## %s: %.1fM params, %s weights, %.0f MB read per decode step, KV %.0f MiB; loaded in %.2f s "
      "(%.0f MiB packed at load), RSS %.0f MiB; %s, tp %d%s%s\n",
      path.c_str(), c.NumParameters() / 1e6, DTypeName(e->weight_dtype()), e->weight_bytes() / 1e6,
      e->kv_bytes() / 1048576.0, load_s, e->packed_weight_bytes() / 1048576.0, ResidentMiBWithoutProbe(),
      e->backend_name().c_str(), static_cast<int>(args.tp),
      args.tp > 1 ? (args.vocab_parallel_head ? " (vocabulary-parallel head)" : " (head on rank 0)") : "",
      args.cuda_graphs ? ", decode as CUDA Graphs" : "");
  std::mt19937 rng(1);
  uint64_t next_id = 1;
  if (args.first_requests > 0) ORCA_RETURN_IF_ERROR(FirstRequests(*e, args, max_prompt, &next_id, rng));
  std::printf("%-6s %-6s | %-10s %-10s %-8s | %-10s %-10s %-9s %-8s | %-8s %-9s\n", "batch", "prompt", "prefill_ms",
              "prefill_tok/s", "%gemm", "decode_ms", "decode_tok/s", "%bw_roof", "x_b1", "bw_now", "%bw_now");
  for (int prompt : prompts) {
    double b1_tps = 0;
    for (int batch : batches)
      ORCA_RETURN_IF_ERROR(Row(*e, args, ceil, bandwidth, batch, prompt, &b1_tps, &next_id, rng));
  }
  std::printf("# resident memory after the runs: %.0f MiB\n", ResidentMiBWithoutProbe());
  return absl::OkStatus();
}

int Run(const Args& args) {
  const int threads = args.threads > 0 ? static_cast<int>(args.threads) : omp_get_num_procs();
  std::printf("# Orca engine microbenchmark (paper Fig. 9 analog), %d threads, device %s\n", threads,
              args.device.c_str());
  BandwidthProbe bandwidth(threads);
  Ceilings ceil;
  if (args.device == "cpu")
    ceil = MeasureCeilings(threads, bandwidth);
  else
    std::printf("# %s: the CPU's bandwidth and GEMM ceilings do not apply; the %% columns are left out\n",
                args.device.c_str());
  absl::StatusOr<std::vector<std::string>> files = ModelFiles(args);
  if (!files.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  for (const std::string& path : *files)
    if (absl::Status s = BenchFile(path, args, threads, ceil, bandwidth); !s.ok()) {
      std::fprintf(stderr, "engine_bench: %s: %s\n", path.c_str(), std::string(s.message()).c_str());
      return 1;
    }
  std::printf(
      "\n# %%gemm: model FLOPs of the prefill iteration / time / measured GEMM peak of the weights' type\n"
      "#   (oneDNN f32, bf16, or u8×s8 int8 for quantized weights).\n"
      "# %%bw_roof: (bytes of weights read per decode step / measured bandwidth) / decode iteration time (median).\n"
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
  flags.AddStringList("models", &args.models,
                      "Model shapes: 25m, 135m, tinyllama-1.1b, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b");
  flags.AddStringList("dtypes", &args.dtypes,
                      "Weight types (any `orca model quantize --type`): bf16, f32, q8_0, q4_k_m, ...");
  flags.AddStringList("model-file", &args.files, "Model files or directories to run instead of --models × --dtypes");
  flags.AddInt("first-requests", &args.first_requests,
               "Prefills of single requests right after load, first vs later (0 = skip)");
  flags.AddInt("reserve-tokens", &args.reserve_tokens,
               "Activation buffers reserved and made resident at load, in tokens (-1 = the engine's default, "
               "0 = grown in the first requests)");
  flags.AddInt("prefill-chunk", &args.prefill_chunk, "Prompt tokens per prefill iteration (0 = the whole prompt)");
  flags.AddInt("kv-local-slots", &args.kv_local_slots,
               "Slots of the sliding-window layers' own KV pool (0 = the engine's default: as many as the main one)");
  flags.AddBool("swa-full", &args.swa_full, "Sliding-window layers keep every position in the main KV pool");
  flags.AddStringList("batches", &args.batches, "Batch sizes");
  flags.AddStringList("prompts", &args.prompts, "Prompt lengths");
  flags.AddInt("gen", &args.gen, "Generated tokens per request");
  flags.AddInt("threads", &args.threads, "Threads (0 = all cores)");
  flags.AddDouble("temperature", &args.temperature,
                  "Every request's sampling temperature (0 = greedy); the decode iterations include the sampling");
  flags.AddDouble("top-p", &args.top_p, "Every request's top-p, with --temperature > 0");
  flags.AddString("device", &args.device, "Kernel backend: cpu or cuda (tensor-parallel shard r uses GPU r)");
  flags.AddInt("tp", &args.tp, "Tensor-parallel shards (threads of this process)");
  flags.AddBool(
      "vocab-parallel-head", &args.vocab_parallel_head,
      "With --tp > 1: every shard computes its vocabulary slice of the logits (false: rank 0 the whole head)");
  flags.AddBool("bf16-dot", &args.bf16_dot,
                "AVX512-BF16 dot products where the CPU has them, for bf16 weights and for attention over a bf16 KV "
                "cache (false: the f32-FMA kernels for both)");
  flags.AddBool("fused-kernels", &args.fused_kernels,
                "Fused kernel pairs where the backend has them (CUDA: RoPE + KV write, residual add + RMSNorm)");
  flags.AddBool("cuda-graphs", &args.cuda_graphs,
                "With --device cuda and --tp 1: decode iterations recorded once per batch shape as CUDA Graphs and "
                "replayed");
  flags.AddInt("small-gemm-max-rows", &args.small_gemm_max_rows,
               "GEMMs up to this many rows use the AVX-512 streaming kernel (-1 = default)");
  flags.AddInt("panel-gemm-max-rows", &args.panel_gemm_max_rows,
               "GEMMs up to this many rows use the AVX-512 panel kernel (-1 = default)");
  args.model_dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache/orca/models";
  flags.AddString("model-dir", &args.model_dir, "Where synthetic benchmark models are written and reused");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  if (args.device != "cpu" && args.device != "cuda") {
    std::fprintf(stderr, "engine_bench: --device must be cpu or cuda, got '%s'\n", args.device.c_str());
    return 2;
  }
  if (args.threads < 0 || args.threads > 1024) {
    std::fprintf(stderr, "engine_bench: --threads must be in [0, 1024] (0 = all cores), got %lld\n",
                 static_cast<long long>(args.threads));
    return 2;
  }
  {
    orca::SamplingParams sampling;
    sampling.temperature = static_cast<float>(args.temperature);
    sampling.top_p = static_cast<float>(args.top_p);
    if (std::string bad = sampling.Validate(); !bad.empty()) {
      std::fprintf(stderr, "engine_bench: --temperature/--top-p: %s\n", bad.c_str());
      return 2;
    }
  }
  // Every row times gen - 1 decode iterations (their median), so at least one is needed.
  if (args.gen < 2 || args.gen > 1 << 20) {
    std::fprintf(stderr, "engine_bench: --gen must be in [2, %d] (gen - 1 decode iterations are timed), got %lld\n",
                 1 << 20, static_cast<long long>(args.gen));
    return 2;
  }
  for (auto [flag, list, out] : {std::tuple{"batches", &args.batches, &args.batch_sizes},
                                 std::tuple{"prompts", &args.prompts, &args.prompt_lengths}}) {
    for (const std::string& v : *list) {
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 1 << 20) {
        std::fprintf(stderr, "engine_bench: --%s takes integers in [1, %d], got '%s'\n", flag, 1 << 20, v.c_str());
        return 2;
      }
      out->push_back(n);
    }
    if (out->empty()) {
      std::fprintf(stderr, "engine_bench: --%s is empty\n", flag);
      return 2;
    }
  }
  if (args.tp < 1 || args.tp > 64) {
    std::fprintf(stderr, "engine_bench: --tp must be in [1, 64], got %lld\n", static_cast<long long>(args.tp));
    return 2;
  }
  std::filesystem::create_directories(args.model_dir);
  orca::SetLogLevel(orca::LogLevel::kWarning);
  return orca::bench::Run(args);
}
