#pragma once
/// Tool calling on the chat API: the output side. Splits one choice's
/// generated text into content and tool calls in the model's ToolCallFormat,
/// incrementally, so the same parser serves streaming (text that may begin a
/// call is held back until it is known whether it is one) and non-streaming
/// (all text fed at once). A block that does not parse as a call of a declared
/// tool is content, never an error: with "auto" the model may write anything.

#include <string>
#include <string_view>
#include <vector>

#include "services/gateway/tool_call_request.h"

namespace orca::gateway {

/// One parsed call, as OpenAI renders it: `arguments` is the JSON text of the arguments object.
struct ToolCall {
  int index = 0;   ///< position among the choice's calls
  std::string id;  ///< "call_" + 24 hex digits, unique per call
  std::string name;
  std::string arguments;
};

/// What a piece of output turned into.
struct ToolParseOutput {
  std::string content;
  std::vector<ToolCall> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  /// `tool_names`: the declared tools; a call of any other name is content.
  ToolCallParser(ToolCallFormat format, std::vector<std::string> tool_names);

  /// Consumes more output text; returns the content that is now known not to
  /// belong to a call, and the calls completed by it.
  ToolParseOutput Feed(std::string_view text);
  /// End of the output: whatever is still held back is resolved (an unclosed
  /// call that parses is a call; anything else is content).
  ToolParseOutput Finish();
  /// Whether any call was produced (the choice's finish_reason is then "tool_calls").
  bool produced_calls() const { return num_calls_ > 0; }

 private:
  enum class Mode {
    kStart,    ///< nothing but whitespace (and Llama's <|python_tag|>) seen yet
    kContent,  ///< plain text; scanning for the format's call marker
    kCalls,    ///< inside the calls section
  };
  void Step(bool at_end, ToolParseOutput* out);
  /// Calls mode: consumes complete calls from the front of pending_; false when more text is needed.
  bool ConsumeCalls(bool at_end, ToolParseOutput* out);
  /// Parses one call object; false unless it is {"name": <declared>, args key: {...}}.
  bool MakeCall(std::string_view json_text, ToolCall* call);
  void EmitContent(std::string_view text, ToolParseOutput* out);

  const ToolCallFormat format_;
  const std::vector<std::string> tool_names_;
  Mode mode_ = Mode::kStart;
  std::string pending_;  ///< text not yet resolved
  std::string raw_;      ///< the calls section's raw text so far (content again if it does not parse)
  int num_calls_ = 0;
};

/// The end index (exclusive) of the JSON object or array starting at `text[start]`
/// (strings and escapes respected), or npos when it is not complete yet.
size_t FindJsonValueEnd(std::string_view text, size_t start);

}  // namespace orca::gateway
