// The paper's §6.2 comparison on the REAL CPU engine (Orca issue 3, benchmark part 2):
// orca(max_bs) vs the request-level baseline over Poisson arrival rates, every iteration
// run by core/engine on a synthetic Llama-shaped model and timed on the wall clock.
//
// The event loop is sim/'s: the real Scheduler plans each iteration, the engine
// runs it (EngineStepRunner), and the virtual clock advances by the measured Step() time,
// so results are what this engine delivers while idle gaps between arrivals cost no wall
// time. Prints median normalized latency against throughput, and the throughput ratio at
// equal median normalized latency (interpolated as sim/sweep.h does).
//
//   orca_engine_sched_bench [--preset 4m] [--rates 1,2,4,8] [--num-requests 100]
//                           [--configs orca:8,orca:32,request-level:1,request-level:8]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/pipeline/bench_models.h"
#include "bench/pipeline/engine_step_runner.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/common/subprocess.h"
#include "core/engine/engine.h"
#include "core/loadgen/fig10_report.h"
#include "core/loadgen/serving_sweep.h"
#include "core/loadgen/trace_flags.h"
#include "sim/sweep.h"

namespace orca::bench {
namespace {

struct Args {
  std::string model;
  std::string preset = "4m";
  std::string model_dir = "/tmp/orca-bench-models";
  std::string dtype = "auto";
  int64_t threads = 1;
  int64_t n_slots = 8192;
  std::string configs = "orca:8,orca:32,request-level:1,request-level:8";
  std::string rates = "1,2,4,8,16";
  loadgen::TraceFlags trace;  ///< The paper's §6.2 trace: --num-requests, --seed, the length bounds
  double saturation_ms = 0;
  std::string targets = "1.25,1.5,2,3,5";
  std::string out;
  std::string gnuplot = "gnuplot";
};

absl::StatusOr<std::string> ResolveModel(const Args& args) {
  if (!args.model.empty()) return args.model;
  return EnsureSyntheticModel(ExecutableDir(), args.preset, args.model_dir);
}

/// Wall time of one Step() over `input` (best of `repeats`), releasing its requests after.
absl::StatusOr<double> TimeStep(engine::Engine& engine, const engine::StepInput& input, int repeats) {
  engine::StepOutput output;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    engine.ReleaseAll();
    const auto start = std::chrono::steady_clock::now();
    ORCA_RETURN_IF_ERROR(engine.Step(input, nullptr, &output));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  engine.ReleaseAll();
  return best;
}

/// The engine's cost shape on this machine: prefill time by prompt length and decode-step
/// time by batch size (each request at 200 tokens of context), best of 3. It explains the
/// sweep: iteration-level batching pays off as far as a batch costs less than its members.
absl::Status Calibrate(engine::Engine& engine) {
  const int32_t vocab = engine.config().vocab_size;
  auto prompt = [vocab](int32_t n, int32_t salt) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + salt * 104729) % vocab;
    return ids;
  };
  std::printf("# engine cost shape (best of 3)\n#   prefill:");
  for (int32_t n : {32, 128, 272, 512}) {
    engine::StepInput in;
    in.seqs.push_back({1, prompt(n, 1), 0, true, engine::SequenceSetup{n + 16, {}, {}}});
    ORCA_ASSIGN_OR_RETURN(const double s, TimeStep(engine, in, 3));
    std::printf("  %d tok %.1f ms", n, s * 1e3);
  }
  std::printf("\n#   decode step at 200 tokens of context:");
  constexpr int32_t kContext = 200;
  for (int32_t batch : {1, 4, 16, 32}) {
    // Fill each request's KV with one prefill, then time one increment over all of them.
    engine::StepOutput output;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      engine.ReleaseAll();
      engine::StepInput fill, step;
      for (int32_t b = 0; b < batch; ++b) {
        const uint64_t id = static_cast<uint64_t>(b) + 1;
        fill.seqs.push_back({id, prompt(kContext, b), 0, true, engine::SequenceSetup{kContext + 16, {}, {}}});
        step.seqs.push_back({id, {b % vocab}, kContext, true, std::nullopt});
      }
      ORCA_RETURN_IF_ERROR(engine.Step(fill, nullptr, &output));
      const auto start = std::chrono::steady_clock::now();
      ORCA_RETURN_IF_ERROR(engine.Step(step, nullptr, &output));
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("  bs %d %.2f ms", batch, best * 1e3);
  }
  engine.ReleaseAll();
  std::printf("\n\n");
  std::fflush(stdout);
  return absl::OkStatus();
}

