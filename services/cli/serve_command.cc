// `orca serve`: the whole stack on one machine, as separate processes on
// loopback — P workers (one per pipeline stage, T tensor-parallel threads
// each), the scheduler (engine master) and the gateway (OpenAI API). Waits
// until the gateway is ready, prints an example request, and stops
// everything on Ctrl-C / SIGTERM (or when any process dies).

#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/model_name.h"
#include "core/common/subprocess.h"
#include "core/loadgen/http_client.h"
#include "services/cli/commands.h"
#include "services/cli/local_stack_commands.h"
#include "services/common/signals.h"

namespace orca::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 8000;
  int grpc_port = 8001;
  int pipeline_parallel = 1;
  int tensor_parallel = 1;
  int max_bs = 16;
  int64_t n_slots = 8192;
  int n_workers = 0;
  std::string policy = "orca";
  int microbatches = 0;
  bool faster_transformer = false;
  int64_t kv_block_size = 16;
  int64_t kv_local_slots = 0;
  bool swa_full = false;
  int64_t max_num_batched_tokens = 0;
  double max_prefill_slowdown = 0;
  int64_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = false;
  std::string scheduling_order = "fcfs";
  int64_t priority_aging_ms = 1000;
  std::string dtype = "auto";
  std::string device = "cpu";
  bool cuda_graphs = false;
  int threads = 0;
  std::vector<std::string> api_keys;
  std::string chat_template;
  std::string tool_call_parser;
  std::string log_dir;
  std::string log_level = "warning";
  int64_t ready_timeout_s = 300;
  int64_t drain_grace_s = 30;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "orca serve: %s\n", msg.c_str());
  return 1;
}

void AddServeFlags(FlagSet& flags, ServeFlags& f) {
  flags.AddString("model", &f.model, "HF checkpoint directory or .gguf file (default: synthetic ~25M Llama)");
  flags.AddString(
      "served-model-name", &f.served_model_name,
      "The model name clients send and metrics are labelled with (default: basename of --model without .gguf)");
  flags.AddString("host", &f.host, "Address the gateway listens on");
  flags.AddInt("port", &f.port, "Gateway HTTP port (OpenAI API, /health, /ready, /metrics)");
  flags.AddInt("grpc-port", &f.grpc_port, "Gateway gRPC port (orca.v1.Generation); 0 disables");
  flags.AddInt("pipeline-parallel", &f.pipeline_parallel,
               "Pipeline stages: worker processes (paper: inter-layer partitions)");
  flags.AddInt("tensor-parallel", &f.tensor_parallel, "Tensor-parallel shards per stage (threads; paper: intra-layer)");
  flags.AddInt("max-bs", &f.max_bs, "Paper's max_bs: requests per iteration");
  flags.AddInt("n-slots", &f.n_slots, "Paper's n_slots: KV slots (tokens) per stage");
  flags.AddInt("n-workers", &f.n_workers, "Paper's n_workers: batches in flight (0 = number of stages)");
  flags.AddString("policy", &f.policy,
                  "orca (Algorithm 1), paged (paged KV: on-demand blocks, preemption) or request-level (baseline)");
  flags.AddInt("microbatches", &f.microbatches,
               "request-level: microbatches per static batch, the paper's mbs in ft(max_bs, mbs) (0 = --n-workers)");
  flags.AddBool("faster-transformer", &f.faster_transformer,
                "request-level: FasterTransformer's engine behaviour (prompts padded to the batch's longest and "
                "computed, finished members keep computing until the whole batch ends)");
  flags.AddInt("kv-block-size", &f.kv_block_size, "KV block size (tokens), the same for scheduler and workers");
  flags.AddInt("kv-local-slots", &f.kv_local_slots,
               "KV slots per stage of the model's sliding-window layers (Gemma 2/3, Mistral, StarCoder2), a pool of "
               "their own where a request holds only its window's blocks; 0 = as many as --n-slots");
  flags.AddBool("swa-full", &f.swa_full,
                "Sliding-window layers keep every position in the main KV pool (llama.cpp's --swa-full); on with "
                "--enable-prefix-caching");
  flags.AddInt("max-num-batched-tokens", &f.max_num_batched_tokens,
               "Chunked prefill: tokens per iteration, decodes first (0 = off; else >= --max-bs)");
  flags.AddDouble("max-prefill-slowdown", &f.max_prefill_slowdown,
                  "Chunked prefill with a time budget: while requests decode, an iteration with prompt chunks may take "
                  "at most this many times its decodes alone (learned online; 0 = off, else in (1, 1000])");
  flags.AddInt("long-prefill-token-threshold", &f.long_prefill_token_threshold,
               "Chunked prefill: at most this many prompt tokens of one request per iteration, so that a long prompt "
               "leaves room for the requests queued behind it (0 = off)");
  flags.AddBool("enable-prefix-caching", &f.enable_prefix_caching, "Reuse cached KV blocks of shared prompt prefixes");
  flags.AddString("scheduling-order", &f.scheduling_order,
                  "fcfs or priority (the request's \"priority\" field, lower first)");
  flags.AddInt("priority-aging-ms", &f.priority_aging_ms,
               "Priority order: one level gained per this much waiting (bounds waiting; 0 = strict)");
  flags.AddString("dtype", &f.dtype, "Weight dtype: auto, f32, bf16");
  flags.AddString("device", &f.device, "Workers' kernel backend: cpu or cuda (tensor-parallel shard r uses GPU r)");
  flags.AddBool("cuda-graphs", &f.cuda_graphs,
                "With --device cuda: workers record each decode batch shape once as a CUDA Graph and replay it "
                "(pipeline and tensor parallelism 1 only)");
  flags.AddInt("threads", &f.threads, "Compute threads per worker (0 = cores / stages)");
  flags.AddStringList("api-keys", &f.api_keys, "Accepted API keys (empty = no auth)");
  flags.AddString("chat-template", &f.chat_template,
                  "Gateway --chat-template: a template file or a built-in (chatml, llama2, llama3) overriding the "
                  "model's");
  flags.AddString("tool-call-parser", &f.tool_call_parser,
                  "Gateway --tool-call-parser: llama3_json, hermes, mistral or auto (default: detected from the chat "
                  "template)");
  flags.AddString("log-dir", &f.log_dir, "Write each process's log to a file here (default: this terminal)");
  flags.AddString("log-level", &f.log_level, "Log level of the services");
  flags.AddInt("ready-timeout", &f.ready_timeout_s, "Seconds to wait for the stack to become ready");
  flags.AddInt("drain-grace-seconds", &f.drain_grace_s,
               "On Ctrl-C / SIGTERM: seconds the gateway lets in-flight requests finish before ending them with "
               "an error event (a second signal ends it now)");
}

