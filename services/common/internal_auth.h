#pragma once
/// Internal authentication: every internal gRPC port of a deployment (the
/// scheduler's orca.v1.Scheduler, every worker's orca.v1.Worker) requires
/// the deployment's internal token in every call, and every internal client
/// (gateway -> scheduler, scheduler -> workers, worker -> next worker,
/// worker -> scheduler rendezvous) sends it:
///
///   authorization: Bearer <internal token>
///
/// Without it a call ends UNAUTHENTICATED before its handler does anything,
/// so nobody who merely reaches a port can submit, cancel or reset work.
///
/// Why a shared bearer token rather than mTLS: every process of a deployment
/// is one trust domain (any of them may drive the others), so one secret per
/// deployment says all there is to say; it costs nothing per call, needs no
/// CA, certificate rotation or SAN planning, and is made by `orca serve` per
/// run and by the operator per OrcaDeployment (a Secret). What it does not
/// give is confidentiality on the wire: the token, prompts and tokens travel
/// in clear text, as they did before. Where the network between pods is not
/// trusted, run a mesh (Istio, Linkerd, Cilium) for transport encryption; the
/// token still decides who may call, and the NetworkPolicy stays as defence
/// in depth.
///
/// Where the token comes from (LoadInternalAuth): --internal-token-file (a
/// mounted Secret) or the environment variable ORCA_INTERNAL_TOKEN; never a
/// command-line value, which `ps` shows to every user of the machine. With
/// neither, a process refuses to start unless --insecure-internal says to
/// run without a credential.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/flags.h"
#include "services/common/grpc_status.h"
#include "services/common/server_stream_writer.h"

namespace orca::services {

class InternalAuth {
 public:
  /// No credential: every caller passes and nothing is sent (--insecure-internal).
  static InternalAuth Insecure() { return InternalAuth(); }
  /// Accepts each of `tokens` and sends the first. InvalidArgument naming
  /// `source` for an empty list or an invalid token (internal_token.h).
  static absl::StatusOr<InternalAuth> FromTokens(std::vector<std::string> tokens, absl::string_view source);

  bool enabled() const { return !tokens_.empty(); }
  /// The token sent; "" when insecure.
  const std::string& token() const;

  /// OK when insecure or `authorization_header` is "Bearer <an accepted token>"
  /// (compared in constant time); Unauthenticated saying what is missing or
  /// wrong, never echoing what was presented.
  absl::Status Check(absl::string_view authorization_header) const;
  /// Check() on a server call's "authorization" metadata. A refusal is logged
  /// with the caller's address (at most once a second).
  absl::Status CheckCall(const grpc::ServerContextBase& context) const;
  /// Adds "authorization: Bearer <token>" to a client call (nothing when insecure).
  void Authorize(grpc::ClientContext* context) const;

 private:
  InternalAuth() = default;

  std::vector<std::string> tokens_;
};

/// --internal-token-file and --insecure-internal.
struct InternalAuthFlags {
  std::string token_file;
  bool insecure = false;
};
void AddInternalAuthFlags(FlagSet* flags, InternalAuthFlags* out);

/// A deprecated spelling of the internal credential that a binary still
/// accepts (the scheduler's --api-keys-file, the gateway's and workers'
/// --scheduler-api-key-file, ...): a file, or tokens given on the command line.
struct LegacyCredentialFlag {
  std::string flag;  ///< e.g. "--api-keys-file"
  std::string file;
  std::vector<std::string> tokens;
  bool given() const { return !file.empty() || !tokens.empty(); }
};

/// The process's credential from exactly one source: --internal-token-file,
/// ORCA_INTERNAL_TOKEN or one of `legacy`; with none, Insecure() if
/// --insecure-internal is set, else InvalidArgument naming --internal-token-file.
/// Two sources, or a source with --insecure-internal, are InvalidArgument naming both.
absl::StatusOr<InternalAuth> LoadInternalAuth(const InternalAuthFlags& flags,
                                              const std::vector<LegacyCredentialFlag>& legacy = {});

/// A call refused before its handler did anything (e.g. by CheckCall): the
/// reactor finishes at once with `status` and deletes itself when done.
grpc::ServerUnaryReactor* RefuseUnary(grpc::CallbackServerContext* context, const absl::Status& status);
template <typename Request>
grpc::ServerReadReactor<Request>* RefuseRead(const absl::Status& status);
template <typename Response>
grpc::ServerWriteReactor<Response>* RefuseWrite(const absl::Status& status);

/// A client interceptor factory that authorizes every call of a channel with
/// `auth` (services/common/channels.h builds internal channels with it), so
/// that no call site can forget to; null when `auth` is insecure.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> AuthorizingInterceptorFactory(
    const InternalAuth& auth);

// ---- implementation of the templates ----

namespace internal {
/// A `Reactor` (a server read or write reactor) that finishes with `status`
/// as it is built and deletes itself when done.
template <typename Reactor>
Reactor* Refuse(const absl::Status& status) {
  class Refused final : public Reactor {
   public:
    // Built on the handler's thread, done on gRPC's: the hand-off is stated to ThreadSanitizer.
    explicit Refused(grpc::Status s) {
      ORCA_GRPC_HANDS_OFF(this);
      this->Finish(std::move(s));
    }
    void OnDone() override {
      ORCA_GRPC_REACTS(this);
      delete this;
    }
  };
  return new Refused(ToGrpcStatus(status));
}
}  // namespace internal

template <typename Request>
grpc::ServerReadReactor<Request>* RefuseRead(const absl::Status& status) {
  return internal::Refuse<grpc::ServerReadReactor<Request>>(status);
}

template <typename Response>
grpc::ServerWriteReactor<Response>* RefuseWrite(const absl::Status& status) {
  return internal::Refuse<grpc::ServerWriteReactor<Response>>(status);
}

}  // namespace orca::services
