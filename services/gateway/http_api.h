#pragma once
/// The gateway's HTTP routes: the OpenAI-compatible API (/v1/completions,
/// /v1/chat/completions, /v1/models), /tokenize and /detokenize, and the
/// operational endpoints (/health, /ready, /metrics).
///
/// The I/O thread that read a request only routes it, checks the API key and
/// admission, and hands the rest to the CPU pool; /health, /ready, /metrics
/// and /v1/models are answered on the I/O thread (they are cheap), so they
/// never wait behind a slow request:
///
///   I/O thread:  route → API key (401) → [generation: draining → 503]
///                → admission ticket (503 + Retry-After over
///                  --max-concurrent-requests; /tokenize and /detokenize too)
///                → CpuPool::TrySubmit (503 + Retry-After when its queue is full)
///   CPU pool:    client gone while queued? → skip (ticket released)
///                → parse/validate (400 naming the field) → model check (404)
///                → template, tokenize, fit to the context, compile constraints (400)
///                → pipeline (503 when no scheduler is ready) → a
///                  CompletionResponder streams or assembles the answer.
///
/// The admission ticket is released on every path (answer, error, client
/// gone, shutdown), before the response can reach the client. A client that
/// disconnects cancels its request at the scheduler at once.
///
/// /ready without a valid API key (when --api-keys is set) shows only
/// {"status": ...}; /metrics needs the key only with --metrics-require-api-key.

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/common/cpu_pool.h"
#include "core/metrics/orca_metrics.h"
#include "core/metrics/registry.h"
#include "services/gateway/admission_controller.h"
#include "services/gateway/api_error.h"
#include "services/gateway/api_key_authenticator.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_pipeline.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/openai_response.h"
#include "services/gateway/output_budget.h"
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
    /// Runs the CPU work of the generation routes, /tokenize and /detokenize. Required.
    CpuPool* cpu_pool = nullptr;
    /// --chat-template-timeout-seconds: the wall-clock budget of one chat template rendering.
    absl::Duration chat_template_timeout = RequestResolver::kDefaultChatTemplateTimeout;
    /// --metrics-require-api-key: /metrics needs the API key too (when keys are set).
    bool metrics_require_api_key = false;
    /// The gateway-wide output budget, reported in /ready's details. Null: none.
    const OutputBudget* output_budget = nullptr;
  };
  explicit HttpApi(Options options);

  /// The HttpServer handler.
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange);
  /// The route template for metrics labels (bounded set; "other" otherwise).
  static const char* RouteTemplate(const std::string& path);

 private:
  class ClientWatch;
  enum class Work { kCompletions, kChat, kTokenize, kDetokenize };

  /// On the I/O thread: admission, then the CPU pool.
  void Offload(Work work, HttpRequest request, const std::shared_ptr<HttpExchange>& exchange);
  /// On the CPU pool: the work itself, ending in a response or a started generation.
  void RunWork(Work work, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
               AdmissionTicket& ticket, ClientWatch& watch);
  absl::Status StartGeneration(OpenAiApi api, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                               AdmissionTicket& ticket, ClientWatch& watch);
  HttpResponse Models(const std::string& path) const;
  absl::StatusOr<HttpResponse> Tokenize(const HttpRequest& request) const;
  absl::StatusOr<HttpResponse> Detokenize(const HttpRequest& request) const;
  /// The full body with `detailed` (schedulers, memory, CPU pool), else only the status.
  HttpResponse Ready(bool detailed) const;
  bool Draining() const;
  HttpResponse Metrics() const;
  /// True when no API keys are configured or the request carries a valid one.
  bool HasValidKey(const HttpRequest& request) const;

  const Options options_;
  const RequestResolver resolver_;
};

}  // namespace orca::gateway
