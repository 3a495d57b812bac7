#pragma once
/// Turns parsed OpenAI requests into tokenized GenerationRequests: renders chat
/// templates, tokenizes, checks token ids against the vocabulary and lengths
/// against the context, and settles each prompt's max_new_tokens: the client's
/// (the API's max_tokens), or when absent default_max_new_tokens — the context
/// left after the prompt (context_remaining), cut so that the prompt's n
/// sequences fit the KV one request may take on the schedulers
/// (SchedulerRouter::KvLimits). Errors are 400s in vLLM's wording, naming both
/// numbers; a request whose n sequences can never fit that KV is one too,
/// naming the prompt tokens, max_tokens, n and the limit. The HTTP and gRPC APIs share it, and with it
/// the model-name check, the context limit and the request ids.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/openai_request.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

class RequestResolver {
 public:
  /// `model` and `router` must outlive the resolver. `chat_template_timeout`:
  /// the wall-clock budget of one chat template rendering
  /// (--chat-template-timeout-seconds; see RenderChat).
  RequestResolver(const GatewayModel* model, const SchedulerRouter* router,
                  absl::Duration chat_template_timeout = kDefaultChatTemplateTimeout)
      : model_(model), router_(router), chat_template_timeout_(chat_template_timeout) {}

  /// The default of --chat-template-timeout-seconds.
  static constexpr absl::Duration kDefaultChatTemplateTimeout = absl::Seconds(5);

  /// NotFound (404, param "model", code model_not_found) unless `model` is empty or ours.
  absl::Status CheckModel(const std::string& model) const;
  /// The context limit: --max-model-len or the model's own, else what the schedulers
  /// report; Unavailable while none is known.
  absl::StatusOr<int32_t> MaxModelLen() const;

  /// `echo_texts` receives each prompt's text (for `echo`).
  absl::StatusOr<GenerationRequest> Completion(const CompletionRequest& request, int32_t max_model_len,
                                               std::vector<std::string>* echo_texts) const;
  absl::StatusOr<GenerationRequest> Chat(const ChatRequest& request, int32_t max_model_len) const;

  /// Renders messages with the chat template, within the chat template
  /// timeout. InvalidArgument (param "messages") when the template rejects
  /// them, runs past its budget, or there is no template (the message names
  /// --chat-template). CPU-heavy: call it
  /// off the I/O threads (the gateway's CpuPool).
  /// `tools_json`: the template's `tools` (ToolsRequest::TemplateJson), empty for none.
  absl::StatusOr<std::string> RenderChat(const std::vector<text::ChatMessage>& messages, bool add_generation_prompt,
                                         const std::map<std::string, std::string>& kwargs,
                                         const std::string& tools_json = "") const;
  /// InvalidArgument naming `field` when an id is outside the vocabulary.
  absl::Status CheckTokenIds(const std::vector<int32_t>& ids, const std::string& field) const;
  /// InvalidArgument (param "logit_bias") naming the first token id outside the vocabulary.
  absl::Status CheckLogitBias(const SamplingParams& sampling) const;

 private:
  /// Validates one prompt's length against the context and sets its max_new_tokens.
  /// Errors name `prompt_field` and `max_new_tokens_field` (the API's spellings: "prompt"
  /// or "messages", "max_tokens").
  absl::StatusOr<PromptInput> MakePrompt(std::vector<int32_t> ids, const GenerationOptions& options,
                                         int32_t max_model_len, const char* prompt_field,
                                         const char* max_new_tokens_field) const;
  GenerationRequest BaseRequest(const GenerationOptions& options) const;

  const GatewayModel* model_;
  const SchedulerRouter* router_;
  const absl::Duration chat_template_timeout_;
};

/// A fresh request id: `prefix` and 32 random hex digits ("cmpl-", "chatcmpl-", "gen-").
std::string NewRequestId(const char* prefix);

}  // namespace orca::gateway
