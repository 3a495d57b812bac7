#include "services/gateway/gateway.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/common/cpu_pool.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "core/metrics/orca_metrics.h"
#include "core/metrics/registry.h"
#include "services/common/service_main.h"
#include "services/gateway/admission_controller.h"
#include "services/gateway/api_error.h"
#include "services/gateway/api_key_authenticator.h"
#include "services/gateway/generation_pipeline.h"
#include "services/gateway/grpc_generation_service.h"
#include "services/gateway/http_api.h"
#include "services/gateway/http_server.h"
#include "services/gateway/output_budget.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

namespace net = boost::asio;

struct Gateway::Impl {
  // Declared first: destroyed last, after everything that posts to it.
  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;

  Options options;
  std::unique_ptr<GatewayModel> model;
  metrics::Registry registry;
  std::unique_ptr<metrics::GatewayMetrics> metrics;
  std::unique_ptr<ApiKeyAuthenticator> authenticator;
  std::unique_ptr<AdmissionController> admission;
  std::unique_ptr<SchedulerRouter> router;
  std::unique_ptr<GenerationPipeline> pipeline;
  std::unique_ptr<HttpApi> http_api;
  std::shared_ptr<OutputBudget> output_budget;  // null: none
  std::unique_ptr<HttpServer> http_server;
  std::unique_ptr<GrpcGenerationService> grpc_service;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;

  absl::Mutex health_mu;
  grpc::HealthCheckServiceInterface* health ABSL_GUARDED_BY(health_mu) = nullptr;
  std::atomic<bool> shut_down{false};
  std::atomic<bool> draining{false};
  std::atomic<bool> hurry{false};
  // Declared last: destroyed first, joining its threads before anything its tasks use goes away.
  std::unique_ptr<CpuPool> cpu_pool;

  absl::Status StartGrpc();
  void SetHealth(bool serving) {
    absl::MutexLock lock(&health_mu);
    if (health == nullptr) return;
    health->SetServingStatus("", serving);
    health->SetServingStatus("orca.v1.Generation", serving);
  }
};

