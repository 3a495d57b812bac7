#include "services/gateway/api_key_authenticator.h"

#include "core/common/status_macros.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {

absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> ApiKeyAuthenticator::Create(const std::vector<std::string>& keys,
                                                                                 const std::string& keys_file) {
  ORCA_ASSIGN_OR_RETURN(services::ApiKeys loaded, services::ApiKeys::Load(keys, keys_file));
  return std::unique_ptr<ApiKeyAuthenticator>(new ApiKeyAuthenticator(std::move(loaded)));
}

absl::Status ApiKeyAuthenticator::Authenticate(std::string_view header) const {
  absl::Status s = keys_.Check(header);
  return s.ok() ? s : WithErrorCode(std::move(s), "invalid_api_key");
}

}  // namespace orca::gateway