/// Checks the flags and settles the model: the default one when none is given, an absolute path.
absl::Status ResolveServeFlags(ServeFlags& f) {
  if (f.pipeline_parallel < 1 || f.tensor_parallel < 1) {
    return absl::InvalidArgumentError("--pipeline-parallel and --tensor-parallel must be >= 1");
  }
  if (f.kv_local_slots < 0)
    return absl::InvalidArgumentError(absl::StrCat("--kv-local-slots must be >= 0 (got ", f.kv_local_slots, ")"));
  if (f.kv_block_size < 1 || f.kv_block_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-block-size must be in [1, 4096] (got ", f.kv_block_size, ")"));
  }
  if (f.max_num_batched_tokens < 0 || f.max_num_batched_tokens > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-num-batched-tokens must be in [0, 1073741824] (got ", f.max_num_batched_tokens, ")"));
  }
  if (!(f.max_prefill_slowdown == 0 || (f.max_prefill_slowdown > 1 && f.max_prefill_slowdown <= 1000))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-prefill-slowdown must be 0 (off) or in (1, 1000] (got ", f.max_prefill_slowdown, ")"));
  }
  if (f.long_prefill_token_threshold < 0 || f.long_prefill_token_threshold > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--long-prefill-token-threshold must be in [0, 1073741824] (got ",
                                                   f.long_prefill_token_threshold, ")"));
  }
  if (f.microbatches < 0 || f.microbatches > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("--microbatches must be in [0, 4096] (got ", f.microbatches, ")"));
  }
  if ((f.microbatches > 0 || f.faster_transformer) && f.policy != "request-level" && f.policy != "request_level") {
    return absl::InvalidArgumentError("--microbatches and --faster-transformer need --policy request-level (got '" +
                                      f.policy + "')");
  }
  if (f.device != "cpu" && f.device != "cuda") {
    return absl::InvalidArgumentError("--device must be cpu or cuda, got '" + f.device + "'");
  }
  if (f.cuda_graphs && f.device != "cuda")
    return absl::InvalidArgumentError("--cuda-graphs needs --device cuda, got '" + f.device + "'");
  if (f.cuda_graphs && (f.pipeline_parallel > 1 || f.tensor_parallel > 1))
    return absl::InvalidArgumentError(absl::StrCat(
        "--cuda-graphs is implemented for --pipeline-parallel 1 and --tensor-parallel 1 (the capture does not hold "
        "NCCL collectives or pipeline links yet); got ",
        f.pipeline_parallel, " and ", f.tensor_parallel));
  if (f.model.empty()) {
    f.model = EnsureDefaultModel();
    if (f.model.empty()) return absl::FailedPreconditionError("cannot write the default model");
  }
  if (!std::filesystem::exists(f.model)) return absl::NotFoundError("--model: " + f.model + " does not exist");
  f.model = std::filesystem::absolute(f.model).string();
  // One name for every service: the gateway answers `"model"` with it and all label metrics with it.
  if (f.served_model_name.empty()) f.served_model_name = ServedModelNameFromPath(f.model);
  return absl::OkStatus();
}

