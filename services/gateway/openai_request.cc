#include "services/gateway/openai_request.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/common/json_parse.h"
#include "core/common/status_macros.h"
#include "services/gateway/api_error.h"
#include "services/gateway/json_fields.h"
#include "services/gateway/structured_output_request.h"

namespace orca::gateway {
namespace {

using json = RequestJson;  // the body's keys in the client's order

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::Status Unsupported(std::string_view param, const std::string& what) {
  return InvalidFieldError(param, absl::StrCat(what, " is not supported by this server"));
}

// A number within the table's range for `limit` (its `field` names it); absent or null leaves `out` as is.
absl::Status ReadReal(const JsonFieldReader& r, const RealLimit& limit, float* out) {
  const std::string name(limit.field);
  const json* value = r.Find(name.c_str());
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_number()) {
    return InvalidFieldError(name, absl::StrCat("'", name, "' must be a number, got ", DescribeJsonValue(*value)));
  }
  const double v = value->get<double>();
  // The float it becomes must be in range too (1e-50 is a positive double but a zero float).
  if (!limit.Contains(v) || !limit.Contains(static_cast<float>(v))) return InvalidFieldError(name, limit.Error(v));
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

// An integer within the table's range for `limit` (an int32 one).
absl::Status ReadInt32(const JsonFieldReader& r, const IntLimit& limit, int32_t* out) {
  const std::string name(limit.field);
  return r.Int32(name.c_str(), static_cast<int32_t>(limit.min), static_cast<int32_t>(limit.max), out);
}
absl::Status ReadOptionalInt32(const JsonFieldReader& r, const IntLimit& limit, std::optional<int32_t>* out) {
  const std::string name(limit.field);
  return r.OptionalInt32(name.c_str(), static_cast<int32_t>(limit.min), static_cast<int32_t>(limit.max), out);
}

// "stop": a string or an array of strings.
absl::Status ParseStop(const JsonFieldReader& reader, std::vector<std::string>* out) {
  const json* stop = reader.Find("stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    if (stop->get_ref<const std::string&>().empty()) return absl::OkStatus();
    if (std::string error =
            limits::kStopStringBytes.Check("stop", static_cast<int64_t>(stop->get_ref<const std::string&>().size()));
        !error.empty()) {
      return InvalidFieldError("stop", error);
    }
    out->push_back(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) {
    return InvalidFieldError(
        "stop", absl::StrCat("'stop' must be a string or an array of strings, got ", DescribeJsonValue(*stop)));
  }
  if (std::string error = limits::kStopStrings.Check(static_cast<int64_t>(stop->size())); !error.empty()) {
    return InvalidFieldError("stop", error);
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    const json& s = (*stop)[i];
    if (!s.is_string()) {
      return InvalidFieldError("stop", absl::StrCat("'stop[", i, "]' must be a string, got ", DescribeJsonValue(s)));
    }
    if (s.get_ref<const std::string&>().empty()) {
      return InvalidFieldError("stop", absl::StrCat("'stop[", i, "]' must not be empty"));
    }
    if (std::string error = limits::kStopStringBytes.Check(
            absl::StrCat("stop[", i, "]"), static_cast<int64_t>(s.get_ref<const std::string&>().size()));
        !error.empty()) {
      return InvalidFieldError("stop", error);
    }
    out->push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseIntArray(const json& array, const std::string& field, size_t max_size, std::vector<int32_t>* out) {
  if (!array.is_array()) {
    return InvalidFieldError(
        field, absl::StrCat("'", field, "' must be an array of integers, got ", DescribeJsonValue(array)));
  }
  if (std::string error =
          CountLimit{field, static_cast<int64_t>(max_size), "entries"}.Check(static_cast<int64_t>(array.size()));
      !error.empty()) {
    return InvalidFieldError(field, error);
  }
  out->reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    int64_t v = 0;
    ORCA_RETURN_IF_ERROR(WithParam(ReadInteger(array[i], absl::StrCat(field, "[", i, "]"), 0, kInt32Max, &v), field));
    out->push_back(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

// "logit_bias": {"<token id>": bias in [-100, 100], ...}. Token ids are checked
// against the vocabulary later (RequestResolver), which knows it.
absl::Status ParseLogitBias(const json& bias, std::vector<std::pair<int32_t, float>>* out) {
  if (!bias.is_object()) {
    return InvalidFieldError("logit_bias",
                             absl::StrCat("'logit_bias' must be an object, got ", DescribeJsonValue(bias)));
  }
  if (std::string error = limits::kLogitBiasEntries.Check(static_cast<int64_t>(bias.size())); !error.empty()) {
    return InvalidFieldError("logit_bias", error);
  }
  out->clear();
  for (const auto& [key, value] : bias.items()) {
    // Decimal digits only: no sign, spaces, exponent or fraction ("50256", not "+5e3").
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (!digits || id > kInt32Max) {
      return InvalidFieldError("logit_bias", absl::StrCat("'logit_bias' keys must be token ids (non-negative "
                                                          "integers written as strings), got '",
                                                          key, "'"));
    }
    if (!value.is_number()) {
      return InvalidFieldError(
          "logit_bias", absl::StrCat("'logit_bias[\"", key, "\"]' must be a number, got ", DescribeJsonValue(value)));
    }
    const double v = value.get<double>();
    if (!limits::kLogitBias.Contains(v)) return InvalidFieldError("logit_bias", LogitBiasValueError(id, v));
    out->emplace_back(static_cast<int32_t>(id), static_cast<float>(v));
  }
  std::sort(out->begin(), out->end());
  for (size_t i = 1; i < out->size(); ++i) {
    if ((*out)[i].first == (*out)[i - 1].first) {  // "7" and "007"
      return InvalidFieldError("logit_bias",
                               absl::StrCat("'logit_bias' names token id ", (*out)[i].first, " more than once"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const JsonFieldReader& r, SamplingParams* s) {
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kTemperature, &s->temperature));
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kTopP, &s->top_p));
  int32_t top_k = 0;
  ORCA_RETURN_IF_ERROR(ReadInt32(r, limits::kTopK, &top_k));
  s->top_k = top_k < 0 ? 0 : top_k;  // vLLM's -1 and 0 both disable it
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kMinP, &s->min_p));
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kPresencePenalty, &s->presence_penalty));
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kFrequencyPenalty, &s->frequency_penalty));
  ORCA_RETURN_IF_ERROR(ReadReal(r, limits::kRepetitionPenalty, &s->repetition_penalty));
  std::optional<int64_t> seed;
  ORCA_RETURN_IF_ERROR(r.Int("seed", limits::kSeed.min, limits::kSeed.max, &seed));
  if (seed) s->seed = static_cast<uint64_t>(*seed);
  return absl::OkStatus();
}

// Fields both APIs share.
absl::Status ParseOptions(const json& body, GenerationOptions* o) {
  JsonFieldReader r(body);
  ORCA_RETURN_IF_ERROR(ReadOptionalInt32(r, limits::kMaxNewTokens, &o->max_new_tokens));
  ORCA_RETURN_IF_ERROR(ReadInt32(r, limits::kMinTokens, &o->min_tokens));
  if (o->max_new_tokens && o->min_tokens > *o->max_new_tokens) {
    return InvalidFieldError("min_tokens", MinTokensError(o->min_tokens, *o->max_new_tokens));
  }
  ORCA_RETURN_IF_ERROR(ReadInt32(r, limits::kN, &o->n));
  std::optional<int64_t> best_of;
  ORCA_RETURN_IF_ERROR(r.Int("best_of", limits::kBestOf.min, limits::kBestOf.max, &best_of));
  if (best_of && *best_of != o->n) {
    return InvalidFieldError("best_of", "'best_of' different from 'n' is not supported by this server");
  }
  ORCA_RETURN_IF_ERROR(ParseSampling(r, &o->sampling));
  ORCA_RETURN_IF_ERROR(ParseStop(r, &o->stop));
  if (const json* ids = r.Find("stop_token_ids")) {
    ORCA_RETURN_IF_ERROR(ParseIntArray(*ids, "stop_token_ids", kMaxStopTokenIds, &o->stop_token_ids));
  }
  ORCA_RETURN_IF_ERROR(r.Bool("ignore_eos", &o->ignore_eos));
  ORCA_RETURN_IF_ERROR(ReadInt32(r, limits::kPriority, &o->priority));
  ORCA_RETURN_IF_ERROR(r.Bool("skip_special_tokens", &o->skip_special_tokens));
  ORCA_RETURN_IF_ERROR(r.Bool("include_stop_str_in_output", &o->include_stop_str_in_output));
  ORCA_RETURN_IF_ERROR(r.Bool("stream", &o->stream));
  ORCA_RETURN_IF_ERROR(r.String("user", &o->user));
  ORCA_RETURN_IF_ERROR(ReadOptionalInt32(r, limits::kPromptLogprobs, &o->prompt_logprobs));
  ORCA_RETURN_IF_ERROR(r.Bool("return_token_ids", &o->return_token_ids));
  o->sampling.prompt_logprobs = o->prompt_logprobs.value_or(-1);
  if (const json* so = r.Find("stream_options")) {
    if (!so->is_object()) {
      return InvalidFieldError("stream_options",
                               absl::StrCat("'stream_options' must be an object, got ", DescribeJsonValue(*so)));
    }
    if (!o->stream) {
      return InvalidFieldError("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    ORCA_RETURN_IF_ERROR(JsonFieldReader(*so, "stream_options.").Bool("include_usage", &o->include_usage));
  }
  if (const json* bias = r.Find("logit_bias")) ORCA_RETURN_IF_ERROR(ParseLogitBias(*bias, &o->sampling.logit_bias));
  ORCA_RETURN_IF_ERROR(ParseStructuredOutput(body, &o->sampling.structured));
  if (o->sampling.structured.enabled()) {
    if (o->ignore_eos) {
      return InvalidFieldError(
          "ignore_eos", "'ignore_eos' cannot be combined with structured outputs (the output ends with its grammar)");
    }
    o->sampling.structured.end_token_ids = o->stop_token_ids;
  }
  return absl::OkStatus();
}

// "prompt": string | [string] | [int] | [[int]].
absl::Status ParsePrompt(const json& body, CompletionRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return InvalidFieldError("prompt", "'prompt' is required");
  const json& prompt = *it;
  const std::string kShape =
      "'prompt' must be a string, an array of strings, an array of token ids or an array "
      "of arrays of token ids";
  if (prompt.is_string()) {
    out->prompt_texts.push_back(prompt.get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt.is_array()) return InvalidFieldError("prompt", absl::StrCat(kShape, ", got ", DescribeJsonValue(prompt)));
  if (prompt.empty()) return InvalidFieldError("prompt", "'prompt' must not be an empty array");
  const json& first = prompt[0];
  if (first.is_number()) {  // one prompt given as token ids
    out->prompt_token_ids.emplace_back();
    return ParseIntArray(prompt, "prompt", std::numeric_limits<int32_t>::max(), &out->prompt_token_ids.back());
  }
  if (prompt.size() > static_cast<size_t>(kMaxChoicesPerRequest)) {
    return InvalidFieldError(
        "prompt", absl::StrCat("'prompt' may hold at most ", kMaxChoicesPerRequest, " prompts, got ", prompt.size()));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& p = prompt[i];
    const std::string field = absl::StrCat("prompt[", i, "]");
    if (first.is_string()) {
      if (!p.is_string())
        return InvalidFieldError("prompt", absl::StrCat(kShape, "; '", field, "' is ", DescribeJsonValue(p)));
      out->prompt_texts.push_back(p.get<std::string>());
    } else if (first.is_array()) {
      if (!p.is_array())
        return InvalidFieldError("prompt", absl::StrCat(kShape, "; '", field, "' is ", DescribeJsonValue(p)));
      if (p.empty()) return InvalidFieldError("prompt", absl::StrCat("'", field, "' must not be empty"));
      out->prompt_token_ids.emplace_back();
      ORCA_RETURN_IF_ERROR(ParseIntArray(p, field, std::numeric_limits<int32_t>::max(), &out->prompt_token_ids.back()));
    } else {
      return InvalidFieldError("prompt", absl::StrCat(kShape, "; '", field, "' is ", DescribeJsonValue(p)));
    }
  }
  return absl::OkStatus();
}

// content: a string, or an array of {"type": "text", "text": ...} parts.
absl::Status ParseContent(const json& content, const std::string& field, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return absl::OkStatus();
  }
  if (!content.is_array()) {
    return InvalidFieldError("messages", absl::StrCat("'", field,
                                                      "' must be a string or an array of content "
                                                      "parts, got ",
                                                      DescribeJsonValue(content)));
  }
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_field = absl::StrCat(field, "[", i, "]");
    if (!part.is_object()) {
      return InvalidFieldError("messages",
                               absl::StrCat("'", part_field, "' must be an object, got ", DescribeJsonValue(part)));
    }
    JsonFieldReader r(part, part_field + ".");
    std::string type;
    ORCA_RETURN_IF_ERROR(WithParam(r.String("type", &type), "messages"));
    if (type != "text") {
      return InvalidFieldError("messages", absl::StrCat("'", part_field, ".type' ",
                                                        type.empty() ? "is missing" : "'" + type + "' is not supported",
                                                        "; only 'text' content parts are"));
    }
    const json* text = r.Find("text");
    if (text == nullptr || !text->is_string()) {
      return InvalidFieldError("messages", absl::StrCat("'", part_field, ".text' must be a string"));
    }
    if (!out->empty()) out->push_back('\n');
    out->append(text->get_ref<const std::string&>());
  }
  return absl::OkStatus();
}

// An assistant message's `tool_calls` ([{"id", "type": "function", "function": {"name", "arguments"}}]) become the
// template's `message.tool_calls` with the arguments as an object (HF templates apply `tojson` to them) when they
// parse; a tool message's `tool_call_id` and `name` are passed through.
absl::Status ParseMessageToolFields(const json& m, const std::string& field, text::ChatMessage* message) {
  JsonFieldReader r(m, field + ".");
  ORCA_RETURN_IF_ERROR(WithParam(r.String("name", &message->name), "messages"));
  ORCA_RETURN_IF_ERROR(WithParam(r.String("tool_call_id", &message->tool_call_id), "messages"));
  if (message->role == "tool" && message->tool_call_id.empty()) {
    return InvalidFieldError("messages", absl::StrCat("'", field, ".tool_call_id' is required for role 'tool'"));
  }
  const json* calls = r.Find("tool_calls");
  if (calls == nullptr) return absl::OkStatus();
  if (message->role != "assistant") {
    return InvalidFieldError("messages", absl::StrCat("'", field, ".tool_calls' is only allowed on role 'assistant'"));
  }
  if (!calls->is_array()) {
    return InvalidFieldError(
        "messages", absl::StrCat("'", field, ".tool_calls' must be an array, got ", DescribeJsonValue(*calls)));
  }
  using ordered = nlohmann::ordered_json;  // the arguments keep the client's key order too
  ordered rendered = ordered::array();
  for (size_t j = 0; j < calls->size(); ++j) {
    const json& call = (*calls)[j];
    const std::string call_field = absl::StrCat(field, ".tool_calls[", j, "]");
    if (!call.is_object()) {
      return InvalidFieldError("messages",
                               absl::StrCat("'", call_field, "' must be an object, got ", DescribeJsonValue(call)));
    }
    JsonFieldReader cr(call, call_field + ".");
    std::string id, type = "function", name, arguments;
    ORCA_RETURN_IF_ERROR(WithParam(cr.String("id", &id), "messages"));
    ORCA_RETURN_IF_ERROR(WithParam(cr.String("type", &type), "messages"));
    if (type != "function") {
      return InvalidFieldError("messages",
                               absl::StrCat("'", call_field, ".type' must be 'function', got '", type, "'"));
    }
    const json* function = cr.Find("function");
    if (function == nullptr || !function->is_object()) {
      return InvalidFieldError("messages", absl::StrCat("'", call_field, ".function' must be an object"));
    }
    JsonFieldReader fr(*function, call_field + ".function.");
    ORCA_RETURN_IF_ERROR(WithParam(fr.String("name", &name), "messages"));
    if (name.empty())
      return InvalidFieldError("messages", absl::StrCat("'", call_field, ".function.name' is required"));
    ORCA_RETURN_IF_ERROR(WithParam(fr.String("arguments", &arguments), "messages"));
    // JSON inside a string escapes the body's nesting limit: parse it with the same limit (null if refused).
    ordered args = ParseOrderedJson(arguments).value_or(ordered());
    ordered rendered_call = ordered::object();
    if (!id.empty()) rendered_call["id"] = id;
    rendered_call["type"] = "function";
    rendered_call["function"] = {{"name", name}, {"arguments", args.is_object() ? args : ordered(arguments)}};
    rendered.push_back(std::move(rendered_call));
  }
  message->tool_calls_json = rendered.dump();
  return absl::OkStatus();
}

absl::Status ParseMessages(const json& body, bool required, std::vector<text::ChatMessage>* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return required ? InvalidFieldError("messages", "'messages' is required") : absl::OkStatus();
  }
  if (!it->is_array()) {
    return InvalidFieldError("messages", absl::StrCat("'messages' must be an array, got ", DescribeJsonValue(*it)));
  }
  if (it->empty()) return InvalidFieldError("messages", "'messages' must contain at least one message");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) {
      return InvalidFieldError("messages", absl::StrCat("'", field, "' must be an object, got ", DescribeJsonValue(m)));
    }
    text::ChatMessage message;
    JsonFieldReader r(m, field + ".");
    ORCA_RETURN_IF_ERROR(WithParam(r.String("role", &message.role), "messages"));
    if (message.role.empty()) return InvalidFieldError("messages", absl::StrCat("'", field, ".role' is required"));
    // An assistant turn may come without content (null or absent: it called tools). The template then sees
    // "" as vLLM passes it, never None: templates such as Qwen3's search and concatenate `message.content`.
    if (const json* content = r.Find("content")) {
      ORCA_RETURN_IF_ERROR(ParseContent(*content, field + ".content", &message.content));
    } else if (message.role != "assistant") {
      return InvalidFieldError("messages", absl::StrCat("'", field, ".content' is required"));
    }
    ORCA_RETURN_IF_ERROR(ParseMessageToolFields(m, field, &message));
    out->push_back(std::move(message));
  }
  return absl::OkStatus();
}

