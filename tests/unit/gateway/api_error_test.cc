// The one status -> HTTP/OpenAI error mapping.

#include "services/gateway/api_error.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "services/common/grpc_status.h"

namespace orca::gateway {
namespace {

TEST(ApiErrorTest, MapsEveryCodeToStatusAndType) {
  struct Case {
    absl::StatusCode code;
    int http;
    const char* type;
    int retry_after;
  };
  const Case cases[] = {
      {absl::StatusCode::kInvalidArgument, 400, "invalid_request_error", 0},
      {absl::StatusCode::kOutOfRange, 400, "invalid_request_error", 0},
      {absl::StatusCode::kFailedPrecondition, 400, "invalid_request_error", 0},
      {absl::StatusCode::kUnauthenticated, 401, "authentication_error", 0},
      {absl::StatusCode::kPermissionDenied, 403, "permission_error", 0},
      {absl::StatusCode::kNotFound, 404, "not_found_error", 0},
      {absl::StatusCode::kResourceExhausted, 429, "rate_limit_exceeded", 1},
      {absl::StatusCode::kUnavailable, 503, "service_unavailable", 1},
      {absl::StatusCode::kDeadlineExceeded, 504, "timeout", 0},
      {absl::StatusCode::kInternal, 500, "internal_error", 0},
      {absl::StatusCode::kUnknown, 500, "internal_error", 0},
      {absl::StatusCode::kDataLoss, 500, "internal_error", 0},
  };
  for (const Case& c : cases) {
    const ApiError error = ApiError::FromStatus(absl::Status(c.code, "why"));
    EXPECT_EQ(error.http_status, c.http) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(error.type, c.type) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(error.retry_after_seconds, c.retry_after) << absl::StatusCodeToString(c.code);
    EXPECT_EQ(error.message, "why");
  }
}

TEST(ApiErrorTest, PayloadsBecomeParamCodeAndRetryAfter) {
  absl::Status status = InvalidFieldError("max_tokens", "'max_tokens' must be at least 1, got -5");
  status = WithErrorCode(status, "context_length_exceeded");
  const ApiError error = ApiError::FromStatus(status);
  EXPECT_EQ(error.param, "max_tokens");
  EXPECT_EQ(error.code, "context_length_exceeded");
  const nlohmann::json body = nlohmann::json::parse(error.ToJson());
  EXPECT_EQ(body["error"]["message"], "'max_tokens' must be at least 1, got -5");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "max_tokens");
  EXPECT_EQ(body["error"]["code"], "context_length_exceeded");

  const ApiError busy = ApiError::FromStatus(WithRetryAfter(absl::ResourceExhaustedError("queue full"), 7));
  EXPECT_EQ(busy.retry_after_seconds, 7);
  const nlohmann::json plain = nlohmann::json::parse(ApiError::FromStatus(absl::InternalError("x")).ToJson());
  EXPECT_TRUE(plain["error"]["param"].is_null());
  EXPECT_TRUE(plain["error"]["code"].is_null());
}

TEST(ApiErrorTest, GrpcCodesRoundTrip) {
  const grpc::Status exhausted(grpc::StatusCode::RESOURCE_EXHAUSTED, "KV slots exhausted");
  const absl::Status status = services::FromGrpcStatus(exhausted);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "KV slots exhausted");
  EXPECT_EQ(ApiError::FromStatus(status).http_status, 429);
  EXPECT_EQ(
      ApiError::FromStatus(services::FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x"))).http_status,
      503);
  EXPECT_EQ(services::ToGrpcStatus(absl::NotFoundError("m")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(services::FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(ApiErrorTest, InvalidUtf8InMessagesStillSerializes) {
  const ApiError error = ApiError::FromStatus(absl::InvalidArgumentError("bad \xff byte"));
  const nlohmann::json body = nlohmann::json::parse(error.ToJson());
  EXPECT_EQ(body["error"]["message"], "bad \xef\xbf\xbd byte");
}

TEST(ApiErrorTest, HttpLayerErrors) {
  EXPECT_EQ(ApiError::FromHttp(413, "too big").type, "invalid_request_error");
  EXPECT_EQ(ApiError::FromHttp(404, "nope").type, "not_found_error");
  EXPECT_EQ(ApiError::FromHttp(503, "busy").retry_after_seconds, 1);
}

}  // namespace
}  // namespace orca::gateway
