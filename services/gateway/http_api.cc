#include "services/gateway/http_api.h"

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/common/logging.h"
#include "core/common/process_memory.h"
#include "core/common/status_macros.h"
#include "services/gateway/completion_responder.h"
#include "services/gateway/openai_request.h"

namespace orca::gateway {
namespace {

using nlohmann::json;

HttpResponse JsonResponse(int status, const json& body) {
  HttpResponse response;
  response.status = status;
  response.body = DumpJson(body);
  return response;
}

// Records orca:http_requests_total and the duration once per exchange, when
// its response ends (or the client leaves: status 499).
class MeteredExchange : public HttpExchange, public std::enable_shared_from_this<MeteredExchange> {
 public:
  MeteredExchange(std::shared_ptr<HttpExchange> inner, const metrics::GatewayMetrics* metrics, std::string route,
                  std::string method)
      : inner_(std::move(inner)),
        metrics_(metrics),
        route_(std::move(route)),
        method_(std::move(method)),
        start_(std::chrono::steady_clock::now()) {}

  void Respond(HttpResponse response) override {
    Record(response.status);
    inner_->Respond(std::move(response));
  }
  void StartStream(int status, std::string content_type, HttpHeaders headers) override {
    stream_status_ = status;
    inner_->StartStream(status, std::move(content_type), std::move(headers));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  bool ReadyForMore(std::function<void(const absl::Status&)> on_ready) override {
    return inner_->ReadyForMore(std::move(on_ready));  // the output budget's backpressure (h3, issue 45)
  }
  void EndStream() override {
    Record(stream_status_.load());
    inner_->EndStream();
  }
  void SetDisconnectHandler(std::function<void()> handler) override {
    inner_->SetDisconnectHandler([weak = weak_from_this(), handler = std::move(handler)] {
      handler();
      // The client closed the connection. Recorded after the handler ran, so that a 499 in
      // /metrics means the request knows its client is gone.
      if (auto self = weak.lock()) self->Record(499);
    });
  }

 private:
  void Record(int status) {
    if (metrics_ == nullptr || recorded_.exchange(true)) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    metrics_->RecordRequest(route_, method_, status, seconds);
  }

  const std::shared_ptr<HttpExchange> inner_;
  const metrics::GatewayMetrics* const metrics_;
  const std::string route_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int> stream_status_{200};
  std::atomic<bool> recorded_{false};
};

/// This process's resident memory for /ready (core/common/process_memory.h), or why it is unknown.
json MemoryJson() {
  const absl::StatusOr<ProcessMemory> memory = ReadProcessMemory();
  return memory.ok() ? json::parse(memory->ToJson()) : json{{"error", std::string(memory.status().message())}};
}

bool NeedsApiKey(const std::string& path) { return path != "/health" && path != "/ready" && path != "/metrics"; }

HttpResponse Unauthorized(const absl::Status& status) {
  HttpResponse response = ApiError::FromStatus(status).ToHttpResponse();
  response.headers.emplace_back("WWW-Authenticate", "Bearer");
  return response;
}

HttpResponse RetryLater(std::string message) {
  return ApiError::FromStatus(WithRetryAfter(absl::UnavailableError(std::move(message)), 1)).ToHttpResponse();
}

}  // namespace

// Whether the client of an offloaded request is still there. Set up on the
// I/O thread before the work is queued (so that a disconnect while it waits is
// seen), read by the CPU pool; once the generation started, a disconnect
// cancels it.
class HttpApi::ClientWatch {
 public:
  /// The exchange's disconnect handler (an I/O thread; must not block).
  void ClientGone() {
    std::shared_ptr<GenerationHandle> handle;
    {
      absl::MutexLock lock(&mu_);
      gone_ = true;
      handle = handle_.lock();
    }
    if (handle) handle->Cancel();
  }
  bool gone() const {
    absl::MutexLock lock(&mu_);
    return gone_;
  }
  /// The started generation; cancelled at once if the client already left.
  void Attach(const std::shared_ptr<GenerationHandle>& handle) {
    {
      absl::MutexLock lock(&mu_);
      handle_ = handle;
      if (!gone_) return;
    }
    handle->Cancel();
  }

