#include "services/common/channels.h"

namespace orca::services {

grpc::ChannelArguments InternalChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // gRPC's defaults back off up to minutes; a restarted peer should be seen within a second.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A channel of its own: the global subchannel pool would share (and keep) backoff state.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), InternalChannelArguments());
}

}  // namespace orca::services
