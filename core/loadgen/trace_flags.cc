#include "core/loadgen/trace_flags.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace orca::loadgen {

void AddTraceFlags(TraceFlagScope scope, TraceFlags* values, FlagSet* flags) {
  LoadTraceOptions& o = values->options;
  const bool all = scope == TraceFlagScope::kAll;
  if (all) {
    flags->AddString("trace", &o.trace,
                     "paper (§6.2: prompt U(32,512), output U(1,128)), homogeneous, chat (shared system prompt, "
                     "multi-turn conversations; replies --min/max-new-tokens), or a JSONL/CSV file");
  }
  flags->AddInt("num-requests", &o.num_requests,
                all ? "Requests of a synthetic trace (file: first N, 0 = all)" : "Requests of the trace (per run)");
  flags->AddInt("seed", &values->seed, "Trace seed (and the prompts' where the program makes them)");
  flags->AddInt("min-prompt-tokens", &o.min_prompt_tokens, "paper trace: shortest prompt");
  flags->AddInt("max-prompt-tokens", &o.max_prompt_tokens, "paper trace: longest prompt");
  flags->AddInt("min-new-tokens", &o.min_new_tokens, "paper trace: fewest generated tokens");
  flags->AddInt("max-new-tokens", &o.max_new_tokens, "paper trace: most generated tokens");
  if (!all) return;
  flags->AddInt("prompt-tokens", &o.prompt_tokens, "homogeneous trace: prompt length");
  flags->AddInt("output-tokens", &o.output_tokens, "homogeneous trace: generated tokens");
  flags->AddDouble("time-scale", &o.time_scale, "file trace: multiply arrival times by this");
  flags->AddInt("chat-system-tokens-min", &o.chat_system_tokens_min, "chat trace: shortest system prompt");
  flags->AddInt("chat-system-tokens-max", &o.chat_system_tokens_max, "chat trace: longest system prompt");
  flags->AddInt("chat-turns-min", &o.chat_turns_min, "chat trace: fewest turns per conversation");
  flags->AddInt("chat-turns-max", &o.chat_turns_max, "chat trace: most turns per conversation");
  flags->AddInt("chat-user-tokens-min", &o.chat_user_tokens_min, "chat trace: shortest user message");
  flags->AddInt("chat-user-tokens-max", &o.chat_user_tokens_max, "chat trace: longest user message");
  flags->AddInt("chat-conversations", &o.chat_conversations, "chat trace: conversations in progress at once");
  flags->AddBool("chat-closed-loop", &o.chat_closed_loop,
                 "chat trace, closed loop: a conversation starts per Poisson arrival (the rate is conversations/s); "
                 "each next turn is sent when the previous one completed, its prompt the previous prompt + the token "
                 "ids the server returned (return_token_ids) + a new user message; --chat-conversations is unused");
  flags->AddDouble("chat-think-time", &o.chat_think_time_s,
                   "chat trace, closed loop: seconds between a turn's completion and the next turn");
}

absl::StatusOr<LoadTraceOptions> TraceOptionsFromFlags(const TraceFlags& values) {
  const LoadTraceOptions& o = values.options;
  const std::pair<const char*, int32_t> counts[] = {{"num-requests", o.num_requests},
                                                    {"min-prompt-tokens", o.min_prompt_tokens},
                                                    {"max-prompt-tokens", o.max_prompt_tokens},
                                                    {"min-new-tokens", o.min_new_tokens},
                                                    {"max-new-tokens", o.max_new_tokens},
                                                    {"prompt-tokens", o.prompt_tokens},
                                                    {"output-tokens", o.output_tokens},
                                                    {"chat-system-tokens-min", o.chat_system_tokens_min},
                                                    {"chat-system-tokens-max", o.chat_system_tokens_max},
                                                    {"chat-turns-min", o.chat_turns_min},
                                                    {"chat-turns-max", o.chat_turns_max},
                                                    {"chat-user-tokens-min", o.chat_user_tokens_min},
                                                    {"chat-user-tokens-max", o.chat_user_tokens_max},
                                                    {"chat-conversations", o.chat_conversations}};
  for (const auto& [name, value] : counts) {
    if (value < 0 || value > (int32_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [0, 1073741824] (got ", value, ")"));
    }
  }
  LoadTraceOptions options = o;
  options.seed = static_cast<uint64_t>(values.seed);
  return options;
}

}  // namespace orca::loadgen
