// Depth bombs against the gateway (issue 45): one authenticated ~40 KB request nested 20,000 deep
// killed the gateway by recursion (or hung it for a minute). Bodies are now refused while they are
// parsed, above 128 levels, with the JSON path of the value that nests too deep; JSON inside string
// fields (guided_json, tool-call arguments, a model's tool-call output) gets the same limit; and the
// structured-output compilers refuse deep schemas and regexes built any other way.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/api_error.h"
#include "services/gateway/openai_request.h"
#include "services/gateway/structured_output_request.h"
#include "services/gateway/tool_call_parser.h"
#include "services/gateway/tool_call_request.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// {"type":"object","properties":{"a": ... {"type":"string"} ...}}, `depth` schema levels (2 JSON levels each).
std::string NestedSchema(int depth) {
  return Repeat(R"({"type":"object","properties":{"a":)", depth) + R"({"type":"string"})" + Repeat("}}", depth);
}

std::string Chat(const std::string& extra) {
  return absl::StrCat(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4)", extra.empty() ? "" : ",", extra,
                      "}");
}

std::string Tools(const std::string& parameters) {
  return absl::StrCat(R"("tools":[{"type":"function","function":{"name":"f","parameters":)", parameters, "}}]");
}

struct DeepBody {
  const char* name;
  std::string body;
  std::string message;  // a substring of the 400's message
};

// The issue's bombs, and the boundary: 128 levels pass, 129 do not.
const std::vector<DeepBody>& DeepBodies() {
  static const auto* cases = new std::vector<DeepBody>{
      {"ChatTemplateKwargs20000Deep",
       Chat(absl::StrCat(R"("chat_template_kwargs":)", Repeat(R"({"a":)", 20000), "1", Repeat("}", 20000))),
       "Invalid JSON body: nesting deeper than 128 levels at chat_template_kwargs.a.a.a.a.a.<119 more>.a.a.a "
       "(arrays and objects may nest at most 128 deep)"},
      {"ToolParameters20000Deep", Chat(absl::StrCat(Tools(NestedSchema(10000)), R"(,"tool_choice":"required")")),
       "nesting deeper than 128 levels at tools[0].function.parameters.properties.a.<"},
      {"ResponseFormatSchema6000Deep",
       Chat(absl::StrCat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)",
                         NestedSchema(3000), "}}")),
       "nesting deeper than 128 levels at response_format.json_schema.schema.properties.a.properties.<"},
      {"MessageContentArrays20000Deep",
       absl::StrCat(R"({"messages":[{"role":"user","content":)", Repeat("[", 20000), Repeat("]", 20000), "}]}"),
       "nesting deeper than 128 levels at messages[0].content[0][0][0].<119 more>[0][0][0] "},
      {"OddKeysAreQuotedAndShortened",
       absl::StrCat(R"({"a b":)", Repeat(absl::StrCat("{\"", std::string(100, 'k'), "\":"), 200), "1", Repeat("}", 200),
                    "}"),
       R"(at ["a b"]["kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk..."]["kkk)"},
      {"OneLevelTooDeep", absl::StrCat(Repeat(R"({"a":)", 128), "[]", Repeat("}", 128)),
       "nesting deeper than 128 levels at a.a.a.a.a.a.<119 more>.a.a.a "},
  };
  return *cases;
}

class DeepBodyTest : public ::testing::TestWithParam<DeepBody> {};

TEST_P(DeepBodyTest, ParseJsonObjectRefusesItWithThePathAndTheLimit) {
  absl::StatusOr<json> body = ParseJsonObject(GetParam().body);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(body.status().message(), HasSubstr(GetParam().message));
  EXPECT_LT(body.status().message().size(), 600u);
}

INSTANTIATE_TEST_SUITE_P(JsonDepth, DeepBodyTest, ::testing::ValuesIn(DeepBodies()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(JsonDepthTest, ExactlyTheLimitIsAccepted) {
  absl::StatusOr<json> body = ParseJsonObject(absl::StrCat(Repeat(R"({"a":)", 127), "[]", Repeat("}", 127)));
  ASSERT_TRUE(body.ok()) << body.status();
  absl::StatusOr<json> messages = ParseJsonObject(
      absl::StrCat(R"({"messages":[{"role":"user","content":)", Repeat("[", 125), Repeat("]", 125), "}]}"));
  EXPECT_TRUE(messages.ok()) << messages.status();
}

TEST(JsonDepthTest, SyntaxErrorsKeepTheirPosition) {
  absl::StatusOr<json> body = ParseJsonObject(R"({"prompt": "x",)");
  ASSERT_FALSE(body.ok());
  EXPECT_THAT(body.status().message(), HasSubstr("Invalid JSON body: parse error at line 1, column 16"));
  EXPECT_THAT(ParseJsonObject("[1]").status().message(), HasSubstr("Request body must be a JSON object"));
}

// Fields that hold JSON or a regex as a string escape the body's limit: each is limited where it is read.
TEST(JsonDepthTest, StringFieldsHoldingDeepJsonOrRegexAreRefused) {
  struct Case {
    const char* name;
    json body;
    const char* param;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"GuidedJsonAsAString20000Deep",
       {{"guided_json", NestedSchema(10000)}},
       "guided_json",
       "'guided_json' is a string but not JSON: nesting deeper than 128 levels at properties.a.properties"},
      {"GuidedRegexWith100000NestedGroups",
       {{"guided_regex", Repeat("(", 100000) + "a" + Repeat(")", 100000)}},
       "guided_regex",
       "'guided_regex' cannot be enforced: regex: the pattern is 200001 bytes; at most 65536"},
      {"GuidedRegexWith20000NestedGroups",
       {{"guided_regex", Repeat("(", 20000) + "a" + Repeat(")", 20000)}},
       "guided_regex",
       "regex: groups and quantifiers nest deeper than 128 levels (the limit) at offset 128"},
      // A DOM that did not come through ParseJsonObject (6,000 levels: deep, yet within reach of dump()'s
      // recursion on a test thread): the compiler's own parse refuses the schema text.
      {"ResponseFormatSchemaDom3000Deep",
       {{"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", json::parse(NestedSchema(3000))}}}}}},
       "response_format",
       "cannot be enforced: the JSON schema is not valid JSON: nesting deeper than 128 levels"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    StructuredOutputSpec spec;
    absl::Status status = ParseStructuredOutput(c.body, &spec);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_EQ(ApiError::FromStatus(status).param, c.param);
  }
}

