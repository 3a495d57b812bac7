#include "services/gateway/api_key_authenticator.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {
namespace {

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> ApiKeyAuthenticator::Create(const std::vector<std::string>& keys,
                                                                                 const std::string& keys_file) {
  std::vector<std::string> all;
  for (const std::string& key : keys) {
    std::string k(absl::StripAsciiWhitespace(key));
    if (!k.empty()) all.push_back(std::move(k));
  }
  if (!keys_file.empty()) {
    ORCA_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(keys_file));
    for (absl::string_view line : absl::StrSplit(contents, '\n')) {
      std::string k(absl::StripAsciiWhitespace(line));
      if (!k.empty() && k[0] != '#') all.push_back(std::move(k));
    }
    if (all.empty()) return absl::InvalidArgumentError("--api-keys-file " + keys_file + " holds no key");
  }
  return std::unique_ptr<ApiKeyAuthenticator>(new ApiKeyAuthenticator(std::move(all)));
}

absl::Status ApiKeyAuthenticator::Authenticate(std::string_view header) const {
  if (keys_.empty()) return absl::OkStatus();
  std::string value(absl::StripAsciiWhitespace(absl::string_view(header.data(), header.size())));
  if (value.empty()) {
    return WithErrorCode(absl::UnauthenticatedError("Missing API key: send it as 'Authorization: Bearer <key>'"),
                         "invalid_api_key");
  }
  if (!absl::StartsWithIgnoreCase(value, "bearer ")) {
    return WithErrorCode(absl::UnauthenticatedError("The Authorization header must be 'Bearer <key>'"),
                         "invalid_api_key");
  }
  const std::string presented(absl::StripAsciiWhitespace(absl::string_view(value).substr(7)));
  bool ok = false;
  for (const std::string& key : keys_) ok |= ConstantTimeEquals(presented, key);
  if (!ok) return WithErrorCode(absl::UnauthenticatedError("Incorrect API key provided"), "invalid_api_key");
  return absl::OkStatus();
}

}  // namespace orca::gateway
