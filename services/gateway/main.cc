// orca-gateway: the stateless front door. Wiring only: flags → Gateway (HTTP and gRPC
// APIs, scheduler routing); SIGTERM shuts it down. Flags: docs/services.md.

#include <csignal>
#include <iostream>

#include "absl/strings/str_split.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "services/common/service_main.h"
#include "services/common/signals.h"
#include "services/gateway/gateway.h"

namespace orca::gateway {
namespace {

struct Flags {
  Gateway::Options gateway;
  std::string schedulers = "127.0.0.1:7000";
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
  flags.AddInt("max-body-bytes", &o.max_body_bytes, "larger request bodies get 413");
  flags.AddInt("max-concurrent-requests", &o.max_concurrent_requests,
               "generation requests in flight; beyond: 503 with Retry-After");
  flags.AddString("chat-template", &o.model.chat_template,
                  "chat template file or built-in name (chatml, llama2, llama3) overriding the model's");
  flags.AddInt("max-model-len", &o.model.max_model_len, "context limit (0 = the model's)");
  services::AddLoggingFlags(&flags, &f.logging);
}

int Main(int argc, char** argv) {
  Flags f;
  FlagSet flags("orca-gateway",
                "OpenAI-compatible HTTP API and orca.v1.Generation gRPC API in front of Orca schedulers.");
  AddFlags(flags, f);
  if (auto exit_code = services::ParseFlagsOrExit(flags, argc, argv, "orca-gateway")) return *exit_code;
  if (absl::Status s = services::ConfigureLogging("gateway", f.logging); !s.ok()) {
    std::cerr << "orca-gateway: " << s.message() << "\n";
    return 2;
  }
  if (f.gateway.model.model_path.empty()) {
    std::cerr << "orca-gateway: --model is required\n\n" << flags.Usage();
    return 2;
  }
  f.gateway.schedulers.clear();
  if (f.gateway.schedulers_dns.empty()) {
    for (absl::string_view address : absl::StrSplit(f.schedulers, ',', absl::SkipWhitespace())) {
      f.gateway.schedulers.emplace_back(address);
    }
  }

  // Before any thread starts, so that only the wait below sees the signals.
  services::BlockTerminationSignals();
  std::signal(SIGPIPE, SIG_IGN);
  auto gateway = Gateway::Create(std::move(f.gateway));
  if (!gateway.ok()) {
    ORCA_LOG(ERROR) << "cannot start: " << gateway.status().message();
    return 1;
  }
  const int sig = services::AwaitTerminationSignal();
  ORCA_LOG(INFO) << "signal " << sig << ": shutting down";
  (*gateway)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace orca::gateway

int main(int argc, char** argv) { return orca::gateway::Main(argc, argv); }
