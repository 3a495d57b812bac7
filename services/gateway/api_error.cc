#include "services/gateway/api_error.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace orca::gateway {
namespace {

constexpr char kParamUrl[] = "type.orca.dev/gateway.param";
constexpr char kCodeUrl[] = "type.orca.dev/gateway.code";
constexpr char kRetryAfterUrl[] = "type.orca.dev/gateway.retry_after";

std::string PayloadOr(const absl::Status& status, const char* url, std::string fallback) {
  auto payload = status.GetPayload(url);  // absl::optional here (not std::optional)
  return payload ? std::string(*payload) : fallback;
}

absl::Status WithPayload(absl::Status status, const char* url, std::string_view value) {
  if (!status.ok()) status.SetPayload(url, absl::Cord(std::string(value)));
  return status;
}

}  // namespace

absl::Status InvalidFieldError(std::string_view param, std::string_view message) {
  return WithParam(absl::InvalidArgumentError(std::string(message)), param);
}

absl::Status WithParam(absl::Status status, std::string_view param) {
  return WithPayload(std::move(status), kParamUrl, param);
}

absl::Status WithErrorCode(absl::Status status, std::string_view code) {
  return WithPayload(std::move(status), kCodeUrl, code);
}

absl::Status WithRetryAfter(absl::Status status, int seconds) {
  return WithPayload(std::move(status), kRetryAfterUrl, std::to_string(seconds));
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;  // the client went away; nobody reads this status
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

const char* ErrorTypeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return "invalid_request_error";
    case absl::StatusCode::kUnauthenticated:
      return "authentication_error";
    case absl::StatusCode::kPermissionDenied:
      return "permission_error";
    case absl::StatusCode::kNotFound:
      return "not_found_error";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_exceeded";
    case absl::StatusCode::kUnavailable:
      return "service_unavailable";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kUnimplemented:
      return "not_implemented";
    default:
      return "internal_error";
  }
}

int DefaultRetryAfterFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      return 1;
    default:
      return 0;
  }
}

ApiError ApiError::FromStatus(const absl::Status& status) {
  ApiError error;
  error.http_status = HttpStatusFor(status.code());
  error.type = ErrorTypeFor(status.code());
  error.message = std::string(status.message());
  if (error.message.empty()) error.message = absl::StatusCodeToString(status.code());
  error.param = PayloadOr(status, kParamUrl, "");
  error.code = PayloadOr(status, kCodeUrl, "");
  error.retry_after_seconds = DefaultRetryAfterFor(status.code());
  int retry_after = 0;
  if (absl::SimpleAtoi(PayloadOr(status, kRetryAfterUrl, ""), &retry_after) && retry_after > 0) {
    error.retry_after_seconds = retry_after;
  }
  return error;
}

ApiError ApiError::FromHttp(int http_status, std::string message) {
  ApiError error;
  error.http_status = http_status;
  error.message = std::move(message);
  if (http_status == 404) {
    error.type = "not_found_error";
  } else if (http_status == 401) {
    error.type = "authentication_error";
  } else if (http_status == 501) {
    error.type = "not_implemented";
  } else if (http_status == 503) {
    error.type = "service_unavailable";
    error.retry_after_seconds = 1;
  } else if (http_status >= 400 && http_status < 500) {
    error.type = "invalid_request_error";
  }
  return error;
}

std::string ApiError::ToJson() const {
  nlohmann::json inner = {
      {"message", message},
      {"type", type},
      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
      {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)},
  };
  nlohmann::json body = {{"error", std::move(inner)}};
  // Messages may quote user text; never let invalid UTF-8 make dump() throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse ApiError::ToHttpResponse() const {
  HttpResponse response;
  response.status = http_status;
  response.body = ToJson();
  if (retry_after_seconds > 0) response.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds));
  return response;
}

}  // namespace orca::gateway
