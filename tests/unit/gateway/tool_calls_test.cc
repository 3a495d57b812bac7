// Tool calling in the gateway: the request fields (tools, tool_choice,
// parallel_tool_calls) and their 400s, the format detection, the constraint for
// "required" / named choices (accept/reject tables over the compiled grammar),
// and the output parser per format, fed whole and one byte at a time.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/common/status_macros.h"
#include "core/structured/compile.h"
#include "services/gateway/api_error.h"
#include "services/gateway/openai_request.h"
#include "services/gateway/tool_call_parser.h"
#include "services/gateway/tool_call_request.h"
#include "tests/unit/structured/test_util.h"

namespace orca::gateway {
namespace {

using nlohmann::json;
using Choice = ToolsRequest::Choice;

json Tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                    "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "noop"}}
  ])");
}

absl::StatusOr<ToolsRequest> Parse(json body) {
  ToolsRequest out;
  ORCA_RETURN_IF_ERROR(ParseToolsRequest(body, &out));
  return out;
}

void ExpectError(json body, const std::string& param, const std::string& fragment) {
  absl::StatusOr<ToolsRequest> r = Parse(body);
  ASSERT_FALSE(r.ok()) << body.dump();
  const ApiError e = ApiError::FromStatus(r.status());
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, param) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(fragment), std::string::npos) << r.status();
}

TEST(ToolsRequestTest, DefaultsAndChoices) {
  auto none = Parse(json::object());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->active());
  auto autoc = Parse({{"tools", Tools()}});
  ASSERT_TRUE(autoc.ok());
  EXPECT_EQ(autoc->choice, Choice::kAuto);
  EXPECT_TRUE(autoc->active());
  EXPECT_TRUE(autoc->parallel_tool_calls);
  EXPECT_EQ(autoc->tools[1].parameters.dump(), R"({"type":"object","properties":{}})");
  auto named = Parse({{"tools", Tools()},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "noop"}}}}},
                      {"parallel_tool_calls", false}});
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->choice, Choice::kNamed);
  EXPECT_EQ(named->named, "noop");
  EXPECT_FALSE(named->parallel_tool_calls);
  auto off = Parse({{"tools", Tools()}, {"tool_choice", "none"}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->active());
  EXPECT_EQ(json::parse(autoc->TemplateJson())[0]["function"]["name"], "get_weather");
}

TEST(ToolsRequestTest, MalformedToolsAndChoicesAreRefusedByField) {
  ExpectError({{"tools", "x"}}, "tools", "'tools' must be an array");
  ExpectError({{"tools", {1}}}, "tools", "'tools[0]' must be an object");
  ExpectError({{"tools", {{{"type", "retrieval"}}}}}, "tools", "'tools[0].type' must be 'function', got 'retrieval'");
  ExpectError({{"tools", {{{"type", "function"}}}}}, "tools", "'tools[0].function' must be an object");
  ExpectError({{"tools", {{{"type", "function"}, {"function", {{"name", "a b"}}}}}}}, "tools",
              "'tools[0].function.name' must be 1 to 64 characters");
  ExpectError({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 3}}}}}}}, "tools",
              "'tools[0].function.parameters' must be a JSON Schema object");
  ExpectError({{"tools",
                {{{"type", "function"}, {"function", {{"name", "f"}}}},
                 {{"type", "function"}, {"function", {{"name", "f"}}}}}}},
              "tools", "'tools[1].function.name' 'f' is declared twice");
  ExpectError({{"tools", Tools()}, {"tool_choice", "always"}}, "tool_choice", "got 'always'");
  ExpectError({{"tools", Tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
              "tool_choice", "'nope' is not one of the functions in 'tools'");
  ExpectError({{"tools", Tools()}, {"tool_choice", {{"type", "function"}}}}, "tool_choice",
              "'tool_choice.function' must be an object");
  ExpectError({{"tool_choice", "required"}}, "tool_choice", "only allowed when 'tools' are specified");
  ExpectError({{"tools", Tools()}, {"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "must be a boolean");
  ExpectError({{"functions", json::array()}}, "functions", "deprecated function-calling API");
}

TEST(ToolsRequestTest, ChatRequestRefusesTwoConstraints) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"tools", Tools()},
               {"tool_choice", "required"},
               {"response_format", {{"type", "json_object"}}}};
  auto r = ParseChatRequest(body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ApiError::FromStatus(r.status()).param, "tool_choice");
  body.erase("response_format");
  ASSERT_TRUE(ParseChatRequest(body).ok());
}

TEST(ToolsRequestTest, MessagesCarryToolCallsAndToolResults) {
  json body = json::parse(R"({"messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "-3"}]})");
  auto r = ParseChatRequest(body);
  ASSERT_TRUE(r.ok()) << r.status();
  const text::ChatMessage& call = r->messages[1];
  // content null reaches the template as "", as vLLM passes it (Qwen3's template concatenates it).
  EXPECT_FALSE(call.content_is_null);
  EXPECT_EQ(call.content, "");
  // The arguments become an object, in the client's key order.
  EXPECT_EQ(
      call.tool_calls_json,
      R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"unit":"c","city":"Oslo"}}}])");
  EXPECT_EQ(r->messages[2].tool_call_id, "call_1");

  json no_id = json::parse(R"({"messages": [{"role": "tool", "content": "x"}]})");
  auto bad = ParseChatRequest(no_id);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("'messages[0].tool_call_id' is required"), std::string::npos);
  json user_calls = json::parse(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})");
  EXPECT_FALSE(ParseChatRequest(user_calls).ok());
}

