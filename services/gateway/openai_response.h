#pragma once
/// Builds OpenAI-shaped response bodies and SSE chunks for /v1/completions and
/// /v1/chat/completions from the pipeline's events. Pure formatting: no I/O,
/// no tokenizer.
///
/// Streaming, per choice: (chat) a first chunk with `delta.role`, then chunks
/// that carry only new text, the last one carrying `finish_reason`; after all
/// choices, an optional usage chunk with empty `choices`, then `data: [DONE]`.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "services/gateway/api_error.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/tool_call_parser.h"

namespace orca::gateway {

enum class OpenAiApi { kCompletions, kChat };

/// Everything one choice produced, for non-streaming responses.
struct ChoiceResult {
  int index = 0;
  std::string text;
  std::vector<GeneratedToken> tokens;
  std::vector<int32_t> token_ids;
  std::vector<GeneratedToken> prompt_logprobs;
  std::optional<FinishReason> finish_reason;
  std::string stop_string;
  std::optional<int32_t> stop_token;
  /// Chat with tools: the calls parsed out of the text (which then holds only the content).
  std::vector<ToolCall> tool_calls;

  /// Appends a delta (text, tokens, and the finish when it carries one).
  void Append(const ChoiceDelta& delta);
};

class OpenAiResponseBuilder {
 public:
  struct Options {
    OpenAiApi api = OpenAiApi::kCompletions;
    std::string id;  // "cmpl-..." / "chatcmpl-..."
    int64_t created = 0;
    std::string model;
    int num_choices = 1;
    /// Whether to render logprobs (the request asked for them).
    bool logprobs = false;
    /// stream_options.include_usage: chunks carry "usage": null, then a usage chunk.
    bool include_usage = false;
    /// Completions `echo` with `logprobs`: the prompt's tokens lead each choice's logprobs
    /// (the first with null logprob and alternatives), with `top_logprobs` alternatives each.
    bool echo_logprobs = false;
    int32_t top_logprobs = 0;
    /// vLLM's prompt_logprobs: each choice gets a `prompt_logprobs` list, null for the first
    /// prompt token, then {token id: {logprob, rank, decoded_token}} with this many alternatives.
    std::optional<int32_t> prompt_logprobs;
    /// vLLM's return_token_ids: each choice carries `token_ids` (its generated ids; in a
    /// stream, the ones new in that chunk).
    bool return_token_ids = false;
  };
  explicit OpenAiResponseBuilder(Options options);

  /// Chat only: the first chunk of a choice, `delta: {role: "assistant", content: ""}`.
  std::string RoleChunk(int index) const;
  /// A chunk with the delta's text (and logprobs / finish_reason when present).
  /// Advances the choice's text offset. Chat with tools: `tool_calls` go into
  /// `delta.tool_calls`, and a choice that produced calls finishes with "tool_calls".
  std::string DeltaChunk(const ChoiceDelta& delta, const std::vector<ToolCall>& tool_calls = {},
                         bool produced_tool_calls = false);
  /// The `choices: []` chunk with usage.
  std::string UsageChunk(const GenerationUsage& usage) const;
  /// An error inside a started stream: `data: {"error": {...}}`.
  static std::string ErrorChunk(const ApiError& error);
  /// The terminator.
  static const char* DoneChunk() { return "data: [DONE]\n\n"; }

  /// The complete non-streaming body.
  std::string FullResponse(const std::vector<ChoiceResult>& choices, const GenerationUsage& usage);

  const Options& options() const { return options_; }

 private:
  nlohmann::json ChunkEnvelope() const;
  nlohmann::json CompletionLogprobs(const std::vector<GeneratedToken>& tokens, size_t* text_offset) const;
  nlohmann::json ChatLogprobs(const std::vector<GeneratedToken>& tokens) const;
  /// The completions logprobs of a choice's prompt tokens (echo) followed by its generated ones.
  nlohmann::json EchoLogprobs(const std::vector<GeneratedToken>& prompt, const std::vector<GeneratedToken>& tokens,
                              size_t* text_offset) const;
  /// vLLM's `prompt_logprobs` list for these prompt tokens.
  nlohmann::json PromptLogprobsJson(const std::vector<GeneratedToken>& prompt) const;
  /// Adds the logprobs and prompt_logprobs fields of one choice (chunk or full response).
  void AddChoiceLogprobs(const std::vector<GeneratedToken>& prompt, const std::vector<GeneratedToken>& tokens,
                         int index, bool streaming, nlohmann::json* choice);
  static nlohmann::json UsageJson(const GenerationUsage& usage);
  static nlohmann::json StopReason(const std::optional<FinishReason>& reason, const std::string& stop_string,
                                   const std::optional<int32_t>& stop_token);

  Options options_;
  std::vector<size_t> text_offsets_;
};

/// `data: <json>\n\n`.
std::string SseEvent(const nlohmann::json& payload);
/// Compact JSON; invalid UTF-8 (e.g. a partial token's bytes) becomes U+FFFD.
std::string DumpJson(const nlohmann::json& value);

}  // namespace orca::gateway
