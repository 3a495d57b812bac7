#include "core/loadgen/completion_stream.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxQuotedBytes = 200;

std::string Quote(absl::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxQuotedBytes), "...");
}

/// The message of an error chunk: OpenAI {"error": {"message": ...}} or {"error": "..."},
/// vLLM {"object": "error", "message": ...}. nullopt for a regular chunk.
std::optional<std::string> ErrorMessage(const json& chunk) {
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object()) {
      auto message = it->find("message");
      if (message != it->end() && message->is_string()) return message->get<std::string>();
    }
    return it->dump();
  }
  if (auto it = chunk.find("object"); it != chunk.end() && it->is_string() && *it == "error") {
    auto message = chunk.find("message");
    return message != chunk.end() && message->is_string() ? message->get<std::string>() : chunk.dump();
  }
  return std::nullopt;
}

/// Tokens a choice chunk carries: the length of logprobs.tokens when the server sent
/// logprobs (exact), else one for a non-empty text delta (servers send one chunk per token
/// and hold back only text that is not yet valid UTF-8).
int32_t ChunkTokens(const json& choice) {
  // return_token_ids: the ids new in this chunk, exact even when its text is held back.
  if (auto ids = choice.find("token_ids"); ids != choice.end() && ids->is_array()) {
    return static_cast<int32_t>(ids->size());
  }
  if (auto lp = choice.find("logprobs"); lp != choice.end() && lp->is_object()) {
    if (auto tokens = lp->find("tokens"); tokens != lp->end() && tokens->is_array()) {
      return static_cast<int32_t>(tokens->size());
    }
    if (auto content = lp->find("content"); content != lp->end() && content->is_array()) {
      return static_cast<int32_t>(content->size());  // chat-style logprobs
    }
  }
  if (auto text = choice.find("text"); text != choice.end() && text->is_string()) {
    return text->get_ref<const std::string&>().empty() ? 0 : 1;
  }
  if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    auto content = delta->find("content");
    if (content != delta->end() && content->is_string() && !content->get_ref<const std::string&>().empty()) {
      return 1;
    }
  }
  return 0;
}

}  // namespace

absl::Status CompletionStream::OnBytes(absl::string_view bytes, double elapsed_s) {
  events_.clear();
  const absl::Status parsed = parser_.Feed(bytes, &events_);
  // Events completed before a parse error still count.
  for (const SseEvent& event : events_) {
    if (absl::Status s = OnEvent(event, elapsed_s); !s.ok()) return s;
  }
  return parsed;
}

absl::Status CompletionStream::OnEvent(const SseEvent& event, double elapsed_s) {
  if (done_) return absl::OkStatus();  // nothing follows [DONE]
  if (event.data == "[DONE]") {
    done_ = true;
    return absl::OkStatus();
  }
  const json chunk = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    return absl::DataLossError(absl::StrCat("stream chunk is not a JSON object: ", Quote(event.data)));
  }
  if (std::optional<std::string> error = ErrorMessage(chunk)) {
    return absl::UnavailableError(absl::StrCat("error event: ", Quote(*error)));
  }
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    auto tokens = usage->find("completion_tokens");
    if (tokens != usage->end() && tokens->is_number_integer()) {
      usage_completion_tokens_ = tokens->get<int32_t>();
    }
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return absl::OkStatus();
  const json& choice = choices->front();
  if (!choice.is_object()) return absl::DataLossError("stream chunk choice is not an object");
  if (auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string()) {
    finish_reason_ = reason->get<std::string>();
  }
  if (auto ids = choice.find("token_ids"); ids != choice.end() && ids->is_array()) {
    token_ids_seen_ = true;
    for (const json& id : *ids) {
      if (!id.is_number_integer()) return absl::DataLossError(absl::StrCat("token_ids holds ", Quote(id.dump())));
      token_ids_.push_back(id.get<int32_t>());
    }
  }
  const int32_t tokens = ChunkTokens(choice);
  if (tokens == 0) return absl::OkStatus();
  if (first_token_s_.has_value()) {
    itl_s_.push_back(elapsed_s - last_token_s_);
  } else {
    first_token_s_ = elapsed_s;
  }
  last_token_s_ = elapsed_s;
  counted_tokens_ += tokens;
  ++num_chunks_;
  return absl::OkStatus();
}

absl::Status CompletionStream::Finish(double elapsed_s, RequestRecord* record) const {
  record->e2e_s = elapsed_s;
  record->ttft_s = first_token_s_.value_or(0.0);
  record->itl_s = itl_s_;
  record->counted_tokens = counted_tokens_;
  record->num_chunks = num_chunks_;
  record->usage_reported = usage_completion_tokens_.has_value();
  record->output_tokens = usage_completion_tokens_.value_or(counted_tokens_);
  record->finish_reason = finish_reason_;
  record->output_token_ids = token_ids_;
  record->token_ids_reported = token_ids_seen_;
  if (!done_) {
    return absl::DataLossError(parser_.has_pending() ? "stream cut inside an event" : "stream ended without [DONE]");
  }
  if (!first_token_s_.has_value()) return absl::DataLossError("stream carried no token");
  return absl::OkStatus();
}

}  // namespace orca::loadgen
