#pragma once
/// The operator's HTTP endpoint on --http-listen:
///   GET /healthz  200 while the process runs (liveness)
///   GET /readyz   200 when `readiness` returns OK, else 503 with the reason
///   GET /metrics  OperatorMetrics in the Prometheus text format
/// One Asio thread; each connection serves one request and closes.
/// (Local to the operator: services/common's AdminHttpServer serves the data plane.)

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace orca::k8s {

class OperatorAdminServer {
 public:
  struct Options {
    /// "host:port"; port 0 picks a free port.
    std::string listen_address = "0.0.0.0:8080";
    std::function<absl::Status()> readiness;
    std::function<std::string()> metrics;
  };

  /// Binds and starts serving. Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<OperatorAdminServer>> Start(Options options);
  ~OperatorAdminServer();

  int port() const { return port_; }
  void Stop();

 private:
  struct Impl;
  explicit OperatorAdminServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace orca::k8s
