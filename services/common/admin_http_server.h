#pragma once
/// The small HTTP/1.1 endpoint every gRPC service (scheduler, worker) serves
/// on its `--http-listen` address for Kubernetes probes and Prometheus:
///
///   GET /health   200 "ok" while the process is alive (liveness probe)
///   GET /ready    200 "ok" when the readiness callback returns OK, else 503
///                 with {"status":"unavailable","code":"...","reason":"..."}
///                 (JSON when ready: {"status":"ok"} plus the service's "config"
///                 when ready_details is set and its "memory" when report_memory).
///                 With an internal_token, a request without it gets only
///                 {"status": "ok" | "unavailable"}: no reason, config or memory.
///   GET /metrics  the registry's page, text format 0.0.4 (401 without the
///                 internal token when metrics_require_token)
///   anything else 404 (405 for methods other than GET/HEAD)
///
///   AdminHttpServer::Options options;
///   options.listen_address = flags.http_listen;   // "127.0.0.1:7001"
///   options.registry = &registry;
///   options.readiness = [&] { return engine.Ready(); };
///   ORCA_ASSIGN_OR_RETURN(auto server, AdminHttpServer::Create(options));
///   ORCA_RETURN_IF_ERROR(server->Start());
///   ...
///   server->Stop();   // or let the destructor do it
///
/// The server runs on one thread of its own (Boost.Asio event loop); requests
/// never run on the caller's threads. Connections are kept alive, requests
/// are bounded in header size, and idle or slow connections time out. A probe
/// always gets through: a connection that has not sent a complete request
/// within request_timeout is closed, and at max_connections the least
/// recently active connection is closed to admit a new one (LRU eviction),
/// so idle or trickling clients can delay a probe by one accept, never
/// refuse it.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/metrics/registry.h"

namespace orca::services {

class AdminHttpServer {
 public:
  struct Options {
    /// "host:port": an IPv4 or bracketed IPv6 literal or a host name, and a
    /// port; port 0 picks an ephemeral port (see port()).
    std::string listen_address = "127.0.0.1:0";
    /// Page for /metrics; nullptr answers /metrics with 404. Must outlive the
    /// server. Serialized on the server thread (gauge callbacks run there).
    const metrics::Registry* registry = nullptr;
    /// Decides /ready; empty means always ready. Runs on the server thread,
    /// so it must be quick and must not call Stop().
    std::function<absl::Status()> readiness;
    /// Optional: a JSON object describing the service's configuration; /ready
    /// then answers JSON ({"status": "ok", "config": …} or the 503 body with
    /// "config" added). Runs on the server thread; must be quick.
    std::function<std::string()> ready_details;
    /// Adds "memory" to the /ready JSON (which it makes JSON even without
    /// ready_details): this process's resident memory now and at its peak
    /// (core/common/process_memory.h: rss_bytes, peak_rss_bytes, rss_anon_bytes,
    /// rss_file_bytes, rss_shmem_bytes, threads).
    bool report_memory = false;
    /// Largest request line plus headers; larger requests get 431.
    size_t max_header_bytes = 8 * 1024;
    /// Largest request body accepted (and ignored); larger gets 413.
    size_t max_body_bytes = 4 * 1024;
    /// Connections open at once. A new connection beyond it evicts the least
    /// recently active one (an idle one first; one being answered last):
    /// activity is the accept, a request's first byte, and a written response.
    int max_connections = 64;
    /// How long a connection may stay idle between keep-alive requests, and
    /// take to accept a response.
    std::chrono::milliseconds idle_timeout{60'000};
    /// How long a connection may take to send a complete request: from its
    /// accept for the first request, from the first byte for later ones.
    /// Slower connections are closed (a slow-header client holds no slot).
    std::chrono::milliseconds request_timeout{10'000};
    /// The deployment's internal token; empty: every endpoint is open. When
    /// set, /ready shows its details (reason, config, memory) only to a
    /// request with "Authorization: Bearer <token>" (compared in constant
    /// time); others get {"status": ...} alone. Probes need no token.
    std::string internal_token;
    /// /metrics answers 401 without the internal token (needs internal_token).
    /// Off by default: Prometheus scrapes without credentials.
    bool metrics_require_token = false;
  };

  /// Validates `options` (address syntax, port range, positive limits and
  /// timeouts, metrics_require_token only with an internal_token).
  /// InvalidArgument names the field.
  static absl::StatusOr<std::unique_ptr<AdminHttpServer>> Create(Options options);

  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  /// Resolves and binds the address, then serves on a new thread. Returns
  /// Unavailable (with the address and the system's reason) when the address
  /// cannot be bound, FailedPrecondition when called twice.
  absl::Status Start();

  /// Closes the listener and every connection, then joins the server thread.
  /// Idempotent; safe without Start(). Must not be called from `readiness`.
  void Stop();

  /// The bound port once Start() succeeded (the real one for port 0), else 0.
  int port() const;
  /// Connections closed to admit new ones at max_connections, since Start().
  int64_t num_evicted_connections() const;

 private:
  class Impl;
  explicit AdminHttpServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace orca::services
