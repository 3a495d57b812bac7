#pragma once
/// The gateway's one mapping from status codes to HTTP statuses and
/// OpenAI-shaped error bodies:
///
///   {"error": {"message": "...", "type": "invalid_request_error",
///              "param": "max_tokens", "code": null}}
///
/// Errors travel through the gateway as absl::Status. Details that OpenAI's
/// error shape carries (the offending `param`, an error `code` such as
/// "context_length_exceeded", a Retry-After hint) ride along as status payloads,
/// attached with the helpers below, so every layer keeps returning plain
/// absl::Status.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "services/gateway/http_exchange.h"

namespace orca::gateway {

/// InvalidArgument naming the request field it is about (`param` in the body).
absl::Status InvalidFieldError(std::string_view param, std::string_view message);
/// Returns `status` with `param` attached.
absl::Status WithParam(absl::Status status, std::string_view param);
/// Returns `status` with an OpenAI error `code` attached (e.g. "invalid_api_key").
absl::Status WithErrorCode(absl::Status status, std::string_view code);
/// Returns `status` with a Retry-After hint (seconds) attached.
absl::Status WithRetryAfter(absl::Status status, int seconds);

/// HTTP status for a status code: InvalidArgument/OutOfRange/FailedPrecondition
/// 400, Unauthenticated 401, PermissionDenied 403, NotFound 404, AlreadyExists/
/// Aborted 409, ResourceExhausted 429, Unimplemented 501, Unavailable 503,
/// DeadlineExceeded 504, Cancelled 499, everything else 500.
int HttpStatusFor(absl::StatusCode code);
/// OpenAI error `type` for a status code ("invalid_request_error",
/// "authentication_error", "not_found_error", "rate_limit_exceeded", ...).
const char* ErrorTypeFor(absl::StatusCode code);
/// Default Retry-After (seconds) for codes that mean "try again later"
/// (ResourceExhausted, Unavailable); 0 for the rest.
int DefaultRetryAfterFor(absl::StatusCode code);

/// An error as the HTTP and SSE layers send it.
struct ApiError {
  int http_status = 500;
  std::string type = "internal_error";
  std::string message;
  std::string param;            // empty: null
  std::string code;             // empty: null
  int retry_after_seconds = 0;  // 0: no Retry-After header

  /// The mapping: status code, message and payloads to an ApiError.
  static ApiError FromStatus(const absl::Status& status);
  /// An error produced by the HTTP layer itself (413, 431, 404 route, ...).
  static ApiError FromHttp(int http_status, std::string message);

  /// `{"error": {...}}` as compact JSON.
  std::string ToJson() const;
  /// The complete HTTP response: status, JSON body, Retry-After when set. The one
  /// place an error response is built (routes, generation, the server's own 4xx).
  HttpResponse ToHttpResponse() const;
};

}  // namespace orca::gateway
