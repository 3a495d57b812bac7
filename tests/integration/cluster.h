#pragma once
// A local Orca engine replica for integration tests: P worker processes
// (stage per process, T tensor-parallel threads each) and a scheduler, all on
// loopback ports, or a scheduler with the in-process engine. Every process
// gets a fresh internal token from a file, as under `orca serve`.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "orca/v1/scheduler.grpc.pb.h"
#include "services/cli/local_stack_commands.h"
#include "services/common/internal_auth.h"
#include "tests/integration/process.h"

namespace orca::testing {

struct ClusterOptions {
  std::string model;
  int pipeline = 1;  // 0: in-process engine in the scheduler
  int tensor_parallel = 1;
  int64_t n_slots = 2048;
  int max_bs = 16;
  int n_workers = 0;  // 0: the scheduler's default (number of stages)
  int worker_timeout_ms = 5000;
  int peer_timeout_ms = 0;  // 0: the worker's default (a backstop; liveness comes from heartbeats)
  std::string policy = "orca";
  std::string name = "cluster";
  std::vector<std::string> extra_scheduler_flags;
  int worker_threads = 0;  // 0: tensor_parallel
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();

  /// Starts every process and waits until the scheduler is ready.
  bool Start(int timeout_ms = 60000);
  /// Starts (or restarts) worker `stage` with the same ports.
  void StartWorker(int stage);
  Process& worker(int stage) { return *workers_[stage]; }
  Process& scheduler() { return *scheduler_; }
  int scheduler_http_port() const { return commands_.ports().scheduler_http; }
  std::string scheduler_address() const { return commands_.scheduler_address(); }
  std::string worker_address(int stage) const { return cli::LoopbackAddress(commands_.ports().worker_grpc[stage]); }
  /// The cluster's internal credential: every process got its file (--internal-token-file).
  const services::InternalAuth& internal_auth() const { return auth_; }
  /// A stub whose calls carry the internal token, as the gateway's do.
  std::unique_ptr<v1::Scheduler::Stub> NewStub() const;
  /// A stub that sends no credential (what anyone who reaches the port could do).
  std::unique_ptr<v1::Scheduler::Stub> NewUnauthenticatedStub() const;
  std::string Logs() const;

 private:
  Cluster(ClusterOptions options, const std::string& token_file);

  ClusterOptions o_;
  services::InternalAuth auth_;
  cli::LocalStackCommands commands_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::unique_ptr<Process> scheduler_;
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  std::string error;
  grpc::Status status;
};

/// Greedy (unless `sampling` says otherwise) generation through the scheduler's gRPC API.
GenerateResult Generate(v1::Scheduler::Stub* stub, const std::vector<int32_t>& prompt, int max_new_tokens,
                        const v1::SamplingParams& sampling = {}, bool ignore_eos = true);

/// Stats once no request is running (or after 2 s): the scheduler publishes a snapshot per round.
v1::SchedulerStats SettledStats(v1::Scheduler::Stub* stub);

}  // namespace orca::testing
