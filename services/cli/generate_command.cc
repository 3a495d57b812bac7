// `orca generate`: one prompt through the in-process engine.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/common/flags.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"
#include "core/engine/engine.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/tokenizer.h"
#include "services/cli/commands.h"

namespace orca::cli {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt;
  std::string prompt_tokens;
  int64_t max_new_tokens = 64;
  double temperature = 0.0;
  int top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  int64_t seed = -1;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  bool ignore_eos = false;
  bool print_token_ids = false;
  std::string dtype = "auto";
  std::string device = "cpu";
  int threads = 0;
  int tensor_parallel = 1;
};

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (auto part : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    int32_t v;
    if (!absl::SimpleAtoi(part, &v))
      return absl::InvalidArgumentError("--prompt-tokens: '" + std::string(part) + "' is not a token id");
    ids.push_back(v);
  }
  if (ids.empty()) return absl::InvalidArgumentError("--prompt-tokens: no token ids given");
  return ids;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "orca generate: %s\n", std::string(s.message()).c_str());
  return 1;
}

void AddGenerateFlags(FlagSet& flags, GenerateFlags& f) {
  flags.AddString("model", &f.model, "HF checkpoint directory or .gguf file (default: the synthetic default model)");
  flags.AddString("prompt", &f.prompt, "Prompt text (tokenized with the model's tokenizer)");
  flags.AddString("prompt-tokens", &f.prompt_tokens, "Prompt as comma-separated token ids instead of text");
  flags.AddInt("max-tokens", &f.max_new_tokens, "Maximum new tokens");
  flags.AddDouble("temperature", &f.temperature, "Sampling temperature (0 = greedy)");
  flags.AddInt("top-k", &f.top_k, "Top-k (0 = off)");
  flags.AddDouble("top-p", &f.top_p, "Nucleus sampling mass (1 = off)");
  flags.AddDouble("min-p", &f.min_p, "Min-p relative threshold (0 = off)");
  flags.AddInt("seed", &f.seed, "Sampling seed (-1 = derived from the request)");
  flags.AddDouble("repetition-penalty", &f.repetition_penalty, "HF-style repetition penalty (1 = off)");
  flags.AddDouble("presence-penalty", &f.presence_penalty, "OpenAI presence penalty");
  flags.AddDouble("frequency-penalty", &f.frequency_penalty, "OpenAI frequency penalty");
  flags.AddBool("ignore-eos", &f.ignore_eos, "Keep generating past the end-of-sequence token");
  flags.AddBool("print-token-ids", &f.print_token_ids, "Also print the prompt and generated token ids");
  flags.AddString("dtype", &f.dtype, "Weight dtype: auto, f32 or bf16");
  flags.AddString("device", &f.device, "Kernel backend: cpu or cuda (tensor-parallel shard r uses GPU r)");
  flags.AddInt("threads", &f.threads, "Compute threads (0 = all cores)");
  flags.AddInt("tensor-parallel", &f.tensor_parallel, "Tensor-parallel shards (threads) in this process");
}

absl::StatusOr<SamplingParams> SamplingFromFlags(const GenerateFlags& f) {
  SamplingParams sp;
  sp.temperature = static_cast<float>(f.temperature);
  sp.top_k = static_cast<int32_t>(f.top_k);
  sp.top_p = static_cast<float>(f.top_p);
  sp.min_p = static_cast<float>(f.min_p);
  if (f.seed >= 0) sp.seed = static_cast<uint64_t>(f.seed);
  sp.repetition_penalty = static_cast<float>(f.repetition_penalty);
  sp.presence_penalty = static_cast<float>(f.presence_penalty);
  sp.frequency_penalty = static_cast<float>(f.frequency_penalty);
  if (std::string err = sp.Validate(); !err.empty()) return absl::InvalidArgumentError(err);
  return sp;
}

