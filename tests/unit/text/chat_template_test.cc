#include "core/text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace orca::text {
namespace {

std::string Render(const std::string& source, ChatTemplateInputs inputs = {}) {
  auto t = ChatTemplate::FromSource(source);
  if (!t.ok()) return "PARSE ERROR: " + std::string(t.status().message());
  auto out = (*t)->Render(inputs);
  if (!out.ok()) return "RENDER ERROR: " + std::string(out.status().message());
  return *out;
}

ChatTemplateInputs Conversation() {
  ChatTemplateInputs in;
  in.messages = {{"system", "sys"}, {"user", "hi"}, {"assistant", "yo"}};
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  return in;
}

TEST(JinjaTest, SyntaxErrorsCarryLineAndColumn) {
  auto t = ChatTemplate::FromSource("ok\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(t.status().message()).find("line 3, column 10"), std::string::npos) << t.status();

  auto unclosed = ChatTemplate::FromSource("{% for m in messages %}{{ m }}");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(std::string(unclosed.status().message()).find("endfor"), std::string::npos) << unclosed.status();

  auto bad_tag = ChatTemplate::FromSource("a\n  {% include 'x' %}");
  ASSERT_FALSE(bad_tag.ok());
  EXPECT_NE(std::string(bad_tag.status().message()).find("line 2, column 6: unsupported statement 'include'"),
            std::string::npos)
      << bad_tag.status();

  EXPECT_FALSE(ChatTemplate::FromSource("{{ 'unterminated }}").ok());
  EXPECT_FALSE(ChatTemplate::FromSource("{% endif %}").ok());

  // Found by the chat template fuzzer: an index past int64 aborted the process.
  auto huge_index = ChatTemplate::FromSource("{{ loop.22222222222222222222222222222last }}");
  ASSERT_FALSE(huge_index.ok());
  EXPECT_NE(std::string(huge_index.status().message()).find("index out of range"), std::string::npos)
      << huge_index.status();
}

TEST(JinjaTest, RuntimeErrorsCarryPositionAndRaiseException) {
  EXPECT_EQ(Render("{{ x | nosuchfilter }}"),
            "RENDER ERROR: chat template: line 1, column 6: unknown filter 'nosuchfilter'");
  EXPECT_EQ(Render("\n {{ raise_exception('bad role') }}"),
            "RENDER ERROR: chat template: line 2, column 5: template error: bad role");
  EXPECT_NE(Render("{{ 1 + 'a' }}").find("unsupported operand types for +"), std::string::npos);
  EXPECT_NE(Render("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
}

TEST(JinjaTest, LoopsExposeLoopVariables) {
  EXPECT_EQ(Render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.length }}"
                   "{{ 'F' if loop.first }}{{ 'L' if loop.last }}{{ loop.revindex }};{% endfor %}",
                   Conversation()),
            "103F3;2132;323L1;");
  EXPECT_EQ(Render("{% for m in messages if m.role != 'system' %}{{ loop.index }}={{ m.content }} {% endfor %}",
                   Conversation()),
            "1=hi 2=yo ");
  EXPECT_EQ(Render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "a1b2");
  EXPECT_EQ(Render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(Render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "13");
  // set inside a loop does not leak; namespace() does.
  EXPECT_EQ(Render("{% set a = 1 %}{% set ns = namespace(b=1) %}{% for x in [5] %}{% set a = x %}{% set ns.b = x %}"
                   "{% endfor %}{{ a }}{{ ns.b }}"),
            "15");
}

TEST(JinjaTest, WhitespaceControlAndHfBlockTrimming) {
  EXPECT_EQ(Render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(Render("a\n  {%- if true %}\nb{% endif -%}\n  c"), "abc");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it.
  EXPECT_EQ(Render("{% if true %}\n    x\n    {% endif %}\ny\n"), "    x\ny");
  EXPECT_EQ(Render("{# comment #}\nz"), "z");
  EXPECT_EQ(Render("{{ 'v' }}\nw"), "v\nw");  // no trimming after expressions
}

TEST(JinjaTest, ExpressionsFiltersAndMethods) {
  EXPECT_EQ(Render("{{ [1,2,3,4][::-1] }} {{ 'hello'[1:3] }} {{ [1,2,3][-1] }}"), "[4, 3, 2, 1] el 3");
  EXPECT_EQ(Render("{{ '  Hi There ' | trim | upper }} {{ 'x' ~ 1 ~ 2.5 }} {{ 'ab' * 2 }}"), "HI THERE x12.5 abab");
  EXPECT_EQ(Render("{{ {'a': [1, 'é'], 'b': none} | tojson }}"), "{\"a\": [1, \"é\"], \"b\": null}");
  EXPECT_EQ(Render("{{ {'a': 1} | tojson(indent=2) }}"), "{\n  \"a\": 1\n}");
  EXPECT_EQ(Render("{{ 'a-b-c'.split('-') | join('+') }} {{ ' x '.strip() }}|{{ 'xxhixx'.strip('x') }}"), "a+b+c x|hi");
  EXPECT_EQ(Render("{{ 'Hello'.startswith(('He', 'x')) }} {{ 'abc'.endswith('bc') }} {{ 'hello world'.title() }}"),
            "True True Hello World");
  EXPECT_EQ(Render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ none is none }} {{ x is defined }}"),
            "d e True False");
  EXPECT_EQ(Render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
                   Conversation()),
            "['hi']");
  EXPECT_EQ(Render("{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}", Conversation()), "2");
  EXPECT_EQ(Render("{{ 'a\nb' | indent(2, true) }}"), "  a\n  b");
  EXPECT_EQ(Render("{{ '7' | int + 1 }} {{ 3.7 | int }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}"), "8 3 -4 2 1024");
  EXPECT_EQ(Render("{{ 1 if 2 > 1 and not false else 0 }}{{ 'b' in ['a', 'b'] }}{{ 'z' not in 'abc' }}"), "1TrueTrue");
  EXPECT_EQ(Render("{{ {'k': 1}.get('k') }}{{ {'k': 1}.get('q', 9) }}{{ {'a': 1}.keys() | list }}"), "19['a']");
  EXPECT_EQ(Render("{{ range(3) | list }} {{ range(1, 7, 2) | join(',') }}"), "[0, 1, 2] 1,3,5");
  EXPECT_EQ(Render("{{ 'ÉCOLE' | lower }} {{ 'straße' | upper }} {{ 'ab' | capitalize }}"), "école STRASSE Ab");
}

