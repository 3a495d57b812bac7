// orca-worker: one pipeline stage (inter-layer partition) with its
// tensor-parallel shards as threads. Wiring only.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/model_name.h"
#include "core/common/status_macros.h"
#include "core/metrics/registry.h"
#include "services/common/admin_http_server.h"
#include "services/common/internal_auth.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/worker/worker_node.h"
#include "services/worker/worker_service.h"

namespace orca::worker {
namespace {

struct Flags {
  std::string listen = "127.0.0.1:7100";
  std::string http_listen = "127.0.0.1:7101";
  std::string model;
  std::string model_name;
  std::string dtype = "auto";
  std::string device = "cpu";
  int first_device = 0;
  bool fused_kernels = true;
  bool cuda_graphs = false;
  int stage = 0;
  bool stage_from_hostname = false;
  int num_stages = 1;
  int tensor_parallel = 1;
  std::vector<std::string> workers;
  std::string scheduler;
  services::InternalAuthFlags internal_auth;
  std::string scheduler_api_key, scheduler_api_key_file;  // deprecated spellings of the internal credential
  std::string deployment_id = "orca";
  std::string data_plane_host = "127.0.0.1";
  int data_plane_port = 7200;
  int64_t n_slots = 8192;
  int64_t reserve_tokens = 512;
  int kv_block_size = 16;
  int64_t kv_local_slots = 0;
  bool swa_full = false;
  int threads = 0;
  int64_t peer_timeout_ms = 300000;
  int64_t rendezvous_timeout_ms = 60000;
  bool metrics_require_token = false;
  services::LoggingFlags logging;
};

int Fail(const absl::Status& s) {
  ORCA_LOG(ERROR) << s;
  return 1;
}

std::vector<std::string> NonEmpty(const std::string& value) {
  return value.empty() ? std::vector<std::string>{} : std::vector<std::string>{value};
}

// A StatefulSet pod is named <name>-<ordinal>: the ordinal is the stage.
absl::StatusOr<int64_t> StageFromHostname() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return absl::InternalError("gethostname failed");
  std::string h(host);
  const size_t dash = h.find_last_of('-');
  int64_t ordinal;
  if (dash == std::string::npos || !absl::SimpleAtoi(h.substr(dash + 1), &ordinal))
    return absl::InvalidArgumentError("--stage-from-hostname: hostname '" + h + "' does not end in -<ordinal>");
  return ordinal;
}

// The data plane's port must be a port, and not one of this worker's other listeners.
absl::Status CheckDataPlanePort(const Flags& f) {
  if (f.data_plane_port < 0 || f.data_plane_port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("--data-plane-port must be in [0, 65535], got ", f.data_plane_port));
  for (const auto& [flag, address] : {std::pair{"--listen", f.listen}, std::pair{"--http-listen", f.http_listen}}) {
    const size_t colon = address.rfind(':');
    int64_t port = -1;
    if (f.data_plane_port != 0 && colon != std::string::npos && absl::SimpleAtoi(address.substr(colon + 1), &port) &&
        port == f.data_plane_port)
      return absl::InvalidArgumentError(
          absl::StrCat("--data-plane-port ", f.data_plane_port, " is also the port of ", flag, " (", address, ")"));
  }
  return absl::OkStatus();
}

void AddFlags(FlagSet* flags, Flags* f) {
  flags->AddString("listen", &f->listen, "gRPC control-plane address");
  flags->AddString("http-listen", &f->http_listen, "HTTP address for /health, /ready, /metrics");
  flags->AddString("model", &f->model, "HF checkpoint directory or .gguf file (required)");
  flags->AddString("model-name", &f->model_name, "Model name for metric labels (default: basename of --model)");
  flags->AddString("dtype", &f->dtype, "Weight dtype: auto, f32, bf16");
  flags->AddString("device", &f->device,
                   "Kernel backend: cpu or cuda (tensor-parallel shard r uses GPU first-device + r)");
  flags->AddInt("first-device", &f->first_device,
                "With --device cuda: the GPU of tensor-parallel shard 0 (orca serve gives stage s of one machine "
                "GPUs s*TP .. s*TP+TP-1; one worker per GPU set can instead set CUDA_VISIBLE_DEVICES)");
  flags->AddBool("fused-kernels", &f->fused_kernels,
                 "Fused kernel pairs where the backend has them (CUDA: RoPE + KV write, residual add + RMSNorm)");
  flags->AddBool("cuda-graphs", &f->cuda_graphs,
                 "With --device cuda: record each decode batch shape once as a CUDA Graph and replay it (one stage, "
                 "tensor parallelism 1 only)");
  flags->AddInt("stage", &f->stage, "Pipeline stage index");
  flags->AddBool("stage-from-hostname", &f->stage_from_hostname,
                 "Take the stage from the hostname's trailing -N (StatefulSet ordinal)");
  flags->AddInt("num-stages", &f->num_stages, "Pipeline depth");
  flags->AddInt("tensor-parallel", &f->tensor_parallel, "Tensor-parallel shards (threads) in this process");
  flags->AddStringList("workers", &f->workers, "gRPC addresses of all stages in order");
  flags->AddString("scheduler", &f->scheduler, "Scheduler gRPC address (data-plane rendezvous)");
  services::AddInternalAuthFlags(flags, &f->internal_auth);
  flags->AddString("scheduler-api-key", &f->scheduler_api_key,
                   "Deprecated: the internal token; use --internal-token-file");
  flags->AddString("scheduler-api-key-file", &f->scheduler_api_key_file,
                   "Deprecated spelling of --internal-token-file");
  flags->AddString("deployment-id", &f->deployment_id, "Rendezvous namespace of this engine replica");
  flags->AddString("data-plane-host", &f->data_plane_host, "Address peers use to reach this worker's Gloo endpoints");
  flags->AddInt("data-plane-port", &f->data_plane_port,
                "Port of the pipeline's Gloo data plane on --data-plane-host; every data-plane connection from "
                "other stages comes in here (0 = an ephemeral port per peer)");
  flags->AddInt("n-slots", &f->n_slots, "KV slots (tokens) this stage pre-allocates");
  flags->AddInt("reserve-tokens", &f->reserve_tokens,
                "Iteration size (tokens) whose activation buffers are allocated and made resident at load, so "
                "that the first request up to it runs as fast as later ones; larger iterations grow them (0: "
                "all grown on demand). The scheduler's --max-num-batched-tokens, when set, bounds every iteration");
  flags->AddInt("kv-block-size", &f->kv_block_size, "KV block size (tokens)");
  flags->AddInt(
      "kv-local-slots", &f->kv_local_slots,
      "Slots of the separate KV pool of the model's sliding-window layers (Gemma 2/3, Mistral, StarCoder2): a "
      "request holds there only its window and current iteration's blocks. 0 = as many as --n-slots");
  flags->AddBool("swa-full", &f->swa_full,
                 "Sliding-window layers keep every position in the main KV pool instead (llama.cpp's --swa-full); "
                 "prefix caching needs it");
  flags->AddInt("threads", &f->threads, "Compute threads in total (0 = all cores)");
  flags->AddInt("peer-timeout-ms", &f->peer_timeout_ms,
                "Backstop on one data-plane operation. A peer that is dead or cut off is found by the engine "
                "master's heartbeats (--worker-timeout-ms), which ends the session and aborts the wait");
  flags->AddInt("rendezvous-timeout-ms", &f->rendezvous_timeout_ms, "Time to form a session's data plane");
  flags->AddBool("metrics-require-token", &f->metrics_require_token,
                 "/metrics answers 401 without the internal token ('Authorization: Bearer <token>'; Prometheus: "
                 "authorization.credentials_file). Off: Prometheus scrapes without credentials");
  services::AddLoggingFlags(flags, &f->logging);
}

// The flags that need more than their parser: required, derived and cross-checked values.
absl::Status CheckFlags(Flags* f) {
  if (f->model.empty()) return absl::InvalidArgumentError("--model is required");
  if (f->stage_from_hostname) {
    auto s = StageFromHostname();
    if (!s.ok()) return s.status();
    f->stage = *s;
  }
  if (f->num_stages < 1 || f->stage < 0 || f->stage >= f->num_stages)
    return absl::InvalidArgumentError("--stage must be in [0, --num-stages)");
  ORCA_RETURN_IF_ERROR(CheckDataPlanePort(*f));
  if (f->model_name.empty()) f->model_name = ServedModelNameFromPath(f->model);
  return absl::OkStatus();
}

absl::StatusOr<WorkerNode::Options> NodeOptionsFrom(const Flags& f) {
  WorkerNode::Options o;
  o.engine.model_path = f.model;
  o.engine.stage = static_cast<int32_t>(f.stage);
  o.engine.num_stages = static_cast<int32_t>(f.num_stages);
  o.engine.tp_size = static_cast<int32_t>(f.tensor_parallel);
  o.engine.n_slots = f.n_slots;
  o.engine.reserve_tokens = f.reserve_tokens;
  o.engine.kv_block_size = static_cast<int32_t>(f.kv_block_size);
  o.engine.kv_local_slots = f.kv_local_slots;
  o.engine.swa_full = f.swa_full;
  o.engine.num_threads = static_cast<int32_t>(f.threads);
  // Tensor-parallel shards are threads of this process: their group stays on loopback.
  o.engine.data_plane_host = "127.0.0.1";
  o.engine.peer_timeout_ms = f.peer_timeout_ms;
  ORCA_RETURN_IF_ERROR(engine::SetDTypeAndDeviceFromFlags(f.dtype, f.device, &o.engine));
  o.engine.fused_kernels = f.fused_kernels;
  o.engine.cuda_graphs = f.cuda_graphs;
  o.engine.first_device = static_cast<int32_t>(std::clamp(f.first_device, -1, 1 << 20));
  o.workers = f.workers;
  o.scheduler_address = f.scheduler;
  ORCA_ASSIGN_OR_RETURN(
      o.internal_auth,
      services::LoadInternalAuth(f.internal_auth, {{"--scheduler-api-key-file", f.scheduler_api_key_file, {}},
                                                   {"--scheduler-api-key", "", NonEmpty(f.scheduler_api_key)}}));
  o.deployment_id = f.deployment_id;
  o.data_plane_host = f.data_plane_host;
  o.data_plane_port = static_cast<int32_t>(f.data_plane_port);
  o.peer_timeout = std::chrono::milliseconds(f.peer_timeout_ms);
  o.rendezvous_timeout = std::chrono::milliseconds(f.rendezvous_timeout_ms);
  o.model_name = f.model_name;

  return o;
}

int Main(int argc, char** argv) {
  services::InstallCrashHandler(argv[0]);
  Flags f;
  FlagSet flags("orca-worker",
                "One pipeline stage of the Orca engine: loads its layers and tensor-parallel shards, receives\n"
                "control messages over gRPC (orca.v1.Worker) and activations over Gloo.");
  AddFlags(&flags, &f);
  if (auto exit_code = services::ParseFlagsOrExit(flags, argc, argv, "ORCA_WORKER_")) return *exit_code;
  if (absl::Status s = services::ConfigureLogging("worker", f.logging); !s.ok()) return Fail(s);
  if (absl::Status s = CheckFlags(&f); !s.ok()) return Fail(s);
  SetLogComponent("worker-" + std::to_string(f.stage));
  services::BlockTerminationSignals();

  metrics::Registry registry;
  absl::StatusOr<WorkerNode::Options> node_options = NodeOptionsFrom(f);
  if (!node_options.ok()) return Fail(node_options.status());
  const WorkerNode::Options& o = *node_options;

  // Health answers while the weights load; readiness waits for them and the peers.
  std::atomic<WorkerNode*> node_ptr{nullptr};
  services::AdminHttpServer::Options ao;
  ao.listen_address = f.http_listen;
  ao.registry = &registry;
  ao.readiness = [&node_ptr]() -> absl::Status {
    WorkerNode* n = node_ptr.load();
    return n ? n->Ready() : absl::UnavailableError("loading weights");
  };
  ao.report_memory = true;
  // /ready's details (addresses, memory) only for a caller with the internal token; probes need none.
  ao.internal_token = o.internal_auth.token();
  ao.metrics_require_token = f.metrics_require_token;
  auto admin = services::AdminHttpServer::Create(ao);
  if (!admin.ok()) return Fail(admin.status());
  if (absl::Status s = (*admin)->Start(); !s.ok()) return Fail(s);

  auto node = WorkerNode::Create(o, &registry);
  if (!node.ok()) return Fail(node.status());
  (*node)->Start();
  node_ptr = node->get();

  WorkerService service(node->get(), o.internal_auth);
  auto server_or = services::StartGrpcServer(f.listen, {&service});
  if (!server_or.ok()) return Fail(server_or.status());
  std::unique_ptr<grpc::Server> server = std::move(*server_or);
  ORCA_LOG(INFO) << "orca-worker stage " << f.stage << "/" << f.num_stages << " serving gRPC on " << f.listen
                 << ", HTTP on " << f.http_listen;
  const int sig = services::AwaitTerminationSignal();
  ORCA_LOG(INFO) << "signal " << sig << ": stopping";
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  node_ptr = nullptr;
  (*admin)->Stop();
  (*node)->Stop();
  return 0;
}

}  // namespace
}  // namespace orca::worker

int main(int argc, char** argv) { return orca::worker::Main(argc, argv); }
