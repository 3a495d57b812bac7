#pragma once
/// A benchmark's own serving stack on loopback: P orca-worker processes (one per pipeline
/// stage), orca-scheduler and orca-gateway, like `orca serve` but with every admin port
/// known, so the benchmark can scrape each process's /metrics.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/subprocess.h"

namespace orca::bench {

struct LocalStackOptions {
  /// Directory holding orca-worker, orca-scheduler and orca-gateway.
  std::string bin_dir;
  std::string model;
  int32_t num_stages = 1;
  /// Scheduler --n-workers: batches in flight (0 = num_stages).
  int32_t n_workers = 0;
  std::string policy = "orca";
  int32_t max_bs = 16;
  int64_t n_slots = 8192;
  /// Compute threads per worker.
  int32_t threads_per_worker = 1;
  /// Each process logs to <log_dir>/<name>.log (created).
  std::string log_dir;
  absl::Duration ready_timeout = absl::Minutes(5);
};

class LocalStack {
 public:
  /// Starts every process and waits until the gateway's /ready answers 200. On failure
  /// everything started is stopped and the error names the process and its log.
  static absl::StatusOr<std::unique_ptr<LocalStack>> Start(const LocalStackOptions& options);
  ~LocalStack();
  LocalStack(const LocalStack&) = delete;
  LocalStack& operator=(const LocalStack&) = delete;

  /// SIGTERM front to back (gateway, scheduler, workers), SIGKILL after a grace period.
  /// Idempotent; an error lists the processes that did not exit cleanly.
  absl::Status Stop();

  std::string gateway_url() const { return url(gateway_http_port_); }
  std::string scheduler_metrics_url() const { return url(scheduler_http_port_) + "/metrics"; }
  /// One per stage, in stage order.
  std::vector<std::string> worker_metrics_urls() const;

 private:
  struct Process {
    std::string log_path;
    std::unique_ptr<Subprocess> process;
  };

  LocalStack() = default;
  static std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }
  absl::Status Spawn(const std::string& name, const std::string& binary, const std::vector<std::string>& args,
                     const std::string& log_dir);
  /// The first process that exited, or nullptr.
  const Process* FirstExited();

  std::vector<Process> processes_;  ///< In start order: workers, scheduler, gateway.
  std::vector<int> worker_http_ports_;
  int scheduler_http_port_ = 0;
  int gateway_http_port_ = 0;
};

}  // namespace orca::bench
