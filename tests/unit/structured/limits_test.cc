// Depth and work limits of the structured-output compilers and matcher (issue 45): every
// depth bomb and budget bomb is a precise InvalidArgument from CompileSpec — the entry point
// of the gateway, the scheduler and the worker alike — never a crash, a hang or a grammar that
// yields empty output; legitimate recursive schemas still compile and match.

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/structured/compile.h"
#include "core/structured/grammar_matcher.h"
#include "core/text/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/structured/test_util.h"

namespace orca::structured {
namespace {

using testing::ByteVocab;
using testing::FullMatch;
using ::testing::HasSubstr;
using testing::RegexSpec;
using testing::SchemaSpec;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// {"type":"object","properties":{"a": ... {"type":"string"} ...}}, `depth` objects deep.
std::string NestedProperties(int depth) {
  return Repeat(R"({"type":"object","properties":{"a":)", depth) + R"({"type":"string"})" + Repeat("}}", depth);
}

std::string NestedItems(int depth) {
  return Repeat(R"({"type":"array","items":)", depth) + R"({"type":"integer"})" + Repeat("}", depth);
}

// $defs d0 .. d{n}: each d{i} is {"$ref": "#/$defs/d{i+1}"} (or, with `fan_out`, an anyOf of two such
// refs), d{n} a string; the root refers to d0.
std::string RefChain(int n, bool fan_out) {
  std::string defs;
  for (int i = 0; i < n; ++i) {
    const std::string ref = absl::StrCat(R"({"$ref":"#/$defs/d)", i + 1, R"("})");
    absl::StrAppend(&defs, "\"d", i, "\":", fan_out ? absl::StrCat(R"({"anyOf":[)", ref, ",", ref, "]}") : ref, ",");
  }
  return absl::StrCat(R"({"$defs":{)", defs, "\"d", n, R"(":{"type":"string"}},"$ref":"#/$defs/d0"})");
}

StructuredOutputSpec ToolCallsSpec(const std::string& schema) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::kToolCalls;
  s.schema = schema;
  s.calls_begin = "<tool_call>\n";
  s.calls_end = "\n</tool_call>";
  s.max_calls = 1;
  return s;
}

StructuredOutputSpec ChoiceSpec(std::vector<std::string> choices) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::kChoice;
  s.choices = std::move(choices);
  return s;
}

struct Bomb {
  const char* name;
  StructuredOutputSpec spec;
  std::vector<std::string> message;  // substrings of the InvalidArgument's message
};