// `chat_template_kwargs`: extra template variables (strings; other JSON values as their JSON text,
// which the template sees as values again: core/text/chat_template.h).
absl::Status ParseChatTemplateKwargs(const json& body, std::map<std::string, std::string>* out) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) {
    return InvalidFieldError("chat_template_kwargs",
                             absl::StrCat("'chat_template_kwargs' must be an object, got ", DescribeJsonValue(*it)));
  }
  for (const auto& [key, value] : it->items()) (*out)[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return absl::OkStatus();
}

absl::Status ParseChatOnlyFields(const json& body, ChatRequest* out) {
  JsonFieldReader r(body);
  // max_completion_tokens is the newer name; it wins over max_tokens.
  std::optional<int32_t> max_completion_tokens;
  ORCA_RETURN_IF_ERROR(ReadOptionalInt32(r, limits::kMaxCompletionTokens, &max_completion_tokens));
  if (max_completion_tokens) out->options.max_new_tokens = max_completion_tokens;
  ORCA_RETURN_IF_ERROR(r.Bool("logprobs", &out->logprobs));
  ORCA_RETURN_IF_ERROR(ReadInt32(r, limits::kTopLogprobs, &out->top_logprobs));
  if (r.Find("top_logprobs") != nullptr && !out->logprobs) {
    return InvalidFieldError("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
  }
  ORCA_RETURN_IF_ERROR(r.Bool("add_generation_prompt", &out->add_generation_prompt));
  ORCA_RETURN_IF_ERROR(r.Bool("add_special_tokens", &out->add_special_tokens));
  ORCA_RETURN_IF_ERROR(ParseToolsRequest(body, &out->tools));
  if (out->tools.choice == ToolsRequest::Choice::kRequired || out->tools.choice == ToolsRequest::Choice::kNamed) {
    if (out->options.sampling.structured.enabled()) {
      return InvalidFieldError("tool_choice",
                               "'tool_choice' 'required' or a named function constrains the output, "
                               "and so does the request's structured output (response_format or "
                               "guided_*): give one of them");
    }
    if (out->options.ignore_eos) {
      return InvalidFieldError("ignore_eos",
                               "'ignore_eos' cannot be combined with 'tool_choice' 'required' or a "
                               "named function (the output ends with its calls)");
    }
  }
  return ParseChatTemplateKwargs(body, &out->chat_template_kwargs);
}

absl::Status ParseModel(const json& body, std::string* model) { return JsonFieldReader(body).String("model", model); }

}  // namespace

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::nullopt;
}

