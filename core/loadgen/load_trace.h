#pragma once
/// Request traces for the load driver: the paper's §6.2 trace, the homogeneous trace of its
/// Fig. 11, and replay of a trace file. Every trace is a list of TraceRequest (arrival
/// offset, prompt length, max new tokens) in non-decreasing arrival order, the same records
/// the simulated-engine sweep (sim/) replays.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/loadgen/poisson_trace.h"

namespace orca::loadgen {

using loadgen::TraceRequest;

enum class TraceKind {
  /// Paper §6.2: Poisson arrivals, prompt U(min_prompt, max_prompt), output U(min_new, max_new).
  kPaper,
  /// Paper Fig. 11: Poisson arrivals, every request with the same prompt and output length.
  kHomogeneous,
  /// Multi-turn chat (prefix caching): Poisson arrivals; every request is the next turn of
  /// one of `chat_conversations` conversations in progress, its prompt the shared system
  /// prompt (chat_system_tokens, one length per seed), every earlier turn of its
  /// conversation (user message and reply) and a new user message; see MakeChatTrace.
  kChat,
  /// Replay of a JSONL or CSV file (see ParseTraceText).
  kFile,
};

struct LoadTraceOptions {
  /// "paper", "homogeneous", or the path of a trace file.
  std::string trace = "paper";
  uint64_t seed = 1;
  /// Requests per second of the synthetic traces (> 0). Unused for files.
  double arrival_rate = 1.0;
  /// Requests of a synthetic trace; for a file, the first `num_requests` (0 = all of it).
  int32_t num_requests = 100;
  /// Paper trace lengths (inclusive bounds; the paper: U(32, 512) and U(1, 128)).
  int32_t min_prompt_tokens = 32;
  int32_t max_prompt_tokens = 512;
  int32_t min_new_tokens = 1;
  int32_t max_new_tokens = 128;
  /// Homogeneous trace lengths.
  int32_t prompt_tokens = 256;
  int32_t output_tokens = 64;
  /// File traces: arrival offsets are multiplied by this (> 0; 0.5 replays twice as fast).
  double time_scale = 1.0;
  /// Chat trace: system prompt length U(min, max) drawn once; turns per conversation,
  /// user message length U(min, max) each; replies are min_new_tokens..max_new_tokens.
  int32_t chat_system_tokens_min = 200;
  int32_t chat_system_tokens_max = 500;
  int32_t chat_turns_min = 2;
  int32_t chat_turns_max = 6;
  int32_t chat_user_tokens_min = 16;
  int32_t chat_user_tokens_max = 64;
  int32_t chat_conversations = 8;
  /// Chat trace, closed loop (MakeChatConversations): each conversation sends its next turn
  /// only once its previous turn completed, its prompt the previous prompt + the token ids
  /// the server returned + the new user message; a new conversation starts per Poisson
  /// arrival (arrival_rate is then conversations/s; chat_conversations is unused).
  bool chat_closed_loop = false;
  /// Closed loop: seconds between a turn's completion and the next turn's send (>= 0).
  double chat_think_time_s = 0;
};

/// One turn of a closed-loop conversation: its new user message and its reply's length.
struct ChatTurn {
  PromptSegment user;
  int32_t max_new_tokens = 0;
};

/// A closed-loop conversation: it starts at `arrival` with [system][user 1]; turn k + 1's
/// prompt is turn k's prompt, the reply the server generated for it, then [user k + 1].
struct ChatConversation {
  absl::Duration arrival;
  PromptSegment system;  ///< num_tokens 0: none.
  std::vector<ChatTurn> turns;
};

/// "paper" / "homogeneous" / "chat" / anything else is a file path.
TraceKind ParseTraceKind(const std::string& trace);

/// The Poisson generator's options for a paper or homogeneous trace (the homogeneous one is the
/// paper's with every length fixed): seed, rate and request count carried over. For the
/// simulated sweeps (sim/), which replay such traces without token contents.
TraceOptions PoissonTraceOptions(const LoadTraceOptions& options);

/// Builds the trace `options` describes. Synthetic traces are deterministic for a seed and,
/// as in GeneratePoissonTrace, their lengths do not depend on the rate. INVALID_ARGUMENT
/// names the bad field; file errors name the file and line.
absl::StatusOr<std::vector<TraceRequest>> MakeLoadTrace(const LoadTraceOptions& options);

/// The chat trace: arrivals as the paper trace's (Poisson at the rate), structure from the
/// seed only (so a rate sweep replays the same conversations faster). Each arrival goes to
/// one of `chat_conversations` slots at random; a slot whose conversation has had all its
/// turns starts a new one. Prompt of turn k = [system][user 1][reply 1]…[user k], as
/// segments (the replies are the trace's, not what the server generated: a prefix cache
/// can reuse everything up to the end of user k-1's turn, as with real chat clients that
/// resend the history). INVALID_ARGUMENT names the bad field.
absl::StatusOr<std::vector<TraceRequest>> MakeChatTrace(const LoadTraceOptions& options);

/// The closed-loop chat workload: conversations arriving as a Poisson process at
/// arrival_rate (conversations/s), turns U(chat_turns_min, max), user messages
/// U(chat_user_tokens_min, max), replies U(min_new_tokens, max_new_tokens), one system prompt
/// of U(chat_system_tokens_min, max) tokens shared by all; `num_requests` turns in all (the
/// last conversation cut short). Lengths and structure depend on the seed only, not on the
/// rate. INVALID_ARGUMENT names the bad field.
absl::StatusOr<std::vector<ChatConversation>> MakeChatConversations(const LoadTraceOptions& options);

/// Parses a trace file's text. Two formats, picked by the first non-blank character:
///  - JSONL ('{'): one object per line, e.g. {"arrival_s": 0.25, "prompt_tokens": 100,
///    "max_tokens": 20}, optionally "segments": [[key, tokens], ...] (shared prompt parts,
///    summing to prompt_tokens);
///  - CSV (anything else): a header row naming the columns, then one row per request.
/// Column / key names: arrival `arrival_s` | `arrival_time` | `timestamp` (seconds),
/// prompt `prompt_tokens` | `input_tokens`, output `max_tokens` | `output_tokens`; other
/// columns are ignored. Rows are stably sorted by arrival and shifted so the first arrives
/// at 0 (absolute timestamps work). Errors name `source` and the line.
absl::StatusOr<std::vector<TraceRequest>> ParseTraceText(const std::string& text, const std::string& source);

/// JSONL in the format ParseTraceText reads (round trip), for saving the trace of a run.
std::string TraceToJsonl(const std::vector<TraceRequest>& trace);

}  // namespace orca::loadgen