// The tool path: a parameters DOM 6,000 deep (the issue's 20,000-deep tool schema hung the request for
// over a minute, then crashed) is a prompt 400 naming the tool.
TEST(JsonDepthTest, ADeepToolSchemaIsAPromptError) {
  json body = json::parse(absl::StrCat("{", Tools(NestedSchema(3000)), R"(,"tool_choice":"required"})"));
  ToolsRequest tools;
  ASSERT_TRUE(ParseToolsRequest(body, &tools).ok());
  absl::StatusOr<StructuredOutputSpec> spec = ToolCallConstraint(tools, ToolCallFormat::kHermes);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("'tools[0].function.parameters' cannot be enforced"));
  EXPECT_THAT(spec.status().message(), HasSubstr("nesting deeper than 128 levels"));
}

// A model can be made to print a value nested a million deep: the tool-call parser must not recurse
// over it (it dumped the arguments recursively); it is content, not a call.
TEST(JsonDepthTest, DeepToolCallOutputIsContentNotACrash) {
  ToolCallParser parser(ToolCallFormat::kHermes, {"f"});
  const std::string deep = Repeat("[", 200000) + Repeat("]", 200000);
  const std::string output =
      absl::StrCat("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", deep, "}}\n</tool_call>");
  ToolParseOutput first = parser.Feed(output);
  ToolParseOutput rest = parser.Finish();
  EXPECT_FALSE(parser.produced_calls());
  EXPECT_TRUE(first.calls.empty());
  EXPECT_EQ(first.content + rest.content, output);

  ToolCallParser strings(ToolCallFormat::kHermes, {"f"});
  const std::string as_string =
      absl::StrCat("<tool_call>\n{\"name\": \"f\", \"arguments\": \"", Repeat("[", 200000), "\"}\n</tool_call>");
  strings.Feed(as_string);
  strings.Finish();
  EXPECT_FALSE(strings.produced_calls());
}

// The whole gateway: each bomb is a 400 naming the path, and the gateway goes on serving.
TEST(JsonDepthHttpTest, DepthBombsAreRefusedAndTheGatewayKeepsServing) {
  GatewayFixture f;
  struct Case {
    const char* name;
    std::string body;
    int status;
    std::string message;  // a substring of the error's message
  };
  std::vector<Case> cases;
  for (const DeepBody& d : DeepBodies()) cases.push_back({d.name, d.body, 400, d.message});
  cases.push_back({"GuidedRegexWith100000NestedGroups",
                   Chat(absl::StrCat(R"("guided_regex":")", Repeat("(", 100000), "a", Repeat(")", 100000), "\"")), 400,
                   "at most 65536"});
  cases.push_back({"GuidedJsonStringNested10000Deep",
                   Chat(absl::StrCat(R"("guided_json":)", json(NestedSchema(10000)).dump())), 400,
                   "nesting deeper than 128 levels"});
  // A $ref cycle no finite value satisfies: accepted before, and the output was empty.
  cases.push_back({"SelfReferencingSchema",
                   Chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)"
                        R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}}})"),
                   400, "JSON Schema $ref '#' at /properties/next can never end"});
  // An earlier assistant turn whose tool-call arguments (a string) nest 100,000 deep: kept as the string and
  // rendered into the prompt (which is then too long for this 1,024-token model: the 400 comes after rendering).
  cases.push_back({"AssistantToolCallArguments100000Deep",
                   absl::StrCat(R"({"max_tokens":2,"messages":[{"role":"user","content":"hi"},)",
                                R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)",
                                R"("function":{"name":"f","arguments":")", Repeat("[", 100000), Repeat("]", 100000),
                                R"("}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]})"),
                   400, "maximum context length is 1024 tokens"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HttpResult r = f.Client().Request("POST", "/v1/chat/completions", c.body);
    ASSERT_EQ(r.status, c.status) << r.body.substr(0, 400);
    EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr(c.message));
    HttpResult ok = f.Client().Request("POST", "/v1/chat/completions", Chat(""));
    ASSERT_EQ(ok.status, 200) << ok.body;
  }
}

}  // namespace
}  // namespace orca::gateway::testing
