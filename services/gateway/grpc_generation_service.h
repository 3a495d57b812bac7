#pragma once
/// orca.v1.Generation: the gateway's public gRPC API, with the capabilities
/// of the OpenAI HTTP API (text or token ids or chat messages in, text and
/// tokens with logprobs out, n choices, stop strings). Built on gRPC's
/// callback API: no handler blocks a callback thread; streamed output is
/// queued and written one message at a time.
///
/// Errors use gRPC codes (INVALID_ARGUMENT naming the field, NOT_FOUND for an
/// unknown model, UNAUTHENTICATED, RESOURCE_EXHAUSTED / UNAVAILABLE when over
/// capacity). A cancelled call cancels the request at the scheduler.
///
/// Generate, Tokenize and Detokenize take an admission ticket
/// (--max-concurrent-requests, shared with the HTTP API) and do their work on
/// the gateway's CpuPool (RESOURCE_EXHAUSTED when its queue is full); the
/// callback thread only checks the key and admission.

#include <grpcpp/grpcpp.h>

#include "absl/functional/any_invocable.h"
#include "core/common/cpu_pool.h"
#include "orca/v1/generation.grpc.pb.h"
#include "services/gateway/admission_controller.h"
#include "services/gateway/api_key_authenticator.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_pipeline.h"
#include "services/gateway/request_resolver.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

class GrpcGenerationService final : public orca::v1::Generation::CallbackService {
 public:
  /// Everything must outlive the service. `authenticator` may be null.
  struct Options {
    const GatewayModel* model = nullptr;
    SchedulerRouter* router = nullptr;
    GenerationPipeline* pipeline = nullptr;
    AdmissionController* admission = nullptr;
    const ApiKeyAuthenticator* authenticator = nullptr;
    /// Runs validation, chat templates, tokenization and constraint compilation
    /// of Generate, Tokenize and Detokenize: gRPC's callback threads also carry
    /// every scheduler stream's events, and must not be held by one request's
    /// CPU work. Required.
    CpuPool* cpu_pool = nullptr;
    absl::Duration chat_template_timeout = RequestResolver::kDefaultChatTemplateTimeout;
  };
  explicit GrpcGenerationService(Options options);

  grpc::ServerWriteReactor<orca::v1::TextGenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const orca::v1::TextGenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const orca::v1::TokenizeRequest* request,
                                     orca::v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context, const orca::v1::DetokenizeRequest* request,
                                       orca::v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context, const orca::v1::ListModelsRequest* request,
                                       orca::v1::ListModelsResponse* response) override;

 private:
  /// API key (from `authorization` metadata) and model name checks.
  absl::Status CheckCall(grpc::CallbackServerContext* context, const std::string& model) const;
  /// Checks the key and admission, then runs `work` on the CPU pool and
  /// finishes the call with its status (the unary calls).
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* context, const std::string& model,
                                    absl::AnyInvocable<absl::Status()> work);
  absl::Status AtCapacity() const;  ///< over --max-concurrent-requests
  absl::Status Busy() const;        ///< the CPU pool's queue is full
  /// Validates and tokenizes; `echo_texts` as in RequestResolver::Completion.
  absl::StatusOr<GenerationRequest> Resolve(const orca::v1::TextGenerateRequest& request,
                                            std::vector<std::string>* echo_texts) const;

  const Options options_;
  const RequestResolver resolver_;
};

}  // namespace orca::gateway
