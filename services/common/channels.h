#pragma once
/// gRPC channels between Orca's own services: fast reconnects (peers restart
/// in seconds, e.g. a rescheduled pod), large enough messages for long
/// prompts, and the internal credential on every call (internal_auth.h).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "services/common/internal_auth.h"

namespace orca::services {

grpc::ChannelArguments InternalChannelArguments();
/// A channel to another Orca process's internal port; every call on it carries
/// `auth`'s token (nothing when `auth` is insecure).
std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address, const InternalAuth& auth);

}  // namespace orca::services
