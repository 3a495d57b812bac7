#pragma once
/// One HTTP request/response exchange as handlers see it, independent of the
/// server's I/O machinery. Handlers may answer synchronously or later from any
/// thread; a response can be complete (Respond) or streamed (StartStream,
/// Write..., EndStream: chunked transfer encoding, e.g. for SSE).

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace orca::gateway {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent, query included
  std::string path;     // target without the query
  HttpHeaders headers;  // names lower-cased
  std::string body;
  std::string peer;  // "ip:port"

  /// The first header with this (lower-case) name, or "".
  std::string_view Header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers) {
      if (name == lower_name) return value;
    }
    return {};
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;
  std::string body;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  /// Sends a complete response. The first Respond/StartStream wins; any call
  /// after the exchange ended (or the client left) is ignored. Thread-safe.
  virtual void Respond(HttpResponse response) = 0;
  /// Sends the status line and headers of a streamed response.
  virtual void StartStream(int status, std::string content_type, HttpHeaders headers) = 0;
  /// Sends more of a streamed response; flushed at once (TCP_NODELAY).
  virtual void Write(std::string data) = 0;
  /// Ends a streamed response.
  virtual void EndStream() = 0;
  /// `on_disconnect` runs once if the client goes away before the response is
  /// complete (at once if it already has). It runs on the server's I/O
  /// threads and must not block.
  virtual void SetDisconnectHandler(std::function<void()> on_disconnect) = 0;
  /// Backpressure for a streamed response (the gateway's output budget): true
  /// when the output written so far is within this exchange's share of the
  /// server's budget, so the producer may go on. Otherwise false, and
  /// `on_ready` runs once, later, on an I/O thread: with OK when the client
  /// has taken enough (or the exchange is over), or with the error that ends
  /// the request (the client read nothing for the budget's max_pause; write
  /// it as the response's last words). Thread-safe. Wrappers must forward it.
  /// Default: always ready.
  virtual bool ReadyForMore(std::function<void(const absl::Status&)> on_ready) { return true; }
};

}  // namespace orca::gateway
