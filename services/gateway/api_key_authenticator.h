#pragma once
/// Bearer-token authentication of the public APIs (--api-keys,
/// --api-keys-file): services::ApiKeys plus the OpenAI error code
/// "invalid_api_key". With no keys configured every request passes.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/api_keys.h"

namespace orca::gateway {

class ApiKeyAuthenticator {
 public:
  /// `keys_file`: one key per line; blank lines and lines starting with '#'
  /// are skipped, surrounding whitespace trimmed. NotFound/PermissionDenied
  /// errors name the file.
  static absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> Create(const std::vector<std::string>& keys,
                                                                     const std::string& keys_file);

  bool enabled() const { return keys_.enabled(); }
  /// Checks an `Authorization` header value. Unauthenticated (code
  /// "invalid_api_key") when keys are configured and it is missing or wrong.
  absl::Status Authenticate(std::string_view authorization_header) const;

 private:
  explicit ApiKeyAuthenticator(services::ApiKeys keys) : keys_(std::move(keys)) {}
  services::ApiKeys keys_;
};

}  // namespace orca::gateway
