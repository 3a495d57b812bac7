#include "tests/integration/cluster.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "services/common/channels.h"

namespace orca::testing {

namespace {

cli::LocalStackPorts PickPorts(int num_stages) {
  absl::StatusOr<cli::LocalStackPorts> ports = cli::LocalStackPorts::Pick(num_stages);
  if (!ports.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ports.status().message()).c_str());
    std::abort();
  }
  return *std::move(ports);
}

cli::LocalStackCommands::Options CommandOptions(const ClusterOptions& o) {
  cli::LocalStackCommands::Options c;
  c.model = o.model;
  c.num_stages = o.pipeline;
  c.tensor_parallel = o.tensor_parallel;
  c.n_slots = o.n_slots;
  c.max_bs = o.max_bs;
  c.n_workers = o.n_workers;
  c.policy = o.policy;
  c.worker_threads = o.worker_threads > 0 ? o.worker_threads : o.tensor_parallel;
  c.engine_threads = 2;
  c.deployment_id = o.name;
  c.peer_timeout_ms = o.peer_timeout_ms;
  c.rendezvous_timeout_ms = 20000;
  c.worker_timeout_ms = o.worker_timeout_ms;
  c.drain_grace_seconds = 5;
  c.extra_scheduler_flags = o.extra_scheduler_flags;
  return c;
}

// A fresh token per cluster, in a file of its own (the file's name carries the cluster's).
std::string TokenFile(const std::string& name) {
  const std::string dir = TempPath(name + "-run");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::StatusOr<std::string> path = cli::CreateInternalTokenFile(dir);
  if (!path.ok()) {
    std::fprintf(stderr, "%s\n", std::string(path.status().message()).c_str());
    std::abort();
  }
  return *path;
}

services::InternalAuth AuthFromFile(const std::string& path) {
  services::InternalAuthFlags flags;
  flags.token_file = path;
  absl::StatusOr<services::InternalAuth> auth = services::LoadInternalAuth(flags);
  if (!auth.ok()) {
    std::fprintf(stderr, "%s\n", std::string(auth.status().message()).c_str());
    std::abort();
  }
  return *std::move(auth);
}

cli::LocalStackCommands::Options WithTokenFile(cli::LocalStackCommands::Options c, const std::string& path) {
  c.internal_token_file = path;
  return c;
}

}  // namespace

Cluster::Cluster(ClusterOptions o) : Cluster(o, TokenFile(o.name)) {}

Cluster::Cluster(ClusterOptions o, const std::string& token_file)
    : o_(std::move(o)),
      auth_(AuthFromFile(token_file)),
      commands_(WithTokenFile(CommandOptions(o_), token_file), PickPorts(o_.pipeline)) {
  workers_.resize(o_.pipeline);
}

Cluster::~Cluster() {
  if (scheduler_) scheduler_->Stop(15, 5000);
  for (auto& w : workers_)
    if (w) w->Stop(15, 5000);
}

void Cluster::StartWorker(int s) {
  if (workers_[s]) workers_[s]->Stop(9, 2000);
  workers_[s] = std::make_unique<Process>("orca-worker", commands_.WorkerArgs(s),
                                          TempPath(o_.name + "-worker" + std::to_string(s) + ".log"));
}

bool Cluster::Start(int timeout_ms) {
  for (int s = 0; s < o_.pipeline; ++s) StartWorker(s);
  scheduler_ =
      std::make_unique<Process>("orca-scheduler", commands_.SchedulerArgs(), TempPath(o_.name + "-scheduler.log"));
  return WaitReady(commands_.ports().scheduler_http, timeout_ms);
}

std::unique_ptr<v1::Scheduler::Stub> Cluster::NewStub() const {
  return v1::Scheduler::NewStub(services::CreateInternalChannel(scheduler_address(), auth_));
}

std::unique_ptr<v1::Scheduler::Stub> Cluster::NewUnauthenticatedStub() const {
  return v1::Scheduler::NewStub(grpc::CreateChannel(scheduler_address(), grpc::InsecureChannelCredentials()));
}

std::string Cluster::Logs() const {
  // Each process's state in its header: a stage that died of a signal without a word in its
  // log (SIGPIPE) says so here.
  std::string out = scheduler_ ? "--- scheduler: " + scheduler_->State() + " ---\n" + scheduler_->Log() : "";
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i])
      out += "--- worker " + std::to_string(i) + ": " + workers_[i]->State() + " ---\n" + workers_[i]->Log();
  return out.size() > 20000 ? out.substr(out.size() - 20000) : out;
}

GenerateResult Generate(v1::Scheduler::Stub* stub, const std::vector<int32_t>& prompt, int max_new_tokens,
                        const v1::SamplingParams& sampling, bool ignore_eos) {
  GenerateResult r;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::GenerateRequest req;
  req.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
  req.set_max_new_tokens(max_new_tokens);
  *req.mutable_sampling() = sampling;
  req.set_ignore_eos(ignore_eos);
  auto reader = stub->Generate(&ctx, req);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    for (const auto& t : resp.tokens()) r.tokens.push_back(t.token_id());
    if (resp.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      r.finish = resp.finish_reason();
      r.error = resp.error();
    }
  }
  r.status = reader->Finish();
  return r;
}

v1::SchedulerStats SettledStats(v1::Scheduler::Stub* stub) {
  v1::SchedulerStats stats;
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext ctx;
    stats.Clear();
    if (stub->GetStats(&ctx, v1::StatsRequest(), &stats).ok() && stats.num_requests_running() == 0 &&
        stats.num_requests_waiting() == 0 && stats.kv_slots_used() == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return stats;
}

}  // namespace orca::testing
