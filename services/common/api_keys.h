#pragma once
/// Bearer API keys, shared by the gateway's public APIs (--api-keys,
/// --api-keys-file) and the scheduler's internal gRPC port, which takes the
/// same kind of key from its callers (the gateways and the workers):
///
///   authorization: Bearer <key>
///
/// Keys are compared in constant time. With no key configured every caller
/// passes (a port on loopback or behind a NetworkPolicy).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::services {

class ApiKeys {
 public:
  /// `keys` plus one key per line of `keys_file` (blank lines and lines
  /// starting with '#' skipped, whitespace trimmed). Errors name the flag
  /// `flag_prefix` + "-file" and the file.
  static absl::StatusOr<ApiKeys> Load(const std::vector<std::string>& keys, const std::string& keys_file,
                                      const std::string& flag_prefix = "--api-keys");

  bool enabled() const { return !keys_.empty(); }
  /// OK when no key is configured or `authorization_header` is "Bearer <a
  /// configured key>"; Unauthenticated saying what is missing or wrong.
  absl::Status Check(std::string_view authorization_header) const;
  /// Check() on a server call's "authorization" metadata.
  absl::Status CheckCall(const grpc::ServerContextBase& context) const;

 private:
  std::vector<std::string> keys_;
};

/// The key a client sends: `key`, or else the first key in `key_file`
/// (e.g. a mounted Secret); "" when both are empty.
absl::StatusOr<std::string> ReadClientKey(const std::string& key, const std::string& key_file,
                                          const std::string& flag = "--scheduler-api-key");
/// Adds "authorization: Bearer <key>" to a client call (nothing for "").
void AddBearerKey(grpc::ClientContext* context, const std::string& key);

}  // namespace orca::services
