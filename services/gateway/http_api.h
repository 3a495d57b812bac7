#pragma once
/// The gateway's HTTP routes: the OpenAI-compatible API (/v1/completions,
/// /v1/chat/completions, /v1/models), /tokenize and /detokenize, and the
/// operational endpoints (/health, /ready, /metrics, which need no API key).
///
/// Each generation request is: admission (503 when over
/// --max-concurrent-requests) → API key → parse/validate (400 naming the
/// field) → model check (404) → tokenize and fit to the context (400) →
/// pipeline (503 when no scheduler is ready) → a CompletionResponder streams
/// or assembles the answer. A client that disconnects cancels its request at
/// the scheduler at once.

#include <atomic>
#include <memory>
#include <string>

#include "core/metrics/orca_metrics.h"
#include "core/metrics/registry.h"
#include "services/gateway/admission_controller.h"
#include "services/gateway/api_error.h"
#include "services/gateway/api_key_authenticator.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_pipeline.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/openai_response.h"
#include "services/gateway/request_resolver.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

class HttpApi {
 public:
  /// Everything must outlive the HttpApi. `registry` and `metrics` may be null.
  struct Options {
    const GatewayModel* model = nullptr;
    SchedulerRouter* router = nullptr;
    GenerationPipeline* pipeline = nullptr;
    const ApiKeyAuthenticator* authenticator = nullptr;
    AdmissionController* admission = nullptr;
    const metrics::Registry* registry = nullptr;
    const metrics::GatewayMetrics* metrics = nullptr;
    /// Set while the gateway drains (SIGTERM): /ready answers 503 "draining"
    /// and generation requests 503 + Retry-After. Null: never.
    const std::atomic<bool>* draining = nullptr;
  };
  explicit HttpApi(Options options);

  /// The HttpServer handler.
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange);
  /// The route template for metrics labels (bounded set; "other" otherwise).
  static const char* RouteTemplate(const std::string& path);

 private:
  void HandleGeneration(OpenAiApi api, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  absl::Status StartGeneration(OpenAiApi api, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                               AdmissionTicket& ticket);
  HttpResponse Models(const std::string& path) const;
  absl::StatusOr<HttpResponse> Tokenize(const HttpRequest& request) const;
  absl::StatusOr<HttpResponse> Detokenize(const HttpRequest& request) const;
  HttpResponse Ready() const;
  bool Draining() const;
  HttpResponse Metrics() const;

  const Options options_;
  const RequestResolver resolver_;
};

}  // namespace orca::gateway
