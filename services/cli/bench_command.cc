// `orca bench`: open-loop load against an OpenAI-compatible server (Orca's gateway,
// llama.cpp's llama-server, vLLM), and `orca bench sweep`: the paper's Fig. 10 over
// `orca serve` stacks started per (policy, max_bs). The logic lives in core/loadgen; this file
// is flags and wiring.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/flags.h"
#include "core/common/mapped_file.h"
#include "core/common/ports.h"
#include "core/common/status_macros.h"
#include "core/common/subprocess.h"
#include "core/loadgen/bench_run.h"
#include "core/loadgen/http_client.h"
#include "core/loadgen/load_trace.h"
#include "core/loadgen/serving_sweep.h"
#include "core/loadgen/trace_flags.h"
#include "services/cli/commands.h"
#include "sim/cost_model.h"
#include "sim/simulated_engine.h"
#include "sim/sweep.h"

namespace orca::cli {
namespace {

/// Flags shared by `orca bench` and `orca bench sweep`.
struct LoadFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string api_key;
  loadgen::TraceFlags trace;  ///< --trace, --num-requests, --seed, the trace lengths, --chat-*; --rate
  double max_duration_s = 600;
  std::string out;
  int max_concurrency = 0;
  double request_timeout_s = 0;
  bool logprobs = false;
  bool include_usage = true;
  bool ignore_eos = true;
  double temperature = -1;
  double top_p = -1;
  std::string prompt_source = "auto";
  int token_id_min = 1, token_id_max = 255;
  bool progress = true;
};

void AddLoadFlags(FlagSet& flags, LoadFlags& f, bool sweep) {
  if (!sweep) {
    flags.AddString("url", &f.url, "Base URL of the OpenAI-compatible server");
    flags.AddString("model", &f.model, "Model name sent in requests (default: the first of GET /v1/models)");
    flags.AddDouble("rate", &f.trace.options.arrival_rate,
                    "Arrival rate λ (requests/s, Poisson) of paper/homogeneous traces");
  }
  flags.AddString("api-key", &f.api_key, "Bearer token, if the server wants one");
  loadgen::AddTraceFlags(loadgen::TraceFlagScope::kAll, &f.trace, &flags);
  flags.AddDouble("max-duration", &f.max_duration_s, "Seconds after which a run stops by itself (per run)");
  flags.AddString("out", &f.out, "Directory for requests.csv and summary.json (sweep: everything)");
  flags.AddInt("max-concurrency", &f.max_concurrency, "Cap on requests in flight (0 = pure open loop)");
  flags.AddDouble("request-timeout", &f.request_timeout_s, "Per-request timeout in seconds (0 = none)");
  flags.AddBool("logprobs", &f.logprobs, "Ask for logprobs so every token arrives in its own counted chunk");
  flags.AddBool("include-usage", &f.include_usage, "stream_options.include_usage (exact token counts)");
  flags.AddBool("ignore-eos", &f.ignore_eos, "Generate exactly max_tokens (the paper's setup)");
  flags.AddDouble("temperature", &f.temperature, "Sampling temperature (negative = the server's default)");
  flags.AddDouble("top-p", &f.top_p, "Sampling top_p, in (0, 1] (negative = the server's default)");
  flags.AddString("prompt-source", &f.prompt_source,
                  "auto, tokenize (ids from POST /tokenize of built-in text) or random");
  flags.AddInt("token-id-min", &f.token_id_min,
               "random prompt ids: smallest (auto falls back to random ids only when this or --token-id-max is given)");
  flags.AddInt("token-id-max", &f.token_id_max, "random prompt ids: largest");
  flags.AddBool("progress", &f.progress, "Progress bar on stderr");
}

/// The run the flags describe. INVALID_ARGUMENT names a flag out of range (the int64 flags that
/// narrow to int32 fields, and the trace's counts and lengths).
absl::StatusOr<loadgen::BenchRunOptions> ToRunOptions(const LoadFlags& f, const FlagSet& flags) {
  const std::pair<const char*, int64_t> narrowed[] = {
      {"max-concurrency", f.max_concurrency}, {"token-id-min", f.token_id_min}, {"token-id-max", f.token_id_max}};
  for (const auto& [name, value] : narrowed) {
    if (value < 0 || value > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [0, 1073741824] (got ", value, ")"));
    }
  }
  if (!(f.max_duration_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-duration must be > 0 seconds (got ", f.max_duration_s, ")"));
  }
  if (f.request_timeout_s < 0) return absl::InvalidArgumentError("--request-timeout must be >= 0");
  loadgen::BenchRunOptions o;
  ORCA_ASSIGN_OR_RETURN(o.trace, loadgen::TraceOptionsFromFlags(f.trace));
  o.driver.base_url = f.url;
  o.driver.model = f.model;
  o.driver.api_key = f.api_key;
  o.driver.ignore_eos = f.ignore_eos;
  o.driver.include_usage = f.include_usage;
  o.driver.logprobs = f.logprobs;
  if (f.temperature >= 0) o.driver.temperature = f.temperature;
  if (f.top_p >= 0) o.driver.top_p = f.top_p;
  o.driver.max_duration = absl::Seconds(f.max_duration_s);
  o.driver.request_timeout = absl::Seconds(f.request_timeout_s);
  o.driver.max_concurrency = static_cast<int32_t>(f.max_concurrency);
  o.driver.show_progress = f.progress;
  o.prompts.mode = f.prompt_source;
  o.prompts.token_id_min = static_cast<int32_t>(f.token_id_min);
  o.prompts.token_id_max = static_cast<int32_t>(f.token_id_max);
  // Only a range the user chose is a fallback for auto (the defaults are special ids in Llama vocabularies).
  o.prompts.token_id_range_given = flags.IsSet("token-id-min") || flags.IsSet("token-id-max");
  o.prompts.seed = o.trace.seed;
  return o;
}

int Fail(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", command.c_str(), std::string(status.message()).c_str());
  return 1;
}

/// `orca serve` (or, for `llama-server:NP` curves, llama.cpp's server on the same model file)
/// as the stack of one sweep curve, on a free loopback port.
class OrcaServeStack : public loadgen::ServingStack {
 public:
  struct Options {
    std::string model;
    int64_t n_slots = 0;  ///< 0: orca serve's default
    int64_t threads = 0;
    std::vector<std::string> extra_args;
    std::string log_dir;
    int64_t ready_timeout_s = 300;
    std::string llama_server = "llama-server";  ///< binary for llama-server curves (PATH lookup)
    int64_t llama_server_slot_ctx = 1024;       ///< context tokens per llama-server slot
    std::vector<std::string> llama_server_args;
  };
  explicit OrcaServeStack(Options options) : options_(std::move(options)) {}
  ~OrcaServeStack() override { (void)Stop(); }

  absl::StatusOr<std::string> Start(const loadgen::SweepCurveSpec& spec) override {
    ORCA_ASSIGN_OR_RETURN(const int port, PickLoopbackPort());
    const std::string logs = options_.log_dir + "/" + loadgen::LabelToFileName(spec.label);
    std::error_code ec;
    std::filesystem::create_directories(logs, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat(logs, ": ", ec.message()));
    std::vector<std::string> args = {"serve",
                                     "--model=" + options_.model,
                                     "--port=" + std::to_string(port),
                                     "--grpc-port=0",
                                     absl::StrCat("--policy=", sched::PolicyKindName(spec.policy)),
                                     "--max-bs=" + std::to_string(spec.max_bs),
                                     "--log-dir=" + logs};
    if (spec.max_num_batched_tokens > 0) {
      args.push_back("--max-num-batched-tokens=" + std::to_string(spec.max_num_batched_tokens));
    }
    if (spec.max_prefill_slowdown > 0) {
      args.push_back(absl::StrCat("--max-prefill-slowdown=", spec.max_prefill_slowdown));
    }
    if (spec.long_prefill_token_threshold > 0) {
      args.push_back(absl::StrCat("--long-prefill-token-threshold=", spec.long_prefill_token_threshold));
    }
    if (spec.prefix_caching) args.push_back("--enable-prefix-caching");
    if (spec.faster_transformer) args.push_back("--faster-transformer");
    if (spec.microbatches > 0) args.push_back("--microbatches=" + std::to_string(spec.microbatches));
    if (options_.n_slots > 0) args.push_back("--n-slots=" + std::to_string(options_.n_slots));
    if (options_.threads > 0) args.push_back("--threads=" + std::to_string(options_.threads));
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
    const std::string url = absl::StrCat("http://127.0.0.1:", port);
    metrics_url_.clear();
    if (spec.server == "llama-server") return StartLlamaServer(spec, port, logs, url);
    // The log is appended to by every start (one per rate when interleaved): only what this
    // start writes names this stack's ports.
    const std::string log_path = logs + "/serve.log";
    const size_t log_offset = std::filesystem::exists(log_path) ? std::filesystem::file_size(log_path, ec) : 0;
    child_ = std::make_unique<Subprocess>("orca serve", ExecutableDir() + "/orca", args,
                                          Subprocess::Options{.log_path = logs + "/serve.log"});
    ORCA_RETURN_IF_ERROR(WaitReady("orca serve", url + "/ready", log_path));
    // The gateway can answer /ready a moment before orca serve prints its banner.
    const auto banner_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((metrics_url_ = SchedulerMetricsUrlFromBanner(log_path, ec ? 0 : log_offset)).empty() &&
           std::chrono::steady_clock::now() < banner_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (metrics_url_.empty()) {
      std::fprintf(stderr, "warning: no scheduler metrics URL in %s/serve.log; KV/preemption columns stay empty\n",
                   logs.c_str());
    }
    return url;
  }

  std::string scheduler_metrics_url() const override { return metrics_url_; }

  absl::Status Stop() override {
    if (!child_) return absl::OkStatus();
    const int status = child_->Stop(SIGTERM, 30000);
    child_.reset();
    // orca serve exits 0 on SIGTERM after stopping its processes. llama-server (c392e50) aborts
    // in its own teardown ("terminate called without an active exception", status 134) after
    // serving everything: a peer's exit is not this sweep's failure.
    if (status != 0 && child_name_ != "llama-server") {
      return absl::InternalError(absl::StrCat(child_name_, " exited with status ", status));
    }
    return absl::OkStatus();
  }

 private:
  /// Polls `ready_url` until it answers 200; the child's death or the timeout end it.
  absl::Status WaitReady(const std::string& name, const std::string& ready_url, const std::string& log_path) {
    child_name_ = name;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.ready_timeout_s);
    for (;;) {
      absl::StatusOr<loadgen::HttpResponse> ready = loadgen::HttpGet(ready_url, absl::Seconds(1));
      if (ready.ok() && ready->status == 200) return absl::OkStatus();
      if (!child_->Alive()) {
        return absl::UnavailableError(
            absl::StrCat(name, " exited (status ", child_->exit_status(), ") during startup; see ", log_path));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(name, " was not ready after ", options_.ready_timeout_s, " s; see ", log_path));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// llama.cpp's server on the same file: NP slots with continuous batching, each slot holding
  /// `llama_server_slot_ctx` tokens of context (llama-server splits -c among its slots), the
  /// sweep's thread count for generation and prompt processing. Ready when /health says 200.
  absl::StatusOr<std::string> StartLlamaServer(const loadgen::SweepCurveSpec& spec, int port, const std::string& logs,
                                               const std::string& url) {
    std::string binary = options_.llama_server;
    if (binary.find('/') == std::string::npos) {
      for (absl::string_view dir : absl::StrSplit(std::getenv("PATH") ? std::getenv("PATH") : "", ':')) {
        const std::string candidate = absl::StrCat(dir, "/", binary);
        if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) {
          binary = candidate;
          break;
        }
      }
    }
    if (access(binary.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("--llama-server: '", options_.llama_server,
                                              "' is not an executable (nor found on PATH); a llama-server:NP "
                                              "curve needs llama.cpp's server binary"));
    }
    std::vector<std::string> args = {"-m",
                                     options_.model,
                                     "--host",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port),
                                     "-np",
                                     std::to_string(spec.max_bs),
                                     "-cb",
                                     "-c",
                                     std::to_string(spec.max_bs * options_.llama_server_slot_ctx)};
    if (options_.threads > 0) {
      for (const char* flag : {"-t", "-tb"}) {
        args.push_back(flag);
        args.push_back(std::to_string(options_.threads));
      }
    }
    args.insert(args.end(), options_.llama_server_args.begin(), options_.llama_server_args.end());
    const std::string log_path = logs + "/llama-server.log";
    child_ = std::make_unique<Subprocess>("llama-server", binary, args, Subprocess::Options{.log_path = log_path});
    ORCA_RETURN_IF_ERROR(WaitReady("llama-server", url + "/health", log_path));
    // Its /health can say 200 while completions still answer 503 "Loading model": ready once a
    // one-token completion is served.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.ready_timeout_s);
    for (;;) {
      absl::StatusOr<loadgen::HttpResponse> r =
          loadgen::HttpPostJson(url + "/v1/completions", R"({"prompt": [1], "max_tokens": 1})", absl::Seconds(60));
      if (r.ok() && r->status == 200) return url;
      if (!child_->Alive() || std::chrono::steady_clock::now() > deadline) {
        return absl::UnavailableError(absl::StrCat("llama-server did not serve a one-token completion (",
                                                   r.ok() ? absl::StrCat("HTTP ", r->status) : r.status().ToString(),
                                                   "); see ", log_path));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  // orca serve's banner names every /metrics URL: "  scheduler  http://127.0.0.1:PORT/metrics".
  // Reads the log from `offset` on (what the current start wrote).
  static std::string SchedulerMetricsUrlFromBanner(const std::string& log_path, size_t offset) {
    absl::StatusOr<std::string> log = ReadFileToString(log_path);
    if (!log.ok() || log->size() < offset) return "";
    for (absl::string_view line : absl::StrSplit(absl::string_view(*log).substr(offset), '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!absl::ConsumePrefix(&line, "scheduler")) continue;
      line = absl::StripAsciiWhitespace(line);
      if (absl::StartsWith(line, "http://") && absl::EndsWith(line, "/metrics")) return std::string(line);
    }
    return "";
  }

  Options options_;
  std::unique_ptr<Subprocess> child_;
  std::string child_name_;
  std::string metrics_url_;
};

/// The checkpoint `orca serve` gets: --model, or the default synthetic model (written once).
absl::StatusOr<std::string> ResolveServeModel(const std::string& flag) {
  const std::string path = flag.empty() ? EnsureDefaultModel() : flag;
  if (path.empty()) return absl::FailedPreconditionError("cannot write the default model");
  if (!std::filesystem::exists(path)) return absl::NotFoundError("--model: " + path + " does not exist");
  return std::filesystem::absolute(path).string();
}

// `orca bench sweep`'s flags: the load flags and the sweep's own.
struct SweepFlags {
  LoadFlags load;
  std::string configs = "orca:8,orca:32,request-level:1,request-level:8";
  std::string rates = "0.5,1,2,4,8";
  std::string targets = "1.25,1.5,2,3,5";
  std::string gnuplot = "gnuplot", title;
  std::string simulate, cost_shape = "linear";
  double saturation_ms = 0;
  int64_t warmup = 2, n_slots = 0, threads = 0, ready_timeout = 300;
  bool interleave = true;
  std::vector<std::string> serve_args;
  std::string llama_server = "llama-server";
  int64_t llama_server_slot_ctx = 1024;
  std::vector<std::string> llama_server_args;
};

void AddSweepFlags(FlagSet& flags, SweepFlags& sw) {
  AddLoadFlags(flags, sw.load, /*sweep=*/true);
  flags.AddString("model", &sw.load.model, "Checkpoint for orca serve (default: the ~25M synthetic default model)");
  flags.AddString(
      "configs", &sw.configs,
      "Curves: POLICY:MAX_BS[:chunk=N][:slowdown=R][:cap=T][:prefix][:mbs=N],... (POLICY orca, paged, request-level or ft = "
      "request-level --faster-transformer, the paper's ft(max_bs, mbs); chunk=N: "
      "--max-num-batched-tokens N; slowdown=R: --max-prefill-slowdown R; cap=T: --long-prefill-token-threshold T; prefix: --enable-prefix-caching; "
      "mbs=N: --microbatches N)");
  flags.AddString("simulate", &sw.simulate,
                  "Instead of orca serve stacks: the simulated GPU engine of sim/ with this cost model (gpt3-13b, "
                  "gpt3-101b, gpt3-175b, gpt3-341b; A100-40GB; n_workers = its pipeline stages; virtual clock)");
  flags.AddString("cost-shape", &sw.cost_shape, "--simulate: linear or roofline (sim/cost_model.h)");
  flags.AddString("rates", &sw.rates, "Arrival rates λ (req/s), increasing");
  flags.AddDouble("saturation-latency-ms", &sw.saturation_ms,
                  "Stop a curve past this median normalized latency (ms/token; 0 = off)");
  flags.AddInt("warmup", &sw.warmup, "Unmeasured requests after each stack start");
  flags.AddBool("interleave", &sw.interleave,
                "Rate by rate, each config on a fresh stack (fair under drifting background load); "
                "--no-interleave: one stack per config");
  flags.AddInt("n-slots", &sw.n_slots, "orca serve --n-slots (0 = its default)");
  flags.AddInt("threads", &sw.threads, "orca serve --threads (0 = its default)");
  flags.AddStringList("serve-arg", &sw.serve_args,
                      "Extra argument for orca serve (repeatable), e.g. --serve-arg=--dtype=f32");
  flags.AddString("llama-server", &sw.llama_server,
                  "llama.cpp's server binary for llama-server:NP curves (a path, or a name looked up on PATH)");
  flags.AddInt("llama-server-slot-ctx", &sw.llama_server_slot_ctx,
               "Context tokens per llama-server slot (its -c is NP times this)");
  flags.AddStringList("llama-server-arg", &sw.llama_server_args,
                      "Extra argument for llama-server (repeatable), e.g. --llama-server-arg=-fa");
  flags.AddString("targets", &sw.targets,
                  "Ratio targets as multiples of the baseline's lowest median normalized latency");
  flags.AddString("gnuplot", &sw.gnuplot, "gnuplot binary (empty: no PNG)");
  flags.AddString("title", &sw.title, "Plot title");
  flags.AddInt("ready-timeout", &sw.ready_timeout, "Seconds to wait for each stack");
}

/// `orca bench sweep --simulate PRESET`: the same curves on the simulated GPU engine (sim/),
/// the real Scheduler deciding every iteration on a virtual clock. Paper and homogeneous
/// traces only (the simulator has no token contents).
int RunSimulatedSweep(const std::string& command, const SweepFlags& sw, const loadgen::LoadTraceOptions& trace,
                      const std::vector<double>& rates, const std::vector<double>& multiples,
                      const std::vector<loadgen::SweepCurveSpec>& specs) {
  const LoadFlags& f = sw.load;
  absl::StatusOr<sim::CostModel> cost = sim::CostModel::Preset(sw.simulate);
  if (!cost.ok()) return Fail(command, cost.status());
  const std::optional<sim::CostShape> shape = sim::ParseCostShape(sw.cost_shape);
  if (!shape.has_value()) {
    return Fail(command,
                absl::InvalidArgumentError("--cost-shape must be linear or roofline (got '" + sw.cost_shape + "')"));
  }
  cost->shape = *shape;
  sim::SweepOptions options;
  const loadgen::TraceKind kind = loadgen::ParseTraceKind(trace.trace);
  if (kind != loadgen::TraceKind::kPaper && kind != loadgen::TraceKind::kHomogeneous) {
    return Fail(command, absl::InvalidArgumentError("--simulate takes --trace paper or homogeneous (got '" +
                                                    trace.trace + "')"));
  }
  options.trace = loadgen::PoissonTraceOptions(trace);
  options.arrival_rates = rates;
  options.saturation_latency = sw.saturation_ms / 1e3;
  sched::SchedulerOptions base;
  base.n_slots = sw.n_slots > 0 ? sw.n_slots : cost->kv_slots;
  base.n_workers = cost->num_stages;
  base.max_context = 2048;  // GPT-3's: a padded FasterTransformer batch must fit it
  std::vector<loadgen::SweepConfig> configs;
  for (const loadgen::SweepCurveSpec& spec : specs)
    configs.push_back({spec.label, loadgen::ApplyCurveSpec(spec, base)});
  const sim::CostModel model = *cost;
  sim::RunnerFactory factory =
      [&model](const sched::SchedulerOptions& o) -> absl::StatusOr<std::unique_ptr<sim::StepRunner>> {
    sim::SimulatedEngineOptions engine;
    engine.cost = model;
    engine.n_slots = o.n_slots;
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<sim::SimulatedEngine> simulated, sim::SimulatedEngine::Create(engine));
    return std::unique_ptr<sim::StepRunner>(std::move(simulated));
  };
  std::cout << "# " << model.description << ", " << sim::CostShapeName(model.shape) << " cost, n_slots " << base.n_slots
            << ", n_workers " << base.n_workers << ", " << trace.num_requests << " requests per point, seed "
            << f.trace.seed << ", " << trace.trace << " trace\n\n";
  absl::StatusOr<std::vector<loadgen::SweepCurve>> curves = sim::RunSweep(options, configs, factory);
  if (!curves.ok()) return Fail(command, curves.status());
  std::cout << loadgen::FormatSweepTable(*curves) << "\n";
  loadgen::SweepOutputOptions out;
  out.out_dir = f.out;
  out.target_multiples = multiples;
  out.gnuplot = sw.gnuplot;
  out.title = sw.title.empty() ? absl::StrCat(model.description, ", ", sim::CostShapeName(model.shape), " cost, ",
                                              trace.trace, " trace")
                               : sw.title;
  absl::StatusOr<std::string> text =
      loadgen::WriteSweepOutputs(loadgen::FromSimCurves(*curves, specs, trace.num_requests), out);
  if (!text.ok()) return Fail(command, text.status());
  std::cout << *text;
  return 0;
}

int RunSweepCommand(int argc, char** argv) {
  const std::string command = "orca bench sweep";
  SweepFlags sw;
  sw.load.out = "bench-out/fig10";
  FlagSet flags(command,
                "The paper's Fig. 10 on this machine: for each --configs entry, starts `orca serve --policy P\n"
                "--max-bs B` on loopback, replays the trace at each of --rates, stops the stack; then writes\n"
                "sweep.csv, fig10.gp, fig10.png (gnuplot) and per-point CSV/JSON under --out, and prints the\n"
                "points and the throughput ratio at equal median normalized latency. --trace homogeneous gives\n"
                "Fig. 11; --simulate PRESET runs the same curves on the simulated A100 engine instead.");
  AddSweepFlags(flags, sw);
  const LoadFlags& f = sw.load;
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(command, s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  absl::StatusOr<loadgen::BenchRunOptions> run = ToRunOptions(f, flags);
  if (!run.ok()) return Fail(command, run.status());
  if (f.out.empty()) return Fail(command, absl::InvalidArgumentError("--out must not be empty"));
  loadgen::ServingSweepOptions options;
  options.run = *std::move(run);
  options.run.driver.model = "";  // the served name: discovered from each stack
  absl::StatusOr<std::vector<double>> rate_list = ParsePositiveNumberList(sw.rates, "rates");
  absl::StatusOr<std::vector<double>> target_list = ParsePositiveNumberList(sw.targets, "targets");
  absl::StatusOr<std::vector<loadgen::SweepCurveSpec>> curves = loadgen::ParseCurveSpecs(sw.configs);
  for (const absl::Status& s : {rate_list.status(), target_list.status(), curves.status()}) {
    if (!s.ok()) return Fail(command, s);
  }
  if (!sw.simulate.empty()) {
    for (const loadgen::SweepCurveSpec& spec : *curves) {
      if (!spec.server.empty()) {
        return Fail(command,
                    absl::InvalidArgumentError(absl::StrCat("--simulate runs Orca's scheduler on a cost model; ",
                                                            spec.label, " is a real server")));
      }
    }
    return RunSimulatedSweep(command, sw, options.run.trace, *rate_list, *target_list, *curves);
  }
  options.arrival_rates = *rate_list;
  options.curves = *curves;
  options.saturation_latency_s = sw.saturation_ms / 1e3;
  options.warmup_requests = static_cast<int32_t>(std::clamp<int64_t>(sw.warmup, 0, 1000));
  options.out_dir = f.out;
  options.interleave = sw.interleave;
  OrcaServeStack::Options stack_options;
  absl::StatusOr<std::string> model = ResolveServeModel(f.model);
  if (!model.ok()) return Fail(command, model.status());
  stack_options.model = *model;
  stack_options.n_slots = sw.n_slots;
  stack_options.threads = sw.threads;
  stack_options.extra_args = sw.serve_args;
  stack_options.log_dir = f.out + "/logs";
  stack_options.ready_timeout_s = sw.ready_timeout;
  stack_options.llama_server = sw.llama_server;
  stack_options.llama_server_slot_ctx = sw.llama_server_slot_ctx;
  stack_options.llama_server_args = sw.llama_server_args;
  if (sw.llama_server_slot_ctx < 1 || sw.llama_server_slot_ctx > (int64_t{1} << 24)) {
    return Fail(command, absl::InvalidArgumentError(absl::StrCat(
                             "--llama-server-slot-ctx must be in [1, 16777216] (got ", sw.llama_server_slot_ctx, ")")));
  }
  OrcaServeStack stack(stack_options);
  absl::StatusOr<std::vector<loadgen::MeasuredCurve>> measured = loadgen::RunServingSweep(options, stack);
  if (!measured.ok()) return Fail(command, measured.status());
  loadgen::SweepOutputOptions out;
  out.out_dir = f.out;
  out.target_multiples = *target_list;
  out.gnuplot = sw.gnuplot;
  out.title = sw.title.empty() ? absl::StrCat("Orca vs request-level, ", options.run.trace.trace, " trace, ",
                                              std::filesystem::path(stack_options.model).filename().string())
                               : sw.title;
  absl::StatusOr<std::string> text = loadgen::WriteSweepOutputs(*measured, out);
  if (!text.ok()) return Fail(command, text.status());
  std::cout << *text;
  return 0;
}

int RunLoad(int argc, char** argv) {
  const std::string command = "orca bench";
  LoadFlags f;
  std::string label;
  bool save_trace = false;
  FlagSet flags(command,
                "Open-loop load against an OpenAI-compatible server: POST /v1/completions, stream=true, one\n"
                "request per trace arrival. Measures TTFT, every inter-token gap, end-to-end and normalized\n"
                "latency (e2e / generated tokens). Stops after --num-requests or --max-duration.\n"
                "`orca bench sweep --help`: the paper's Fig. 10 over orca serve stacks.");
  AddLoadFlags(flags, f, /*sweep=*/false);
  flags.AddString("label", &label, "Name recorded in summary.json");
  flags.AddBool("save-trace", &save_trace, "Also write the trace as trace.jsonl into --out (replayable)");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(command, s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  absl::StatusOr<loadgen::BenchRunOptions> run = ToRunOptions(f, flags);
  if (!run.ok()) return Fail(command, run.status());
  const loadgen::BenchRunOptions& options = *run;
  if (save_trace && options.trace.chat_closed_loop) {
    return Fail(command, absl::InvalidArgumentError(
                             "--save-trace: a closed-loop chat run's prompts depend on the server's replies"));
  }
  absl::StatusOr<loadgen::BenchRunReport> report = loadgen::RunBenchmark(options, label);
  if (!report.ok()) return Fail(command, report.status());
  std::cout << loadgen::FormatReport(*report);
  if (!f.out.empty()) {
    if (absl::Status s = loadgen::WriteReport(*report, f.out); !s.ok()) return Fail(command, s);
    if (save_trace) {
      absl::StatusOr<std::vector<loadgen::TraceRequest>> trace = loadgen::MakeLoadTrace(options.trace);
      if (!trace.ok()) return Fail(command, trace.status());
      if (absl::Status s = WriteStringToFile(f.out + "/trace.jsonl", loadgen::TraceToJsonl(*trace)); !s.ok()) {
        return Fail(command, s);
      }
    }
    std::cout << "\nwrote " << f.out << "/requests.csv and " << f.out << "/summary.json\n";
  }
  // Failed requests are results, not a failure of the tool; a run with no success is.
  return report->summary.num_completed > 0 ? 0 : 1;
}

}  // namespace

int RunBench(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "sweep") {
    std::string name = std::string(argv[0]) + " sweep";
    argv[1] = name.data();
    return RunSweepCommand(argc - 1, argv + 1);
  }
  return RunLoad(argc, argv);
}

}  // namespace orca::cli
