#pragma once
/// Turns parsed OpenAI requests into tokenized GenerationRequests: renders chat
/// templates, tokenizes, checks token ids against the vocabulary and lengths
/// against the context, and settles each prompt's completion budget
/// (absent max_tokens: the rest of the context). Errors are 400s in vLLM's
/// wording, naming both numbers. The HTTP and gRPC APIs share it, and with it
/// the model-name check, the context limit and the request ids.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/openai_request.h"
#include "services/gateway/scheduler_router.h"

namespace orca::gateway {

class RequestResolver {
 public:
  /// `model` and `router` must outlive the resolver.
  RequestResolver(const GatewayModel* model, const SchedulerRouter* router) : model_(model), router_(router) {}

  /// NotFound (404, param "model", code model_not_found) unless `model` is empty or ours.
  absl::Status CheckModel(const std::string& model) const;
  /// The context limit: --max-model-len or the model's own, else what the schedulers
  /// report; Unavailable while none is known.
  absl::StatusOr<int32_t> MaxModelLen() const;

  /// `echo_texts` receives each prompt's text (for `echo`).
  absl::StatusOr<GenerationRequest> Completion(const CompletionRequest& request, int32_t max_model_len,
                                               std::vector<std::string>* echo_texts) const;
  absl::StatusOr<GenerationRequest> Chat(const ChatRequest& request, int32_t max_model_len) const;

  /// Renders messages with the chat template. InvalidArgument (param
  /// "messages") when the template rejects them or there is no template.
  /// `tools_json`: the template's `tools` (ToolsRequest::TemplateJson), empty for none.
  absl::StatusOr<std::string> RenderChat(const std::vector<text::ChatMessage>& messages, bool add_generation_prompt,
                                         const std::map<std::string, std::string>& kwargs,
                                         const std::string& tools_json = "") const;
  /// InvalidArgument naming `field` when an id is outside the vocabulary.
  absl::Status CheckTokenIds(const std::vector<int32_t>& ids, const std::string& field) const;
  /// InvalidArgument (param "logit_bias") naming the first token id outside the vocabulary.
  absl::Status CheckLogitBias(const SamplingParams& sampling) const;

 private:
  /// Validates one prompt's length against the context and sets its budget.
  absl::StatusOr<PromptInput> MakePrompt(std::vector<int32_t> ids, const GenerationOptions& options,
                                         int32_t max_model_len, const char* prompt_field,
                                         const char* max_tokens_field) const;
  GenerationRequest BaseRequest(const GenerationOptions& options) const;

  const GatewayModel* model_;
  const SchedulerRouter* router_;
};

/// A fresh request id: `prefix` and 32 random hex digits ("cmpl-", "chatcmpl-", "gen-").
std::string NewRequestId(const char* prefix);

}  // namespace orca::gateway
