// The tokenizer's pre-tokenizer regex (core/text/regex.h) comes from a model's tokenizer.json and runs
// over request text: every recursive walk in it is bounded (issue 45). Groups nest at most 200 deep
// (parsed by recursion); quantifiers stacked on one atom, long sequences of groups and nested
// look-aheads are parsed iteratively and matched under the matcher's depth bound, so none of them can
// exhaust the stack of the thread that tokenizes, whatever the pattern or the text.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/text/regex.h"
#include "gtest/gtest.h"

namespace orca::text {
namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(RegexLimitsTest, HostilePatternsCompileOrAreRefusedAndMatchWithoutExhaustingTheStack) {
  struct Case {
    const char* name;
    std::string pattern;
    bool compiles;
  };
  const std::vector<Case> cases = {
      {"100000StackedQuantifiers", absl::StrCat("a", Repeat("*", 100000)), true},
      {"20000StackedLazyQuantifiers", absl::StrCat("a", Repeat("{0,2}?", 20000)), true},
      {"50000GroupsInSequence", Repeat("(?:ab)", 50000), true},
      {"200NestedGroups", absl::StrCat(Repeat("(?:a|", 200), "b", Repeat(")*", 200)), true},
      {"200NestedLookaheads", absl::StrCat(Repeat("(?=a", 200), Repeat(")", 200), "a+"), true},
      {"201NestedGroups", absl::StrCat(Repeat("(", 201), "a", Repeat(")", 201)), false},
      {"100000NestedGroups", absl::StrCat(Repeat("(", 100000), "a", Repeat(")", 100000)), false},
  };
  std::vector<char32_t> text;
  for (int i = 0; i < 20000; ++i) text.push_back(i % 7 == 6 ? U'b' : U'a');
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::unique_ptr<Regex>> re = Regex::Compile(c.pattern);
    ASSERT_EQ(re.ok(), c.compiles) << re.status();
    if (!re.ok()) {
      EXPECT_NE(re.status().message().find("nested more than 200 deep"), std::string::npos) << re.status();
      continue;
    }
    (*re)->FindAll(text);  // terminates, whatever it finds
  }
}

}  // namespace
}  // namespace orca::text
