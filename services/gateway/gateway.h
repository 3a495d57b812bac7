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
    /// Sent to the schedulers (their --api-keys); "" = none.
    std::string scheduler_api_key;
    int64_t max_body_bytes = 4 << 20;
    int64_t max_concurrent_requests = 4096;
    /// I/O threads for the HTTP server (connections are multiplexed on them).
    int io_threads = 2;
    absl::Duration scheduler_poll_interval = absl::Seconds(1);
    absl::Duration scheduler_stall_grace = absl::Seconds(5);  ///< SchedulerRouter::Options::stall_grace
    absl::Duration idle_timeout = absl::Seconds(120);
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
  /// Open HTTP connections.
  size_t num_http_connections() const;

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