// Nothing between the body and the template (or the constraint compiler) re-sorts JSON keys: tools'
// parameters, tool-call arguments and chat_template_kwargs keep the order the client wrote them in.
TEST(ToolsRequestTest, JsonKeepsTheClientsKeyOrder) {
  const std::string params =
      R"({"type":"object","required":["zeta"],"properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})";
  absl::StatusOr<RequestJson> body = ParseJsonObject(
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls": [)"
      R"({"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"zeta\": \"z\", \"alpha\": 1}"}}]}],)"
      R"("tools": [{"type": "function", "function": {"parameters": )" +
      params + R"(, "name": "f"}}], "tool_choice": "required", "chat_template_kwargs": {"b": {"y": 1, "x": 2}, "a": 0},)"
      R"("response_format": null})");
  ASSERT_TRUE(body.ok()) << body.status();
  absl::StatusOr<ChatRequest> chat = ParseChatRequest(*body);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->tools.TemplateJson(), R"([{"type":"function","function":{"name":"f","parameters":)" + params + "}}]");
  EXPECT_EQ(chat->messages[1].tool_calls_json,
            R"([{"id":"c","type":"function","function":{"name":"f","arguments":{"zeta":"z","alpha":1}}}])");
  EXPECT_EQ(chat->chat_template_kwargs.at("b"), R"({"y":1,"x":2})");
  // The constrained output follows `properties`' order, so the schema keeps it too.
  absl::StatusOr<StructuredOutputSpec> spec = ToolCallConstraint(chat->tools, ToolCallFormat::kHermes);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_NE(spec->schema.find(R"("arguments":)" + params), std::string::npos) << spec->schema;
  // As does a response_format schema.
  absl::StatusOr<RequestJson> structured = ParseJsonObject(
      R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", )"
      R"("json_schema": {"name": "s", "schema": )" +
      params + "}}}");
  ASSERT_TRUE(structured.ok());
  absl::StatusOr<ChatRequest> with_schema = ParseChatRequest(*structured);
  ASSERT_TRUE(with_schema.ok()) << with_schema.status();
  EXPECT_EQ(with_schema->options.sampling.structured.schema, params);
}

