#include "bench/pipeline/local_stack.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/load/http_client.h"
#include "core/common/ports.h"
#include "core/common/status_macros.h"

namespace orca::bench {
namespace {

constexpr int kStopGraceMs = 20000;

std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

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
  std::vector<std::string> worker_addrs;
  std::vector<int> worker_grpc, worker_data_plane;
  for (int s = 0; s < options.num_stages; ++s) {
    ORCA_ASSIGN_OR_RETURN(const int grpc_port, PickLoopbackPort());
    ORCA_ASSIGN_OR_RETURN(const int http_port, PickLoopbackPort());
    ORCA_ASSIGN_OR_RETURN(const int data_plane_port, PickLoopbackPort());
    worker_grpc.push_back(grpc_port);
    worker_data_plane.push_back(data_plane_port);
    stack->worker_http_ports_.push_back(http_port);
    worker_addrs.push_back(Loopback(grpc_port));
  }
  ORCA_ASSIGN_OR_RETURN(const int sched_grpc, PickLoopbackPort());
  ORCA_ASSIGN_OR_RETURN(stack->scheduler_http_port_, PickLoopbackPort());
  ORCA_ASSIGN_OR_RETURN(stack->gateway_http_port_, PickLoopbackPort());
  const std::string workers = absl::StrJoin(worker_addrs, ",");
  for (int s = 0; s < options.num_stages; ++s) {
    ORCA_RETURN_IF_ERROR(
        stack->Spawn(absl::StrCat("worker-", s), options.bin_dir + "/orca-worker",
                     {"--model=" + options.model, "--listen=" + worker_addrs[s],
                      "--http-listen=" + Loopback(stack->worker_http_ports_[s]),
                      absl::StrCat("--data-plane-port=", worker_data_plane[s]), absl::StrCat("--stage=", s),
                      absl::StrCat("--num-stages=", options.num_stages), "--workers=" + workers,
                      "--scheduler=" + Loopback(sched_grpc), absl::StrCat("--n-slots=", options.n_slots),
                      absl::StrCat("--threads=", options.threads_per_worker), "--log-level=warning"},
                     options.log_dir));
  }
  std::vector<std::string> scheduler_args = {"--listen=" + Loopback(sched_grpc),
                                             "--http-listen=" + Loopback(stack->scheduler_http_port_),
                                             "--workers=" + workers,
                                             "--policy=" + options.policy,
                                             absl::StrCat("--max-bs=", options.max_bs),
                                             absl::StrCat("--n-slots=", options.n_slots),
                                             "--log-level=warning"};
  if (options.n_workers > 0) scheduler_args.push_back(absl::StrCat("--n-workers=", options.n_workers));
  ORCA_RETURN_IF_ERROR(stack->Spawn("scheduler", options.bin_dir + "/orca-scheduler", scheduler_args, options.log_dir));
  ORCA_RETURN_IF_ERROR(stack->Spawn(
      "gateway", options.bin_dir + "/orca-gateway",
      {"--listen=" + Loopback(stack->gateway_http_port_), "--grpc-listen=", "--schedulers=" + Loopback(sched_grpc),
       "--model=" + options.model, "--log-level=warning"},
      options.log_dir));

  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoSeconds(options.ready_timeout);
  for (;;) {
    absl::StatusOr<HttpResponse> ready = HttpGet(stack->gateway_url() + "/ready", absl::Seconds(1));
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
