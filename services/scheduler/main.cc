// orca-scheduler: the iteration-level scheduler of one engine replica and its
// engine master. Wiring only: flags → SchedulerLoop + engine client → gRPC
// service + admin HTTP; SIGTERM drains.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <iostream>

#include "absl/strings/str_split.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/model_name.h"
#include "core/common/status_macros.h"
#include "core/metrics/registry.h"
#include "services/common/admin_http_server.h"
#include "services/common/internal_auth.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/scheduler/in_process_engine_client.h"
#include "services/scheduler/remote_engine_client.h"
#include "services/scheduler/scheduler_service.h"

namespace orca::scheduler {
namespace {

struct Flags {
  std::string listen = "127.0.0.1:7000";
  std::string http_listen = "127.0.0.1:7001";
  std::vector<std::string> workers;
  std::string model;
  std::string model_name;
  std::string policy = "orca";
  int64_t max_num_batched_tokens = 0;
  double max_prefill_slowdown = 0;
  int64_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = false;
  std::string scheduling_order = "fcfs";
  int64_t priority_aging_ms = 1000;
  int max_bs = 16;
  int64_t n_slots = 8192;
  int n_workers = 0;
  int microbatches = 0;
  bool faster_transformer = false;
  int kv_block_size = 16;
  int64_t max_queued_requests = 1024;
  int64_t max_queued_tokens = 1 << 20;
  double max_request_kv_share = 0.75;
  int64_t default_deadline_ms = 0;
  double drain_grace_seconds = 30;
  int64_t worker_timeout_ms = 5000;
  int64_t engine_down_wait_ms = 10000;
  services::InternalAuthFlags internal_auth;
  std::vector<std::string> api_keys;  // deprecated spellings of the internal credential
  std::string api_keys_file;
  std::string dtype = "auto";
  std::string device = "cpu";
  int threads = 0;
  int tensor_parallel = 1;
  bool metrics_require_token = false;
  services::LoggingFlags logging;
};

int Fail(const absl::Status& s) {
  ORCA_LOG(ERROR) << s;
  return 1;
}

absl::StatusOr<std::unique_ptr<EngineClient>> MakeEngine(const Flags& f, const std::string& model_name,
                                                         const services::InternalAuth& auth) {
  if (!f.workers.empty()) {
    RemoteEngineClient::Options o;
    o.workers = f.workers;
    o.internal_auth = auth;
    o.worker_timeout = absl::Milliseconds(f.worker_timeout_ms);
    o.kv_block_size = static_cast<int32_t>(f.kv_block_size);
    o.model_name = model_name;
    auto c = RemoteEngineClient::Create(o);
    if (!c.ok()) return c.status();
    return std::unique_ptr<EngineClient>(std::move(*c));
  }
  if (f.model.empty())
    return absl::InvalidArgumentError("give --workers (remote pipeline) or --model (in-process engine)");
  engine::Engine::Options eo;
  eo.model_path = f.model;
  eo.n_slots = f.n_slots;
  eo.kv_block_size = static_cast<int32_t>(f.kv_block_size);
  // Prefix caching needs every position's KV: the engine's sliding-window layers then keep
  // theirs in the main pool (llama.cpp's --swa-full), as a worker started with --swa-full.
  eo.swa_full = f.enable_prefix_caching;
  // No iteration exceeds the token budget: reserving it leaves nothing to grow.
  if (f.max_num_batched_tokens > 0) eo.reserve_tokens = f.max_num_batched_tokens;
  eo.num_threads = static_cast<int32_t>(f.threads);
  eo.tp_size = static_cast<int32_t>(f.tensor_parallel);
  ORCA_RETURN_IF_ERROR(engine::SetDTypeAndDeviceFromFlags(f.dtype, f.device, &eo));
  auto c = InProcessEngineClient::Create(eo, model_name);
  if (!c.ok()) return c.status();
  return std::unique_ptr<EngineClient>(std::move(*c));
}

void AddFlags(FlagSet* flags, Flags* f) {
  flags->AddString("listen", &f->listen, "gRPC address");
  flags->AddString("http-listen", &f->http_listen, "HTTP address for /health, /ready, /metrics");
  flags->AddStringList("workers", &f->workers, "Worker gRPC addresses in stage order (empty: in-process engine)");
  flags->AddString("model", &f->model, "Model path for the in-process engine");
  flags->AddString("model-name", &f->model_name,
                   "Model name in stats and metric labels (default: basename of --model)");
  flags->AddString("policy", &f->policy,
                   "orca (iteration-level, Algorithm 1), paged (iteration-level, paged KV: on-demand blocks, "
                   "preemption) or request-level (baseline)");
  flags->AddInt("max-num-batched-tokens", &f->max_num_batched_tokens,
                "Chunked prefill: tokens per iteration, decodes first, then prompt chunks (0 = off: whole prompts, "
                "Algorithm 1; else >= --max-bs; orca and paged)");
  flags->AddDouble("max-prefill-slowdown", &f->max_prefill_slowdown,
                   "Chunked prefill with a time budget: while requests decode, prompt chunks are cut so that an "
                   "iteration is predicted to take at most this many times as long as its decodes alone (learned from "
                   "measured iterations); 0 = off, else in (1, 1000]; orca and paged");
  flags->AddInt("long-prefill-token-threshold", &f->long_prefill_token_threshold,
                "Chunked prefill: at most this many prompt tokens of one request per iteration, so that a long prompt "
                "leaves room in the budget for the requests queued behind it (0 = off; orca and paged)");
  flags->AddBool("enable-prefix-caching", &f->enable_prefix_caching,
                 "Share full KV blocks by content across requests (the scheduler sends block ids; workers need the "
                 "same --kv-block-size)");
  flags->AddString("scheduling-order", &f->scheduling_order,
                   "fcfs (arrival order) or priority (request priority, lower first; orca and paged)");
  flags->AddInt("priority-aging-ms", &f->priority_aging_ms,
                "With --scheduling-order priority: a waiting request gains one priority level per this much waiting, "
                "which bounds its wait (0 = strict priority, no bound)");
  flags->AddInt("max-bs", &f->max_bs, "Paper's max_bs: requests per iteration");
  flags->AddInt("n-slots", &f->n_slots, "Paper's n_slots: KV slot budget (tokens)");
  flags->AddInt("n-workers", &f->n_workers, "Paper's n_workers: batches in flight (0 = number of stages)");
  flags->AddInt("microbatches", &f->microbatches,
                "request-level: microbatches a static batch is split into, the paper's mbs in ft(max_bs, mbs) "
                "(0 = --n-workers)");
  flags->AddBool("faster-transformer", &f->faster_transformer,
                 "request-level: FasterTransformer's engine behaviour (prompts padded to the batch's longest and "
                 "computed, finished members keep computing until the batch ends, KV sized batch x max_seq_len)");
  flags->AddInt("kv-block-size", &f->kv_block_size, "KV block size; reservations round up to it");
  flags->AddInt("max-queued-requests", &f->max_queued_requests,
                "Queued requests beyond which Generate fails RESOURCE_EXHAUSTED");
  flags->AddInt("max-queued-tokens", &f->max_queued_tokens,
                "Queued prompt tokens beyond which Generate fails RESOURCE_EXHAUSTED");
  flags->AddDouble("max-request-kv-share", &f->max_request_kv_share,
                   "Fairness: the most KV one request, or the n sequences of one prompt counted together, may "
                   "reserve, as a share of --n-slots; more is refused INVALID_ARGUMENT (the gateway answers 400 and "
                   "sizes its default max_tokens to fit). 0.75: whatever the largest request admitted, a request "
                   "behind it finds a quarter of the slots it cannot take (2048 of 8192: a whole 2k context), while "
                   "one prompt's n sequences may still use most of the budget. In (0, 1]; 1 = no cap beyond "
                   "--n-slots (the n sequences of one prompt still count together)");
  flags->AddInt("default-deadline-ms", &f->default_deadline_ms, "Deadline for requests without one (0 = none)");
  flags->AddDouble("drain-grace-seconds", &f->drain_grace_seconds,
                   "On SIGTERM: time to finish in-flight work before cancelling it");
  flags->AddInt("worker-timeout-ms", &f->worker_timeout_ms,
                "A worker silent (no heartbeat) this long is dead, stopped or cut off: its pipeline session fails. "
                "The only bound on silence; iterations may compute for as long as they take");
  flags->AddInt("engine-down-wait-ms", &f->engine_down_wait_ms,
                "While the worker pipeline is down (restarting), queued requests wait this long for it before "
                "failing UNAVAILABLE (the gateway answers 503 + Retry-After); 0 = fail at once");
  services::AddInternalAuthFlags(flags, &f->internal_auth);
  flags->AddStringList("api-keys", &f->api_keys, "Deprecated: internal tokens; use --internal-token-file");
  flags->AddString("api-keys-file", &f->api_keys_file, "Deprecated spelling of --internal-token-file");
  flags->AddString("dtype", &f->dtype, "In-process engine weight dtype: auto, f32, bf16");
  flags->AddString("device", &f->device, "In-process engine kernel backend: cpu or cuda (shard r uses GPU r)");
  flags->AddInt("threads", &f->threads, "In-process engine compute threads (0 = all cores)");
  flags->AddInt("tensor-parallel", &f->tensor_parallel, "In-process engine tensor-parallel shards (threads)");
  flags->AddBool("metrics-require-token", &f->metrics_require_token,
                 "/metrics answers 401 without the internal token ('Authorization: Bearer <token>'; Prometheus: "
                 "authorization.credentials_file). Off: Prometheus scrapes without credentials");
  services::AddLoggingFlags(flags, &f->logging);
}

// The scheduler loop's options from the flags; InvalidArgument names the flag that is out of range.
absl::StatusOr<SchedulerLoop::Options> LoopOptionsFrom(const Flags& f) {
  SchedulerLoop::Options lo;
  auto policy = sched::ParsePolicyKind(f.policy);
  if (!policy)
    return absl::InvalidArgumentError("--policy must be orca, paged or request-level, got '" + f.policy + "'");
  lo.scheduler.policy = *policy;
  auto order = sched::ParseSchedulingOrder(f.scheduling_order);
  if (!order)
    return absl::InvalidArgumentError("--scheduling-order must be fcfs or priority, got '" + f.scheduling_order + "'");
  if (f.max_num_batched_tokens < 0 || f.max_num_batched_tokens > INT32_MAX)
    return absl::InvalidArgumentError("--max-num-batched-tokens must be in [0, 2^31)");
  if (f.priority_aging_ms < 0) return absl::InvalidArgumentError("--priority-aging-ms must be >= 0");
  if (!(f.max_prefill_slowdown == 0 || (f.max_prefill_slowdown > 1 && f.max_prefill_slowdown <= 1000)))
    return absl::InvalidArgumentError(
        absl::StrCat("--max-prefill-slowdown must be 0 (off) or in (1, 1000], got ", f.max_prefill_slowdown));
  lo.scheduler.max_prefill_slowdown = f.max_prefill_slowdown;
  if (f.long_prefill_token_threshold < 0 || f.long_prefill_token_threshold > INT32_MAX)
    return absl::InvalidArgumentError("--long-prefill-token-threshold must be in [0, 2^31)");
  lo.scheduler.long_prefill_token_threshold = static_cast<int32_t>(f.long_prefill_token_threshold);
  lo.scheduler.max_num_batched_tokens = static_cast<int32_t>(f.max_num_batched_tokens);
  lo.scheduler.enable_prefix_caching = f.enable_prefix_caching;
  lo.scheduler.scheduling_order = *order;
  lo.scheduler.priority_aging = absl::Milliseconds(f.priority_aging_ms);
  lo.scheduler.max_bs = static_cast<int32_t>(f.max_bs);
  lo.scheduler.n_slots = f.n_slots;
  lo.scheduler.n_workers = static_cast<int32_t>(f.n_workers > 0 ? f.n_workers : std::max<size_t>(1, f.workers.size()));
  if (f.microbatches < 0) return absl::InvalidArgumentError("--microbatches must be >= 0 (0 = --n-workers)");
  lo.scheduler.num_microbatches = static_cast<int32_t>(f.microbatches);
  lo.scheduler.faster_transformer = f.faster_transformer;
  lo.scheduler.kv_block_size = static_cast<int32_t>(f.kv_block_size);
  lo.scheduler.max_queued_requests = f.max_queued_requests;
  lo.scheduler.max_queued_tokens = f.max_queued_tokens;
  if (!(f.max_request_kv_share > 0 && f.max_request_kv_share <= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("--max-request-kv-share must be in (0, 1], 1 = no cap, got ", f.max_request_kv_share));
  lo.scheduler.max_request_kv_share = f.max_request_kv_share;
  lo.default_deadline = absl::Milliseconds(f.default_deadline_ms);
  lo.engine_down_wait = absl::Milliseconds(std::max<int64_t>(0, f.engine_down_wait_ms));
  lo.model_name = f.model_name;
  if (lo.model_name.empty() && !f.model.empty()) lo.model_name = ServedModelNameFromPath(f.model);
  return lo;
}

// Stops taking requests and gives in-flight ones up to `grace_seconds` to finish; a second signal cuts it short.
void DrainInFlight(double grace_seconds, SchedulerLoop* loop, grpc::Server* server) {
  loop->BeginDrain();
  server->GetHealthCheckService()->SetServingStatus(false);
  const auto grace_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  while (std::chrono::steady_clock::now() < grace_end) {
    const LoopStats s = loop->stats();
    if (s.scheduler.num_running == 0 && s.scheduler.num_queued == 0) break;
    if (services::WaitForTerminationSignal(std::chrono::milliseconds(50)) != 0) break;  // a second signal: hurry
  }
}

int Main(int argc, char** argv) {
  services::InstallCrashHandler(argv[0]);
  Flags f;
  FlagSet flags("orca-scheduler",
                "The iteration-level scheduler (ORCA Algorithm 1) and engine master of one engine replica.\n"
                "Serves orca.v1.Scheduler over gRPC; /health, /ready and /metrics over HTTP.");
  AddFlags(&flags, &f);
  if (auto exit_code = services::ParseFlagsOrExit(flags, argc, argv, "ORCA_SCHEDULER_")) return *exit_code;
  if (absl::Status s = services::ConfigureLogging("scheduler", f.logging); !s.ok()) return Fail(s);

  // The credential first: a scheduler that would refuse (or admit) everybody must not start.
  auto auth = services::LoadInternalAuth(f.internal_auth,
                                         {{"--api-keys-file", f.api_keys_file, {}}, {"--api-keys", "", f.api_keys}});
  if (!auth.ok()) return Fail(auth.status());

  absl::StatusOr<SchedulerLoop::Options> loop_options = LoopOptionsFrom(f);
  if (!loop_options.ok()) return Fail(loop_options.status());
  const SchedulerLoop::Options& lo = *loop_options;

  services::BlockTerminationSignals();
  metrics::Registry registry;
  auto engine = MakeEngine(f, lo.model_name, *auth);
  if (!engine.ok()) return Fail(engine.status());
  auto loop = SchedulerLoop::Create(lo, std::move(*engine), &registry);
  if (!loop.ok()) return Fail(loop.status());
  if (absl::Status s = (*loop)->Start(); !s.ok()) return Fail(s);

  SchedulerService service(loop->get(), *auth);
  auto server_or = services::StartGrpcServer(f.listen, {&service});
  if (!server_or.ok()) return Fail(server_or.status());
  std::unique_ptr<grpc::Server> server = std::move(*server_or);

  services::AdminHttpServer::Options ao;
  ao.listen_address = f.http_listen;
  ao.registry = &registry;
  SchedulerLoop* raw_loop = loop->get();
  ao.readiness = [raw_loop] { return raw_loop->Ready(); };
  ao.ready_details = [raw_loop] { return SchedulingConfigJson(raw_loop->stats()); };
  ao.report_memory = true;
  // /ready's details (addresses, memory) only for a caller with the internal token; probes need none.
  ao.internal_token = auth->token();
  ao.metrics_require_token = f.metrics_require_token;
  auto admin = services::AdminHttpServer::Create(ao);
  if (!admin.ok()) return Fail(admin.status());
  if (absl::Status s = (*admin)->Start(); !s.ok()) return Fail(s);
  ORCA_LOG(INFO) << "orca-scheduler serving gRPC on " << f.listen << ", HTTP on " << f.http_listen << "; policy "
                 << f.policy << ", max_bs " << f.max_bs << ", n_slots " << f.n_slots << ", n_workers "
                 << lo.scheduler.n_workers << "; scheduling " << SchedulingConfigJson(raw_loop->stats());

  const int sig = services::AwaitTerminationSignal();
  ORCA_LOG(INFO) << "signal " << sig << ": draining (grace " << f.drain_grace_seconds << " s)";
  DrainInFlight(f.drain_grace_seconds, raw_loop, server.get());
  raw_loop->CancelAll();
  service.store().Close();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*admin)->Stop();
  raw_loop->Stop();
  ORCA_LOG(INFO) << "orca-scheduler stopped";
  return 0;
}

}  // namespace
}  // namespace orca::scheduler

int main(int argc, char** argv) { return orca::scheduler::Main(argc, argv); }
