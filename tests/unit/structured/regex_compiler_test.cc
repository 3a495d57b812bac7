// guided_regex: the supported subset as accept/reject tables, and the refused
// constructs named with their offset.

#include <string>
#include <vector>

#include "core/structured/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/structured/test_util.h"

namespace orca::structured {
namespace {

using testing::FullMatch;
using testing::RegexSpec;

struct RegexCase {
  std::string regex;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

TEST(RegexCompilerTest, MatchesWholeTextsOfTheSubset) {
  const std::vector<RegexCase> cases = {
      {"\\d{3}-\\d{4}", {"555-1234"}, {"5551234", "555-123", "555-12345", "a55-1234"}},
      {"(cat|dog)s?", {"cat", "dogs"}, {"cats!", "catdog", ""}},
      {"^[^a-c]+$", {"xyz", "d"}, {"abc", "xa", ""}},
      {".", {"x", "\xC3\xA9", "\xF0\x9F\x98\x80"}, {"\n", "ab", "\xC3"}},
      {"a{2,3}", {"aa", "aaa"}, {"a", "aaaa"}},
      {"a{2,}b", {"aab", "aaaaab"}, {"ab"}},
      {"\\w+@\\w+\\.com", {"a_1@b.com"}, {"a@b.org", "@b.com"}},
      {"(?:ab)*c", {"c", "ababc"}, {"abac"}},
      {"(?<year>\\d{4})", {"2024"}, {"24"}},
      {"[\\d\\s]+", {"1 2\t3"}, {"1a"}},
      {"\\S\\x41\\u00e9", {"zA\xC3\xA9"}, {" A\xC3\xA9"}},
      {"[a-c-]+", {"a-c"}, {"d"}},
      {"x+?y", {"xxy"}, {"y"}},
      {"\\.\\*\\?", {".*?"}, {"a*?"}},
      {"[é-ê]", {"\xC3\xA9", "\xC3\xAA"}, {"\xC3\xAB", "e"}},
  };
  for (const RegexCase& c : cases) {
    auto g = CompileSpec(RegexSpec(c.regex));
    ASSERT_TRUE(g.ok()) << c.regex << ": " << g.status();
    for (const std::string& t : c.accept) EXPECT_TRUE(FullMatch(*g, t)) << c.regex << " should accept " << t;
    for (const std::string& t : c.reject) EXPECT_FALSE(FullMatch(*g, t)) << c.regex << " should reject " << t;
  }
}

TEST(RegexCompilerTest, RefusesWhatItCannotEnforceNamingTheConstruct) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreferences are not supported at offset 3"},
      {"(?<n>a)\\k<n>", "backreferences (\\k<name>)"},
      {"a(?=b)", "lookaround assertions are not supported at offset 1"},
      {"(?!a)", "lookaround"},
      {"(?<=a)b", "lookaround"},
      {"(?<!a)b", "lookaround"},
      {"\\bword", "word boundaries"},
      {"a^b", "anchors are only supported"},
      {"(?i)abc", "inline flags"},
      {"a++", "possessive"},
      {"\\p{L}", "Unicode property classes"},
      {"*a", "nothing to repeat"},
      {"(ab", "unterminated group"},
      {"ab)", "unmatched ')'"},
      {"[ab", "unterminated character class"},
      {"a{5,2}", "n < m"},
      {"a{2000}", "counts above 1000"},
      {"[z-a]", "out of order"},
      {"\\q", "unknown escape \\q"},
  };
  for (const auto& [regex, error] : cases) {
    auto g = CompileSpec(RegexSpec(regex));
    ASSERT_FALSE(g.ok()) << regex;
    EXPECT_THAT(std::string(g.status().message()), ::testing::HasSubstr(error)) << regex;
  }
}

}  // namespace
}  // namespace orca::structured