/// The prompt's token ids: --prompt-tokens as given, or --prompt through the tokenizer.
absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerateFlags& f, const text::Tokenizer* tokenizer) {
  std::vector<int32_t> prompt;
  if (!f.prompt_tokens.empty()) {
    ORCA_ASSIGN_OR_RETURN(prompt, ParseIds(f.prompt_tokens));
  } else {
    prompt = tokenizer->Encode(f.prompt, /*add_special_tokens=*/true);
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  return prompt;
}

/// Decodes greedily or by `sp` up to --max-tokens (or an end-of-sequence token),
/// printing the text as it comes; the timing summary goes to stderr.
absl::Status Decode(const GenerateFlags& f, engine::Engine& engine, const text::Tokenizer* tokenizer,
                    const std::vector<int32_t>& prompt, const SamplingParams& sp, int64_t n_slots) {
  const std::vector<int32_t> eos = tokenizer ? tokenizer->eos_ids() : engine.config().eos_token_ids;
  std::unique_ptr<text::IncrementalDetokenizer> detok;
  if (tokenizer) {
    detok = std::make_unique<text::IncrementalDetokenizer>(*tokenizer, prompt);
    if (!f.prompt.empty()) std::cout << f.prompt << std::flush;
  }
  engine::StepInput in;
  in.seqs.push_back({1, prompt, 0, true, engine::SequenceSetup{static_cast<int32_t>(n_slots), sp, prompt}});
  std::vector<int32_t> generated;
  const auto t0 = std::chrono::steady_clock::now();
  auto t_first = t0;
  int32_t pos = 0;
  for (int64_t i = 0; i < f.max_new_tokens; ++i) {
    engine::StepOutput out;
    ORCA_RETURN_IF_ERROR(engine.Step(in, nullptr, &out));
    if (i == 0) t_first = std::chrono::steady_clock::now();
    const int32_t tok = out.samples[0].sample.token_id;
    const bool is_eos = std::find(eos.begin(), eos.end(), tok) != eos.end();
    if (is_eos && !f.ignore_eos) break;
    generated.push_back(tok);
    if (detok) std::cout << detok->Add(tok) << std::flush;
    pos += static_cast<int32_t>(in.seqs[0].token_ids.size());
    in.seqs[0] = {1, {tok}, pos, true, std::nullopt};
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (detok) std::cout << detok->Flush();
  std::cout << "\n";
  if (f.print_token_ids) {
    std::cout << "prompt_token_ids:";
    for (int32_t t : prompt) std::cout << " " << t;
    std::cout << "\ngenerated_token_ids:";
    for (int32_t t : generated) std::cout << " " << t;
    std::cout << "\n";
  }
  const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
  std::fprintf(stderr, "[%zu prompt tokens in %.1f ms (%.0f tok/s); %zu generated, decode %.1f tok/s]\n", prompt.size(),
               prefill_s * 1e3, prompt.size() / std::max(prefill_s, 1e-9), generated.size(),
               generated.size() > 1 ? (generated.size() - 1) / std::max(decode_s, 1e-9) : 0.0);
  return absl::OkStatus();
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  GenerateFlags f;
  FlagSet flags("orca generate", "Runs one prompt through the in-process engine and prints the continuation.");
  AddGenerateFlags(flags, f);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) return Fail(s);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (f.model.empty()) {
    f.model = EnsureDefaultModel();
    if (f.model.empty()) return 1;
  }
  if (f.prompt.empty() == f.prompt_tokens.empty())
    return Fail(absl::InvalidArgumentError("give exactly one of --prompt or --prompt-tokens"));
  if (f.max_new_tokens < 1) return Fail(absl::InvalidArgumentError("--max-tokens must be at least 1"));
  absl::StatusOr<SamplingParams> sp = SamplingFromFlags(f);
  if (!sp.ok()) return Fail(sp.status());

  engine::Engine::Options eo;
  eo.model_path = f.model;
  eo.num_threads = static_cast<int32_t>(f.threads);
  eo.tp_size = static_cast<int32_t>(f.tensor_parallel);
  if (absl::Status s = engine::SetDTypeAndDeviceFromFlags(f.dtype, f.device, &eo); !s.ok()) return Fail(s);
  SetLogLevel(LogLevel::kWarning);
  std::unique_ptr<text::Tokenizer> tokenizer;
  if (auto tok = text::Tokenizer::Load(f.model); tok.ok()) {
    tokenizer = std::move(*tok);
  } else if (!f.prompt.empty()) {
    return Fail(tok.status());
  }
  absl::StatusOr<std::vector<int32_t>> prompt = PromptIds(f, tokenizer.get());
  if (!prompt.ok()) return Fail(prompt.status());
  eo.n_slots = static_cast<int64_t>(prompt->size()) + f.max_new_tokens;
  auto engine_or = engine::Engine::Create(eo);
  if (!engine_or.ok()) return Fail(engine_or.status());
  engine::Engine& engine = **engine_or;
  const int64_t context = engine.config().max_position;
  if (static_cast<int64_t>(prompt->size()) + f.max_new_tokens > context)
    return Fail(absl::InvalidArgumentError("prompt (" + std::to_string(prompt->size()) + " tokens) + --max-tokens (" +
                                           std::to_string(f.max_new_tokens) + ") exceeds the model's context of " +
                                           std::to_string(context)));
  if (absl::Status s = Decode(f, engine, tokenizer.get(), *prompt, *sp, eo.n_slots); !s.ok()) return Fail(s);
  return 0;
}

}  // namespace orca::cli
