// The depth-limited JSON parser (core/common/json_parse.h): the same values as nlohmann's own parser
// for every document within the limit (a table and random documents), a precise error naming the path
// for every document past it, and linear-time objects with many keys in document order.

#include "core/common/json_parse.h"

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JsonParseTest, SameValuesAsNlohmann) {
  const std::vector<std::string> docs = {
      "0",
      "-1.5e300",
      "18446744073709551615",
      "-9223372036854775808",
      "true",
      "null",
      R"("a\u00e9\ud83d\ude00")",
      "[]",
      "{}",
      "[[], {}, [[]]]",
      R"({"b": 1, "a": [1, {"c": null}], "": ""})",
      R"({"dup": 1, "x": 2, "dup": 3})",  // the last value wins, at the first position (ordered)
      R"(  {"k" : [ 1 , 2 ] }  )",
      Repeat("[", 128) + Repeat("]", 128),
  };
  for (const std::string& doc : docs) {
    SCOPED_TRACE(doc);
    absl::StatusOr<json> ours = ParseJson(doc);
    ASSERT_TRUE(ours.ok()) << ours.status();
    EXPECT_EQ(*ours, json::parse(doc));
    absl::StatusOr<ordered_json> ordered = ParseOrderedJson(doc);
    ASSERT_TRUE(ordered.ok()) << ordered.status();
    EXPECT_EQ(ordered->dump(), ordered_json::parse(doc).dump());
  }
}

TEST(JsonParseTest, RandomDocumentsParseAsNlohmannParsesThem) {
  std::mt19937 rng(45);
  auto value = [&](auto&& self, int depth) -> ordered_json {
    switch (rng() % (depth > 6 ? 4 : 6)) {
      case 0:
        return static_cast<int64_t>(rng()) - (1LL << 31);
      case 1:
        return absl::StrCat("s", rng() % 100);
      case 2:
        return rng() % 2 == 0;
      case 3:
        return nullptr;
      case 4: {
        ordered_json a = ordered_json::array();
        for (int i = rng() % 4; i > 0; --i) a.push_back(self(self, depth + 1));
        return a;
      }
      default: {
        ordered_json o = ordered_json::object();
        for (int i = rng() % 12; i > 0; --i) o[absl::StrCat("k", rng() % 30)] = self(self, depth + 1);
        return o;
      }
    }
  };
  for (int i = 0; i < 100; ++i) {
    const std::string doc = value(value, 0).dump();
    absl::StatusOr<ordered_json> ordered = ParseOrderedJson(doc);
    ASSERT_TRUE(ordered.ok()) << ordered.status();
    EXPECT_EQ(ordered->dump(), doc);
    absl::StatusOr<json> plain = ParseJson(doc);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(*plain, json::parse(doc));
  }
}

TEST(JsonParseTest, TooDeepIsRefusedWithThePathAndTheLimit) {
  struct Case {
    std::string doc;
    int max_depth;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Repeat("[", 129) + Repeat("]", 129), kMaxJsonDepth,
       "nesting deeper than 128 levels at [0][0][0][0][0][0].<119 more>[0][0][0] (arrays and objects may nest at "
       "most 128 deep)"},
      {Repeat("[", 100000), kMaxJsonDepth, "nesting deeper than 128 levels at [0][0][0]"},
      {R"({"a": [1, 2, {"b": [[]]}]})", 4, "nesting deeper than 4 levels at a[2].b[0]"},
      {R"({"a": [1, 2, {"b": {"c": {}}}]})", 4, "nesting deeper than 4 levels at a[2].b.c"},
      {R"({"x y": {"\u00e9": {}}})", 2, R"(at ["x y"]["é"])"},
      {"{}", 0, "nesting deeper than 0 levels at the top level"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.doc.substr(0, 60));
    absl::StatusOr<json> plain = ParseJson(c.doc, c.max_depth);
    ASSERT_FALSE(plain.ok());
    EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plain.status().message(), HasSubstr(c.message));
    EXPECT_THAT(ParseOrderedJson(c.doc, c.max_depth).status().message(), HasSubstr(c.message));
  }
}

TEST(JsonParseTest, SyntaxErrorsCarryNlohmannsMessageWithoutItsPrefix) {
  for (const std::string doc : {"{", "[1,]", "{} x", "", "nul", "\"\xff\""}) {
    SCOPED_TRACE(doc);
    absl::StatusOr<json> parsed = ParseJson(doc);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("parse error at line 1, column"));
    EXPECT_THAT(std::string(parsed.status().message()), ::testing::Not(HasSubstr("[json.exception")));
  }
}

// ordered_json's own parser scans every member on every insert (50,000 keys: 8.6 s); ours indexes
// large objects. Checked by result here (the time is in bench/serving/json_parse_bench).
TEST(JsonParseTest, LargeOrderedObjectsKeepOrderAndLastDuplicate) {
  std::string doc = "{";
  for (int i = 0; i < 50000; ++i) absl::StrAppend(&doc, i ? "," : "", "\"k", i, "\":", i);
  absl::StrAppend(&doc, ",\"k7\":-7}");
  absl::StatusOr<ordered_json> parsed = ParseOrderedJson(doc);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 50000u);
  EXPECT_EQ(parsed->begin().key(), "k0");
  EXPECT_EQ((*parsed)["k7"], -7);
  EXPECT_EQ(std::next(parsed->begin(), 7).key(), "k7");
  EXPECT_EQ(std::prev(parsed->end()).key(), "k49999");
}

}  // namespace
}  // namespace orca
