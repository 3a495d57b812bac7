#include "services/gateway/openai_response.h"

#include <nlohmann/json.hpp>

namespace orca::gateway {
namespace {

using nlohmann::json;

json Bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// A choice that produced tool calls and stopped on its own finishes with "tool_calls" (OpenAI's).
json FinishJson(const std::optional<FinishReason>& reason, bool produced_tool_calls = false) {
  if (reason && *reason == FinishReason::kStop && produced_tool_calls) return "tool_calls";
  return reason ? json(FinishReasonName(*reason)) : json(nullptr);
}

json ToolCallJson(const ToolCall& call, bool streaming) {
  json out = {
      {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  if (streaming) out["index"] = call.index;
  return out;
}

}  // namespace

std::string DumpJson(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string SseEvent(const json& payload) { return "data: " + DumpJson(payload) + "\n\n"; }

void ChoiceResult::Append(const ChoiceDelta& delta) {
  text += delta.text;
  tokens.insert(tokens.end(), delta.tokens.begin(), delta.tokens.end());
  token_ids.insert(token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  prompt_logprobs.insert(prompt_logprobs.end(), delta.prompt_logprobs.begin(), delta.prompt_logprobs.end());
  if (delta.finish_reason) {
    finish_reason = delta.finish_reason;
    stop_string = delta.stop_string;
    stop_token = delta.stop_token;
  }
}

OpenAiResponseBuilder::OpenAiResponseBuilder(Options options)
    : options_(std::move(options)), text_offsets_(static_cast<size_t>(std::max(options_.num_choices, 0)), 0) {}

json OpenAiResponseBuilder::ChunkEnvelope() const {
  json chunk = {
      {"id", options_.id},
      {"object", options_.api == OpenAiApi::kChat ? "chat.completion.chunk" : "text_completion"},
      {"created", options_.created},
      {"model", options_.model},
      {"system_fingerprint", nullptr},
  };
  if (options_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json OpenAiResponseBuilder::StopReason(const std::optional<FinishReason>& reason, const std::string& stop_string,
                                       const std::optional<int32_t>& stop_token) {
  if (!reason || *reason != FinishReason::kStop) return nullptr;
  if (!stop_string.empty()) return stop_string;
  if (stop_token) return *stop_token;
  return nullptr;
}

json OpenAiResponseBuilder::CompletionLogprobs(const std::vector<GeneratedToken>& tokens, size_t* text_offset) const {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const GeneratedToken& token : tokens) {
    out["tokens"].push_back(token.text);
    out["text_offset"].push_back(*text_offset);
    *text_offset += token.text.size();
    if (!token.has_logprob) {  // a prompt's first token (echo)
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      continue;
    }
    out["token_logprobs"].push_back(token.logprob);
    // As OpenAI documents: the sampled token is always included, so a position
    // has up to logprobs + 1 entries. (Keys holding partial UTF-8 are repaired
    // by DumpJson.)
    json top = json::object();
    for (const TokenAlternative& alt : token.top) top[alt.text] = alt.logprob;
    if (!top.contains(token.text)) top[token.text] = token.logprob;
    out["top_logprobs"].push_back(std::move(top));
  }
  return out;
}

json OpenAiResponseBuilder::EchoLogprobs(const std::vector<GeneratedToken>& prompt,
                                         const std::vector<GeneratedToken>& tokens, size_t* text_offset) const {
  std::vector<GeneratedToken> all;
  all.reserve(prompt.size() + tokens.size());
  for (const GeneratedToken& t : prompt) {
    all.push_back(t);
    // The engine computed max(logprobs, prompt_logprobs) alternatives per prompt position.
    if (all.back().top.size() > static_cast<size_t>(options_.top_logprobs))
      all.back().top.resize(options_.top_logprobs);
  }
  all.insert(all.end(), tokens.begin(), tokens.end());
  return CompletionLogprobs(all, text_offset);
}

json OpenAiResponseBuilder::PromptLogprobsJson(const std::vector<GeneratedToken>& prompt) const {
  json out = json::array();
  const size_t k = static_cast<size_t>(options_.prompt_logprobs.value_or(0));
  for (const GeneratedToken& t : prompt) {
    if (!t.has_logprob) {
      out.push_back(nullptr);
      continue;
    }
    // As vLLM: the prompt token itself with its rank in the distribution, then the k most likely (rank 1 = most
    // likely; ties broken by the lower id, so a tied prompt token may show a rank its alternative also shows).
    json position = json::object();
    position[std::to_string(t.id)] = {{"logprob", t.logprob}, {"rank", t.rank}, {"decoded_token", t.text}};
    for (size_t i = 0; i < t.top.size() && i < k; ++i) {
      const TokenAlternative& alt = t.top[i];
      if (alt.id == t.id) continue;
      position[std::to_string(alt.id)] = {
          {"logprob", alt.logprob}, {"rank", static_cast<int32_t>(i + 1)}, {"decoded_token", alt.text}};
    }
    out.push_back(std::move(position));
  }
  return out;
}

void OpenAiResponseBuilder::AddChoiceLogprobs(const std::vector<GeneratedToken>& prompt,
                                              const std::vector<GeneratedToken>& tokens, int index, bool streaming,
                                              json* choice) {
  const bool chat = options_.api == OpenAiApi::kChat;
  const bool echo = !chat && options_.echo_logprobs;
  const bool any = !tokens.empty() || (echo && !prompt.empty());
  if (!options_.logprobs || (streaming && !any)) {
    (*choice)["logprobs"] = nullptr;
  } else if (chat) {
    (*choice)["logprobs"] = ChatLogprobs(tokens);
  } else {
    size_t offset = 0;
    size_t* offset_ptr = &offset;
    if (index >= 0 && static_cast<size_t>(index) < text_offsets_.size()) offset_ptr = &text_offsets_[index];
    (*choice)["logprobs"] = echo ? EchoLogprobs(prompt, tokens, offset_ptr) : CompletionLogprobs(tokens, offset_ptr);
  }
  if (options_.prompt_logprobs && (!streaming || !prompt.empty())) {
    (*choice)["prompt_logprobs"] = PromptLogprobsJson(prompt);
  }
}

json OpenAiResponseBuilder::ChatLogprobs(const std::vector<GeneratedToken>& tokens) const {
  json content = json::array();
  for (const GeneratedToken& token : tokens) {
    json top = json::array();
    for (const TokenAlternative& alt : token.top) {
      top.push_back({{"token", alt.text}, {"logprob", alt.logprob}, {"bytes", Bytes(alt.text)}});
    }
    content.push_back(
        {{"token", token.text}, {"logprob", token.logprob}, {"bytes", Bytes(token.text)}, {"top_logprobs", top}});
  }
  return {{"content", std::move(content)}};
}

json OpenAiResponseBuilder::UsageJson(const GenerationUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

std::string OpenAiResponseBuilder::RoleChunk(int index) const {
  json chunk = ChunkEnvelope();
  chunk["choices"] = json::array({{{"index", index},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  return SseEvent(chunk);
}

std::string OpenAiResponseBuilder::DeltaChunk(const ChoiceDelta& delta, const std::vector<ToolCall>& tool_calls,
                                              bool produced_tool_calls) {
  json chunk = ChunkEnvelope();
  json choice = {{"index", delta.index}};
  if (options_.api == OpenAiApi::kChat) {
    json d = json::object();
    if (!delta.text.empty() || (!delta.finish_reason && tool_calls.empty())) d["content"] = delta.text;
    if (!tool_calls.empty()) {
      d["tool_calls"] = json::array();
      for (const ToolCall& call : tool_calls) d["tool_calls"].push_back(ToolCallJson(call, /*streaming=*/true));
    }
    choice["delta"] = std::move(d);
  } else {
    choice["text"] = delta.text;
  }
  AddChoiceLogprobs(delta.prompt_logprobs, delta.tokens, delta.index, /*streaming=*/true, &choice);
  if (options_.return_token_ids) choice["token_ids"] = delta.token_ids;
  choice["finish_reason"] = FinishJson(delta.finish_reason, produced_tool_calls);
  choice["stop_reason"] = StopReason(delta.finish_reason, delta.stop_string, delta.stop_token);
  chunk["choices"] = json::array({std::move(choice)});
  return SseEvent(chunk);
}

std::string OpenAiResponseBuilder::UsageChunk(const GenerationUsage& usage) const {
  json chunk = ChunkEnvelope();
  chunk["choices"] = json::array();
  chunk["usage"] = UsageJson(usage);
  return SseEvent(chunk);
}

std::string OpenAiResponseBuilder::ErrorChunk(const ApiError& error) { return "data: " + error.ToJson() + "\n\n"; }

std::string OpenAiResponseBuilder::FullResponse(const std::vector<ChoiceResult>& choices,
                                                const GenerationUsage& usage) {
  const bool chat = options_.api == OpenAiApi::kChat;
  json body = {
      {"id", options_.id},
      {"object", chat ? "chat.completion" : "text_completion"},
      {"created", options_.created},
      {"model", options_.model},
      {"system_fingerprint", nullptr},
  };
  json out = json::array();
  for (const ChoiceResult& c : choices) {
    json choice = {{"index", c.index}};
    if (chat && !c.tool_calls.empty()) {
      json calls = json::array();
      for (const ToolCall& call : c.tool_calls) calls.push_back(ToolCallJson(call, /*streaming=*/false));
      choice["message"] = {{"role", "assistant"},
                           {"content", c.text.empty() ? json(nullptr) : json(c.text)},
                           {"tool_calls", std::move(calls)}};
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    AddChoiceLogprobs(c.prompt_logprobs, c.tokens, c.index, /*streaming=*/false, &choice);
    if (options_.return_token_ids) choice["token_ids"] = c.token_ids;
    choice["finish_reason"] = FinishJson(c.finish_reason, !c.tool_calls.empty());
    choice["stop_reason"] = StopReason(c.finish_reason, c.stop_string, c.stop_token);
    out.push_back(std::move(choice));
  }
  body["choices"] = std::move(out);
  body["usage"] = UsageJson(usage);
  return DumpJson(body);
}

}  // namespace orca::gateway
