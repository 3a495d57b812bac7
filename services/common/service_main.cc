#include "services/common/service_main.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <iostream>
#include <mutex>

#include "core/common/logging.h"

namespace orca::services {

void AddLoggingFlags(FlagSet* flags, LoggingFlags* out) {
  flags->AddString("log-level", &out->log_level, "debug, info, warning or error");
  flags->AddBool("log-json", &out->log_json, "Log JSON lines (with request ids as fields)");
}

std::optional<int> ParseFlagsOrExit(FlagSet& flags, int argc, char** argv, const std::string& env_prefix) {
  flags.EnableConfigFile();
  if (!env_prefix.empty()) flags.EnableEnvironment(env_prefix);
  return flags.ParseForMain(argc, argv);
}

absl::Status ConfigureLogging(const std::string& component, const LoggingFlags& flags) {
  LogLevel level;
  if (!ParseLogLevel(flags.log_level, &level))
    return absl::InvalidArgumentError("--log-level must be debug, info, warning or error, got '" + flags.log_level +
                                      "'");
  SetLogComponent(component);
  SetLogLevel(level);
  if (flags.log_json) SetLogFormat(LogFormat::kJson);
  return absl::OkStatus();
}

void DisallowPortSharing(grpc::ServerBuilder& builder) {
  // gRPC sets SO_REUSEPORT by default: a second process could bind the same port and
  // silently receive a share of the calls (headers and credentials included).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(const std::string& address,
                                                              const std::vector<grpc::Service*>& services,
                                                              const GrpcServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  // The plugin registers itself per call: once per process (tests start several servers).
  static std::once_flag reflection_once;
  std::call_once(reflection_once, [] { grpc::reflection::InitProtoReflectionServerBuilderPlugin(); });
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  DisallowPortSharing(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    const size_t colon = address.rfind(':');
    const std::string port_text = colon == std::string::npos ? address : address.substr(colon + 1);
    return absl::UnavailableError("cannot listen on " + address + ": port " + port_text +
                                  " is in use by another process, or the address is not one of this host's");
  }
  if (options.bound_port != nullptr) *options.bound_port = port;
  return server;
}

}  // namespace orca::services
