#pragma once
/// What every service's main() does the same way: common flags (logging),
/// parsing with --help, and a gRPC server with health checking and reflection.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/flags.h"

namespace orca::services {

struct LoggingFlags {
  std::string log_level = "info";
  bool log_json = false;
};

/// Adds --log-level and --log-json.
void AddLoggingFlags(FlagSet* flags, LoggingFlags* out);
/// FlagSet::ParseForMain with --config and environment variables `<env_prefix>FLAG_NAME`.
std::optional<int> ParseFlagsOrExit(FlagSet& flags, int argc, char** argv, const std::string& env_prefix = "");
/// Sets the log component, level and format.
absl::Status ConfigureLogging(const std::string& component, const LoggingFlags& flags);
struct GrpcServerOptions {
  /// Largest request message accepted.
  int max_receive_message_bytes = 64 << 20;
  /// When set, receives the port bound (for an address with port 0).
  int* bound_port = nullptr;
};
/// Turns off gRPC's default SO_REUSEPORT on `builder`'s ports, so that binding a
/// port another process listens on fails instead of sharing its calls. Every
/// ServerBuilder in Orca calls it (StartGrpcServer does).
void DisallowPortSharing(grpc::ServerBuilder& builder);
/// Starts a gRPC server on `address` with `services`, gRPC health checking and
/// server reflection, its port not shared (DisallowPortSharing). Unavailable,
/// naming the address and the port, when it cannot listen (e.g. the port is in use).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(const std::string& address,
                                                              const std::vector<grpc::Service*>& services,
                                                              const GrpcServerOptions& options = {});

}  // namespace orca::services
