#pragma once
/// The one mapping between absl::Status and grpc::Status (the codes share
/// numbering; messages carry over), shared by every service.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace orca::services {

absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace orca::services
