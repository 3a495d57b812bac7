#pragma once
/// absl::Status <-> grpc::Status. The codes share numbering; messages carry over.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace orca::gateway {

absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace orca::gateway
