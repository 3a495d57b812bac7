#pragma once
/// Parsing and validation of OpenAI-compatible request bodies into plain
/// structs. Nothing here needs the model: token-id ranges, prompt lengths and
/// the context limit are checked later (RequestResolver).
///
/// Follows OpenAI's (and vLLM's) rules: unknown fields are ignored, `null`
/// means "not given", wrong types and out-of-range values are 400s naming the
/// field; the ranges are core/common/sampling_limits.h's, in its words. Features Orca does not implement (suffix, the legacy `functions`,
/// non-text content parts) are rejected explicitly rather than silently ignored.

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/sampling_limits.h"
#include "core/common/sampling_params.h"
#include "core/text/chat_template.h"
#include "services/gateway/json_fields.h"
#include "services/gateway/tool_call_request.h"

namespace orca::gateway {

/// Limits on what one request may ask for: names for entries of the one table,
/// core/common/sampling_limits.h, which every entry point checks against.
inline constexpr int32_t kMaxChoicesPerRequest = limits::kMaxChoicesPerRequest;  // n × number of prompts
inline constexpr int32_t kMaxStopStrings = static_cast<int32_t>(limits::kStopStrings.max);
inline constexpr int32_t kMaxStopTokenIds = static_cast<int32_t>(limits::kStopTokenIds.max);
inline constexpr int32_t kMaxCompletionLogprobs = static_cast<int32_t>(limits::kLogprobs.max);
inline constexpr int32_t kMaxChatTopLogprobs = static_cast<int32_t>(limits::kTopLogprobs.max);
inline constexpr int32_t kMaxPromptLogprobs = static_cast<int32_t>(limits::kPromptLogprobs.max);

/// Generation options shared by completions and chat.
struct GenerationOptions {
  /// The client's new-token limit (the API's `max_tokens`, or chat's
  /// `max_completion_tokens`). Absent: the gateway's default_max_new_tokens, the rest of
  /// the context cut to the KV one request may take (RequestResolver).
  std::optional<int32_t> max_new_tokens;
  int32_t min_tokens = 0;
  int32_t n = 1;
  /// OpenAI's defaults: temperature 1, top_p 1.
  SamplingParams sampling = DefaultSampling();
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  /// vLLM's extra field: lower values are scheduled first when the scheduler runs
  /// --scheduling-order priority (ignored otherwise). In [-1e6, 1e6].
  int32_t priority = 0;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  bool stream = false;
  /// stream_options.include_usage: a last chunk with empty choices and usage.
  bool include_usage = false;
  std::string user;
  /// vLLM's prompt_logprobs (0..20): each prompt token's logprob with this many alternatives,
  /// returned as the choice's `prompt_logprobs`.
  std::optional<int32_t> prompt_logprobs;
  /// vLLM's return_token_ids extension: each choice (every stream chunk, or the whole
  /// response) carries `token_ids`, the ids of the tokens it generated, in order, the stop
  /// token included — what a chat client sends back so the next turn's prompt holds the
  /// model's reply token for token (and hits its prefix-cached blocks).
  bool return_token_ids = false;

  static SamplingParams DefaultSampling() {
    SamplingParams params;
    params.temperature = 1.0f;
    return params;
  }
};

/// POST /v1/completions.
struct CompletionRequest {
  std::string model;  // empty: the served model
  /// Exactly one of the two is non-empty; each entry is one prompt.
  std::vector<std::string> prompt_texts;
  std::vector<std::vector<int32_t>> prompt_token_ids;
  bool echo = false;
  /// Completions-API logprobs: the number of alternatives per token (0..5).
  std::optional<int32_t> logprobs;
  bool add_special_tokens = true;
  GenerationOptions options;
};

/// POST /v1/chat/completions.
struct ChatRequest {
  std::string model;
  std::vector<text::ChatMessage> messages;
  bool add_generation_prompt = true;
  std::map<std::string, std::string> chat_template_kwargs;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  /// The template already adds BOS where the model wants it.
  bool add_special_tokens = false;
  /// tools, tool_choice, parallel_tool_calls.
  ToolsRequest tools;
  GenerationOptions options;
};

/// POST /tokenize: either a prompt or chat messages.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;
  std::vector<text::ChatMessage> messages;
  bool add_generation_prompt = true;
  std::optional<bool> add_special_tokens;  // default: true for a prompt, false for messages
  bool return_token_strs = false;
  /// Extra chat-template variables, as for chat completions (messages only).
  std::map<std::string, std::string> chat_template_kwargs;
  /// `tools` and `tool_choice` (messages only), read as for chat completions: the
  /// prompt counted is the one chat would render (tools shown unless the choice is "none").
  ToolsRequest tools;
};

/// POST /detokenize.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
  /// Special tokens are kept unless the client asks otherwise, as HF's
  /// `tokenizer.decode` and vLLM's /detokenize do: the text round-trips
  /// through /tokenize.
  bool skip_special_tokens = false;
};

/// Parses a request body as a JSON object, its keys in the client's order
/// (RequestJson). Invalid UTF-8 is rejected with its byte offset; malformed
/// JSON with the parser's line/column.
absl::StatusOr<RequestJson> ParseJsonObject(std::string_view body);

absl::StatusOr<CompletionRequest> ParseCompletionRequest(const RequestJson& body);
absl::StatusOr<ChatRequest> ParseChatRequest(const RequestJson& body);
absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(const RequestJson& body);
absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(const RequestJson& body);

/// Byte offset of the first invalid UTF-8 sequence, or nullopt when valid.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

}  // namespace orca::gateway