TEST(JinjaTest, MacrosAndSetBlocks) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', punct='?') }}"),
            "Hi A! Hi B?");
  EXPECT_EQ(Render("{% set block %}in{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[in2]");
}

TEST(JinjaTest, ExtraVariablesKeepJsonTypes) {
  ChatTemplateInputs in;
  in.extra = {{"enable_thinking", "false"}, {"name", "plain text"}, {"tools", "[{\"n\": 1}]"}};
  EXPECT_EQ(Render("{{ enable_thinking is false }} {{ name }} {{ tools[0].n }}", in), "True plain text 1");
}

TEST(ChatTemplateTest, BuiltinsRender) {
  ChatTemplateInputs in = Conversation();
  auto chatml = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(*(*chatml)->Render(in),
            "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto llama3 = ChatTemplate::Builtin("llama3");
  ASSERT_TRUE(llama3.ok());
  in.add_generation_prompt = false;
  EXPECT_EQ(*(*llama3)->Render(in),
            "<s><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>");
  auto llama2 = ChatTemplate::Builtin("llama2");
  ASSERT_TRUE(llama2.ok());
  EXPECT_EQ(*(*llama2)->Render(in), "<s>[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST] yo </s>");
  EXPECT_TRUE(absl::IsNotFound(ChatTemplate::Builtin("nope").status()));
}

TEST(ChatTemplateTest, FromModelReadsStringOrNamedListAndReportsMissing) {
  const auto dir = std::filesystem::temp_directory_path() / ("orca_chat_template_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& text) { std::ofstream(dir / "tokenizer_config.json") << text; };
  write(R"({"chat_template": "A{{ messages | length }}"})");
  auto t = ChatTemplate::FromModel(dir.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Render(Conversation()), "A3");
  write(R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  t = ChatTemplate::FromModel(dir.string());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->source(), "D");
  write(R"({"bos_token": "<s>"})");
  EXPECT_TRUE(absl::IsNotFound(ChatTemplate::FromModel(dir.string()).status()));
  write(R"({"chat_template": 5})");
  EXPECT_EQ(ChatTemplate::FromModel(dir.string()).status().code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orca::text

namespace orca::text {
namespace {

TEST(JinjaTest, HostileTemplatesFailCleanly) {
  EXPECT_NE(Render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  std::string deep_if;
  for (int i = 0; i < 3000; ++i) deep_if += "{% if true %}";
  EXPECT_NE(Render(deep_if).find("nested too deeply"), std::string::npos);
  EXPECT_NE(Render("{{ " + std::string(5000, '-') + "1 }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("max_call_depth (100)"),
            std::string::npos);
  EXPECT_NE(Render("{{ range(100000000) | length }}").find("range()"), std::string::npos);
}

// A conversation with a tool: the user asks, the assistant calls it (content null), the tool answers.
ChatTemplateInputs ToolConversation() {
  ChatTemplateInputs in;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.tools_json = R"([{"type":"function","function":{"name":"get_weather","description":"Weather in a city",)"
                  R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";
  ChatMessage user{"user", "Weather in Oslo?"};
  ChatMessage call{"assistant", ""};
  call.content_is_null = true;
  call.tool_calls_json =
      R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Oslo"}}}])";
  ChatMessage result{"tool", "-3 C"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  in.messages = {user, call, result};
  return in;
}

TEST(ChatTemplateToolsTest, BuiltinChatmlRendersToolsCallsAndResultsHermesStyle) {
  auto chatml = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(chatml.ok());
  absl::StatusOr<std::string> out = (*chatml)->Render(ToolConversation());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|im_start|>system\n# Tools\n\nThese functions are available (JSON Schema signatures inside "
            "<tools></tools>):\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", )"
            R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"
            "\n</tools>\n\nTo call functions, answer with one block per call:\n<tool_call>\n{\"name\": <function "
            "name>, \"arguments\": <arguments object>}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>tool\n<tool_response>\n-3 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
  // Without tools the built-in is plain ChatML, as before.
  ChatTemplateInputs plain = Conversation();
  EXPECT_EQ(*(*chatml)->Render(plain).value().begin(), '<');
  EXPECT_EQ((*chatml)->Render(plain)->find("# Tools"), std::string::npos);
}

TEST(ChatTemplateToolsTest, BuiltinLlama3RendersJsonCallsAndIpythonResults) {
  auto llama3 = ChatTemplate::Builtin("llama3");
  ASSERT_TRUE(llama3.ok());
  absl::StatusOr<std::string> out = (*llama3)->Render(ToolConversation());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("The functions:\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
                      "\"get_weather\""),
            std::string::npos)
      << *out;
  EXPECT_NE(out->find("Weather in Oslo?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": "
                      "\"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"
                      "<|start_header_id|>ipython<|end_header_id|>\n\n-3 C<|eot_id|>"),
            std::string::npos)
      << *out;
}

// Templates written the way the families' published formats describe (not copies of their files), to check
// that what they read of a message reaches them: tools, tool_calls (arguments as an object), None content,
// tool_call_id and name.
TEST(ChatTemplateToolsTest, FamilyStyleTemplatesSeeEveryToolField) {
  const std::string mistral_style =
      "{{ bos_token }}{% for m in messages %}"
      "{% if m.role == 'user' %}{% if loop.last or tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]"
      "{% endif %}[INST]{{ m.content }}[/INST]"
      "{% elif m.role == 'assistant' and m.tool_calls %}[TOOL_CALLS][{% for c in m.tool_calls %}"
      "{{ {'name': c.function.name, 'arguments': c.function.arguments, 'id': c.id} | tojson }}"
      "{% endfor %}]{{ eos_token }}"
      "{% elif m.role == 'tool' %}[TOOL_RESULTS]{{ {'content': m.content, 'call_id': m.tool_call_id} | tojson }}"
      "[/TOOL_RESULTS]{% endif %}{% endfor %}";
  EXPECT_EQ(Render(mistral_style, ToolConversation()),
            "<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
            "\"Weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
            "\"string\"}}, \"required\": [\"city\"]}}}][/AVAILABLE_TOOLS][INST]Weather in Oslo?[/INST]"
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"call_1\"}]</s>"
            "[TOOL_RESULTS]{\"content\": \"-3 C\", \"call_id\": \"call_1\"}[/TOOL_RESULTS]");
  const std::string hermes_style =
      "{% for m in messages %}{% if m.content is none %}(none){% endif %}"
      "{% if m.role == 'tool' %}<tool_response>{{ m.name }}#{{ m.tool_call_id }}:{{ m.content }}</tool_response>"
      "{% elif m.tool_calls is defined %}{% for c in m.tool_calls %}<tool_call>{{ c.function.arguments.city }}"
      "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
      "{% if tools is not defined %}no tools{% endif %}";
  EXPECT_EQ(Render(hermes_style, ToolConversation()),
            "Weather in Oslo?(none)<tool_call>Oslo</tool_call><tool_response>get_weather#call_1:-3 C</tool_response>");
  ChatTemplateInputs no_tools = ToolConversation();
  no_tools.tools_json.clear();
  EXPECT_NE(Render(hermes_style, no_tools).find("no tools"), std::string::npos);
}

}  // namespace
}  // namespace orca::text
