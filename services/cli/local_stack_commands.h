#pragma once
/// The command lines of a local Orca stack on loopback: P orca-worker processes (one
/// per pipeline stage), orca-scheduler and orca-gateway. The one place that knows which
/// flags wire them together; `orca serve`, the pipeline benchmark's stack
/// (bench/pipeline/local_stack) and the integration tests' clusters build their
/// processes with it.
///
/// Flags whose option is left at its "unset" value (empty string, 0) are not passed,
/// so the binary's own default applies.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::cli {

/// The loopback ports of one stack, all distinct (core/common/ports.h).
struct LocalStackPorts {
  int scheduler_grpc = 0;
  int scheduler_http = 0;
  std::vector<int> worker_grpc;        ///< One per stage.
  std::vector<int> worker_http;        ///< One per stage.
  std::vector<int> worker_data_plane;  ///< One per stage: --data-plane-port.

  /// Picks every port of a stack with `num_stages` workers (0: none).
  static absl::StatusOr<LocalStackPorts> Pick(int num_stages);
};

class LocalStackCommands {
 public:
  struct Options {
    std::string model;  ///< Absolute checkpoint path, for every process.
    /// Passed to every process as --model-name / --served-model-name when set;
    /// otherwise each derives it (the scheduler only when it has --model).
    std::string served_model_name;
    /// Worker processes; 0: no workers, the scheduler runs the engine in process.
    int num_stages = 1;
    int tensor_parallel = 1;
    int64_t n_slots = 8192;
    int max_bs = 16;
    int n_workers = 0;  ///< Scheduler --n-workers (0: not passed).
    std::string policy = "orca";
    /// The request-level baseline (scheduler flags; 0 / false: not passed): --microbatches
    /// (the paper's mbs) and --faster-transformer.
    int microbatches = 0;
    bool faster_transformer = false;
    /// Scheduler and worker --kv-block-size (0: not passed, the binaries' default).
    int kv_block_size = 0;
    /// Worker (and in-process engine) --kv-local-slots (0: not passed) and --swa-full (also passed
    /// with enable_prefix_caching: a cached prefix needs its sliding-window layers' KV).
    int64_t kv_local_slots = 0;
    bool swa_full = false;
    /// Beyond the paper (scheduler flags; 0 / false / empty: not passed).
    int max_num_batched_tokens = 0;
    double max_prefill_slowdown = 0;
    int32_t long_prefill_token_threshold = 0;
    bool enable_prefix_caching = false;
    std::string scheduling_order;
    int64_t priority_aging_ms = -1;  ///< -1: not passed.
    std::string dtype;               ///< Worker --dtype.
    std::string device;              ///< Worker (and in-process engine) --device; empty: not passed (cpu).
    bool cuda_graphs = false;        ///< Worker --cuda-graphs.
    int64_t worker_threads = 0;      ///< Worker --threads.
    int64_t engine_threads = 0;      ///< Scheduler --threads (in-process engine only).
    std::string log_level;           ///< Every process.
    std::string deployment_id;       ///< Worker --deployment-id.
    int peer_timeout_ms = 0;         ///< Worker --peer-timeout-ms.
    int rendezvous_timeout_ms = 0;
    int worker_timeout_ms = 0;               ///< Scheduler --worker-timeout-ms.
    double drain_grace_seconds = 0;          ///< Scheduler --drain-grace-seconds.
    double gateway_drain_grace_seconds = 0;  ///< Gateway --drain-grace-seconds.
    /// The internal credential: passed to every process as --internal-token-file (each
    /// internal port requires the token, each process sends it). Empty: every process
    /// gets --insecure-internal instead (the internal ports take any caller).
    std::string internal_token_file;
    std::vector<std::string> extra_scheduler_flags;
    std::string gateway_listen;       ///< host:port
    std::string gateway_grpc_listen;  ///< Always passed; empty disables the gateway's gRPC API.
    std::vector<std::string> api_keys;
    std::string chat_template;     ///< Gateway --chat-template (empty: not passed).
    std::string tool_call_parser;  ///< Gateway --tool-call-parser (empty: not passed).
  };

  LocalStackCommands(Options options, LocalStackPorts ports);

  /// Arguments (after the program name) of orca-worker for `stage`.
  std::vector<std::string> WorkerArgs(int stage) const;
  /// Arguments of orca-scheduler.
  std::vector<std::string> SchedulerArgs() const;
  /// Arguments of orca-gateway.
  std::vector<std::string> GatewayArgs() const;

  const LocalStackPorts& ports() const { return ports_; }
  std::string scheduler_address() const;
  /// "host:port,..." of the workers' gRPC servers in stage order.
  std::string worker_addresses() const;

 private:
  std::string InternalAuthArg() const;

  Options options_;
  LocalStackPorts ports_;
};

/// "127.0.0.1:<port>".
std::string LoopbackAddress(int port);

/// Draws a fresh internal token (32 random bytes, hex) and writes it to a new file
/// `dir`/internal-token, readable by its owner only; returns the file's path.
absl::StatusOr<std::string> CreateInternalTokenFile(const std::string& dir);

}  // namespace orca::cli