absl::Status Gateway::Impl::StartGrpc() {
  GrpcGenerationService::Options service_options;
  service_options.model = model.get();
  service_options.router = router.get();
  service_options.pipeline = pipeline.get();
  service_options.admission = admission.get();
  service_options.authenticator = authenticator.get();
  service_options.cpu_pool = cpu_pool.get();
  service_options.chat_template_timeout = options.chat_template_timeout;
  grpc_service = std::make_unique<GrpcGenerationService>(service_options);
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = services::StartGrpcServer(
      options.grpc_listen, {grpc_service.get()},
      {.max_receive_message_bytes = static_cast<int>(options.max_body_bytes), .bound_port = &grpc_port});
  if (!server.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot listen on --grpc-listen ", options.grpc_listen));
  }
  grpc_server = std::move(server).value();
  {
    absl::MutexLock lock(&health_mu);
    health = grpc_server->GetHealthCheckService();
  }
  SetHealth(router->AnyReady());
  return absl::OkStatus();
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Create(Options options) {
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<GatewayModel> model, GatewayModel::Load(options.model));
  return CreateWithModel(std::move(options), std::move(model));
}

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::CreateWithModel(Options options,
                                                                  std::unique_ptr<GatewayModel> model) {
  if (options.max_body_bytes <= 0) return absl::InvalidArgumentError("--max-body-bytes must be positive");
  if (options.io_threads <= 0) return absl::InvalidArgumentError("io_threads must be positive");
  if (options.max_buffered_output_bytes < 0)
    return absl::InvalidArgumentError("--max-buffered-output-bytes must be >= 0 (0: no overall budget)");
  if (options.max_output_pause <= absl::ZeroDuration())
    return absl::InvalidArgumentError("--max-output-pause-seconds must be positive");
  if (options.cpu_threads < 0)
    return absl::InvalidArgumentError("--cpu-threads must be >= 0 (0: the hardware threads)");
  if (options.cpu_max_queued <= 0) return absl::InvalidArgumentError("--cpu-max-queued must be positive");
  if (options.chat_template_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("--chat-template-timeout-seconds must be positive");
  auto impl = std::make_unique<Impl>();
  Impl& g = *impl;
  g.options = std::move(options);
  g.model = std::move(model);
  ORCA_ASSIGN_OR_RETURN(g.metrics, metrics::GatewayMetrics::Create(&g.registry, g.model->name()));
  ORCA_ASSIGN_OR_RETURN(g.authenticator, ApiKeyAuthenticator::Create(g.options.api_keys, g.options.api_keys_file));
  g.admission = std::make_unique<AdmissionController>(g.options.max_concurrent_requests);

  SchedulerRouter::Options router_options;
  router_options.addresses = g.options.schedulers;
  router_options.dns_target = g.options.schedulers_dns;
  router_options.poll_interval = g.options.scheduler_poll_interval;
  router_options.stall_grace = g.options.scheduler_stall_grace;
  router_options.api_key = g.options.scheduler_api_key;
  router_options.on_poll = [impl_ptr = impl.get()](bool any_ready) { impl_ptr->SetHealth(any_ready); };
  ORCA_ASSIGN_OR_RETURN(g.router, SchedulerRouter::Create(std::move(router_options)));
  g.pipeline = std::make_unique<GenerationPipeline>(&g.model->tokenizer(), g.router.get());
  ORCA_ASSIGN_OR_RETURN(
      g.cpu_pool,
      CpuPool::Create({.num_threads = g.options.cpu_threads > 0 ? g.options.cpu_threads : CpuPool::DefaultNumThreads(),
                       .max_queued = g.options.cpu_max_queued,
                       .name = "gw-cpu"}));

  HttpApi::Options api_options;
  api_options.model = g.model.get();
  api_options.router = g.router.get();
  api_options.pipeline = g.pipeline.get();
  api_options.authenticator = g.authenticator.get();
  api_options.admission = g.admission.get();
  api_options.registry = &g.registry;
  api_options.metrics = g.metrics.get();
  api_options.draining = &g.draining;
  api_options.cpu_pool = g.cpu_pool.get();
  api_options.chat_template_timeout = g.options.chat_template_timeout;
  api_options.metrics_require_api_key = g.options.metrics_require_api_key;
  if (g.options.max_buffered_output_bytes > 0) {
    g.output_budget = std::make_shared<OutputBudget>(OutputBudget::Options{
        .max_bytes = static_cast<size_t>(g.options.max_buffered_output_bytes), .max_pause = g.options.max_output_pause});
  }
  api_options.output_budget = g.output_budget.get();
  g.http_api = std::make_unique<HttpApi>(api_options);

  HttpServer::Options http_options;
  http_options.listen = g.options.listen;
  http_options.max_body_bytes = static_cast<size_t>(g.options.max_body_bytes);
  http_options.idle_timeout = g.options.idle_timeout;
  http_options.output_budget = g.output_budget;
  // OpenAI-shaped bodies for the server's own 400/413/431 too.
  http_options.error_responder = [](int status, std::string message) {
    return ApiError::FromHttp(status, std::move(message)).ToHttpResponse();
  };
  HttpApi* api = g.http_api.get();
  ORCA_ASSIGN_OR_RETURN(g.http_server,
                        HttpServer::Create(g.io, std::move(http_options),
                                           [api](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
                                             api->Handle(std::move(request), std::move(exchange));
                                           }));
  if (!g.options.grpc_listen.empty()) ORCA_RETURN_IF_ERROR(g.StartGrpc());

  g.work.emplace(net::make_work_guard(g.io));
  for (int i = 0; i < g.options.io_threads; ++i) g.io_threads.emplace_back([&io = g.io] { io.run(); });
  ORCA_LOG(INFO) << "gateway serving model '" << g.model->name() << "' on HTTP port " << g.http_server->port()
                 << (g.grpc_server ? absl::StrCat(" and gRPC port ", g.grpc_port) : std::string());
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

int Gateway::http_port() const { return impl_->http_server->port(); }
int Gateway::grpc_port() const { return impl_->grpc_server ? impl_->grpc_port : 0; }
bool Gateway::ready() const { return impl_->router->AnyReady(); }
bool Gateway::WaitUntilReady(absl::Duration timeout) { return impl_->router->WaitUntilReady(timeout); }
int64_t Gateway::num_active_requests() const { return impl_->pipeline->num_active(); }
const OutputBudget* Gateway::output_budget() const { return impl_->output_budget.get(); }
int64_t Gateway::num_admitted_requests() const { return impl_->admission->in_flight(); }

void Gateway::EndGracePeriod() {
  if (impl_) impl_->hurry = true;
}

void Gateway::Shutdown(absl::Duration grace) {
  if (!impl_ || impl_->shut_down.exchange(true)) return;
  Impl& g = *impl_;
  const absl::Time grace_end = absl::Now() + grace;
  // 1. Not ready, no new requests. The listener stays open so that a client
  //    routed here late gets a 503 + Retry-After rather than a refused connection.
  g.draining = true;
  {
    absl::MutexLock lock(&g.health_mu);
    if (g.health != nullptr) {
      g.health->SetServingStatus("", false);
      g.health->SetServingStatus("orca.v1.Generation", false);
    }
    g.health = nullptr;  // the router's polls no longer change it
  }
  std::thread grpc_stop;
  if (g.grpc_server) {
    // Rejects new calls now, lets running ones finish; the deadline is a backstop (step 3 ends them first).
    grpc_stop = std::thread([&g, grace] {
      g.grpc_server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace + absl::Seconds(5)));
    });
  }
  if (g.pipeline->num_active() > 0)
    ORCA_LOG(INFO) << "draining: " << g.pipeline->num_active() << " requests in flight, grace "
                   << absl::FormatDuration(grace);
  // 2. In-flight requests run on: the admitted ones still on the CPU pool (which may start
  //    generations), and the generations.
  while (absl::Now() < grace_end && !g.hurry) {
    const absl::Duration step = std::min(absl::Milliseconds(50), grace_end - absl::Now());
    if (!g.cpu_pool->WaitIdle(step)) continue;
    if (g.pipeline->num_active() == 0) break;
    g.pipeline->WaitIdle(step);
  }
  // 3. What is left ends with an error its client can read, and frees its KV at the scheduler:
  //    requests still waiting for the CPU pool get a 503 (gRPC UNAVAILABLE), those on it finish
  //    (a chat template within its timeout), then every generation still running fails.
  g.cpu_pool->Stop();
  if (const int64_t left = g.pipeline->num_active(); left > 0) {
    ORCA_LOG(WARNING) << "drain grace period over: ending " << left << " requests";
    g.pipeline->FailAll(
        absl::UnavailableError("The gateway is shutting down (its drain grace period is over); retry the request"));
    g.pipeline->WaitIdle(absl::Seconds(5));
  }
  // 4. Let the last responses reach their clients, then close everything.
  const absl::Time flush_end = absl::Now() + absl::Seconds(5);
  while (g.http_server->num_active_exchanges() > 0 && absl::Now() < flush_end) absl::SleepFor(absl::Milliseconds(10));
  g.http_server->Stop();
  if (grpc_stop.joinable()) grpc_stop.join();
  g.pipeline->CancelAll();
  g.pipeline->WaitIdle(absl::Seconds(1));
  g.router->Stop();
  g.work.reset();
  g.io.stop();
  for (std::thread& t : g.io_threads) t.join();
  g.io_threads.clear();
}

}  // namespace orca::gateway
