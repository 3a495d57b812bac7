#include "services/gateway/request_resolver.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/kv_footprint.h"
#include "core/common/status_macros.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {
namespace {

// The one place a chat template rendering gets its wall-clock deadline
// (--chat-template-timeout-seconds), on top of the engine's default step,
// size and depth limits (core/text/render_budget.h).
absl::StatusOr<std::string> RenderWithDeadline(const text::ChatTemplate& chat_template,
                                               const text::ChatTemplateInputs& inputs, absl::Time deadline) {
  text::RenderBudget budget;
  budget.deadline = deadline;
  return chat_template.Render(inputs, budget);
}

// The KV budget: one request's n sequences may take at most what a scheduler
// admits for one request (SchedulerKvLimits), or it would be refused there, or
// never fit. `options.max_new_tokens` is the client's, or nullopt: the default,
// default_max_new_tokens, is then `context_remaining` (the context left after
// the prompt) cut to the most that fits. Returns the prompt's max_new_tokens;
// InvalidArgument naming the numbers when not even one new token fits.
absl::StatusOr<int32_t> FitKvBudget(const SchedulerKvLimits& kv, int64_t prompt_len, const GenerationOptions& options,
                                    int32_t context_remaining, bool chat, const char* prompt_field,
                                    const char* max_new_tokens_field) {
  const int32_t wanted = options.max_new_tokens ? *options.max_new_tokens : context_remaining;
  if (kv.max_request_kv_slots <= 0) return wanted;  // no scheduler reported a budget yet
  const int64_t n = std::max(1, options.n);
  const bool shares = kv.shares_group_prompts && !options.sampling.WantsPromptLogprobs();
  auto footprint = [&](int64_t max_new) {
    return GroupKvFootprint(prompt_len, n, max_new, kv.kv_block_size, shares);
  };
  if (footprint(wanted) <= kv.max_request_kv_slots) return wanted;
  const std::string sequences = n > 1 ? absl::StrCat(n, " sequences (n) of ") : "";
  const std::string limit =
      absl::StrCat("one request may take at most ", kv.max_request_kv_slots,
                   " KV slots on this engine (the scheduler's --max-request-kv-share of its KV budget)");
  if (options.max_new_tokens || footprint(1) > kv.max_request_kv_slots) {
    const int64_t shown = options.max_new_tokens ? *options.max_new_tokens : 1;
    return InvalidFieldError(
        options.max_new_tokens ? max_new_tokens_field : (n > 1 ? "n" : prompt_field),
        absl::StrCat("This request can never fit the engine's KV cache: ", prompt_len, " tokens in the ",
                     chat ? "messages" : "prompt", " and ", sequences, shown, " new tokens (max_tokens) take ",
                     footprint(shown), " KV slots, but ", limit, ". Please reduce ", n > 1 ? "n, " : "",
                     "max_tokens or the length of the ", chat ? "messages." : "prompt."));
  }
  // default_max_new_tokens: the largest max_new_tokens up to context_remaining that fits
  // (the footprint grows with it).
  int32_t lo = 1, hi = wanted;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (footprint(mid) <= kv.max_request_kv_slots) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int32_t default_max_new_tokens = lo;
  return default_max_new_tokens;
}

}  // namespace

