// JSON Schema -> grammar: accept/reject tables of whole texts per schema, and
// the refused keywords' errors (keyword and JSON pointer named).

#include <string>
#include <vector>

#include "core/structured/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/structured/test_util.h"

namespace orca::structured {
namespace {

using testing::FullMatch;
using testing::SchemaSpec;

struct SchemaCase {
  const char* name;
  std::string schema;  // empty: JSON mode (any object)
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

const std::vector<SchemaCase>& Cases() {
  static const auto* cases = new std::vector<SchemaCase>{
      {"JsonMode",
       "",
       {"{}", R"({"a":[1,2,{"b":null}],"c":"x"})", "{ \"a\": true }", "{\n  \"a\": -1.5e3\n}"},
       {"[]", "1", "\"x\"", R"({"a":})", "{  \"a\":1}", "{\n\n\"a\":1}", " {}", "{} ", R"({"a":1,})", R"({'a':1})"}},
      {"RequiredAndOptionalInOrder",
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
           "required":["name"],"additionalProperties":false})",
       {R"({"name":"Bob"})", R"({"name":"Bob","age":3})", R"({"name": "B\"o\u00e9", "age": -12})",
        "{\n  \"name\": \"x\"\n}"},
       {"{}", R"({"age":3})", R"({"age":3,"name":"a"})", R"({"name":"a","extra":1})", R"({"name":1})",
        R"({"name":"a",})", R"({"name":"a","age":1.5})", R"({"name":"a","age":01})", R"({"name":"a\q"})",
        "{\"name\":\"a\nb\"}"}},
      {"AllOptional",
       R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}}})",
       {"{}", R"({"a":true})", R"({"b":null})", R"({"a":false,"b":null})"},
       {R"({"b":null,"a":true})", R"({,"b":null})", R"({"c":1})"}},
      {"EnumConstAndTypeArray",
       R"({"type":"object","properties":{"color":{"enum":["red","green",1,null]},"k":{"const":"v"},
           "t":{"type":["string","null"]}},"required":["color","k","t"]})",
       {R"({"color":"red","k":"v","t":null})", R"({"color":1,"k":"v","t":"x"})", R"({"color":null,"k":"v","t":""})"},
       {R"({"color":"blue","k":"v","t":null})", R"({"color":"red","k":"w","t":null})",
        R"({"color":"red","k":"v","t":1})"}},
      {"ArrayBounds",
       R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":3})",
       {"[true]", "[true,false,true]", "[ true , false ]", "[\n  true\n]"},
       {"[]", "[true,true,true,true]", "[1]", "[true,]"}},
      {"PrefixItems",
       R"({"type":"array","prefixItems":[{"type":"string"},{"type":"number"}],"items":false})",
       {R"(["a",1])", R"(["a"])", "[]", R"(["a",-0.5])"},
       {R"(["a",1,2])", "[1]"}},
      {"RecursiveRef",
       R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
           "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
           "additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1,"next":{"v":2}})", R"({"v":1})"}},
      {"Draft07Definitions",
       R"({"definitions":{"n":{"type":"integer"}},"type":"array","items":{"$ref":"#/definitions/n"}})",
       {"[1,2,3]", "[]"},
       {"[1.5]"}},
      {"StringLength",
       R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", "\"\xC3\xA9\xE2\x82\xAC\"", R"("\n\t")", R"("a\u0041")"},
       {R"("a")", R"("abcd")", "\"\xC3\xA9\""}},
      {"Pattern",
       R"({"type":"string","pattern":"^[a-z]+\\d{2}$"})",
       {R"("ab12")", R"("z00")"},
       {R"("ab1")", R"("AB12")", R"("12")"}},
      {"FormatDate",
       R"({"type":"string","format":"date"})",
       {R"("2024-02-28")", R"("1999-12-31")", R"("2024-04-30")"},
       {R"("2024-13-01")", R"("2024-02-30")", R"("2024-04-31")", R"("24-01-01")"}},
      {"FormatDateTimeAndUuid",
       R"({"type":"object","properties":{"t":{"type":"string","format":"date-time"},
           "u":{"type":"string","format":"uuid"}},"required":["t","u"]})",
       {R"({"t":"2024-01-02T03:04:05Z","u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"t":"2024-01-02T23:59:59.123+05:30","u":"00000000-0000-0000-0000-000000000000"})"},
       {R"({"t":"2024-01-02 03:04:05Z","u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"t":"2024-01-02T03:04:05Z","u":"123e4567e89b12d3a456426614174000"})"}},
      {"AdditionalPropertiesSchema",
       R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
       {R"({"a":1,"b":"x"})", R"({"b":"x"})", "{}", R"({"ab":"x","c-d_9":"y"})"},
       {R"({"b":1})", R"({"a":"x"})", R"({"a":1,"a":"x"})"}},
      {"Numbers",
       R"({"type":"number"})",
       {"1.5e10", "-0", "0.25", "12", "3E-2"},
       {"01", "1.", ".5", "+1", "1e", "NaN"}},
      {"IntegerRange",
       R"({"type":"integer","minimum":-12,"maximum":130})",
       {"-12", "-1", "0", "7", "99", "100", "129", "130"},
       {"-13", "131", "200", "1000", "-0", "007", "-"}},
      {"IntegerExclusiveBounds",
       R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})",
       {"1", "9"},
       {"0", "10", "-1"}},
      {"IntegerLowerBoundOnly",
       R"({"type":"integer","minimum":18})",
       {"18", "19", "20", "99", "100", "123456789"},
       {"17", "9", "0", "-5"}},
      {"NumberInclusiveBounds",
       R"({"type":"number","minimum":1,"maximum":5})",
       {"1", "1.5", "4.999", "5"},
       {"0.5", "5.5", "5.0", "6", "-1", "1e2"}},
      {"BooleanAndNull",
       R"({"anyOf":[{"type":"boolean"},{"type":"null"}]})",
       {"true", "false", "null"},
       {"True", "0", "\"true\""}},
      {"AnnotationsIgnored",
       R"({"title":"T","description":"d","$schema":"https://json-schema.org/draft/2020-12/schema",
           "type":"integer","examples":[1],"default":0})",
       {"0", "-7"},
       {"1.5"}},
  };
  return *cases;
}

