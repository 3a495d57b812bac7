#include "services/common/internal_auth.h"

#include <grpcpp/support/client_interceptor.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/logging.h"
#include "services/common/api_keys.h"
#include "services/common/internal_token.h"

namespace orca::services {
namespace {

constexpr char kBearer[] = "Bearer ";

// A refused call is worth a log line (a misconfigured peer, or a probe), but a flood of them is not
// worth a flood of lines: at most one a second, process-wide.
bool ShouldLogRefusal() {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  int64_t last = last_ms.load(std::memory_order_relaxed);
  return now - last >= 1000 && last_ms.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

class AuthorizingInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit AuthorizingInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // owned by the factory, which the channel keeps
};

class AuthorizingFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AuthorizingFactory(std::string header) : header_(std::move(header)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new AuthorizingInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<InternalAuth> InternalAuth::FromTokens(std::vector<std::string> tokens, absl::string_view source) {
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no internal token"));
  for (std::string& t : tokens) {
    t = std::string(absl::StripAsciiWhitespace(t));
    if (absl::Status s = ValidateInternalToken(t, source); !s.ok()) return s;
  }
  InternalAuth auth;
  auth.tokens_ = std::move(tokens);
  return auth;
}

const std::string& InternalAuth::token() const {
  static const std::string kNone;
  return tokens_.empty() ? kNone : tokens_.front();
}

absl::Status InternalAuth::Check(absl::string_view header) const {
  if (tokens_.empty()) return absl::OkStatus();
  const absl::string_view value = absl::StripAsciiWhitespace(absl::string_view(header.data(), header.size()));
  if (value.empty()) {
    return absl::UnauthenticatedError(
        "missing internal credential: this internal port wants 'authorization: Bearer <internal token>' "
        "(give the caller the same --internal-token-file)");
  }
  if (!absl::StartsWithIgnoreCase(value, kBearer)) {
    return absl::UnauthenticatedError("the internal credential must be sent as 'authorization: Bearer <token>'");
  }
  const absl::string_view presented = absl::StripAsciiWhitespace(value.substr(sizeof(kBearer) - 1));
  bool ok = false;
  for (const std::string& t : tokens_) ok |= ConstantTimeEquals({presented.data(), presented.size()}, t);
  if (!ok) {
    return absl::UnauthenticatedError(
        "wrong internal credential: the caller's --internal-token-file holds another token than this process's");
  }
  return absl::OkStatus();
}

absl::Status InternalAuth::CheckCall(const grpc::ServerContextBase& context) const {
  if (tokens_.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  absl::Status s =
      Check(it == metadata.end() ? absl::string_view() : absl::string_view(it->second.data(), it->second.size()));
  // A second authorization entry is ambiguous (which one did a proxy check?): refused.
  if (s.ok() && metadata.count("authorization") > 1)
    s = absl::UnauthenticatedError("more than one authorization entry in the call's metadata");
  if (!s.ok() && ShouldLogRefusal()) {
    ORCA_LOG(WARNING) << "refused an internal call from " << context.peer() << ": " << s.message();
  }
  return s;
}

void InternalAuth::Authorize(grpc::ClientContext* context) const {
  if (!tokens_.empty()) context->AddMetadata("authorization", absl::StrCat(kBearer, tokens_.front()));
}

void AddInternalAuthFlags(FlagSet* flags, InternalAuthFlags* out) {
  flags->AddString("internal-token-file", &out->token_file,
                   "File holding the deployment's internal token (the first line is sent, every line accepted; e.g. "
                   "a mounted Secret; orca serve and the operator make one). Every internal gRPC port requires it "
                   "and every internal client sends it. Or set ORCA_INTERNAL_TOKEN; never on the command line");
  flags->AddBool("insecure-internal", &out->insecure,
                 "Run without an internal credential: the internal ports take calls from anyone who can connect "
                 "(who may then submit, cancel and reset work). Only on a network nobody else reaches");
}

absl::StatusOr<InternalAuth> LoadInternalAuth(const InternalAuthFlags& flags,
                                              const std::vector<LegacyCredentialFlag>& legacy) {
  std::vector<std::string> sources;
  if (!flags.token_file.empty()) sources.push_back("--internal-token-file");
  const char* env = std::getenv(kInternalTokenEnv);
  const bool from_env = env != nullptr && !absl::StripAsciiWhitespace(env).empty();
  if (from_env) sources.push_back(kInternalTokenEnv);
  for (const LegacyCredentialFlag& l : legacy)
    if (l.given()) sources.push_back(l.flag);
  if (sources.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("the internal credential is given twice (",
                                                   absl::StrJoin(sources, " and "), "): give one of them"));
  }
  if (flags.insecure) {
    if (!sources.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--insecure-internal and ", sources[0], " contradict each other: give one of them"));
    }
    ORCA_LOG(WARNING) << "--insecure-internal: the internal gRPC ports take calls from anyone who can connect";
    return InternalAuth::Insecure();
  }
  if (!flags.token_file.empty()) {
    auto tokens = ReadInternalTokenFile(flags.token_file, "--internal-token-file");
    if (!tokens.ok()) return tokens.status();
    return InternalAuth::FromTokens(*std::move(tokens), "--internal-token-file");
  }
  if (from_env) return InternalAuth::FromTokens({std::string(env)}, kInternalTokenEnv);
  for (const LegacyCredentialFlag& l : legacy) {
    if (!l.given()) continue;
    ORCA_LOG(WARNING) << l.flag << " is deprecated: it now sets the internal credential; use --internal-token-file";
    if (l.file.empty()) return InternalAuth::FromTokens(l.tokens, l.flag);
    auto tokens = ReadInternalTokenFile(l.file, l.flag);
    if (!tokens.ok()) return tokens.status();
    return InternalAuth::FromTokens(*std::move(tokens), l.flag);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no internal credential: give --internal-token-file (a file holding the token shared by the deployment's "
      "orca-scheduler, orca-worker and orca-gateway processes; make one with `openssl rand -hex 32`) or set ",
      kInternalTokenEnv, ", or run with --insecure-internal on a network nobody else reaches"));
}

grpc::ServerUnaryReactor* RefuseUnary(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> AuthorizingInterceptorFactory(
    const InternalAuth& auth) {
  if (!auth.enabled()) return nullptr;
  return std::make_unique<AuthorizingFactory>(absl::StrCat(kBearer, auth.token()));
}

}  // namespace orca::services
