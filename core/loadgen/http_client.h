#pragma once
/// Blocking one-shot HTTP requests (libcurl) for the control side of a benchmark: probing
/// /ready, listing /v1/models, POST /tokenize, scraping /metrics. The load itself goes
/// through LoadDriver's event loop.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace orca::loadgen {

struct HttpResponse {
  long status = 0;
  std::string body;
};

/// GET `url`. A transport failure (refused, timeout) is UNAVAILABLE naming the url; any HTTP
/// status is a response.
absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout, const std::string& api_key = "");

/// POST `body` as application/json to `url`.
absl::StatusOr<HttpResponse> HttpPostJson(const std::string& url, const std::string& body, absl::Duration timeout,
                                          const std::string& api_key = "");

/// Initializes libcurl once per process (thread-safe); every function here calls it.
void EnsureCurlInitialized();

/// `base_url` without trailing slashes, joined with `path` (which starts with '/').
std::string JoinUrl(const std::string& base_url, const std::string& path);

}  // namespace orca::loadgen
