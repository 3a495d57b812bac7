#pragma once
/// The whole gateway in one object: model (tokenizer, chat template), router,
/// pipeline, HTTP server (OpenAI API) and gRPC server (orca.v1.Generation,
/// health, reflection), on one io_context run by a few threads. main.cc and
/// the in-process tests create it; nothing else is global.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/gateway/gateway_model.h"

namespace orca::gateway {

class OutputBudget;

class Gateway {
 public:
  /// The orca-gateway flags (docs/services.md), plus internals for tests.
  struct Options {
    std::string listen = "127.0.0.1:8000";
    std::string grpc_listen = "127.0.0.1:8001";  // empty: no gRPC server
    std::vector<std::string> schedulers = {"127.0.0.1:7000"};
    /// "HOST:PORT": discover the schedulers through DNS instead (see SchedulerRouter).
    std::string schedulers_dns;
    GatewayModel::Options model;
    std::vector<std::string> api_keys;
    std::string api_keys_file;
    /// The internal token sent to the schedulers (--internal-token-file); "" = none.
    std::string scheduler_api_key;
    int64_t max_body_bytes = 4 << 20;
    int64_t max_concurrent_requests = 4096;
    /// I/O threads for the HTTP server (connections are multiplexed on them).
    int io_threads = 2;
    /// Threads that parse, tokenize, render chat templates and compile
    /// constraints for the HTTP and gRPC APIs, off the I/O threads
    /// (--cpu-threads); 0: the hardware threads, at least 2.
    int cpu_threads = 0;
    /// Requests that may wait for a CPU thread; beyond, 503 + Retry-After
    /// (gRPC RESOURCE_EXHAUSTED) at once (--cpu-max-queued).
    int64_t cpu_max_queued = 1024;
    /// The wall-clock budget of one chat template rendering (--chat-template-timeout-seconds).
    absl::Duration chat_template_timeout = absl::Seconds(5);
    /// /metrics requires the API key too (--metrics-require-api-key).
    bool metrics_require_api_key = false;
    absl::Duration scheduler_poll_interval = absl::Seconds(1);
    absl::Duration scheduler_stall_grace = absl::Seconds(5);  ///< SchedulerRouter::Options::stall_grace
    absl::Duration idle_timeout = absl::Seconds(120);
    /// Streamed output buffered for slow clients, over all connections
    /// (--max-buffered-output-bytes; output_budget.h). 0: no overall budget.
    int64_t max_buffered_output_bytes = int64_t{256} << 20;
    /// A stream whose client takes nothing this long while its output is
    /// paused is cancelled with an error event (--max-output-pause-seconds).
    absl::Duration max_output_pause = absl::Seconds(30);
  };

  /// Loads the model and starts serving. Does not wait for schedulers:
  /// /ready reports them.
  static absl::StatusOr<std::unique_ptr<Gateway>> Create(Options options);
  /// Like Create, with an already loaded model (tests).
  static absl::StatusOr<std::unique_ptr<Gateway>> CreateWithModel(Options options, std::unique_ptr<GatewayModel> model);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  int http_port() const;
  /// 0 when the gRPC server is disabled.
  int grpc_port() const;
  /// True when the tokenizer is loaded and a scheduler is ready.
  bool ready() const;
  /// Waits until ready(); false on timeout.
  bool WaitUntilReady(absl::Duration timeout);
  /// Requests in flight (scheduler calls open).
  int64_t num_active_requests() const;
  /// The budget streamed output draws on (buffered bytes, peak, pauses);
  /// null with max_buffered_output_bytes 0.
  const OutputBudget* output_budget() const;
  /// Admission tickets held (--max-concurrent-requests): requests queued for or
  /// running on the CPU pool, generations in flight, /tokenize and /detokenize
  /// calls. 0 when the gateway is idle.
  int64_t num_admitted_requests() const;

  /// Drains, as on SIGTERM before a rolling update's SIGKILL: at once /ready
  /// answers 503 "draining", gRPC health NOT_SERVING, new generation requests
  /// 503 + Retry-After (new gRPC calls UNAVAILABLE); in-flight requests run
  /// on for up to `grace`; what is left then ends with a proper error (an SSE
  /// error event and [DONE], a 503 body, a gRPC UNAVAILABLE) and its scheduler
  /// calls are cancelled; then connections close and threads stop.
  /// Idempotent; the destructor calls it.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  /// Ends a Shutdown's grace period now (a second signal). Any thread.
  void EndGracePeriod();

 private:
  struct Impl;
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace orca::gateway