const std::vector<Bomb>& Bombs() {
  static const auto* bombs = new std::vector<Bomb>{
      // Depth bombs from the issue: each killed the gateway (or, sent over gRPC, the worker) by recursion.
      {"SchemaObjectsNested6000Deep",
       SchemaSpec(NestedProperties(6000)),
       {"nesting deeper than 128 levels at properties.a.properties.a.properties.a.<119 more>.a.properties.a ",
        "(arrays and objects may nest at most 128 deep)"}},
      {"SchemaItemsNested20000Deep", SchemaSpec(NestedItems(20000)), {"nesting deeper than 128 levels at items.items"}},
      {"ToolCallSchemaNested20000Deep",
       ToolCallsSpec(NestedProperties(20000)),
       {"tool-call schema", "nesting deeper than 128 levels"}},
      {"RegexWith100000NestedGroups",
       RegexSpec(Repeat("(", 100000) + "a" + Repeat(")", 100000)),
       {"200001 bytes; at most 65536 are accepted"}},
      {"RegexWith20000NestedGroups",
       RegexSpec(Repeat("(", 20000) + "a" + Repeat(")", 20000)),
       {"groups and quantifiers nest deeper than 128 levels (the limit) at offset 128"}},
      {"RegexWith50000StackedQuantifiers",
       RegexSpec("a" + Repeat("*", 50000)),
       {"nest deeper than 128 levels (the limit) at offset 129"}},
      {"SchemaPatternWith20000NestedGroups",
       SchemaSpec(absl::StrCat(R"({"type":"object","properties":{"p":{"type":"string","pattern":")", Repeat("(", 20000),
                               "a", Repeat(")", 20000), R"("}}})")),
       {"JSON Schema keyword 'pattern' at /properties/p", "nest deeper than 128"}},
      // $ref recursion: a chain longer than the matcher's stack compiled by recursion before.
      {"RefChain20000Long", SchemaSpec(RefChain(20000, false)), {"nests more than 128 rule calls"}},
      // $ref cycles that no finite JSON value satisfies: accepted before, and the output was empty.
      {"SelfReference", SchemaSpec(R"({"$ref":"#"})"), {"$ref '#' at the schema root can never end"}},
      {"DefinitionReferringToItself",
       SchemaSpec(R"({"$defs":{"loop":{"$ref":"#/$defs/loop"}},"$ref":"#/$defs/loop"})"),
       {"$ref '#/$defs/loop' at the schema root can never end"}},
      {"RequiredPropertyReferringToItsObject",
       SchemaSpec(R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})"),
       {"$ref '#' at /properties/next can never end"}},
      {"MutuallyRequiredDefinitions",
       SchemaSpec(R"({"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}},"required":["b"]},
                               "b":{"type":"array","items":{"$ref":"#/$defs/a"},"minItems":1}},
                      "$ref":"#/$defs/a"})"),
       {"$ref '#/$defs/a' at the schema root can never end"}},
      {"LoopInAnOptionalBranch",
       SchemaSpec(R"({"$defs":{"loop":{"$ref":"#/$defs/loop"}},
                      "anyOf":[{"type":"string"},{"$ref":"#/$defs/loop"}]})"),
       {"$ref '#/$defs/loop' at /anyOf/1 can never end"}},
      {"LeftRecursion",
       SchemaSpec(R"({"anyOf":[{"$ref":"#"},{"type":"string"}]})"),
       {"$ref '#' at /anyOf/0 recurses into itself before producing any output (left recursion)"}},
      // Budget bombs: work that multiplies.
      {"TwoWayRefChoicesNested20Deep",
       SchemaSpec(RefChain(20, true)),
       {"branches into more than 65536 parser stacks before its first byte"}},
      {"RegexRepetitionsMultiply",
       RegexSpec("((a{1000}){1000}){1000}"),
       {"needs more than 1000000 automaton states (the limit) from offset"}},
      {"ThousandLongStrings",
       SchemaSpec(absl::StrCat(R"({"type":"object","properties":{)",
                               [] {
                                 std::string props;
                                 for (int i = 0; i < 1000; ++i)
                                   absl::StrAppend(&props, i ? "," : "", "\"p", i,
                                                   R"(":{"type":"string","maxLength":4096})");
                                 return props;
                               }(),
                               "}}")),
       {"automaton states (the limit)"}},
      {"ChoicesOverAMegabyte",
       ChoiceSpec(std::vector<std::string>(3, std::string(400000, 'x'))),
       {"1200000 bytes of choices; at most 1048576"}},
      {"SchemaTextOverAMegabyte",
       SchemaSpec(absl::StrCat(R"({"description":")", std::string(1 << 20, 'x'), R"("})")),
       {"the JSON schema is 1048594 bytes; at most 1048576"}},
  };
  return *bombs;
}

class BombTest : public ::testing::TestWithParam<Bomb> {};

TEST_P(BombTest, IsAPreciseInvalidArgument) {
  const Bomb& bomb = GetParam();
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = CompileSpec(bomb.spec);
  ASSERT_FALSE(grammar.ok());
  EXPECT_EQ(grammar.status().code(), absl::StatusCode::kInvalidArgument) << grammar.status();
  for (const std::string& part : bomb.message) EXPECT_THAT(grammar.status().message(), HasSubstr(part));
  EXPECT_LT(grammar.status().message().size(), 1200u) << "messages quote long input by its two ends";
}

TEST_P(BombTest, TheWorkersMatcherFactoryRefusesItToo) {
  MatcherFactory factory(ByteVocab());
  absl::StatusOr<std::unique_ptr<GrammarMatcher>> matcher = factory.NewMatcher(GetParam().spec);
  ASSERT_FALSE(matcher.ok());
  EXPECT_EQ(matcher.status().code(), absl::StatusCode::kInvalidArgument) << matcher.status();
}