std::string NewRequestId(const char* prefix) {
  static thread_local absl::BitGen gen;
  return absl::StrFormat("%s%016x%016x", prefix, absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

absl::Status RequestResolver::CheckModel(const std::string& model) const {
  if (model.empty() || model == model_->name()) return absl::OkStatus();
  return WithErrorCode(WithParam(absl::NotFoundError(absl::StrCat("The model `", model, "` does not exist.")), "model"),
                       "model_not_found");
}

absl::StatusOr<int32_t> RequestResolver::MaxModelLen() const {
  if (model_->max_model_len() > 0) return model_->max_model_len();
  const int32_t from_schedulers = router_->MaxContext();
  if (from_schedulers > 0) return from_schedulers;
  return absl::UnavailableError("The context length is not known yet (no scheduler has reported it)");
}

absl::Status RequestResolver::CheckTokenIds(const std::vector<int32_t>& ids, const std::string& field) const {
  const int32_t vocab = model_->tokenizer().vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidFieldError(field, absl::StrCat("Token id ", ids[i], " at '", field, "[", i,
                                                   "]' is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status RequestResolver::CheckLogitBias(const SamplingParams& sampling) const {
  const int32_t vocab = model_->tokenizer().vocab_size();
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (id < 0 || id >= vocab) {
      return InvalidFieldError("logit_bias",
                               absl::StrCat("'logit_bias' key '", id,
                                            "' is not a token id of this model: the vocabulary is [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PromptInput> RequestResolver::MakePrompt(std::vector<int32_t> ids, const GenerationOptions& options,
                                                        int32_t max_model_len, const char* prompt_field,
                                                        const char* max_new_tokens_field) const {
  const bool chat = std::string(prompt_field) == "messages";
  if (ids.empty()) {
    return InvalidFieldError(prompt_field, absl::StrCat("The ", chat ? "messages render" : "prompt tokenizes",
                                                        " to zero tokens; at least one is required"));
  }
  const int64_t prompt_len = static_cast<int64_t>(ids.size());
  if (prompt_len >= max_model_len) {
    return WithErrorCode(
        InvalidFieldError(prompt_field, absl::StrCat("This model's maximum context length is ", max_model_len,
                                                     " tokens. However, your request has ", prompt_len,
                                                     " input tokens. Please "
                                                     "reduce the length of the input ",
                                                     chat ? "messages." : "prompt.")),
        "context_length_exceeded");
  }
  PromptInput prompt;
  if (options.max_new_tokens) {
    const int64_t requested = prompt_len + *options.max_new_tokens;
    if (requested > max_model_len) {
      return WithErrorCode(
          InvalidFieldError(
              max_new_tokens_field,
              absl::StrCat("This model's maximum context length is ", max_model_len, " tokens. However, you requested ",
                           requested, " tokens (", prompt_len, " in the ", chat ? "messages" : "prompt", ", ",
                           *options.max_new_tokens, " in the completion). Please reduce the length of the ",
                           chat ? "messages" : "prompt", " or completion.")),
          "context_length_exceeded");
    }
  }
  const auto context_remaining = static_cast<int32_t>(max_model_len - prompt_len);
  ORCA_ASSIGN_OR_RETURN(prompt.max_new_tokens, FitKvBudget(router_->KvLimits(), prompt_len, options, context_remaining,
                                                           chat, prompt_field, max_new_tokens_field));
  prompt.token_ids = std::move(ids);
  return prompt;
}

GenerationRequest RequestResolver::BaseRequest(const GenerationOptions& options) const {
  GenerationRequest out;
  out.n = options.n;
  out.min_new_tokens = options.min_tokens;
  out.sampling = options.sampling;
  out.stop = options.stop;
  out.stop_token_ids = options.stop_token_ids;
  out.ignore_eos = options.ignore_eos;
  out.priority = options.priority;
  out.skip_special_tokens = options.skip_special_tokens;
  out.include_stop_str_in_output = options.include_stop_str_in_output;
  out.return_token_ids = options.return_token_ids;
  return out;
}

absl::StatusOr<GenerationRequest> RequestResolver::Completion(const CompletionRequest& request, int32_t max_model_len,
                                                              std::vector<std::string>* echo_texts) const {
  ORCA_RETURN_IF_ERROR(CheckTokenIds(request.options.stop_token_ids, "stop_token_ids"));
  ORCA_RETURN_IF_ERROR(CheckLogitBias(request.options.sampling));
  GenerationRequest out = BaseRequest(request.options);
  const text::Tokenizer& tokenizer = model_->tokenizer();
  for (const std::string& text : request.prompt_texts) {
    std::vector<int32_t> ids = tokenizer.Encode(text, request.add_special_tokens);
    ORCA_ASSIGN_OR_RETURN(PromptInput prompt,
                          MakePrompt(std::move(ids), request.options, max_model_len, "prompt", "max_tokens"));
    out.prompts.push_back(std::move(prompt));
    if (echo_texts != nullptr) echo_texts->push_back(text);
  }
  for (const std::vector<int32_t>& ids : request.prompt_token_ids) {
    ORCA_RETURN_IF_ERROR(CheckTokenIds(ids, "prompt"));
    if (echo_texts != nullptr && request.echo) {
      ORCA_ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(ids, request.options.skip_special_tokens));
      echo_texts->push_back(std::move(text));
    } else if (echo_texts != nullptr) {
      echo_texts->emplace_back();
    }
    ORCA_ASSIGN_OR_RETURN(PromptInput prompt, MakePrompt(ids, request.options, max_model_len, "prompt", "max_tokens"));
    out.prompts.push_back(std::move(prompt));
  }
  return out;
}

absl::StatusOr<std::string> RequestResolver::RenderChat(const std::vector<text::ChatMessage>& messages,
                                                        bool add_generation_prompt,
                                                        const std::map<std::string, std::string>& kwargs,
                                                        const std::string& tools_json) const {
  const text::ChatTemplate* chat_template = model_->chat_template();
  if (chat_template == nullptr) {
    // vLLM's answer too: a chat template is never guessed for a model that ships none.
    return InvalidFieldError("messages",
                             "This model has no chat template, so chat requests cannot be rendered; start the "
                             "gateway (or orca serve) with --chat-template set to a template file or a built-in "
                             "(chatml, llama2, llama3), or send the prompt to /v1/completions");
  }
  // OpenAI's roles; anything else is refused by name (as OpenAI does) rather
  // than rendered by a template that has no idea what a "wizard" turn is.
  static constexpr const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles))
      return InvalidFieldError("messages", absl::StrCat("'messages[", i, "].role' is '", role,
                                                        "'; supported roles are 'system', 'developer', 'user', "
                                                        "'assistant', 'tool' and 'function'"));
  }
  text::ChatTemplateInputs inputs;
  inputs.messages = messages;
  // OpenAI's `developer` role replaced `system` for its newer models and means the same thing; chat templates
  // know only `system`, so render it as one (as OpenAI does for models without a developer role).
  for (text::ChatMessage& m : inputs.messages)
    if (m.role == "developer") m.role = "system";
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.bos_token = model_->tokenizer().bos_token();
  inputs.eos_token = model_->tokenizer().eos_token();
  inputs.extra = kwargs;
  inputs.tools_json = tools_json;
  absl::StatusOr<std::string> rendered =
      RenderWithDeadline(*chat_template, inputs, absl::Now() + chat_template_timeout_);
  if (!rendered.ok()) {
    return InvalidFieldError("messages", absl::StrCat("The chat template rejected the messages: ",
                                                      std::string(rendered.status().message())));
  }
  return rendered;
}

absl::StatusOr<GenerationRequest> RequestResolver::Chat(const ChatRequest& request, int32_t max_model_len) const {
  ORCA_RETURN_IF_ERROR(CheckTokenIds(request.options.stop_token_ids, "stop_token_ids"));
  ORCA_RETURN_IF_ERROR(CheckLogitBias(request.options.sampling));
  const bool tools = request.tools.active();
  ORCA_ASSIGN_OR_RETURN(std::string prompt_text,
                        RenderChat(request.messages, request.add_generation_prompt, request.chat_template_kwargs,
                                   tools ? request.tools.TemplateJson() : ""));
  std::vector<int32_t> ids = model_->tokenizer().Encode(prompt_text, request.add_special_tokens);
  GenerationRequest out = BaseRequest(request.options);
  if (tools) {
    // "required" and a named function: the output is constrained to calls in the model's format.
    ORCA_ASSIGN_OR_RETURN(StructuredOutputSpec constraint,
                          ToolCallConstraint(request.tools, model_->tool_call_format()));
    if (constraint.enabled()) {
      constraint.end_token_ids = request.options.stop_token_ids;
      out.sampling.structured = std::move(constraint);
    }
    // Mistral's [TOOL_CALLS] is a special token: the parser must see it.
    if (model_->tool_call_format() == ToolCallFormat::kMistral) out.skip_special_tokens = false;
  }
  ORCA_ASSIGN_OR_RETURN(PromptInput prompt,
                        MakePrompt(std::move(ids), request.options, max_model_len, "messages", "max_tokens"));
  out.prompts.push_back(std::move(prompt));
  return out;
}

}  // namespace orca::gateway
