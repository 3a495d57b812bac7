#pragma once
/// Turns parsed OpenAI requests into tokenized GenerationRequests: renders chat
/// templates, tokenizes, checks token ids against the vocabulary and lengths
/// against the context, and settles each prompt's completion budget
/// (absent max_tokens: the rest of the context). Errors are 400s in vLLM's
/// wording, naming both numbers.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/gateway/gateway_model.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/openai_request.h"

namespace orca::gateway {

class RequestResolver {
 public:
  /// `model` must outlive the resolver.
  explicit RequestResolver(const GatewayModel* model) : model_(model) {}

  /// `echo_texts` receives each prompt's text (for `echo`).
  absl::StatusOr<GenerationRequest> Completion(const CompletionRequest& request, int32_t max_model_len,
                                               std::vector<std::string>* echo_texts) const;
  absl::StatusOr<GenerationRequest> Chat(const ChatRequest& request, int32_t max_model_len) const;

  /// Renders messages with the chat template. InvalidArgument (param
  /// "messages") when the template rejects them or there is no template.
  absl::StatusOr<std::string> RenderChat(const std::vector<text::ChatMessage>& messages, bool add_generation_prompt,
                                         const std::map<std::string, std::string>& kwargs) const;
  /// InvalidArgument naming `field` when an id is outside the vocabulary.
  absl::Status CheckTokenIds(const std::vector<int32_t>& ids, const std::string& field) const;

 private:
  /// Validates one prompt's length against the context and sets its budget.
  absl::StatusOr<PromptInput> MakePrompt(std::vector<int32_t> ids, const GenerationOptions& options,
                                         int32_t max_model_len, const char* prompt_field,
                                         const char* max_tokens_field) const;
  GenerationRequest BaseRequest(const GenerationOptions& options) const;

  const GatewayModel* model_;
};

}  // namespace orca::gateway