INSTANTIATE_TEST_SUITE_P(Limits, BombTest, ::testing::ValuesIn(Bombs()),
                         [](const auto& info) { return std::string(info.param.name); });

struct Legit {
  const char* name;
  StructuredOutputSpec spec;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

class LegitTest : public ::testing::TestWithParam<Legit> {};

TEST_P(LegitTest, CompilesAndMatches) {
  const Legit& c = GetParam();
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = CompileSpec(c.spec);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  for (const std::string& text : c.accept) EXPECT_TRUE(FullMatch(*grammar, text)) << text;
  for (const std::string& text : c.reject) EXPECT_FALSE(FullMatch(*grammar, text)) << text;
}

INSTANTIATE_TEST_SUITE_P(
    Limits, LegitTest,
    ::testing::ValuesIn(std::vector<Legit>{
        {"TreeWithAnArrayOfChildren",
         SchemaSpec(R"({"type":"object","properties":{"value":{"type":"integer"},
                        "children":{"type":"array","items":{"$ref":"#"}}},"required":["value"]})"),
         {R"({"value":1})", R"({"value":1,"children":[{"value":2},{"value":3,"children":[]}]})"},
         {R"({"children":[]})", R"({"value":1,"children":[{}]})"}},
        {"LinkedListWithAnOptionalNext",
         SchemaSpec(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                        "next":{"$ref":"#/$defs/node"}},"required":["v"]}},"$ref":"#/$defs/node"})"),
         {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})"},
         {R"({"v":1,"next":{}})"}},
        {"NestedArraysOrIntegers",
         SchemaSpec(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]})"),
         {"1", "[]", "[1,[2,[3]],[]]", Repeat("[", 40) + Repeat("]", 40)},
         {"[1,]", "\"x\""}},
        {"Objects60Deep", SchemaSpec(NestedProperties(60)), {Repeat(R"({"a":)", 60) + "\"x\"" + Repeat("}", 60)}, {}},
        {"RefChain100Long", SchemaSpec(RefChain(100, false)), {"\"x\""}, {"1"}},
        {"TwoWayRefChoicesNested10Deep", SchemaSpec(RefChain(10, true)), {"\"x\""}, {"1"}},
        {"Regex100NestedGroups", RegexSpec(Repeat("(", 100) + "ab" + Repeat(")", 100) + "+"), {"ab", "abab"}, {"a"}},
        {"RegexBoundedRepetition",
         RegexSpec("(ab{1,20}){1,20}"),
         {"ab", "abbbab", Repeat("ab", 20)},
         {"b", Repeat("ab", 21)}},
    }),
    [](const auto& info) { return std::string(info.param.name); });