TEST(ToolCallFormatTest, FlagAndDetection) {
  EXPECT_EQ(*ParseToolCallParserFlag("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ParseToolCallParserFlag("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(*ParseToolCallParserFlag("mistral"), ToolCallFormat::kMistral);
  EXPECT_FALSE(ParseToolCallParserFlag("auto")->has_value());
  EXPECT_FALSE(ParseToolCallParserFlag("pythonic").ok());
  EXPECT_EQ(DetectToolCallFormat("{{ '[TOOL_CALLS]' }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat("<tool_call>\n{{ x }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("<|start_header_id|>"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("<|python_tag|>"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat(""), ToolCallFormat::kHermes);
}

bool Accepts(const StructuredOutputSpec& spec, const std::string& text) {
  auto g = structured::CompileSpec(spec);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() && structured::testing::FullMatch(*g, text);
}

TEST(ToolCallConstraintTest, RequiredAndNamedPerFormat) {
  ToolsRequest tools = *Parse({{"tools", Tools()}, {"tool_choice", "required"}});
  auto hermes = ToolCallConstraint(tools, ToolCallFormat::kHermes);
  ASSERT_TRUE(hermes.ok()) << hermes.status();
  EXPECT_EQ(hermes->kind, StructuredOutputSpec::Kind::kToolCalls);
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}})";
  const std::string noop = R"({"name": "noop", "arguments": {}})";
  EXPECT_TRUE(Accepts(*hermes, "<tool_call>\n" + weather + "\n</tool_call>"));
  EXPECT_TRUE(Accepts(*hermes, "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + noop + "\n</tool_call>"));
  EXPECT_FALSE(Accepts(*hermes, weather));
  EXPECT_FALSE(Accepts(*hermes, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(*hermes,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
                       "</tool_call>"));  // `unit` is required
  EXPECT_FALSE(Accepts(*hermes, "Sure! <tool_call>\n" + noop + "\n</tool_call>"));

  auto mistral = ToolCallConstraint(tools, ToolCallFormat::kMistral);
  ASSERT_TRUE(mistral.ok());
  EXPECT_TRUE(Accepts(*mistral, "[TOOL_CALLS][" + weather + ", " + noop + "]"));
  EXPECT_FALSE(Accepts(*mistral, "[TOOL_CALLS][]"));

  auto llama = ToolCallConstraint(tools, ToolCallFormat::kLlama3Json);
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(Accepts(*llama, R"({"name": "noop", "parameters": {}})"));
  EXPECT_TRUE(Accepts(*llama, R"({"name": "noop", "parameters": {}}; {"name": "noop", "parameters": {}})"));
  EXPECT_FALSE(Accepts(*llama, noop));  // "arguments" is not Llama's key

  tools.parallel_tool_calls = false;
  auto single = ToolCallConstraint(tools, ToolCallFormat::kHermes);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->max_calls, 1);
  EXPECT_FALSE(Accepts(*single, "<tool_call>\n" + noop + "\n</tool_call>\n<tool_call>\n" + noop + "\n</tool_call>"));

  ToolsRequest named =
      *Parse({{"tools", Tools()}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  auto n = ToolCallConstraint(named, ToolCallFormat::kHermes);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(Accepts(*n, "<tool_call>\n" + weather + "\n</tool_call>"));
  EXPECT_FALSE(Accepts(*n, "<tool_call>\n" + noop + "\n</tool_call>"));

  ToolsRequest autoc = *Parse({{"tools", Tools()}});
  EXPECT_FALSE(ToolCallConstraint(autoc, ToolCallFormat::kHermes)->enabled());
}

TEST(ToolCallConstraintTest, UnenforceableParametersNameTheTool) {
  json tools = Tools();
  tools.push_back(json::parse(
      R"({"type": "function", "function": {"name": "bad", "parameters": {"type": "object", "properties": {"x": {"not": {}}}}}})"));
  ToolsRequest required = *Parse({{"tools", tools}, {"tool_choice", "required"}});
  auto r = ToolCallConstraint(required, ToolCallFormat::kHermes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ApiError::FromStatus(r.status()).param, "tools");
  EXPECT_NE(std::string(r.status().message()).find("'tools[2].function.parameters'"), std::string::npos) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("'not' at /properties/x"), std::string::npos) << r.status();
  // "auto" does not constrain, so it does not need the schema to compile; a named choice of another tool neither.
  EXPECT_TRUE(ToolCallConstraint(*Parse({{"tools", tools}}), ToolCallFormat::kHermes).ok());
  EXPECT_TRUE(ToolCallConstraint(
                  *Parse({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "noop"}}}}}}),
                  ToolCallFormat::kHermes)
                  .ok());
}

// Feeds `text` whole, and one byte at a time, and checks both give the same content and calls.
ToolParseOutput ParseAll(ToolCallFormat format, const std::string& text) {
  const std::vector<std::string> names = {"get_weather", "noop"};
  ToolCallParser whole(format, names);
  ToolParseOutput a = whole.Feed(text);
  ToolParseOutput a_end = whole.Finish();
  a.content += a_end.content;
  a.calls.insert(a.calls.end(), a_end.calls.begin(), a_end.calls.end());
  ToolCallParser bytes(format, names);
  ToolParseOutput b;
  for (char c : text) {
    ToolParseOutput piece = bytes.Feed(std::string(1, c));
    b.content += piece.content;
    b.calls.insert(b.calls.end(), piece.calls.begin(), piece.calls.end());
  }
  ToolParseOutput b_end = bytes.Finish();
  b.content += b_end.content;
  b.calls.insert(b.calls.end(), b_end.calls.begin(), b_end.calls.end());
  EXPECT_EQ(a.content, b.content) << text;
  EXPECT_EQ(a.calls.size(), b.calls.size()) << text;
  for (size_t i = 0; i < a.calls.size() && i < b.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
    EXPECT_EQ(a.calls[i].index, static_cast<int>(i));
    EXPECT_EQ(b.calls[i].index, static_cast<int>(i));
  }
  EXPECT_EQ(whole.produced_calls(), !a.calls.empty());
  return a;
}

TEST(ToolCallParserTest, Hermes) {
  auto out = ParseAll(ToolCallFormat::kHermes,
                      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                      "\"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n"
                      "</tool_call>\n");
  EXPECT_EQ(out.content, "Let me check.\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Oslo","unit":"c"})");
  EXPECT_EQ(out.calls[0].id.substr(0, 5), "call_");
  EXPECT_EQ(out.calls[0].id.size(), 29u);
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
  EXPECT_EQ(out.calls[1].arguments, "{}");

  // Unclosed at the end but complete JSON: a call. Garbage, an undeclared tool, or plain text: content.
  EXPECT_EQ(ParseAll(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}").calls.size(), 1u);
  const std::string garbage = "<tool_call>\n{\"name\": \"noop\", \"argu</tool_call> tail";
  EXPECT_EQ(ParseAll(ToolCallFormat::kHermes, garbage).content, garbage);
  const std::string other = "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(ParseAll(ToolCallFormat::kHermes, other).content, other);
  EXPECT_TRUE(ParseAll(ToolCallFormat::kHermes, other).calls.empty());
  EXPECT_EQ(ParseAll(ToolCallFormat::kHermes, "a <tool_ b").content, "a <tool_ b");
  EXPECT_EQ(ParseAll(ToolCallFormat::kHermes, "  Hi there").content, "  Hi there");
}

TEST(ToolCallParserTest, HoldsBackOnlyWhatMayStartACall) {
  ToolCallParser p(ToolCallFormat::kHermes, {"noop"});
  EXPECT_EQ(p.Feed("Hello <tool").content, "Hello ");
  EXPECT_EQ(p.Feed("box> ok").content, "<toolbox> ok");
  EXPECT_EQ(p.Feed("<tool_call>{\"name\": \"noop\",").content, "");
  ToolParseOutput done = p.Feed(" \"arguments\": {}}</tool_call>");
  ASSERT_EQ(done.calls.size(), 1u);
  EXPECT_TRUE(p.Finish().empty());
}

TEST(ToolCallParserTest, Mistral) {
  auto out = ParseAll(ToolCallFormat::kMistral,
                      "[TOOL_CALLS][{\"name\": \"noop\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                      "\"arguments\": {\"city\": \"a]\\\"}\", \"unit\": \"f\"}}]");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[1].arguments, R"({"city":"a]\"}","unit":"f"})");
  EXPECT_EQ(ParseAll(ToolCallFormat::kMistral, "[TOOL_CALLS] {\"name\": \"noop\", \"arguments\": {}}").calls.size(),
            1u);
  const std::string broken = "x [TOOL_CALLS][{\"name\": \"noop\"}]";
  EXPECT_EQ(ParseAll(ToolCallFormat::kMistral, broken).content, broken);
  EXPECT_EQ(ParseAll(ToolCallFormat::kMistral, "just [TOOL").content, "just [TOOL");
}

