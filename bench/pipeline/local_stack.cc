#include "bench/pipeline/local_stack.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/ports.h"
#include "core/common/status_macros.h"
#include "core/loadgen/http_client.h"
#include "services/cli/local_stack_commands.h"

namespace orca::bench {
namespace {

constexpr int kStopGraceMs = 20000;

}  // namespace

absl::Status LocalStack::Spawn(const std::string& name, const std::string& binary, const std::vector<std::string>& args,
                               const std::string& log_dir) {
  Process p;
  p.log_path = absl::StrCat(log_dir, "/", name, ".log");
  p.process = std::make_unique<Subprocess>(name, binary, args,
                                           Subprocess::Options{.log_path = p.log_path, .truncate_log = true});
  if (!p.process->started()) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  processes_.push_back(std::move(p));
  return absl::OkStatus();
}

const LocalStack::Process* LocalStack::FirstExited() {
  for (Process& p : processes_)
    if (p.process->started() && p.process->exit_status() == -1 && !p.process->Alive()) return &p;
  return nullptr;
}

absl::StatusOr<std::unique_ptr<LocalStack>> LocalStack::Start(const LocalStackOptions& options) {
  if (options.num_stages < 1) return absl::InvalidArgumentError("num_stages must be >= 1");
  std::error_code ec;
  std::filesystem::create_directories(options.log_dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(options.log_dir, ": ", ec.message()));
  std::unique_ptr<LocalStack> stack(new LocalStack());
  ORCA_ASSIGN_OR_RETURN(cli::LocalStackPorts ports, cli::LocalStackPorts::Pick(options.num_stages));
  ORCA_ASSIGN_OR_RETURN(stack->gateway_http_port_, PickLoopbackPort());
  stack->worker_http_ports_ = ports.worker_http;
  stack->scheduler_http_port_ = ports.scheduler_http;
  cli::LocalStackCommands::Options c;
  c.model = options.model;
  c.num_stages = options.num_stages;
  c.n_slots = options.n_slots;
  c.max_bs = options.max_bs;
  c.n_workers = options.n_workers;
  c.policy = options.policy;
  c.worker_threads = options.threads_per_worker;
  c.log_level = "warning";
  c.gateway_listen = cli::LoopbackAddress(stack->gateway_http_port_);
  // The internal token of this run (a log directory reused by an earlier run holds its old one).
  std::filesystem::remove(options.log_dir + "/internal-token", ec);
  ORCA_ASSIGN_OR_RETURN(c.internal_token_file, cli::CreateInternalTokenFile(options.log_dir));
  const cli::LocalStackCommands commands(std::move(c), std::move(ports));
  for (int s = 0; s < options.num_stages; ++s) {
    ORCA_RETURN_IF_ERROR(stack->Spawn(absl::StrCat("worker-", s), options.bin_dir + "/orca-worker",
                                      commands.WorkerArgs(s), options.log_dir));
  }
  ORCA_RETURN_IF_ERROR(
      stack->Spawn("scheduler", options.bin_dir + "/orca-scheduler", commands.SchedulerArgs(), options.log_dir));
  ORCA_RETURN_IF_ERROR(
      stack->Spawn("gateway", options.bin_dir + "/orca-gateway", commands.GatewayArgs(), options.log_dir));

  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoSeconds(options.ready_timeout);
  for (;;) {
    absl::StatusOr<loadgen::HttpResponse> ready = loadgen::HttpGet(stack->gateway_url() + "/ready", absl::Seconds(1));
    if (ready.ok() && ready->status == 200) return stack;
    if (const Process* dead = stack->FirstExited()) {
      return absl::UnavailableError(
          absl::StrCat(dead->process->name(), " exited during startup; see ", dead->log_path));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the stack was not ready in time; see the logs in ", options.log_dir));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

LocalStack::~LocalStack() { (void)Stop(); }

absl::Status LocalStack::Stop() {
  std::vector<std::string> unclean;
  // Front to back: stop taking requests, then drain the engine.
  for (auto it = processes_.rbegin(); it != processes_.rend(); ++it) {
    Subprocess& p = *it->process;
    const int status = p.Alive() ? p.Stop(SIGTERM, kStopGraceMs) : p.exit_status();
    if (p.killed())
      unclean.push_back(p.name() + " (killed)");
    else if (status != 0)
      unclean.push_back(absl::StrCat(p.name(), " (exit status ", status, ")"));
  }
  if (unclean.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("did not exit cleanly: ", absl::StrJoin(unclean, ", ")));
}

std::vector<std::string> LocalStack::worker_metrics_urls() const {
  std::vector<std::string> urls;
  for (int port : worker_http_ports_) urls.push_back(url(port) + "/metrics");
  return urls;
}

}  // namespace orca::bench
