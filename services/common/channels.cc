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

std::shared_ptr<grpc::Channel> CreateInternalChannel(const std::string& address, const InternalAuth& auth) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (auto factory = AuthorizingInterceptorFactory(auth)) interceptors.push_back(std::move(factory));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, grpc::InsecureChannelCredentials(),
                                                                 InternalChannelArguments(), std::move(interceptors));
}

}  // namespace orca::services