LocalStackCommands::Options StackOptions(const ServeFlags& f) {
  LocalStackCommands::Options o;
  o.model = f.model;
  o.served_model_name = f.served_model_name;
  o.num_stages = static_cast<int>(f.pipeline_parallel);
  o.tensor_parallel = static_cast<int>(f.tensor_parallel);
  o.n_slots = f.n_slots;
  o.max_bs = static_cast<int>(f.max_bs);
  o.n_workers = static_cast<int>(f.n_workers);
  o.policy = f.policy;
  o.microbatches = static_cast<int>(f.microbatches);
  o.faster_transformer = f.faster_transformer;
  o.kv_block_size = static_cast<int>(f.kv_block_size);
  o.kv_local_slots = f.kv_local_slots;
  o.swa_full = f.swa_full;
  o.max_num_batched_tokens = static_cast<int>(f.max_num_batched_tokens);
  o.max_prefill_slowdown = f.max_prefill_slowdown;
  o.long_prefill_token_threshold = static_cast<int32_t>(f.long_prefill_token_threshold);
  o.enable_prefix_caching = f.enable_prefix_caching;
  o.scheduling_order = f.scheduling_order;
  o.priority_aging_ms = f.priority_aging_ms;
  o.dtype = f.dtype;
  o.device = f.device;
  o.cuda_graphs = f.cuda_graphs;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  o.worker_threads = f.threads > 0 ? f.threads : std::max<int64_t>(f.tensor_parallel, cores / f.pipeline_parallel);
  o.log_level = f.log_level;
  o.gateway_listen = absl::StrCat(f.host, ":", f.port);
  o.gateway_grpc_listen = f.grpc_port > 0 ? absl::StrCat(f.host, ":", f.grpc_port) : "";
  o.api_keys = f.api_keys;
  o.chat_template = f.chat_template;
  o.tool_call_parser = f.tool_call_parser;
  o.gateway_drain_grace_seconds = static_cast<double>(f.drain_grace_s);
  return o;
}

/// The run's private directory: made by mkdtemp (mode 0700) under $XDG_RUNTIME_DIR, or else the
/// temporary directory, and removed when `orca serve` returns. It holds the run's internal token
/// (0600), which every process reads from there: a token on a command line would be visible to
/// every user of the machine.
class RunDirectory {
 public:
  static absl::StatusOr<std::unique_ptr<RunDirectory>> Create() {
    std::error_code ec;
    std::string base;
    if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
        runtime != nullptr && std::filesystem::is_directory(runtime, ec))
      base = runtime;
    if (base.empty()) base = std::filesystem::temp_directory_path(ec).string();
    if (base.empty()) base = "/tmp";
    std::string path = base + "/orca-serve-XXXXXX";
    if (::mkdtemp(path.data()) == nullptr)
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create a run directory under ", base, ": ", std::strerror(errno)));
    return std::unique_ptr<RunDirectory>(new RunDirectory(std::move(path)));
  }
  ~RunDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit RunDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

