#include "services/common/api_keys.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"

namespace orca::services {
namespace {

absl::StatusOr<std::vector<std::string>> KeysInFile(const std::string& path, const std::string& flag) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok())
    return absl::Status(contents.status().code(), absl::StrCat(flag, ": ", contents.status().message()));
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    std::string k(absl::StripAsciiWhitespace(line));
    if (!k.empty() && k[0] != '#') keys.push_back(std::move(k));
  }
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " holds no key"));
  return keys;
}

}  // namespace

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

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::vector<std::string>& keys, const std::string& keys_file,
                                      const std::string& flag_prefix) {
  ApiKeys out;
  for (const std::string& key : keys) {
    std::string k(absl::StripAsciiWhitespace(key));
    if (!k.empty()) out.keys_.push_back(std::move(k));
  }
  if (!keys_file.empty()) {
    ORCA_ASSIGN_OR_RETURN(std::vector<std::string> more, KeysInFile(keys_file, flag_prefix + "-file"));
    out.keys_.insert(out.keys_.end(), more.begin(), more.end());
  }
  return out;
}

absl::Status ApiKeys::Check(std::string_view header) const {
  if (keys_.empty()) return absl::OkStatus();
  const std::string value(absl::StripAsciiWhitespace(absl::string_view(header.data(), header.size())));
  if (value.empty()) return absl::UnauthenticatedError("Missing API key: send it as 'Authorization: Bearer <key>'");
  if (!absl::StartsWithIgnoreCase(value, "bearer "))
    return absl::UnauthenticatedError("The Authorization header must be 'Bearer <key>'");
  const std::string presented(absl::StripAsciiWhitespace(absl::string_view(value).substr(7)));
  bool ok = false;
  for (const std::string& key : keys_) ok |= ConstantTimeEquals(presented, key);
  if (!ok) return absl::UnauthenticatedError("Incorrect API key provided");
  return absl::OkStatus();
}

absl::Status ApiKeys::CheckCall(const grpc::ServerContextBase& context) const {
  if (keys_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  return Check(it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size()));
}

void AddBearerKey(grpc::ClientContext* context, const std::string& key) {
  if (!key.empty()) context->AddMetadata("authorization", "Bearer " + key);
}

}  // namespace orca::services
