// orca-gateway: the stateless front door. Flags: docs/services.md.

#include <csignal>
#include <iostream>

#include "absl/strings/str_split.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "services/gateway/gateway.h"

namespace {

int Run(int argc, char** argv) {
  orca::SetLogComponent("gateway");
  orca::gateway::Gateway::Options options;
  std::string schedulers = "127.0.0.1:7000";
  std::vector<std::string> api_keys;
  std::string log_level = "info";
  bool log_json = false;

  orca::FlagSet flags("orca-gateway",
                      "OpenAI-compatible HTTP API and orca.v1.Generation gRPC API in front of Orca schedulers.");
  flags.AddString("listen", &options.listen, "HTTP address: OpenAI API, /health, /ready, /metrics");
  flags.AddString("grpc-listen", &options.grpc_listen,
                  "gRPC address: orca.v1.Generation, health, reflection (empty disables)");
  flags.AddString("schedulers", &schedulers, "comma-separated scheduler addresses (engine replicas)");
  flags.AddString("schedulers-dns", &options.schedulers_dns,
                  "HOST:PORT: discover the schedulers as HOST's DNS addresses (e.g. a headless Service), "
                  "re-resolved every poll; replaces --schedulers");
  flags.AddString("model", &options.model.model_path,
                  "model path: tokenizer, chat template, context length (required)");
  flags.AddString("served-model-name", &options.model.served_model_name,
                  "the `model` clients send (default: basename of --model)");
  flags.AddStringList("api-keys", &api_keys, "comma-separated accepted API keys (empty = no auth)");
  flags.AddString("api-keys-file", &options.api_keys_file, "file with one API key per line (e.g. a mounted Secret)");
  flags.AddInt("max-body-bytes", &options.max_body_bytes, "larger request bodies get 413");
  flags.AddInt("max-concurrent-requests", &options.max_concurrent_requests,
               "generation requests in flight; beyond: 503 with Retry-After");
  flags.AddString("chat-template", &options.model.chat_template,
                  "chat template file or built-in name (chatml, llama2, llama3) overriding the model's");
  flags.AddInt("max-model-len", &options.model.max_model_len, "context limit (0 = the model's)");
  flags.AddString("log-level", &log_level, "debug, info, warning or error");
  flags.AddBool("log-json", &log_json, "Log JSON lines");
  flags.EnableConfigFile();
  if (absl::Status status = flags.Parse(argc, argv); !status.ok()) {
    std::cerr << "orca-gateway: " << status.message() << "\n\n" << flags.Usage();
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  orca::LogLevel level;
  if (!orca::ParseLogLevel(log_level, &level)) {
    std::cerr << "orca-gateway: --log-level must be debug, info, warning or error\n";
    return 2;
  }
  orca::SetLogLevel(level);
  if (log_json) orca::SetLogFormat(orca::LogFormat::kJson);
  if (options.model.model_path.empty()) {
    std::cerr << "orca-gateway: --model is required\n\n" << flags.Usage();
    return 2;
  }
  options.schedulers.clear();
  if (options.schedulers_dns.empty()) {
    for (absl::string_view address : absl::StrSplit(schedulers, ',', absl::SkipWhitespace())) {
      options.schedulers.emplace_back(address);
    }
  }
  options.api_keys = api_keys;

  // Block the shutdown signals before any thread starts so only sigwait sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto gateway = orca::gateway::Gateway::Create(std::move(options));
  if (!gateway.ok()) {
    ORCA_LOG(ERROR) << "cannot start: " << gateway.status().message();
    return 1;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  ORCA_LOG(INFO) << "signal " << signal << ": shutting down";
  (*gateway)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