/// The stack's processes, in start order (workers, scheduler, gateway); stopped front to back.
class ServeStack {
 public:
  ServeStack(const LocalStackCommands& commands, int num_stages, const std::string& log_dir, int64_t drain_grace_s)
      : drain_grace_s_(drain_grace_s) {
    auto log_path = [&](const std::string& name) {
      return log_dir.empty() ? std::string() : log_dir + "/" + name + ".log";
    };
    const std::string bin = ExecutableDir();
    for (int s = 0; s < num_stages; ++s) {
      const std::string name = absl::StrCat("worker-", s);
      Start(name, bin + "/orca-worker", commands.WorkerArgs(s), log_path(name));
    }
    Start("scheduler", bin + "/orca-scheduler", commands.SchedulerArgs(), log_path("scheduler"));
    Start("gateway", bin + "/orca-gateway", commands.GatewayArgs(), log_path("gateway"));
  }

  /// Front to back: stop taking requests first, then drain the engine. Returns `code`.
  /// The gateway drains first: in-flight requests finish within its grace period (a second
  /// Ctrl-C ends it now); then the engine stops.
  int StopAll(int code) {
    Subprocess& gateway = *children_.back();
    if (gateway.Alive()) {
      kill(gateway.pid(), SIGTERM);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(drain_grace_s_ + 15);
      while (gateway.Alive() && std::chrono::steady_clock::now() < give_up) {
        if (services::WaitForTerminationSignal(std::chrono::milliseconds(100)) != 0) {
          std::fprintf(stderr, "orca serve: ending the drain now\n");
          kill(gateway.pid(), SIGTERM);
        }
      }
    }
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) (*it)->Stop(SIGTERM, 10000);
    return code;
  }
  /// The first process that has exited, or nullptr.
  Subprocess* FirstExited() {
    for (auto& c : children_)
      if (!c->Alive()) return c.get();
    return nullptr;
  }

 private:
  void Start(const std::string& name, const std::string& path, const std::vector<std::string>& args,
             const std::string& log_path) {
    children_.push_back(std::make_unique<Subprocess>(name, path, args, Subprocess::Options{.log_path = log_path}));
  }

  int64_t drain_grace_s_;
  std::vector<std::unique_ptr<Subprocess>> children_;
};

/// FailedPrecondition naming `flag` and the port when a listener holds `host`:`port` already (another
/// `orca serve`?). Checked before anything starts: the gateway would fail to bind it, while the readiness
/// probe reached the other stack's gateway and reported this one ready.
absl::Status CheckPortFree(const std::string& host, int port, const char* flag) {
  if (port == 0) return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  // An unresolvable --host is the gateway's to report.
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return absl::OkStatus();
  absl::Status status;
  for (addrinfo* a = found; a != nullptr && status.ok(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // As the gateway binds: SO_REUSEADDR admits a port in TIME_WAIT, never one that is listened on.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) {
      status = absl::FailedPreconditionError(
          absl::StrCat(flag, " ", port, ": ", host, ":", port, " is in use by another process (another orca serve?)"));
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return status;
}

/// The last non-empty line of the log at `path` ("" if none): why a process stopped.
std::string LastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.size() > 400 ? last.substr(0, 400) + "..." : last;
}

bool IsReady(const std::string& url) {
  absl::StatusOr<loadgen::HttpResponse> ready = loadgen::HttpGet(url + "/ready", absl::Seconds(1));
  return ready.ok() && ready->status == 200;
}

/// Polls the gateway's /ready: 0 once ready, else the exit code to stop with (a process died,
/// the timeout passed, or a termination signal came).
int AwaitReady(ServeStack& stack, const std::string& url, const ServeFlags& f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.ready_timeout_s);
  while (!IsReady(url)) {
    if (Subprocess* c = stack.FirstExited()) {
      const std::string why = f.log_dir.empty() ? "" : LastLogLine(f.log_dir + "/" + c->name() + ".log");
      return Fail(absl::StrCat(c->name(), " exited (status ", c->exit_status(), ") during startup",
                               why.empty() ? "" : ": " + why, f.log_dir.empty() ? "" : "; see " + f.log_dir));
    }
    if (std::chrono::steady_clock::now() > deadline) return Fail("the stack did not become ready in time");
    if (services::WaitForTerminationSignal(std::chrono::milliseconds(100)) != 0) return 130;
  }
  return 0;
}

