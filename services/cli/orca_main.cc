// `orca`: the user's CLI, in the spirit of `vllm serve` / `llama-server`.

#include <cstdio>
#include <cstring>
#include <string>

#include "services/cli/commands.h"

namespace {

constexpr const char* kUsage = R"(Usage: orca <command> [flags]

Orca serves decoder-only Transformer LLMs with iteration-level scheduling and
selective batching (ORCA, OSDI '22).

Commands:
  serve           Start the whole stack locally (gateway, scheduler, workers) on loopback
  generate        Run one prompt through the in-process engine
  model synth     Write a deterministic synthetic checkpoint (HF layout + tokenizer)
  model info      Print a checkpoint's configuration and tensors (types, sizes)
  model quantize  Write a GGUF with quantized weights (q8_0, q4_k_m, ...) from a checkpoint
  bench           Drive load against an OpenAI-compatible server
  bench sweep     The paper's Fig. 10: load sweeps over local orca serve stacks (or the simulator)

Run `orca <command> --help` for the flags of a command.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  // Shift so each command sees its own name as argv[0].
  std::string name = "orca " + cmd;
  argv[1] = name.data();
  if (cmd == "generate") return orca::cli::RunGenerate(argc - 1, argv + 1);
  if (cmd == "model") return orca::cli::RunModel(argc - 1, argv + 1);
  if (cmd == "serve") return orca::cli::RunServe(argc - 1, argv + 1);
  if (cmd == "bench") return orca::cli::RunBench(argc - 1, argv + 1);
  std::fprintf(stderr, "orca: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
