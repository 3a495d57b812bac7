// orca-gateway: the stateless front door. Wiring only: flags → Gateway (HTTP and gRPC
// APIs, scheduler routing); SIGTERM shuts it down. Flags: docs/services.md.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "absl/strings/str_split.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "services/common/api_keys.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/gateway/gateway.h"

namespace orca::gateway {
namespace {

struct Flags {
  Gateway::Options gateway;
  std::string schedulers = "127.0.0.1:7000";
  std::string scheduler_api_key, scheduler_api_key_file;
  double drain_grace_seconds = 30;
  double scheduler_stall_grace_seconds = 5;
  services::LoggingFlags logging;
};

void AddFlags(FlagSet& flags, Flags& f) {
  Gateway::Options& o = f.gateway;
  flags.AddString("listen", &o.listen, "HTTP address: OpenAI API, /health, /ready, /metrics");
  flags.AddString("grpc-listen", &o.grpc_listen,
                  "gRPC address: orca.v1.Generation, health, reflection (empty disables)");
  flags.AddString("schedulers", &f.schedulers, "comma-separated scheduler addresses (engine replicas)");
  flags.AddString("schedulers-dns", &o.schedulers_dns,
                  "HOST:PORT: discover the schedulers as HOST's DNS addresses (e.g. a headless Service), "
                  "re-resolved every poll; replaces --schedulers");
  flags.AddString("model", &o.model.model_path, "model path: tokenizer, chat template, context length (required)");
  flags.AddString("served-model-name", &o.model.served_model_name,
                  "the `model` clients send (default: basename of --model)");
  flags.AddStringList("api-keys", &o.api_keys, "comma-separated accepted API keys (empty = no auth)");
  flags.AddString("api-keys-file", &o.api_keys_file, "file with one API key per line (e.g. a mounted Secret)");
  flags.AddString("scheduler-api-key", &f.scheduler_api_key,
                  "key sent to the schedulers (their --api-keys), as 'authorization: Bearer <key>'");
  flags.AddString("scheduler-api-key-file", &f.scheduler_api_key_file,
                  "file holding --scheduler-api-key (its first key line; e.g. a mounted Secret)");
  flags.AddInt("max-body-bytes", &o.max_body_bytes, "larger request bodies get 413");
  flags.AddInt("max-concurrent-requests", &o.max_concurrent_requests,
               "generation requests in flight; beyond: 503 with Retry-After");
  flags.AddString("chat-template", &o.model.chat_template,
                  "chat template file or built-in name (chatml, llama2, llama3) overriding the model's");
  flags.AddInt("max-model-len", &o.model.max_model_len, "context limit (0 = the model's)");
  flags.AddString("tool-call-parser", &o.model.tool_call_parser,
                  "how the model writes tool calls: llama3_json, hermes, mistral, or auto (detected from the chat "
                  "template)");
  flags.AddDouble("drain-grace-seconds", &f.drain_grace_seconds,
                  "On SIGTERM: stop taking requests and report not-ready at once, let in-flight requests finish "
                  "for this long, then end the rest with an error event / 503 (a second signal ends it now). "
                  "Keep the pod's terminationGracePeriodSeconds above it");
  flags.AddDouble("scheduler-stall-grace-seconds", &f.scheduler_stall_grace_seconds,
                  "A ready scheduler whose stats polls time out stays routable this long after its last answer "
                  "(a stall costs latency, not 503s); a refused connection takes it out at once");
  services::AddLoggingFlags(&flags, &f.logging);
}

int Main(int argc, char** argv) {
  services::InstallCrashHandler(argv[0]);
  Flags f;
  FlagSet flags("orca-gateway",
                "OpenAI-compatible HTTP API and orca.v1.Generation gRPC API in front of Orca schedulers.");
  AddFlags(flags, f);
  if (auto exit_code = services::ParseFlagsOrExit(flags, argc, argv)) return *exit_code;
  if (absl::Status s = services::ConfigureLogging("gateway", f.logging); !s.ok()) {
    std::cerr << "orca-gateway: " << s.message() << "\n";
    return 2;
  }
  if (f.gateway.model.model_path.empty()) {
    std::cerr << "orca-gateway: --model is required\n\n" << flags.Usage();
    return 2;
  }
  f.gateway.scheduler_stall_grace = absl::Seconds(std::max(0.0, f.scheduler_stall_grace_seconds));
  f.gateway.schedulers.clear();
  if (f.gateway.schedulers_dns.empty()) {
    for (absl::string_view address : absl::StrSplit(f.schedulers, ',', absl::SkipWhitespace())) {
      f.gateway.schedulers.emplace_back(address);
    }
  }
  auto scheduler_key = services::ReadClientKey(f.scheduler_api_key, f.scheduler_api_key_file);
  if (!scheduler_key.ok()) {
    std::cerr << "orca-gateway: " << scheduler_key.status().message() << "\n";
    return 2;
  }
  f.gateway.scheduler_api_key = *scheduler_key;

  // Before any thread starts, so that only the wait below sees the signals.
  services::BlockTerminationSignals();
  std::signal(SIGPIPE, SIG_IGN);
  auto gateway = Gateway::Create(std::move(f.gateway));
  if (!gateway.ok()) {
    ORCA_LOG(ERROR) << "cannot start: " << gateway.status().message();
    return 1;
  }
  const int sig = services::AwaitTerminationSignal();
  ORCA_LOG(INFO) << "signal " << sig << ": draining (grace " << f.drain_grace_seconds << " s)";
  std::atomic<bool> drained = false;
  std::thread drain([&gateway, &drained, grace = std::max(0.0, f.drain_grace_seconds)] {
    (*gateway)->Shutdown(absl::Seconds(grace));
    drained = true;
  });
  // A second signal ends the grace period now.
  while (!drained) {
    if (const int again = services::WaitForTerminationSignal(std::chrono::milliseconds(200)); again != 0) {
      ORCA_LOG(INFO) << "signal " << again << ": ending the drain now";
      (*gateway)->EndGracePeriod();
      break;
    }
  }
  drain.join();
  ORCA_LOG(INFO) << "gateway stopped";
  return 0;
}

}  // namespace
}  // namespace orca::gateway

int main(int argc, char** argv) { return orca::gateway::Main(argc, argv); }