// A legal grammar that recurses as deep as the input asks: the matcher's stacks stop at kMaxStackDepth
// frames (the next '[' is refused), without recursion of its own (a property check: it held before).
TEST(MatcherLimitsTest, RecursionDeeperThanTheStackCapIsRefusedNotFollowed) {
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar =
      CompileSpec(SchemaSpec(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#"}}]})"));
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarRuntime runtime(*grammar, ByteVocab());
  GrammarRuntime::StateSet states = runtime.Initial();
  int opened = 0;
  while (opened < 1000) {
    GrammarRuntime::StateSet next = runtime.Advance(states, '[');
    if (next.empty()) break;
    states = std::move(next);
    ++opened;
  }
  EXPECT_GT(opened, 50);
  EXPECT_LE(opened, GrammarRuntime::kMaxStackDepth);
  // The innermost array is then empty: the stack has no frame left for an item.
  EXPECT_TRUE(GrammarRuntime::CanEnd(runtime.AdvanceBytes(states, std::string(opened, ']'))));
}

// The vocabulary trie is walked with an explicit stack: a token as long as a model file may make one
// (200,000 bytes) recursed once per byte before.
TEST(MatcherLimitsTest, AVeryLongTokenIsWalkedWithoutRecursion) {
  std::vector<std::string> tokens = {"a", "b", std::string(200000, 'a')};
  tokens.emplace_back();  // EOS
  auto vocab = TokenVocabulary::FromBytes(std::move(tokens), {3});
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = CompileSpec(RegexSpec("a*"));
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto runtime = std::make_shared<GrammarRuntime>(*grammar, vocab);
  GrammarMatcher matcher(runtime, {});
  std::shared_ptr<const TokenMask> mask = matcher.CurrentMask();
  ASSERT_NE(mask, nullptr);
  EXPECT_TRUE(mask->Test(0));
  EXPECT_FALSE(mask->Test(1));
  EXPECT_TRUE(mask->Test(2));
}

// A grammar may pass the per-rule check yet fan out after a byte (a choice between many rules, each
// with many alternatives): the matcher explores at most kMaxStepNodes stacks for that byte and keeps
// what it found; every continuation it offers is still valid.
TEST(MatcherLimitsTest, OneStepExploresAtMostTheStepBudget) {
  GrammarBuilder b;
  const Rule wide = b.NewRule();
  std::vector<Fragment> letters;
  for (int i = 0; i < 1000; ++i) letters.push_back(b.Bytes('a', 'z'));
  b.DefineRule(wide, b.Alt(letters));
  std::vector<Fragment> calls;
  for (int i = 0; i < 400; ++i) calls.push_back(b.Call(wide));
  const Rule root = b.NewRule();
  b.DefineRule(root, b.Seq(b.Literal("x"), b.Alt(calls)));
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = b.Finish(root);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarRuntime runtime(*grammar, ByteVocab());
  GrammarRuntime::StateSet after_x = runtime.Advance(runtime.Initial(), 'x');
  EXPECT_GT(runtime.stats().closure_cuts, 0);
  ASSERT_FALSE(after_x.empty());
  EXPECT_LE(static_cast<int64_t>(after_x.size()), kMaxStepNodes);
  EXPECT_TRUE(GrammarRuntime::CanEnd(runtime.Advance(after_x, 'q')));
}

// The cache of compiled grammars is bounded by their states, not only by their count: 256 grammars of the
// maximum size would be 25 GB.
TEST(GrammarCacheLimitsTest, KeepsAtMostItsStateBudgetAndNeverAnOversizedGrammar) {
  const StructuredOutputSpec a = RegexSpec("a{400}"), b = RegexSpec("b{400}"), c = RegexSpec("c{400}");
  absl::StatusOr<std::shared_ptr<const Grammar>> one = CompileSpec(a);
  ASSERT_TRUE(one.ok());
  const int64_t size = static_cast<int64_t>((*one)->states().size());
  GrammarCache cache(/*capacity=*/256, /*max_states=*/2 * size + size / 2);  // room for two
  ASSERT_TRUE(cache.Get(a).ok());
  ASSERT_TRUE(cache.Get(b).ok());
  ASSERT_TRUE(cache.Get(c).ok());  // evicts a, the least recently used
  EXPECT_EQ(cache.misses(), 3);
  ASSERT_TRUE(cache.Get(c).ok());
  ASSERT_TRUE(cache.Get(b).ok());
  EXPECT_EQ(cache.hits(), 2);
  ASSERT_TRUE(cache.Get(a).ok());
  EXPECT_EQ(cache.misses(), 4);

  GrammarCache small(/*capacity=*/256, /*max_states=*/size / 2);
  ASSERT_TRUE(small.Get(a).ok());
  ASSERT_TRUE(small.Get(a).ok());  // compiled again: too big to keep
  EXPECT_EQ(small.misses(), 2);
  EXPECT_EQ(small.hits(), 0);
}

// Over GPT-2's real 50k vocabulary (../shared/models/tiny-gpt2; skipped without it): realistic grammars
// stay far inside the per-mask budget along random generations, and a grammar built to explode is cut.
class Gpt2BudgetTest : public ::testing::Test {
 protected:
  static std::string Dir() {
    const char* s = std::getenv("ORCA_SHARED_DIR");
    return std::string(s ? s : "../shared") + "/models/tiny-gpt2";
  }
  void SetUp() override {
    struct stat st {};
    if (::stat((Dir() + "/tokenizer.json").c_str(), &st) != 0) GTEST_SKIP() << "no " << Dir();
    static const std::shared_ptr<const TokenVocabulary>* vocab = [] {
      auto tok = text::Tokenizer::Load(Dir());
      EXPECT_TRUE(tok.ok()) << tok.status();
      auto v = TokenVocabulary::FromTokenizer(**tok);
      EXPECT_TRUE(v.ok()) << v.status();
      return new std::shared_ptr<const TokenVocabulary>(*v);
    }();
    vocab_ = *vocab;
  }
  std::shared_ptr<const TokenVocabulary> vocab_;
};

TEST_F(Gpt2BudgetTest, RealisticGrammarsStayFarInsideTheMaskBudget) {
  const std::vector<StructuredOutputSpec> specs = {
      SchemaSpec(R"({"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},
        "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":4},
        "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string",
        "pattern":"[0-9]{5}"}},"required":["city","zip"]}},"required":["name","age","address"]})"),
      SchemaSpec(R"({"type":"object","properties":{"value":{"type":"number"},
        "children":{"type":"array","items":{"$ref":"#"}}},"required":["value"]})"),
      SchemaSpec("{}"),
      RegexSpec("[A-Z][a-z]{2,12}( [A-Z][a-z]{2,12}){0,3}, [0-9]{1,5} [a-z ]{3,30}"),
  };
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(i);
    MatcherFactory factory(vocab_);
    absl::StatusOr<std::unique_ptr<GrammarMatcher>> matcher = factory.NewMatcher(specs[i]);
    ASSERT_TRUE(matcher.ok()) << matcher.status();
    int64_t most = 0;
    for (int step = 0; step < 120 && !(*matcher)->terminated(); ++step) {
      const int64_t before = factory.stats().closure_nodes;
      std::shared_ptr<const TokenMask> mask = (*matcher)->CurrentMask();
      most = std::max(most, factory.stats().closure_nodes - before);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab_->vocab_size(); ++id)
        if (mask->Test(id)) allowed.push_back(id);
      if (allowed.empty()) break;
      ASSERT_TRUE((*matcher)->Accept(allowed[rng() % allowed.size()]).ok());
    }
    EXPECT_EQ(factory.stats().mask_cuts, 0);
    EXPECT_EQ(factory.stats().closure_cuts, 0);
    EXPECT_LT(most, kMaxMaskNodes / 8);
    std::printf("spec %zu: at most %lld parser stacks explored for one mask (budget %lld)\n", i,
                static_cast<long long>(most), static_cast<long long>(kMaxMaskNodes));
  }
}

