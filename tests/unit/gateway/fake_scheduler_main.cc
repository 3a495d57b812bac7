// orca-fake-scheduler: the FakeScheduler test double as a process, so the
// gateway's e2e tests (tests/e2e/gateway) and manual runs need no engine.
//
//   orca-fake-scheduler --listen 127.0.0.1:7000 --write-model-dir /tmp/m
//   orca-gateway --model /tmp/m --schedulers 127.0.0.1:7000 --insecure-internal  (the fake takes any caller)

#include <csignal>
#include <iostream>

#include "core/common/flags.h"
#include "services/gateway/testing/byte_level_model.h"
#include "services/gateway/testing/fake_scheduler.h"

int main(int argc, char** argv) {
  using orca::gateway::testing::FakeScheduler;
  FakeScheduler::Options options;
  options.listen = "127.0.0.1:7000";
  options.vocab_size = orca::gateway::testing::kByteLevelVocabSize;
  options.eos_id = orca::gateway::testing::kByteLevelEosId;
  std::string model_dir;
  int64_t iteration_us = 2000;
  int max_context = options.max_context;
  orca::FlagSet flags("orca-fake-scheduler",
                      "Test double of orca-scheduler: deterministic tokens, one per request per iteration.");
  flags.AddString("listen", &options.listen, "gRPC address");
  flags.AddString("model-name", &options.model_name, "model name reported in stats");
  flags.AddInt("max-context", &max_context, "max_context reported and enforced");
  flags.AddInt("vocab-size", &options.vocab_size, "vocabulary size reported in stats");
  flags.AddInt("token-min", &options.token_min, "generated tokens are drawn from [token-min, token-max)");
  flags.AddInt("token-max", &options.token_max, "see --token-min");
  flags.AddInt("eos-id", &options.eos_id, "EOS token id (-1: none)");
  flags.AddInt("eos-after", &options.eos_after, "emit EOS as this generated token (0: never)");
  flags.AddInt("iteration-us", &iteration_us, "microseconds between iterations");
  flags.AddString("write-model-dir", &model_dir,
                  "write a byte-level test model (tokenizer.json, config.json) here for orca-gateway --model");
  if (absl::Status status = flags.Parse(argc, argv); !status.ok()) {
    std::cerr << status.message() << "\n" << flags.Usage();
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  options.max_context = max_context;
  options.iteration_interval = absl::Microseconds(iteration_us);
  if (!model_dir.empty()) {
    if (absl::Status status = orca::gateway::testing::WriteByteLevelModel(model_dir, max_context); !status.ok()) {
      std::cerr << status.message() << "\n";
      return 1;
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto scheduler = FakeScheduler::Start(options);
  if (!scheduler.ok()) {
    std::cerr << scheduler.status().message() << "\n";
    return 1;
  }
  std::cout << "orca-fake-scheduler listening on " << (*scheduler)->address() << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  (*scheduler)->Shutdown();
  return 0;
}