/// Sweep curves as the serving sweep's records, for its CSV and plot.
std::vector<loadgen::MeasuredCurve> ToMeasured(const std::vector<loadgen::SweepCurve>& curves,
                                               const std::vector<loadgen::SweepCurveSpec>& specs) {
  std::vector<loadgen::MeasuredCurve> out;
  for (size_t i = 0; i < curves.size(); ++i) {
    loadgen::MeasuredCurve& m = out.emplace_back();
    m.spec = specs[i];
    for (const loadgen::SweepPoint& p : curves[i].points) {
      loadgen::MeasuredPoint& q = m.points.emplace_back();
      q.arrival_rate = p.arrival_rate;
      q.summary.throughput_rps = p.throughput_rps;
      q.summary.num_completed = 1;  // every simulated request completes
      q.summary.normalized_latency_s.p50 = p.median_normalized_latency;
      q.summary.normalized_latency_s.p99 = p.p99_normalized_latency;
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<engine::Engine>> CreateEngine(const Args& args, const std::string& model) {
  engine::Engine::Options o;
  o.model_path = model;
  o.n_slots = args.n_slots;
  o.num_threads = static_cast<int32_t>(args.threads);
  ORCA_RETURN_IF_ERROR(engine::SetDTypeAndDeviceFromFlags(args.dtype, "cpu", &o));
  return engine::Engine::Create(o);
}

/// One scheduler configuration per curve, sized to the engine (its KV pool and block size).
std::vector<loadgen::SweepConfig> MakeConfigs(const std::vector<loadgen::SweepCurveSpec>& specs,
                                              const engine::Engine& engine) {
  std::vector<loadgen::SweepConfig> configs;
  for (const loadgen::SweepCurveSpec& spec : specs) {
    loadgen::SweepConfig& c = configs.emplace_back();
    c.label = spec.label;
    c.scheduler = loadgen::ApplyCurveSpec(spec, c.scheduler);
    c.scheduler.n_slots = engine.kv_slots_total();
    c.scheduler.n_workers = 1;
    c.scheduler.kv_block_size = 16;  // the engine's block table (engine::Engine::Options::kv_block_size)
    c.scheduler.max_context = engine.config().max_position;
    c.scheduler.vocab_size = engine.config().vocab_size;
  }
  return configs;
}

/// Rate by rate over every configuration (not configuration by configuration): a drift in
/// the shared machine's background load then hits all curves alike. A configuration stops
/// after its first point past options.saturation_latency.
absl::StatusOr<std::vector<loadgen::SweepCurve>> RunInterleaved(const sim::SweepOptions& options,
                                                                const std::vector<loadgen::SweepConfig>& configs,
                                                                engine::Engine& engine) {
  auto factory = [&engine](const sched::SchedulerOptions&) -> absl::StatusOr<std::unique_ptr<sim::StepRunner>> {
    return std::make_unique<EngineStepRunner>(&engine);
  };
  std::vector<loadgen::SweepCurve> curves(configs.size());
  std::vector<bool> saturated(configs.size(), false);
  for (double rate : options.arrival_rates) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (saturated[i]) continue;
      sim::SweepOptions point = options;
      point.arrival_rates = {rate};
      ORCA_ASSIGN_OR_RETURN(std::vector<loadgen::SweepCurve> one, sim::RunSweep(point, {configs[i]}, factory));
      curves[i].config = configs[i];
      curves[i].points.push_back(one.front().points.front());
      const loadgen::SweepPoint& p = curves[i].points.back();
      std::fprintf(stderr, "  %s @ %g req/s: %.3f req/s, p50 normalized latency %.2f ms/token\n",
                   configs[i].label.c_str(), rate, p.throughput_rps, p.median_normalized_latency * 1e3);
      saturated[i] = options.saturation_latency > 0 && p.median_normalized_latency > options.saturation_latency;
    }
  }
  return curves;
}

absl::Status Run(const Args& args) {
  ORCA_ASSIGN_OR_RETURN(const std::string model, ResolveModel(args));
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> engine, CreateEngine(args, model));
  ORCA_ASSIGN_OR_RETURN(const std::vector<loadgen::SweepCurveSpec> specs, loadgen::ParseCurveSpecs(args.configs));
  ORCA_ASSIGN_OR_RETURN(const std::vector<double> rates, ParsePositiveNumberList(args.rates, "rates"));
  ORCA_ASSIGN_OR_RETURN(const std::vector<double> multiples, ParsePositiveNumberList(args.targets, "targets"));
  ORCA_ASSIGN_OR_RETURN(const loadgen::LoadTraceOptions trace, loadgen::TraceOptionsFromFlags(args.trace));
  sim::SweepOptions options;
  options.trace = loadgen::PoissonTraceOptions(trace);
  options.arrival_rates = rates;
  options.simulation.vocab_size = engine->config().vocab_size;
  options.saturation_latency = args.saturation_ms / 1e3;

  std::printf("# %s, %lld compute thread(s)\n", EngineStepRunner(engine.get()).Describe().c_str(),
              static_cast<long long>(args.threads));
  std::printf(
      "# §6.2 trace: %lld requests per point, seed %lld, Poisson arrivals, prompt U(%lld,%lld), output U(%lld,%lld), "
      "no early EOS\n\n",
      static_cast<long long>(trace.num_requests), static_cast<long long>(args.trace.seed),
      static_cast<long long>(trace.min_prompt_tokens), static_cast<long long>(trace.max_prompt_tokens),
      static_cast<long long>(trace.min_new_tokens), static_cast<long long>(trace.max_new_tokens));
  std::fflush(stdout);
  ORCA_RETURN_IF_ERROR(Calibrate(*engine));
  const auto wall_start = std::chrono::steady_clock::now();
  ORCA_ASSIGN_OR_RETURN(const std::vector<loadgen::SweepCurve> curves,
                        RunInterleaved(options, MakeConfigs(specs, *engine), *engine));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  std::printf("%s\n", loadgen::FormatSweepTable(curves).c_str());
  const std::vector<loadgen::MeasuredCurve> measured = ToMeasured(curves, specs);
  std::printf("Throughput at equal median normalized latency\n\n%s",
              loadgen::FormatEqualLatencyTable(measured, multiples).c_str());
  std::printf("\npeak ratio: %.2fx   (sweep wall time %.0f s)\n",
              loadgen::PeakRatio(measured, loadgen::RatioTargets(measured, multiples)), wall_s);
  if (args.out.empty()) return absl::OkStatus();
  loadgen::SweepOutputOptions out;
  out.out_dir = args.out;
  out.target_multiples = multiples;
  out.gnuplot = args.gnuplot;
  out.title = absl::StrCat("Real CPU engine (", args.model.empty() ? "llama-" + args.preset : model,
                           "), virtual clock, prompt U(", trace.min_prompt_tokens, ",", trace.max_prompt_tokens,
                           "), output U(", trace.min_new_tokens, ",", trace.max_new_tokens, ")");
  ORCA_ASSIGN_OR_RETURN(const std::string text, loadgen::WriteSweepOutputs(measured, out));
  std::printf("%s", text.substr(text.rfind("wrote")).c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  orca::bench::Args a;
  orca::FlagSet flags("orca_engine_sched_bench",
                      "The paper's §6.2 trace on the real CPU engine: orca(max_bs) vs request-level, median\n"
                      "normalized latency vs throughput and the ratio at equal latency (virtual clock advanced by\n"
                      "measured Step() times).");
  flags.AddString("model", &a.model, "Checkpoint (default: a synthetic --preset model)");
  flags.AddString("preset", &a.preset, "Synthetic Llama shape: tiny (0.13M), 4m, 25m");
  flags.AddString("model-dir", &a.model_dir, "Where synthetic models are written");
  flags.AddString("dtype", &a.dtype, "Weights: auto, f32, bf16");
  flags.AddInt("threads", &a.threads, "Engine compute threads");
  flags.AddInt("n-slots", &a.n_slots, "KV slots (paper's n_slots)");
  flags.AddString("configs", &a.configs, "Curves: POLICY:MAX_BS,...");
  flags.AddString("rates", &a.rates, "Arrival rates (req/s), increasing");
  orca::loadgen::AddTraceFlags(orca::loadgen::TraceFlagScope::kPaper, &a.trace, &flags);
  flags.AddDouble("saturation-latency-ms", &a.saturation_ms,
                  "Stop a curve past this median normalized latency (0 = off)");
  flags.AddString("targets", &a.targets,
                  "Ratio targets as multiples of the baseline's lowest median normalized latency");
  flags.AddString("out", &a.out, "Write sweep.csv, fig10.gp and fig10.png here");
  flags.AddString("gnuplot", &a.gnuplot, "gnuplot binary (empty: no PNG)");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  orca::SetLogLevel(orca::LogLevel::kWarning);
  if (absl::Status s = orca::bench::Run(a); !s.ok()) {
    std::fprintf(stderr, "orca_engine_sched_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