void PrintBanner(const std::string& url, const std::string& name, const LocalStackCommands& commands) {
  // Each process serves its own /metrics (as each pod does in a cluster): HTTP and request metrics at the
  // gateway, the vLLM-named engine metrics (orca:num_requests_running, …) at the scheduler, per-stage ones at each
  // worker.
  std::string metrics = absl::StrCat("  gateway    ", url, "/metrics\n  scheduler  http://",
                                     LoopbackAddress(commands.ports().scheduler_http), "/metrics\n");
  for (size_t s = 0; s < commands.ports().worker_http.size(); ++s)
    absl::StrAppend(&metrics, "  worker-", s, "   http://", LoopbackAddress(commands.ports().worker_http[s]),
                    "/metrics\n");
  std::printf(
      "Orca is ready: %s (OpenAI API), model \"%s\"\n\nMetrics (Prometheus text):\n%s\nTry:\n  curl %s/v1/completions "
      "-H "
      "'Content-Type: application/json' \\\n    -d '{\"model\": \"%s\", \"prompt\": \"Once upon a time\", "
      "\"max_tokens\": "
      "32}'\n\nCtrl-C stops everything.\n",
      url.c_str(), name.c_str(), metrics.c_str(), url.c_str(), name.c_str());
  std::fflush(stdout);
}

/// Serves until a termination signal (exit 0) or until a process dies (exit 1).
int ServeUntilStopped(ServeStack& stack) {
  while (true) {
    if (const int sig = services::WaitForTerminationSignal(std::chrono::milliseconds(200)); sig != 0) {
      std::fprintf(stderr, "\norca serve: stopping\n");
      return stack.StopAll(0);
    }
    if (Subprocess* c = stack.FirstExited()) {
      std::fprintf(stderr, "orca serve: %s exited (status %d); stopping the stack\n", c->name().c_str(),
                   c->exit_status());
      return stack.StopAll(1);
    }
  }
}

}  // namespace

int RunServe(int argc, char** argv) {
  ServeFlags f;
  FlagSet flags("orca serve",
                "Starts gateway, scheduler and worker(s) as separate processes on loopback and serves the\n"
                "OpenAI-compatible API. The default model is synthesized on first run.");
  AddServeFlags(flags, f);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(std::string(s.message()));
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (absl::Status s = ResolveServeFlags(f); !s.ok()) return Fail(std::string(s.message()));
  if (!f.log_dir.empty()) std::filesystem::create_directories(f.log_dir);
  for (const auto& [flag, port] : {std::pair{"--port", f.port}, std::pair{"--grpc-port", f.grpc_port}}) {
    if (absl::Status s = CheckPortFree(f.host, static_cast<int>(port), flag); !s.ok())
      return Fail(std::string(s.message()));
  }
  services::BlockTerminationSignals();
  // Every internal port is picked up front, all distinct (see core/common/ports.h).
  absl::StatusOr<LocalStackPorts> ports = LocalStackPorts::Pick(static_cast<int>(f.pipeline_parallel));
  if (!ports.ok()) return Fail(std::string(ports.status().message()));
  // A fresh internal token per run: the stack's internal ports take calls only from its own processes.
  absl::StatusOr<std::unique_ptr<RunDirectory>> run_dir = RunDirectory::Create();
  if (!run_dir.ok()) return Fail(std::string(run_dir.status().message()));
  absl::StatusOr<std::string> token_file = CreateInternalTokenFile((*run_dir)->path());
  if (!token_file.ok()) return Fail(std::string(token_file.status().message()));
  LocalStackCommands::Options stack_options = StackOptions(f);
  stack_options.internal_token_file = *token_file;
  const LocalStackCommands commands(std::move(stack_options), *std::move(ports));

  ServeStack stack(commands, static_cast<int>(f.pipeline_parallel), f.log_dir, f.drain_grace_s);
  std::fprintf(stderr, "orca serve: starting %lld worker(s) (tp %lld), scheduler and gateway for %s\n",
               static_cast<long long>(f.pipeline_parallel), static_cast<long long>(f.tensor_parallel), f.model.c_str());
  const std::string probe_host = f.host == "0.0.0.0" ? "127.0.0.1" : f.host;
  const std::string url = absl::StrCat("http://", probe_host, ":", f.port);
  if (const int code = AwaitReady(stack, url, f); code != 0) return stack.StopAll(code);
  PrintBanner(url, f.served_model_name, commands);
  return ServeUntilStopped(stack);
}

}  // namespace orca::cli
