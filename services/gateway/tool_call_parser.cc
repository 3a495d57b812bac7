#include "services/gateway/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "core/common/json_parse.h"

namespace orca::gateway {
namespace {

using ordered_json = nlohmann::ordered_json;

// The model's output as JSON, null when it is not (or nests deeper than orca::kMaxJsonDepth: a model can be
// asked to print a million '[' and the arguments are dumped recursively).
ordered_json ParseModelJson(std::string_view text) { return ParseOrderedJson(text).value_or(ordered_json()); }

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t SkipSpace(std::string_view s, size_t i = 0) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

bool AllSpace(std::string_view s) { return SkipSpace(s) == s.size(); }

std::string_view Trim(std::string_view s) {
  s.remove_prefix(SkipSpace(s));
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t PartialMarkerSuffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::string NewCallId() {
  static thread_local absl::BitGen gen;
  return absl::StrFormat("call_%016x%08x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint32_t>(gen));
}

}  // namespace

size_t FindJsonValueEnd(std::string_view text, size_t start) {
  if (start >= text.size() || (text[start] != '{' && text[start] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::vector<std::string> tool_names)
    : format_(format), tool_names_(std::move(tool_names)) {}

ToolParseOutput ToolCallParser::Feed(std::string_view text) {
  ToolParseOutput out;
  pending_.append(text);
  Step(/*at_end=*/false, &out);
  return out;
}

ToolParseOutput ToolCallParser::Finish() {
  ToolParseOutput out;
  Step(/*at_end=*/true, &out);
  if (!pending_.empty()) EmitContent(pending_, &out);
  pending_.clear();
  return out;
}

void ToolCallParser::EmitContent(std::string_view text, ToolParseOutput* out) {
  // Whitespace around and between calls is not content.
  if (num_calls_ > 0 && AllSpace(text)) return;
  out->content.append(text);
}

bool ToolCallParser::MakeCall(std::string_view json_text, ToolCall* call) {
  ordered_json value = ParseModelJson(json_text);
  if (!value.is_object()) return false;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string()) return false;
  if (std::find(tool_names_.begin(), tool_names_.end(), name->get<std::string>()) == tool_names_.end()) return false;
  auto args = value.find(format_ == ToolCallFormat::kLlama3Json ? "parameters" : "arguments");
  if (args == value.end()) args = value.find(format_ == ToolCallFormat::kLlama3Json ? "arguments" : "parameters");
  if (args == value.end()) return false;
  ordered_json arguments = *args;
  if (arguments.is_string()) {  // some models write the arguments as a JSON string
    arguments = ParseModelJson(arguments.get_ref<const std::string&>());
  }
  if (!arguments.is_object()) return false;
  call->index = num_calls_;
  call->id = NewCallId();
  call->name = name->get<std::string>();
  call->arguments = arguments.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return true;
}

void ToolCallParser::Step(bool at_end, ToolParseOutput* out) {
  for (;;) {
    if (mode_ == Mode::kStart) {
      const size_t lead = SkipSpace(pending_);
      if (lead == pending_.size()) return;  // only whitespace so far
      std::string_view rest = std::string_view(pending_).substr(lead);
      if (format_ == ToolCallFormat::kLlama3Json) {
        const bool tag = rest.substr(0, kPythonTag.size()) == kPythonTag;
        if (!tag && !at_end && rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest) return;
        if (tag || rest[0] == '{') {
          raw_ = pending_.substr(0, lead);
          pending_.erase(0, lead);
          mode_ = Mode::kCalls;
          continue;
        }
      }
      mode_ = Mode::kContent;
      continue;
    }
    if (mode_ == Mode::kContent) {
      if (format_ == ToolCallFormat::kLlama3Json) {  // calls only at the start of the output
        EmitContent(pending_, out);
        pending_.clear();
        return;
      }
      const std::string_view marker = format_ == ToolCallFormat::kHermes ? kHermesOpen : kMistralMarker;
      const size_t at = pending_.find(marker);
      if (at == std::string::npos) {
        const size_t keep = at_end ? 0 : PartialMarkerSuffix(pending_, marker);
        EmitContent(std::string_view(pending_).substr(0, pending_.size() - keep), out);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      const std::string_view before = std::string_view(pending_).substr(0, at);
      if (!AllSpace(before)) EmitContent(before, out);
      raw_ = std::string(marker);
      pending_.erase(0, at + marker.size());
      mode_ = Mode::kCalls;
      continue;
    }
    if (!ConsumeCalls(at_end, out)) return;
  }
}

bool ToolCallParser::ConsumeCalls(bool at_end, ToolParseOutput* out) {
  // The section's text is content after all: its raw text so far plus `n` bytes of pending_.
  auto fail = [&](size_t n) {
    EmitContent(raw_ + pending_.substr(0, n), out);
    pending_.erase(0, n);
    raw_.clear();
    mode_ = Mode::kContent;
    return true;
  };
  if (format_ == ToolCallFormat::kHermes) {
    const size_t close = pending_.find(kHermesClose);
    if (close == std::string::npos) {
      if (!at_end) return false;
      ToolCall call;  // an unclosed block (the model stopped after the JSON) that parses is still a call
      if (!MakeCall(Trim(pending_), &call)) return fail(pending_.size());
      out->calls.push_back(std::move(call));
      ++num_calls_;
      pending_.clear();
      return false;
    }
    ToolCall call;
    if (!MakeCall(Trim(std::string_view(pending_).substr(0, close)), &call)) return fail(close + kHermesClose.size());
    out->calls.push_back(std::move(call));
    ++num_calls_;
    pending_.erase(0, close + kHermesClose.size());
    raw_.clear();
    mode_ = Mode::kStart;
    return true;
  }
  // Llama 3 JSON and Mistral: one JSON value (Mistral: an array of calls or one call; Llama: one call, then "; ").
  size_t start = SkipSpace(pending_);
  if (format_ == ToolCallFormat::kLlama3Json) {
    if (std::string_view(pending_).substr(start, kPythonTag.size()) == kPythonTag) {
      start = SkipSpace(pending_, start + kPythonTag.size());
    } else if (num_calls_ > 0 && start < pending_.size() && pending_[start] == ';') {
      start = SkipSpace(pending_, start + 1);  // "; " between calls
    }
  }
  if (start == pending_.size()) {
    if (at_end) {
      raw_.clear();
      pending_.clear();
    }
    return false;
  }
  const size_t end = FindJsonValueEnd(pending_, start);
  if (end == std::string::npos) {
    const bool opens = pending_[start] == '{' || pending_[start] == '[';
    if (opens && !at_end) return false;
    return fail(pending_.size());
  }
  const std::string_view value = std::string_view(pending_).substr(start, end - start);
  std::vector<ToolCall> calls;
  if (value[0] == '[' && format_ == ToolCallFormat::kMistral) {
    ordered_json array = ParseModelJson(value);
    if (!array.is_array() || array.empty()) return fail(end);
    for (const ordered_json& element : array) {
      ToolCall call;
      if (!MakeCall(element.dump(), &call)) return fail(end);
      calls.push_back(std::move(call));
      ++num_calls_;  // MakeCall numbers the calls by num_calls_
    }
    num_calls_ -= static_cast<int>(calls.size());
  } else {
    ToolCall call;
    if (!MakeCall(value, &call)) return fail(end);
    calls.push_back(std::move(call));
  }
  num_calls_ += static_cast<int>(calls.size());
  for (ToolCall& call : calls) out->calls.push_back(std::move(call));
  pending_.erase(0, end);
  raw_.clear();
  // Llama 3: more calls may follow a ";" (ConsumeCalls again); anything else after the calls is content.
  const size_t next = SkipSpace(pending_);
  if (next == pending_.size()) {
    if (!at_end) return false;
    pending_.clear();
    return false;
  }
  if (format_ != ToolCallFormat::kLlama3Json || pending_[next] != ';') mode_ = Mode::kContent;
  return true;
}

}  // namespace orca::gateway
