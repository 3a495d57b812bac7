#include "core/text/regex.h"

#include <gtest/gtest.h>

#include "core/text/components.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

std::vector<std::string> Pieces(std::string_view pattern, std::string_view text) {
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  return SplitWithPattern(text, **re, SplitBehavior::kIsolated, false);
}

using V = std::vector<std::string>;

TEST(RegexTest, Gpt2Pattern) {
  EXPECT_EQ(Pieces(kGpt2Pattern, "Hello world's 123  x\n\n"), (V{"Hello", " world", "'s", " 123", " ", " x", "\n\n"}));
  EXPECT_EQ(Pieces(kGpt2Pattern, "I'M"), (V{"I", "'", "M"}));  // case-sensitive contractions
}

TEST(RegexTest, Llama3PatternCaseInsensitiveContractionsAndDigitGroups) {
  EXPECT_EQ(Pieces(kLlama3Pattern, "I'M 1234567 (hi)\n  x"),
            (V{"I", "'M", " ", "123", "456", "7", " (", "hi", ")\n", " ", " x"}));
  EXPECT_EQ(Pieces(kQwen2Pattern, "ab12"), (V{"ab", "1", "2"}));
  EXPECT_EQ(Pieces(kLlama3Pattern, "Привет,мир"), (V{"Привет", ",мир"}));
}

TEST(RegexTest, ConstructsAndSemantics) {
  EXPECT_EQ(Pieces("a+?b", "aaab"), (V{"aaab"}));
  EXPECT_EQ(Pieces("a{2}", "aaaaa"), (V{"aa", "aa", "a"}));
  EXPECT_EQ(Pieces("[^a-c]+", "abxyzc"), (V{"ab", "xyz", "c"}));
  EXPECT_EQ(Pieces(R"(\d+|\p{Lu}\p{Ll}*)", "HelloWorld42"), (V{"Hello", "World", "42"}));
  EXPECT_EQ(Pieces("(?:ab)+", "ababa"), (V{"abab", "a"}));
  EXPECT_EQ(Pieces("x(?=y)", "xxy"), (V{"x", "x", "y"}));
  EXPECT_EQ(Pieces(R"(\s+(?!\S)|\s+)", "a   b"), (V{"a", "  ", " ", "b"}));
  EXPECT_EQ(Pieces(R"(\x41\u0042)", "zABz"), (V{"z", "AB", "z"}));
}

TEST(RegexTest, RejectsUnsupportedSyntaxWithPosition) {
  auto lookbehind = Regex::Compile("(?<=a)b");
  ASSERT_FALSE(lookbehind.ok());
  EXPECT_NE(std::string(lookbehind.status().message()).find("look-behind"), std::string::npos);
  EXPECT_FALSE(Regex::Compile("(ab").ok());
  EXPECT_FALSE(Regex::Compile("[a-").ok());
  EXPECT_FALSE(Regex::Compile("*a").ok());
  auto prop = Regex::Compile(R"(\p{Foo})");
  ASSERT_FALSE(prop.ok());
  EXPECT_NE(std::string(prop.status().message()).find("Foo"), std::string::npos);
}

TEST(RegexTest, SplitBehaviors) {
  auto re = *Regex::Compile("-");
  EXPECT_EQ(SplitWithPattern("a-b--c", *re, SplitBehavior::kRemoved, false), (V{"a", "b", "c"}));
  EXPECT_EQ(SplitWithPattern("a-b--c", *re, SplitBehavior::kMergedWithPrevious, false), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(SplitWithPattern("a-b--c", *re, SplitBehavior::kMergedWithNext, false), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(SplitWithPattern("a-b--c", *re, SplitBehavior::kContiguous, false), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(SplitWithPattern("a-b--c", *re, SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

TEST(UnicodeTest, LossyDecodingReplacesMaximalSubparts) {
  // Truncated 3-byte sequence, lone continuation, overlong, surrogate, valid.
  const std::string bytes =
      "a\xE2\x82"
      "b\x80"
      "c\xC0\xAF"
      "d\xED\xA0\x80"
      "e\xE2\x82\xAC";
  EXPECT_EQ(SanitizeUtf8(bytes),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD"
            "c\xEF\xBF\xBD\xEF\xBF\xBD"
            "d\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
            "e\xE2\x82\xAC");
  EXPECT_TRUE(IsValidUtf8("héllo 👍"));
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));
  // Streaming in any split gives the same text.
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    Utf8StreamDecoder d;
    std::string out = d.Feed(bytes.substr(0, cut));
    out += d.Feed(bytes.substr(cut));
    out += d.Finish();
    EXPECT_EQ(out, SanitizeUtf8(bytes)) << cut;
  }
}

}  // namespace
}  // namespace orca::text

namespace orca::text {
namespace {

TEST(RegexTest, LongInputsForRepeatedGroupsDoNotExhaustTheStack) {
  auto re = *Regex::Compile("(?:ab)+|.");
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "ab";
  // The split may differ from an unbounded engine, but it covers the text.
  std::string joined;
  for (const std::string& p : SplitWithPattern(text, *re, SplitBehavior::kIsolated, false)) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_FALSE(Regex::Compile(std::string(500, '(') + "a" + std::string(500, ')')).ok());
}

}  // namespace
}  // namespace orca::text
