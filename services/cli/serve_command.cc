// `orca serve`: the whole stack on one machine, as separate processes on
// loopback — P workers (one per pipeline stage, T tensor-parallel threads
// each), the scheduler (engine master) and the gateway (OpenAI API). Waits
// until the gateway is ready, prints an example request, and stops
// everything on Ctrl-C / SIGTERM (or when any process dies).

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/flags.h"
#include "core/common/model_name.h"
#include "core/common/ports.h"
#include "core/common/subprocess.h"
#include "services/cli/child_process.h"
#include "services/cli/commands.h"
#include "services/common/signals.h"

namespace orca::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int64_t port = 8000;
  int64_t grpc_port = 8001;
  int64_t pipeline_parallel = 1;
  int64_t tensor_parallel = 1;
  int64_t max_bs = 16;
  int64_t n_slots = 8192;
  int64_t n_workers = 0;
  std::string policy = "orca";
  std::string dtype = "auto";
  int64_t threads = 0;
  std::vector<std::string> api_keys;
  std::string log_dir;
  std::string log_level = "warning";
  int64_t ready_timeout_s = 300;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "orca serve: %s\n", msg.c_str());
  return 1;
}

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

int RunServe(int argc, char** argv) {
  ServeFlags f;
  FlagSet flags("orca serve",
                "Starts gateway, scheduler and worker(s) as separate processes on loopback and serves the\n"
                "OpenAI-compatible API. The default model is synthesized on first run.");
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
  flags.AddString("policy", &f.policy, "orca or request-level");
  flags.AddString("dtype", &f.dtype, "Weight dtype: auto, f32, bf16");
  flags.AddInt("threads", &f.threads, "Compute threads per worker (0 = cores / stages)");
  flags.AddStringList("api-keys", &f.api_keys, "Accepted API keys (empty = no auth)");
  flags.AddString("log-dir", &f.log_dir, "Write each process's log to a file here (default: this terminal)");
  flags.AddString("log-level", &f.log_level, "Log level of the services");
  flags.AddInt("ready-timeout", &f.ready_timeout_s, "Seconds to wait for the stack to become ready");
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(std::string(s.message()));
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (f.pipeline_parallel < 1 || f.tensor_parallel < 1)
    return Fail("--pipeline-parallel and --tensor-parallel must be >= 1");
  if (f.model.empty()) {
    f.model = EnsureDefaultModel();
    if (f.model.empty()) return 1;
  }
  if (!std::filesystem::exists(f.model)) return Fail("--model: " + f.model + " does not exist");
  f.model = std::filesystem::absolute(f.model).string();
  // One name for every service: the gateway answers `"model"` with it and all label metrics with it.
  const std::string name = f.served_model_name.empty() ? ServedModelNameFromPath(f.model) : f.served_model_name;
  if (!f.log_dir.empty()) std::filesystem::create_directories(f.log_dir);
  auto log_path = [&](const std::string& name) {
    return f.log_dir.empty() ? std::string() : f.log_dir + "/" + name + ".log";
  };
  const std::string bin = ExecutableDir();
  services::BlockTerminationSignals();

  const int P = static_cast<int>(f.pipeline_parallel);
  // Every internal port is picked up front, all distinct (see core/common/ports.h):
  // the scheduler's two, then each worker's gRPC, HTTP and data-plane ports.
  std::vector<int> ports;
  for (int i = 0; i < 2 + 3 * P; ++i) {
    auto port = PickLoopbackPort();
    if (!port.ok()) return Fail(std::string(port.status().message()));
    ports.push_back(*port);
  }
  const int sched_grpc = ports[0], sched_http = ports[1];
  std::vector<int> worker_grpc, worker_http, worker_data_plane;
  std::vector<std::string> worker_addrs;
  for (int s = 0; s < P; ++s) {
    worker_grpc.push_back(ports[2 + 3 * s]);
    worker_http.push_back(ports[3 + 3 * s]);
    worker_data_plane.push_back(ports[4 + 3 * s]);
    worker_addrs.push_back(Addr(worker_grpc.back()));
  }
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = f.threads > 0 ? f.threads : std::max<int64_t>(f.tensor_parallel, cores / P);
  std::vector<std::unique_ptr<Subprocess>> children;
  for (int s = 0; s < P; ++s) {
    std::vector<std::string> args = {"--model=" + f.model,
                                     "--listen=" + worker_addrs[s],
                                     "--http-listen=" + Addr(worker_http[s]),
                                     "--data-plane-port=" + std::to_string(worker_data_plane[s]),
                                     "--stage=" + std::to_string(s),
                                     "--num-stages=" + std::to_string(P),
                                     "--tensor-parallel=" + std::to_string(f.tensor_parallel),
                                     "--workers=" + absl::StrJoin(worker_addrs, ","),
                                     "--scheduler=" + Addr(sched_grpc),
                                     "--n-slots=" + std::to_string(f.n_slots),
                                     "--dtype=" + f.dtype,
                                     "--threads=" + std::to_string(threads),
                                     "--log-level=" + f.log_level};
    args.push_back("--model-name=" + name);
    children.push_back(
        std::make_unique<Subprocess>("worker-" + std::to_string(s), bin + "/orca-worker", args,
                                     Subprocess::Options{.log_path = log_path("worker-" + std::to_string(s))}));
  }
  std::vector<std::string> sargs = {"--listen=" + Addr(sched_grpc),
                                    "--http-listen=" + Addr(sched_http),
                                    "--workers=" + absl::StrJoin(worker_addrs, ","),
                                    "--max-bs=" + std::to_string(f.max_bs),
                                    "--n-slots=" + std::to_string(f.n_slots),
                                    "--policy=" + f.policy,
                                    "--log-level=" + f.log_level};
  if (f.n_workers > 0) sargs.push_back("--n-workers=" + std::to_string(f.n_workers));
  sargs.push_back("--model-name=" + name);
  children.push_back(std::make_unique<Subprocess>("scheduler", bin + "/orca-scheduler", sargs,
                                                  Subprocess::Options{.log_path = log_path("scheduler")}));
  std::vector<std::string> gargs = {"--listen=" + f.host + ":" + std::to_string(f.port),
                                    "--schedulers=" + Addr(sched_grpc), "--model=" + f.model,
                                    "--log-level=" + f.log_level};
  gargs.push_back(f.grpc_port > 0 ? "--grpc-listen=" + f.host + ":" + std::to_string(f.grpc_port) : "--grpc-listen=");
  gargs.push_back("--served-model-name=" + name);
  if (!f.api_keys.empty()) gargs.push_back("--api-keys=" + absl::StrJoin(f.api_keys, ","));
  children.push_back(std::make_unique<Subprocess>("gateway", bin + "/orca-gateway", gargs,
                                                  Subprocess::Options{.log_path = log_path("gateway")}));

  auto stop_all = [&](int code) {
    // Front to back: stop taking requests first, then drain the engine.
    for (auto it = children.rbegin(); it != children.rend(); ++it) (*it)->Stop(SIGTERM, 10000);
    return code;
  };
  auto dead_child = [&]() -> Subprocess* {
    for (auto& c : children)
      if (!c->Alive()) return c.get();
    return nullptr;
  };

  std::fprintf(stderr, "orca serve: starting %d worker(s) (tp %lld), scheduler and gateway for %s\n", P,
               static_cast<long long>(f.tensor_parallel), f.model.c_str());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.ready_timeout_s);
  const std::string probe_host = f.host == "0.0.0.0" ? "127.0.0.1" : f.host;
  while (HttpStatus(probe_host, static_cast<int>(f.port), "/ready") != 200) {
    if (Subprocess* c = dead_child()) {
      Fail(absl::StrCat(c->name(), " exited (status ", c->exit_status(), ") during startup",
                        f.log_dir.empty() ? "" : "; see " + f.log_dir));
      return stop_all(1);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      Fail("the stack did not become ready in time");
      return stop_all(1);
    }
    if (services::WaitForTerminationSignal(std::chrono::milliseconds(100)) != 0) return stop_all(130);
  }
  const std::string url = absl::StrCat("http://", probe_host, ":", f.port);
  // Each process serves its own /metrics (as each pod does in a cluster): HTTP and request metrics at the
  // gateway, the vLLM-named engine metrics (orca:num_requests_running, …) at the scheduler, per-stage ones at each
  // worker.
  std::string metrics =
      absl::StrCat("  gateway    ", url, "/metrics\n  scheduler  http://", Addr(sched_http), "/metrics\n");
  for (int s = 0; s < P; ++s)
    absl::StrAppend(&metrics, "  worker-", s, "   http://", Addr(worker_http[s]), "/metrics\n");
  std::printf(
      "Orca is ready: %s (OpenAI API), model \"%s\"\n\nMetrics (Prometheus text):\n%s\nTry:\n  curl %s/v1/completions "
      "-H "
      "'Content-Type: application/json' \\\n    -d '{\"model\": \"%s\", \"prompt\": \"Once upon a time\", "
      "\"max_tokens\": "
      "32}'\n\nCtrl-C stops everything.\n",
      url.c_str(), name.c_str(), metrics.c_str(), url.c_str(), name.c_str());
  std::fflush(stdout);
  while (true) {
    if (const int sig = services::WaitForTerminationSignal(std::chrono::milliseconds(200)); sig != 0) {
      std::fprintf(stderr, "\norca serve: stopping\n");
      return stop_all(0);
    }
    if (Subprocess* c = dead_child()) {
      std::fprintf(stderr, "orca serve: %s exited (status %d); stopping the stack\n", c->name().c_str(),
                   c->exit_status());
      return stop_all(1);
    }
  }
}

}  // namespace orca::cli