absl::StatusOr<json> ParseJsonObject(std::string_view body) {
  if (std::optional<size_t> bad = FindInvalidUtf8(body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Request body is not valid UTF-8 (invalid byte sequence at offset ", *bad, ")"));
  }
  // Nesting is limited while parsing (core/common/json_parse.h): nothing deeper is built or walked.
  absl::StatusOr<json> parsed = ParseOrderedJson(body);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("Invalid JSON body: ", parsed.status().message()));
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Request body must be a JSON object, got ", DescribeJsonValue(*parsed)));
  }
  return parsed;
}

absl::StatusOr<CompletionRequest> ParseCompletionRequest(const json& body) {
  CompletionRequest out;
  ORCA_RETURN_IF_ERROR(ParseModel(body, &out.model));
  ORCA_RETURN_IF_ERROR(ParsePrompt(body, &out));
  ORCA_RETURN_IF_ERROR(ParseOptions(body, &out.options));
  JsonFieldReader r(body);
  ORCA_RETURN_IF_ERROR(r.Bool("echo", &out.echo));
  ORCA_RETURN_IF_ERROR(ReadOptionalInt32(r, limits::kLogprobs, &out.logprobs));
  ORCA_RETURN_IF_ERROR(r.Bool("add_special_tokens", &out.add_special_tokens));
  if (const json* suffix = r.Find("suffix")) {
    if (!suffix->is_string()) {
      return InvalidFieldError("suffix", absl::StrCat("'suffix' must be a string, got ", DescribeJsonValue(*suffix)));
    }
    if (!suffix->get_ref<const std::string&>().empty()) return Unsupported("suffix", "'suffix'");
  }
  const size_t num_prompts = out.prompt_texts.size() + out.prompt_token_ids.size();
  if (num_prompts * static_cast<size_t>(out.options.n) > static_cast<size_t>(kMaxChoicesPerRequest)) {
    return InvalidFieldError("n", absl::StrCat("'n' × number of prompts must be at most ", kMaxChoicesPerRequest,
                                               ", got ", out.options.n, " × ", num_prompts));
  }
  if (out.logprobs) {
    out.options.sampling.logprobs = true;
    out.options.sampling.top_logprobs = *out.logprobs;
    // echo with logprobs: the prompt's tokens lead the logprobs, with as many alternatives as the output's.
    if (out.echo) out.options.sampling.prompt_logprobs = std::max(out.options.sampling.prompt_logprobs, *out.logprobs);
  }
  return out;
}