 private:
  mutable absl::Mutex mu_;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  std::weak_ptr<GenerationHandle> handle_ ABSL_GUARDED_BY(mu_);
};

HttpApi::HttpApi(Options options)
    : options_(options), resolver_(options.model, options.router, options.chat_template_timeout) {}

const char* HttpApi::RouteTemplate(const std::string& path) {
  static constexpr const char* kRoutes[] = {
      "/v1/completions", "/v1/chat/completions", "/v1/models", "/tokenize", "/detokenize", "/health", "/ready",
      "/metrics"};
  for (const char* route : kRoutes) {
    if (path == route) return route;
  }
  if (absl::StartsWith(path, "/v1/models/")) return "/v1/models/{model}";
  return "other";
}

void HttpApi::Handle(HttpRequest request, std::shared_ptr<HttpExchange> raw_exchange) {
  const std::string route = RouteTemplate(request.path);
  auto exchange = std::make_shared<MeteredExchange>(std::move(raw_exchange), options_.metrics, route, request.method);
  auto method_not_allowed = [&](const char* allowed) {
    HttpResponse response = ApiError::FromHttp(405, absl::StrCat("Method ", request.method, " is not allowed on ",
                                                                 request.path, "; use ", allowed))
                                .ToHttpResponse();
    response.headers.emplace_back("Allow", allowed);
    exchange->Respond(std::move(response));
  };
  const bool is_get = request.method == "GET";
  const bool is_post = request.method == "POST";

  if (route == "/health") {
    is_get ? exchange->Respond(JsonResponse(200, {{"status", "ok"}})) : method_not_allowed("GET");
    return;
  }
  if (route == "/ready") {
    // Probes carry no key: they get the status; the details (addresses, memory) need one.
    is_get ? exchange->Respond(Ready(/*detailed=*/HasValidKey(request))) : method_not_allowed("GET");
    return;
  }
  if (route == "/metrics") {
    if (!is_get) {
      method_not_allowed("GET");
    } else if (options_.metrics_require_api_key && !HasValidKey(request)) {
      exchange->Respond(Unauthorized(options_.authenticator->Authenticate(request.Header("authorization"))));
    } else {
      exchange->Respond(Metrics());
    }
    return;
  }
  if (route == "other") {
    exchange->Respond(ApiError::FromHttp(404, absl::StrCat("Not found: ", request.path)).ToHttpResponse());
    return;
  }
  if (NeedsApiKey(request.path) && options_.authenticator != nullptr) {
    absl::Status auth = options_.authenticator->Authenticate(request.Header("authorization"));
    if (!auth.ok()) {
      exchange->Respond(Unauthorized(auth));
      return;
    }
  }
  if (route == "/v1/models" || route == "/v1/models/{model}") {
    is_get ? exchange->Respond(Models(request.path)) : method_not_allowed("GET");
    return;
  }
  if (!is_post) {
    method_not_allowed("POST");
    return;
  }
  const Work work = route == "/v1/completions"        ? Work::kCompletions
                    : route == "/v1/chat/completions" ? Work::kChat
                    : route == "/tokenize"            ? Work::kTokenize
                                                      : Work::kDetokenize;
  Offload(work, std::move(request), exchange);
}

void HttpApi::Offload(Work work, HttpRequest request, const std::shared_ptr<HttpExchange>& exchange) {
  const bool generation = work == Work::kCompletions || work == Work::kChat;
  if (generation && Draining()) {
    exchange->Respond(
        RetryLater("The gateway is shutting down and takes no new requests; retry (another replica serves it)"));
    return;
  }
  std::optional<AdmissionTicket> ticket = options_.admission->TryAdmit();
  if (!ticket) {
    exchange->Respond(RetryLater(absl::StrCat("The server is at capacity (", options_.admission->max_in_flight(),
                                              " concurrent requests); retry later")));
    return;
  }
  auto watch = std::make_shared<ClientWatch>();
  exchange->SetDisconnectHandler([watch] { watch->ClientGone(); });
  CpuPool& pool = *options_.cpu_pool;
  const bool queued = pool.TrySubmit([this, work, request = std::move(request), exchange, ticket = std::move(*ticket),
                                      watch](CpuPool::Mode mode) mutable {
    if (mode == CpuPool::Mode::kCancelled) {
      ticket.Release();
      exchange->Respond(RetryLater("The gateway is shutting down; retry the request"));
      return;
    }
    // A client that left while its work waited gets none done; the ticket goes with the task.
    if (watch->gone()) return;
    RunWork(work, request, exchange, ticket, *watch);
  });
  if (!queued) {
    // The task (and with it the ticket) is already gone.
    exchange->Respond(RetryLater(absl::StrCat("The server is busy (", pool.num_threads(), " CPU threads busy and ",
                                              pool.max_queued(), " requests waiting for them); retry later")));
  }
}

void HttpApi::RunWork(Work work, const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                      AdmissionTicket& ticket, ClientWatch& watch) {
  if (work == Work::kTokenize || work == Work::kDetokenize) {
    absl::StatusOr<HttpResponse> response = work == Work::kTokenize ? Tokenize(request) : Detokenize(request);
    ticket.Release();  // before the client can see the answer and send its next request
    exchange->Respond(response.ok() ? std::move(response).value()
                                    : ApiError::FromStatus(response.status()).ToHttpResponse());
    return;
  }
  const OpenAiApi api = work == Work::kCompletions ? OpenAiApi::kCompletions : OpenAiApi::kChat;
  absl::Status status = StartGeneration(api, request, exchange, ticket, watch);
  if (!status.ok()) {
    ticket.Release();
    exchange->Respond(ApiError::FromStatus(status).ToHttpResponse());
  }
}

absl::Status HttpApi::StartGeneration(OpenAiApi api, const HttpRequest& request,
                                      const std::shared_ptr<HttpExchange>& exchange, AdmissionTicket& ticket,
                                      ClientWatch& watch) {
  CompletionResponder::Options responder;
  responder.received = absl::Now();
  ORCA_ASSIGN_OR_RETURN(RequestJson body, ParseJsonObject(request.body));
  GenerationRequest generation;
  GenerationOptions options;
  if (api == OpenAiApi::kCompletions) {
    ORCA_ASSIGN_OR_RETURN(CompletionRequest parsed, ParseCompletionRequest(body));
    ORCA_RETURN_IF_ERROR(resolver_.CheckModel(parsed.model));
    ORCA_ASSIGN_OR_RETURN(int32_t max_model_len, resolver_.MaxModelLen());
    ORCA_ASSIGN_OR_RETURN(generation, resolver_.Completion(parsed, max_model_len, &responder.echo_texts));
    if (!parsed.echo) responder.echo_texts.clear();
    responder.format.echo_logprobs = parsed.echo && parsed.logprobs.has_value();
    options = parsed.options;
    generation.request_id = NewRequestId("cmpl-");
  } else {
    ORCA_ASSIGN_OR_RETURN(ChatRequest parsed, ParseChatRequest(body));
    ORCA_RETURN_IF_ERROR(resolver_.CheckModel(parsed.model));
    ORCA_ASSIGN_OR_RETURN(int32_t max_model_len, resolver_.MaxModelLen());
    ORCA_ASSIGN_OR_RETURN(generation, resolver_.Chat(parsed, max_model_len));
    options = parsed.options;
    if (parsed.tools.active()) {
      responder.tool_format = options_.model->tool_call_format();
      responder.tool_names = parsed.tools.names();
    }
    generation.request_id = NewRequestId("chatcmpl-");
  }
  responder.format.api = api;
  responder.format.id = generation.request_id;
  responder.format.created = static_cast<int64_t>(std::time(nullptr));
  responder.format.model = options_.model->name();
  responder.format.num_choices = generation.num_choices();
  responder.format.logprobs = generation.sampling.logprobs;
  responder.format.top_logprobs = generation.sampling.top_logprobs;
  responder.format.prompt_logprobs = options.prompt_logprobs;
  responder.format.include_usage = options.include_usage;
  responder.format.return_token_ids = options.return_token_ids;
  responder.stream = options.stream;
  responder.n = generation.n;
  responder.request_id = generation.request_id;

  auto observer = std::make_shared<CompletionResponder>(std::move(responder), exchange, std::move(ticket));
  ORCA_ASSIGN_OR_RETURN(std::shared_ptr<GenerationHandle> handle,
                        options_.pipeline->Start(std::move(generation), std::move(observer)));
  watch.Attach(handle);
  return absl::OkStatus();
}

HttpResponse HttpApi::Models(const std::string& path) const {
  const GatewayModel& model = *options_.model;
  json card = {{"id", model.name()}, {"object", "model"},    {"created", model.created()},
               {"owned_by", "orca"}, {"root", model.name()}, {"parent", nullptr}};
  absl::StatusOr<int32_t> max_len = resolver_.MaxModelLen();
  card["max_model_len"] = max_len.ok() ? json(*max_len) : json(nullptr);
  if (path != "/v1/models") {
    const std::string id = path.substr(std::string("/v1/models/").size());
    if (id != model.name()) return ApiError::FromStatus(resolver_.CheckModel(id)).ToHttpResponse();
    return JsonResponse(200, card);
  }
  return JsonResponse(200, {{"object", "list"}, {"data", json::array({card})}});
}

absl::StatusOr<HttpResponse> HttpApi::Tokenize(const HttpRequest& request) const {
  ORCA_ASSIGN_OR_RETURN(RequestJson body, ParseJsonObject(request.body));
  ORCA_ASSIGN_OR_RETURN(TokenizeRequest parsed, ParseTokenizeRequest(body));
  ORCA_RETURN_IF_ERROR(resolver_.CheckModel(parsed.model));
  std::string text;
  bool add_special = true;
  if (parsed.prompt) {
    text = *parsed.prompt;
    add_special = parsed.add_special_tokens.value_or(true);
  } else {
    ORCA_ASSIGN_OR_RETURN(text, resolver_.RenderChat(parsed.messages, parsed.add_generation_prompt,
                                                     parsed.chat_template_kwargs,
                                                     parsed.tools.active() ? parsed.tools.TemplateJson() : ""));
    add_special = parsed.add_special_tokens.value_or(false);
  }
  const text::Tokenizer& tokenizer = options_.model->tokenizer();
  std::vector<int32_t> ids = tokenizer.Encode(text, add_special);
  absl::StatusOr<int32_t> max_len = resolver_.MaxModelLen();
  json out = {{"count", ids.size()}, {"max_model_len", max_len.ok() ? json(*max_len) : json(nullptr)}, {"tokens", ids}};
  if (parsed.return_token_strs) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(tokenizer.IdToToken(id));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return JsonResponse(200, out);
}

absl::StatusOr<HttpResponse> HttpApi::Detokenize(const HttpRequest& request) const {
  ORCA_ASSIGN_OR_RETURN(RequestJson body, ParseJsonObject(request.body));
  ORCA_ASSIGN_OR_RETURN(DetokenizeRequest parsed, ParseDetokenizeRequest(body));
  ORCA_RETURN_IF_ERROR(resolver_.CheckModel(parsed.model));
  ORCA_RETURN_IF_ERROR(resolver_.CheckTokenIds(parsed.tokens, "tokens"));
  absl::StatusOr<std::string> text = options_.model->tokenizer().Decode(parsed.tokens, parsed.skip_special_tokens);
  if (!text.ok()) return WithParam(absl::InvalidArgumentError(std::string(text.status().message())), "tokens");
  return JsonResponse(200, {{"prompt", *text}});
}

bool HttpApi::Draining() const { return options_.draining != nullptr && options_.draining->load(); }

bool HttpApi::HasValidKey(const HttpRequest& request) const {
  return options_.authenticator == nullptr ||
         options_.authenticator->Authenticate(request.Header("authorization")).ok();
}

HttpResponse HttpApi::Ready(bool detailed) const {
  const bool draining = Draining();
  const bool ready = !draining && options_.router->AnyReady();
  const char* status = draining ? "draining" : ready ? "ready" : "not_ready";
  if (!detailed) return JsonResponse(ready ? 200 : 503, {{"status", status}});
  json schedulers = json::array();
  for (const SchedulerStatus& s : options_.router->Snapshot()) {
    schedulers.push_back({{"address", s.address},
                          {"ready", s.ready},
                          {"reason", s.not_ready_reason},
                          {"outstanding", s.outstanding},
                          {"model_name", s.has_stats ? json(s.stats.model_name()) : json(nullptr)},
                          // As of the last poll (about a second old).
                          {"num_requests_running", s.stats.num_requests_running()},
                          {"num_requests_waiting", s.stats.num_requests_waiting()},
                          {"kv_slots_used", s.stats.kv_slots_used()},
                          {"kv_slots_total", s.stats.kv_slots_total()},
                          // KV by layer type: the sliding-window layers' own pool (0 and 0: none).
                          {"kv_local_slots_used", s.stats.kv_local_slots_used()},
                          {"kv_local_slots_total", s.stats.kv_local_slots_total()},
                          {"iterations", s.stats.iterations()}});
  }
  const CpuPool& pool = *options_.cpu_pool;
  json output = nullptr;  // --max-buffered-output-bytes 0: no budget
  if (const OutputBudget* b = options_.output_budget; b != nullptr) {
    output = {{"max_bytes", b->options().max_bytes}, {"buffered_bytes", b->buffered_bytes()},
              {"peak_bytes", b->peak_bytes()},       {"streams", b->num_streams()},
              {"pauses", b->num_pauses()},           {"pause_cancels", b->num_pause_cancels()},
              {"refused_writes", b->num_refused()}};
  }
  return JsonResponse(ready ? 200 : 503, {{"status", status},
                                          {"model", options_.model->name()},
                                          {"schedulers", std::move(schedulers)},
                                          {"requests_in_flight", options_.admission->in_flight()},
                                          {"cpu_pool",
                                           {{"threads", pool.num_threads()},
                                            {"running", pool.num_running()},
                                            {"queued", pool.num_queued()},
                                            {"max_queued", pool.max_queued()}}},
                                          {"output_budget", std::move(output)},
                                          {"memory", MemoryJson()}});
}

HttpResponse HttpApi::Metrics() const {
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = options_.registry != nullptr ? options_.registry->Serialize() : "";
  return response;
}

}  // namespace orca::gateway