TEST(ToolCallParserTest, Llama3Json) {
  auto out = ParseAll(ToolCallFormat::kLlama3Json,
                      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"unit\": "
                      "\"c\"}}; {\"name\": \"noop\", \"parameters\": {}}");
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Rome","unit":"c"})");
  // Only at the very start: JSON later in the text is content, as is a JSON object that is not a call.
  EXPECT_EQ(ParseAll(ToolCallFormat::kLlama3Json, "Sure: {\"name\": \"noop\", \"parameters\": {}}").calls.size(), 0u);
  EXPECT_EQ(ParseAll(ToolCallFormat::kLlama3Json, "{\"a\": 1} and more").content, "{\"a\": 1} and more");
  EXPECT_EQ(ParseAll(ToolCallFormat::kLlama3Json, "\n<|pyt").content, "\n<|pyt");
  EXPECT_EQ(ParseAll(ToolCallFormat::kLlama3Json, "Plain answer.").content, "Plain answer.");
}

TEST(ToolCallParserTest, JsonValueEnd) {
  EXPECT_EQ(FindJsonValueEnd(R"({"a": "}"} x)", 0), 10u);
  EXPECT_EQ(FindJsonValueEnd(R"([{"a": "\""}])", 0), 13u);
  EXPECT_EQ(FindJsonValueEnd(R"({"a": [1, 2)", 0), std::string::npos);
  EXPECT_EQ(FindJsonValueEnd("x{}", 0), std::string::npos);
}

}  // namespace
}  // namespace orca::gateway