absl::StatusOr<ChatRequest> ParseChatRequest(const json& body) {
  ChatRequest out;
  ORCA_RETURN_IF_ERROR(ParseModel(body, &out.model));
  ORCA_RETURN_IF_ERROR(ParseMessages(body, /*required=*/true, &out.messages));
  ORCA_RETURN_IF_ERROR(ParseOptions(body, &out.options));
  ORCA_RETURN_IF_ERROR(ParseChatOnlyFields(body, &out));
  if (out.options.max_new_tokens && out.options.min_tokens > *out.options.max_new_tokens) {
    return InvalidFieldError(
        "min_tokens", absl::StrCat("'min_tokens' (", out.options.min_tokens, ") must not exceed the completion limit (",
                                   *out.options.max_new_tokens, ")"));
  }
  out.options.sampling.logprobs = out.logprobs;
  out.options.sampling.top_logprobs = out.logprobs ? out.top_logprobs : 0;
  return out;
}

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(const json& body) {
  TokenizeRequest out;
  ORCA_RETURN_IF_ERROR(ParseModel(body, &out.model));
  JsonFieldReader r(body);
  std::string prompt;
  if (r.Find("prompt") != nullptr) {
    ORCA_RETURN_IF_ERROR(r.String("prompt", &prompt));
    out.prompt = std::move(prompt);
  }
  ORCA_RETURN_IF_ERROR(ParseMessages(body, /*required=*/false, &out.messages));
  if (out.prompt.has_value() == !out.messages.empty()) {
    return InvalidFieldError("prompt", "exactly one of 'prompt' and 'messages' is required");
  }
  ORCA_RETURN_IF_ERROR(r.Bool("add_generation_prompt", &out.add_generation_prompt));
  bool add_special_tokens = false;
  if (r.Find("add_special_tokens") != nullptr) {
    ORCA_RETURN_IF_ERROR(r.Bool("add_special_tokens", &add_special_tokens));
    out.add_special_tokens = add_special_tokens;
  }
  ORCA_RETURN_IF_ERROR(r.Bool("return_token_strs", &out.return_token_strs));
  if (!out.messages.empty()) {
    ORCA_RETURN_IF_ERROR(ParseChatTemplateKwargs(body, &out.chat_template_kwargs));
    ORCA_RETURN_IF_ERROR(ParseToolsRequest(body, &out.tools));
  }
  return out;
}

absl::StatusOr<DetokenizeRequest> ParseDetokenizeRequest(const json& body) {
  DetokenizeRequest out;
  ORCA_RETURN_IF_ERROR(ParseModel(body, &out.model));
  auto it = body.find("tokens");
  if (it == body.end() || it->is_null()) return InvalidFieldError("tokens", "'tokens' is required");
  ORCA_RETURN_IF_ERROR(ParseIntArray(*it, "tokens", std::numeric_limits<int32_t>::max(), &out.tokens));
  ORCA_RETURN_IF_ERROR(JsonFieldReader(body).Bool("skip_special_tokens", &out.skip_special_tokens));
  return out;
}

}  // namespace orca::gateway