class SchemaTableTest : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(SchemaTableTest, AcceptsValidAndRejectsInvalidTexts) {
  const SchemaCase& c = GetParam();
  StructuredOutputSpec spec = SchemaSpec(c.schema);
  if (c.schema.empty()) spec.kind = StructuredOutputSpec::Kind::kJsonObject;
  absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileSpec(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const std::string& text : c.accept) EXPECT_TRUE(FullMatch(*g, text)) << "should accept: " << text;
  for (const std::string& text : c.reject) EXPECT_FALSE(FullMatch(*g, text)) << "should reject: " << text;
}

INSTANTIATE_TEST_SUITE_P(Schemas, SchemaTableTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

struct RefusedCase {
  std::string schema;
  std::string error;  // a substring of the message
};

TEST(SchemaCompilerTest, RefusesUnsupportedKeywordsNamingKeywordAndPath) {
  const std::vector<RefusedCase> cases = {
      {R"({"type":"integer","multipleOf":3})", "unsupported JSON Schema keyword 'multipleOf' at the schema root"},
      {R"({"type":"number","exclusiveMinimum":0})",
       "'exclusiveMinimum' at the schema root: is supported on 'integer' only"},
      {R"({"type":"number","minimum":0.5})", "'minimum' at the schema root: on 'number' must be an integer"},
      {R"({"type":"number","minimum":-3})", "on 'number' must be >= 0"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies within the bounds"},
      {R"({"type":"object","properties":{"a":{"type":"string","foo":1}}})", "keyword 'foo' at /properties/a"},
      {R"({"type":"array","items":{"type":"array","uniqueItems":true}})", "keyword 'uniqueItems' at /items"},
      {R"({"not":{}})", "'not'"},
      {R"({"type":"object","properties":{"x":{}},"patternProperties":{}})", "'patternProperties'"},
      {R"({"$defs":{"a":{"type":"number","exclusiveMaximum":3}},"$ref":"#/$defs/a"})",
       "'exclusiveMaximum' at /$defs/a"},
      {R"({"$ref":"http://example.com/s.json"})", "only local JSON pointers"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"allOf":[{"type":"string"},{"minLength":1}]})", "only a single-schema allOf"},
      {R"({"type":"string","format":"hostname"})", "'hostname' is not supported"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreferences"},
      {R"({"type":"string","pattern":"(?=a)b"})", "lookaround"},
      {R"({"type":"string","pattern":"a$b"})", "anchors"},
      {R"({"type":"string","pattern":"a","minLength":1})", "'pattern' at the schema root: combining"},
      {R"({"type":"foo"})", "unknown type 'foo'"},
      {R"({"type":"object","required":["x"]})", "'x' is not declared in 'properties'"},
      {R"({"anyOf":[{"type":"string"}],"type":"string"})", "'anyOf' at the schema root: combining it with 'type'"},
      {R"({"type":"array","items":[{"type":"string"}]})", "use 'prefixItems'"},
      {R"({"type":"object","properties":{"a":false}})", "/properties/a is 'false'"},
      {R"({"enum":[1,2],"type":"string"})", "no value matches 'type'"},
      {R"({"type":"string","maxLength":1,"minLength":2})", "'maxLength' at the schema root: is below minLength"},
      {"{not json", "not valid JSON"},
  };
  for (const RefusedCase& c : cases) {
    absl::StatusOr<std::shared_ptr<const Grammar>> g = CompileSpec(SchemaSpec(c.schema));
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr(c.error)) << c.schema;
  }
}

TEST(SchemaCompilerTest, ChoiceMatchesExactlyOneOfTheChoices) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::kChoice;
  spec.choices = {"yes", "no", "maybe so"};
  auto g = CompileSpec(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FullMatch(*g, "yes"));
  EXPECT_TRUE(FullMatch(*g, "maybe so"));
  EXPECT_FALSE(FullMatch(*g, "ye"));
  EXPECT_FALSE(FullMatch(*g, "yesno"));
  spec.choices = {"a", ""};
  EXPECT_FALSE(CompileSpec(spec).ok());
}

// kToolCalls: begin V (separator V)* end, at most max_calls values, each valid against the schema.
TEST(SchemaCompilerTest, ToolCallsAreAFramedSequenceOfSchemaValues) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::kToolCalls;
  spec.schema = R"({"type":"object","properties":{"name":{"const":"f"},"x":{"type":"integer"}},
                    "required":["name","x"],"additionalProperties":false})";
  spec.calls_begin = "<c>";
  spec.calls_separator = "|";
  spec.calls_end = "</c>";
  auto g = CompileSpec(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(FullMatch(*g, R"(<c>{"name":"f","x":1}</c>)"));
  EXPECT_TRUE(FullMatch(*g, R"(<c>{"name":"f","x":1}|{"name": "f", "x": -2}|{"name":"f","x":3}</c>)"));
  EXPECT_FALSE(FullMatch(*g, "<c></c>"));
  EXPECT_FALSE(FullMatch(*g, R"(<c>{"name":"g","x":1}</c>)"));
  EXPECT_FALSE(FullMatch(*g, R"({"name":"f","x":1})"));
  EXPECT_FALSE(FullMatch(*g, R"(<c>{"name":"f","x":1}|</c>)"));
  spec.max_calls = 2;
  auto two = CompileSpec(spec);
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(FullMatch(*two, R"(<c>{"name":"f","x":1}|{"name":"f","x":2}</c>)"));
  EXPECT_FALSE(FullMatch(*two, R"(<c>{"name":"f","x":1}|{"name":"f","x":2}|{"name":"f","x":3}</c>)"));
  // The framing is part of the grammar's identity.
  StructuredOutputSpec other = spec;
  other.calls_end = "</d>";
  EXPECT_NE(spec.GrammarKey(), other.GrammarKey());
  other = spec;
  other.max_calls = 3;
  EXPECT_NE(spec.GrammarKey(), other.GrammarKey());
  spec.max_calls = -1;
  EXPECT_FALSE(CompileSpec(spec).ok());
  spec.max_calls = 0;
  spec.schema = R"({"type":"object","properties":{"x":{"not":{}}}})";
  auto bad = CompileSpec(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("'not' at /properties/x"));
}

TEST(GrammarCacheTest, CompilesEachSpecOnceAndCachesErrors) {
  GrammarCache cache(2);
  ASSERT_TRUE(cache.Get(SchemaSpec(R"({"type":"string"})")).ok());
  ASSERT_TRUE(cache.Get(SchemaSpec(R"({"type":"string"})")).ok());
  EXPECT_FALSE(cache.Get(SchemaSpec(R"({"type":"integer","multipleOf":2})")).ok());
  EXPECT_FALSE(cache.Get(SchemaSpec(R"({"type":"integer","multipleOf":2})")).ok());
  EXPECT_EQ(cache.hits(), 2);
  EXPECT_EQ(cache.misses(), 2);
}

}  // namespace
}  // namespace orca::structured
