// UTF-8 sanitizing, shared by the tokenizers and the metrics exposition (label values).
// Decoding and the streaming decoder are tested under their orca::text names in tests/unit/text.

#include "core/common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace orca {
namespace {

TEST(Utf8Test, SanitizeKeepsValidText) {
  const std::string text = "ascii \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(SanitizeUtf8(text), text);
}

TEST(Utf8Test, SanitizeReplacesEachMaximalSubpart) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a" + replacement + "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), replacement + replacement);                    // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), replacement + replacement + replacement);  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80").size(), 4 * replacement.size());        // > U+10FFFF
  // A truncated sequence is one maximal subpart: one U+FFFD, as Python and JS decode it.
  EXPECT_EQ(SanitizeUtf8("x\xE2\x82"), "x" + replacement);
  EXPECT_FALSE(IsValidUtf8("x\xE2\x82"));
}

}  // namespace
}  // namespace orca