TEST_F(Gpt2BudgetTest, AMaskThatWouldExploreBillionsOfStacksStopsAtTheBudget) {
  MatcherFactory factory(vocab_);
  absl::StatusOr<std::unique_ptr<GrammarMatcher>> matcher = factory.NewMatcher(RegexSpec("(.{1,100}){1,100}"));
  ASSERT_TRUE(matcher.ok()) << matcher.status();
  int32_t a = -1;
  for (int32_t id = 0; id < vocab_->vocab_size() && a < 0; ++id)
    if (vocab_->bytes(id) == "a") a = id;
  ASSERT_GE(a, 0);
  // After 150 characters the live positions spread over the whole automaton: every byte of every token
  // now costs tens of thousands of stacks.
  for (int i = 0; i < 150; ++i) ASSERT_TRUE((*matcher)->Accept(a).ok());
  const GrammarRuntime::Stats before = factory.stats();
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const TokenMask> mask = (*matcher)->CurrentMask();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const GrammarRuntime::Stats after = factory.stats();
  std::printf("the cut mask: %lld parser stacks in %.1f ms (reported, not asserted)\n",
              static_cast<long long>(after.closure_nodes - before.closure_nodes),
              std::chrono::duration<double, std::milli>(elapsed).count());
  EXPECT_EQ(after.mask_cuts - before.mask_cuts, 1);
  EXPECT_LE(after.closure_nodes - before.closure_nodes, kMaxMaskNodes + kMaxStepNodes);
  EXPECT_GT(mask->allowed, 0);  // what was found before the cut is offered
}

}  // namespace
}  // namespace orca::structured
