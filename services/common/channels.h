#pragma once
/// gRPC channels between Orca's own services: fast reconnects (peers restart
/// in seconds, e.g. a rescheduled pod) and large enough messages for long prompts.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace orca::services {

grpc::ChannelArguments InternalChannelArguments();
std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address);

}  // namespace orca::services
