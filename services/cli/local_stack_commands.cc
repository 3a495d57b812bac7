#include "services/cli/local_stack_commands.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/ports.h"
#include "core/common/status_macros.h"
#include "services/common/internal_token.h"

namespace orca::cli {

std::string LoopbackAddress(int port) { return absl::StrCat("127.0.0.1:", port); }

absl::StatusOr<std::string> CreateInternalTokenFile(const std::string& dir) {
  ORCA_ASSIGN_OR_RETURN(const std::string token, services::GenerateInternalToken());
  const std::string path = dir + "/internal-token";
  ORCA_RETURN_IF_ERROR(services::WriteInternalTokenFile(path, token));
  return path;
}

absl::StatusOr<LocalStackPorts> LocalStackPorts::Pick(int num_stages) {
  LocalStackPorts ports;
  ORCA_ASSIGN_OR_RETURN(ports.scheduler_grpc, PickLoopbackPort());
  ORCA_ASSIGN_OR_RETURN(ports.scheduler_http, PickLoopbackPort());
  for (int s = 0; s < num_stages; ++s) {
    ORCA_ASSIGN_OR_RETURN(const int grpc, PickLoopbackPort());
    ORCA_ASSIGN_OR_RETURN(const int http, PickLoopbackPort());
    ORCA_ASSIGN_OR_RETURN(const int data_plane, PickLoopbackPort());
    ports.worker_grpc.push_back(grpc);
    ports.worker_http.push_back(http);
    ports.worker_data_plane.push_back(data_plane);
  }
  return ports;
}

LocalStackCommands::LocalStackCommands(Options options, LocalStackPorts ports)
    : options_(std::move(options)), ports_(std::move(ports)) {}

std::string LocalStackCommands::InternalAuthArg() const {
  // The file, never the token: a command line is visible to every user of the machine.
  return options_.internal_token_file.empty() ? "--insecure-internal"
                                              : "--internal-token-file=" + options_.internal_token_file;
}

std::string LocalStackCommands::scheduler_address() const { return LoopbackAddress(ports_.scheduler_grpc); }

std::string LocalStackCommands::worker_addresses() const {
  std::vector<std::string> addresses;
  for (int port : ports_.worker_grpc) addresses.push_back(LoopbackAddress(port));
  return absl::StrJoin(addresses, ",");
}

std::vector<std::string> LocalStackCommands::WorkerArgs(int stage) const {
  const Options& o = options_;
  std::vector<std::string> args = {"--model=" + o.model,
                                   "--listen=" + LoopbackAddress(ports_.worker_grpc[stage]),
                                   "--http-listen=" + LoopbackAddress(ports_.worker_http[stage]),
                                   absl::StrCat("--data-plane-port=", ports_.worker_data_plane[stage]),
                                   absl::StrCat("--stage=", stage),
                                   absl::StrCat("--num-stages=", o.num_stages),
                                   absl::StrCat("--tensor-parallel=", o.tensor_parallel),
                                   "--workers=" + worker_addresses(),
                                   "--scheduler=" + scheduler_address(),
                                   absl::StrCat("--n-slots=", o.n_slots)};
  if (o.kv_block_size > 0) args.push_back(absl::StrCat("--kv-block-size=", o.kv_block_size));
  if (o.kv_local_slots > 0) args.push_back(absl::StrCat("--kv-local-slots=", o.kv_local_slots));
  if (o.swa_full || o.enable_prefix_caching) args.push_back("--swa-full");
  // No iteration exceeds the scheduler's token budget: reserving it leaves nothing to grow.
  if (o.max_num_batched_tokens > 0) args.push_back(absl::StrCat("--reserve-tokens=", o.max_num_batched_tokens));
  if (!o.deployment_id.empty()) args.push_back("--deployment-id=" + o.deployment_id);
  if (!o.dtype.empty()) args.push_back("--dtype=" + o.dtype);
  if (!o.device.empty()) args.push_back("--device=" + o.device);
  // Stages of one machine on distinct GPUs: stage s takes s*TP .. s*TP+TP-1.
  if (o.device == "cuda") args.push_back(absl::StrCat("--first-device=", stage * o.tensor_parallel));
  if (o.cuda_graphs) args.push_back("--cuda-graphs");
  if (o.worker_threads > 0) args.push_back(absl::StrCat("--threads=", o.worker_threads));
  if (o.peer_timeout_ms > 0) args.push_back(absl::StrCat("--peer-timeout-ms=", o.peer_timeout_ms));
  if (o.rendezvous_timeout_ms > 0) args.push_back(absl::StrCat("--rendezvous-timeout-ms=", o.rendezvous_timeout_ms));
  if (!o.log_level.empty()) args.push_back("--log-level=" + o.log_level);
  if (!o.served_model_name.empty()) args.push_back("--model-name=" + o.served_model_name);
  args.push_back(InternalAuthArg());
  return args;
}

std::vector<std::string> LocalStackCommands::SchedulerArgs() const {
  const Options& o = options_;
  std::vector<std::string> args = {
      "--listen=" + scheduler_address(), "--http-listen=" + LoopbackAddress(ports_.scheduler_http),
      absl::StrCat("--max-bs=", o.max_bs), absl::StrCat("--n-slots=", o.n_slots), "--policy=" + o.policy};
  if (o.num_stages > 0) {
    args.push_back("--workers=" + worker_addresses());
  } else {
    args.push_back("--model=" + o.model);
    if (o.engine_threads > 0) args.push_back(absl::StrCat("--threads=", o.engine_threads));
    if (!o.device.empty()) args.push_back("--device=" + o.device);
    if (o.kv_local_slots > 0) args.push_back(absl::StrCat("--kv-local-slots=", o.kv_local_slots));
    if (o.swa_full) args.push_back("--swa-full");  // with --enable-prefix-caching the scheduler sets it itself
  }
  if (o.n_workers > 0) args.push_back(absl::StrCat("--n-workers=", o.n_workers));
  if (o.microbatches > 0) args.push_back(absl::StrCat("--microbatches=", o.microbatches));
  if (o.faster_transformer) args.push_back("--faster-transformer");
  if (o.kv_block_size > 0) args.push_back(absl::StrCat("--kv-block-size=", o.kv_block_size));
  if (o.max_num_batched_tokens > 0) {
    args.push_back(absl::StrCat("--max-num-batched-tokens=", o.max_num_batched_tokens));
  }
  if (o.max_prefill_slowdown > 0) args.push_back(absl::StrCat("--max-prefill-slowdown=", o.max_prefill_slowdown));
  if (o.long_prefill_token_threshold > 0)
    args.push_back(absl::StrCat("--long-prefill-token-threshold=", o.long_prefill_token_threshold));
  if (o.enable_prefix_caching) args.push_back("--enable-prefix-caching");
  if (!o.scheduling_order.empty()) args.push_back("--scheduling-order=" + o.scheduling_order);
  if (o.priority_aging_ms >= 0) args.push_back(absl::StrCat("--priority-aging-ms=", o.priority_aging_ms));
  if (o.worker_timeout_ms > 0) args.push_back(absl::StrCat("--worker-timeout-ms=", o.worker_timeout_ms));
  if (o.drain_grace_seconds > 0) args.push_back(absl::StrCat("--drain-grace-seconds=", o.drain_grace_seconds));
  args.push_back(InternalAuthArg());
  if (!o.log_level.empty()) args.push_back("--log-level=" + o.log_level);
  if (!o.served_model_name.empty()) args.push_back("--model-name=" + o.served_model_name);
  args.insert(args.end(), o.extra_scheduler_flags.begin(), o.extra_scheduler_flags.end());
  return args;
}

std::vector<std::string> LocalStackCommands::GatewayArgs() const {
  const Options& o = options_;
  std::vector<std::string> args = {"--listen=" + o.gateway_listen, "--grpc-listen=" + o.gateway_grpc_listen,
                                   "--schedulers=" + scheduler_address(), "--model=" + o.model};
  if (!o.log_level.empty()) args.push_back("--log-level=" + o.log_level);
  if (!o.served_model_name.empty()) args.push_back("--served-model-name=" + o.served_model_name);
  if (!o.api_keys.empty()) args.push_back("--api-keys=" + absl::StrJoin(o.api_keys, ","));
  args.push_back(InternalAuthArg());
  if (!o.chat_template.empty()) args.push_back("--chat-template=" + o.chat_template);
  if (!o.tool_call_parser.empty()) args.push_back("--tool-call-parser=" + o.tool_call_parser);
  if (o.gateway_drain_grace_seconds > 0) {
    args.push_back(absl::StrCat("--drain-grace-seconds=", o.gateway_drain_grace_seconds));
  }
  return args;
}

}  // namespace orca::cli
