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
};

}  // namespace orca::gateway
