#pragma once
/// The gateway's transport-independent generation request and the events the
/// pipeline reports back. The OpenAI HTTP API and the gRPC API both translate
/// into and out of these.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/common/sampling_params.h"

namespace orca::gateway {

/// One tokenized prompt with its own completion budget.
struct PromptInput {
  std::vector<int32_t> token_ids;
  /// The client's limit or the gateway's default_max_new_tokens, resolved against the
  /// context and the KV budget: never 0, and prompt + this fits.
  int32_t max_new_tokens = 0;
};

/// A validated, tokenized request: `prompts.size() × n` choices. Choice
/// `p × n + i` is sample i of prompt p (vLLM's and OpenAI's ordering).
struct GenerationRequest {
  std::string request_id;
  std::vector<PromptInput> prompts;
  int32_t n = 1;
  int32_t min_new_tokens = 0;
  /// With a seed, sample i uses seed + i so the n choices differ reproducibly.
  SamplingParams sampling;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  /// Scheduling priority (lower first; see GenerationOptions::priority).
  int32_t priority = 0;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  /// Deltas carry the generated ids (ChoiceDelta::token_ids).
  bool return_token_ids = false;

  int num_choices() const { return static_cast<int>(prompts.size()) * n; }
};

/// One alternative at a position (when top logprobs are asked for).
struct TokenAlternative {
  int32_t id = 0;
  float logprob = 0.0f;
  std::string text;  // the token's bytes (may be a partial UTF-8 sequence)
};

/// A generated token with its logprob data. `text` and `top` are filled only
/// when the request asked for logprobs.
struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0.0f;
  /// False for a prompt's first token, which has no logprob (rendered as null).
  bool has_logprob = true;
  /// Prompt tokens: the 1-based rank of the token in the model's distribution.
  int32_t rank = 0;
  std::string text;
  std::vector<TokenAlternative> top;
};

enum class FinishReason { kStop, kLength };

inline const char* FinishReasonName(FinishReason reason) { return reason == FinishReason::kStop ? "stop" : "length"; }

/// New output of one choice. Text is final (never retracted): partial UTF-8 and
/// possible stop-string prefixes are held back until decided.
struct ChoiceDelta {
  int index = 0;
  std::string text;
  std::vector<GeneratedToken> tokens;
  /// With GenerationRequest::return_token_ids: the ids generated since the last delta (all of
  /// them, whether or not their text was held back; the stop token included).
  std::vector<int32_t> token_ids;
  /// Prompt tokens with their logprobs (SamplingParams::prompt_logprobs), in order from the
  /// first (which has none); they come before the choice's first generated token.
  std::vector<GeneratedToken> prompt_logprobs;
  /// Set on the last delta of the choice.
  std::optional<FinishReason> finish_reason;
  /// For kStop: the stop string that matched, or empty.
  std::string stop_string;
  /// For kStop: the stop token (EOS or a stop_token_ids entry) that ended it.
  std::optional<int32_t> stop_token;
  /// Set on the last delta: this choice's prompt and generated token counts.
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

struct GenerationUsage {
  int32_t prompt_tokens = 0;  // each prompt counted once, whatever n is
  int32_t completion_tokens = 0;
};

/// Receives a request's events. Calls are serialized (never concurrent) and
/// may come from any thread; implementations must not block and must not call
/// back into the GenerationHandle synchronously. Exactly one of OnComplete /
/// OnError ends the sequence, unless the handle was cancelled first (then
/// nothing more is delivered).
class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  virtual void OnDelta(const ChoiceDelta& delta) = 0;
  virtual void OnComplete(const GenerationUsage& usage) = 0;
  /// Not the caller's fault unless the status says so (e.g. a scheduler's
  /// InvalidArgument); after an error every other choice has been cancelled.
  virtual void OnError(const absl::Status& status) = 0;
  /// Backpressure, asked after deliveries: true when the consumer takes more
  /// now. Otherwise it keeps `on_ready` and runs it once, from any thread:
  /// with OK when it can take more, or with the error that ends the request.
  /// May run concurrently with the calls above (thread-safe). Default: always.
  virtual bool ReadyForMore(std::function<void(const absl::Status&)> on_ready) { return true; }
};

}  // namespace orca::gateway
