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
#include "services/common/internal_auth.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/gateway/gateway.h"

namespace orca::gateway {
namespace {

struct Flags {
  Gateway::Options gateway;
  std::string schedulers = "127.0.0.1:7000";
  services::InternalAuthFlags internal_auth;
  std::string scheduler_api_key, scheduler_api_key_file;  // deprecated spellings of the internal credential
  double drain_grace_seconds = 30;
  double scheduler_stall_grace_seconds = 5;
  double max_output_pause_seconds = 30;
  double chat_template_timeout_seconds = 5;
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
  services::AddInternalAuthFlags(&flags, &f.internal_auth);
  flags.AddString("scheduler-api-key", &f.scheduler_api_key,
                  "deprecated: the internal token; use --internal-token-file");
  flags.AddString("scheduler-api-key-file", &f.scheduler_api_key_file, "deprecated spelling of --internal-token-file");
  flags.AddInt("max-body-bytes", &o.max_body_bytes, "larger request bodies get 413");
  flags.AddInt("max-concurrent-requests", &o.max_concurrent_requests,
               "requests in flight (generations, /tokenize, /detokenize, and those waiting for a CPU thread); "
               "beyond: 503 with Retry-After");
  flags.AddInt("cpu-threads", &o.cpu_threads,
               "threads that parse, tokenize, render chat templates and compile constraints, off the HTTP I/O "
               "threads (0 = the hardware threads, at least 2)");
  flags.AddInt("cpu-max-queued", &o.cpu_max_queued,
               "requests that may wait for a --cpu-threads thread; beyond: 503 with Retry-After (gRPC "
               "RESOURCE_EXHAUSTED) at once");
  flags.AddDouble("chat-template-timeout-seconds", &f.chat_template_timeout_seconds,
                  "wall-clock budget of one chat template rendering; a template that runs longer fails its "
                  "request with a 400 naming the template");
  flags.AddBool("metrics-require-api-key", &o.metrics_require_api_key,
                "/metrics requires an --api-keys key too (default: open, for Prometheus); /health never does, "
                "and /ready without a key shows only its status");
  flags.AddString("chat-template", &o.model.chat_template,
                  "chat template file or built-in name (chatml, llama2, llama3) overriding the model's; without "
                  "it a model that ships no template answers chat requests with a 400");
  flags.AddInt("max-model-len", &o.model.max_model_len, "context limit (0 = the model's)");
  flags.AddString("tool-call-parser", &o.model.tool_call_parser,
                  "how the model writes tool calls: llama3_json, hermes, mistral, or auto (detected from the chat "
                  "template)");
  flags.AddDouble("drain-grace-seconds", &f.drain_grace_seconds,
                  "On SIGTERM: stop taking requests and report not-ready at once, let in-flight requests finish "
                  "for this long, then end the rest with an error event / 503 (a second signal ends it now). "
                  "Keep the pod's terminationGracePeriodSeconds above it");
  flags.AddInt("max-buffered-output-bytes", &o.max_buffered_output_bytes,
               "streamed output held for clients that read slower than it is generated, over all connections "
               "(0 = no overall cap; each connection is also capped at 16 MiB). A stream holding more than its "
               "share pauses its scheduler request until its client catches up");
  flags.AddDouble("max-output-pause-seconds", &f.max_output_pause_seconds,
                  "a stream paused this long (its client reads nothing) is cancelled: its scheduler request ends "
                  "(freeing its KV) and the stream ends with an error event");
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
  f.gateway.max_output_pause = absl::Seconds(f.max_output_pause_seconds);
  f.gateway.chat_template_timeout = absl::Seconds(f.chat_template_timeout_seconds);
  f.gateway.schedulers.clear();
  if (f.gateway.schedulers_dns.empty()) {
    for (absl::string_view address : absl::StrSplit(f.schedulers, ',', absl::SkipWhitespace())) {
      f.gateway.schedulers.emplace_back(address);
    }
  }
  // The internal credential, sent to the schedulers on every call (they require it).
  std::vector<std::string> inline_key;
  if (!f.scheduler_api_key.empty()) inline_key.push_back(f.scheduler_api_key);
  auto internal_auth = services::LoadInternalAuth(
      f.internal_auth,
      {{"--scheduler-api-key-file", f.scheduler_api_key_file, {}}, {"--scheduler-api-key", "", inline_key}});
  if (!internal_auth.ok()) {
    std::cerr << "orca-gateway: " << internal_auth.status().message() << "\n";
    return 2;
  }
  f.gateway.scheduler_api_key = internal_auth->token();

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
