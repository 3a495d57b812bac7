#pragma once
/// Bearer API keys of the gateway's public APIs (--api-keys, --api-keys-file):
///
///   authorization: Bearer <key>
///
/// Keys are compared in constant time. With no key configured every caller
/// passes. The internal ports (scheduler, workers) take the deployment's
/// internal token instead (internal_auth.h), which is required by default.

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

/// True when `a` and `b` are equal; the time taken depends only on their
/// lengths, not on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

/// Adds "authorization: Bearer <key>" to a client call (nothing for "").
void AddBearerKey(grpc::ClientContext* context, const std::string& key);

}  // namespace orca::services
