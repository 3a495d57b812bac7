#include "core/metrics/text_format.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace orca::metrics {
namespace {

TEST(TextFormatTest, MetricNamesAllowColonsButNotLeadingDigits) {
  EXPECT_TRUE(IsValidMetricName("orca:num_requests_running"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_TRUE(IsValidMetricName(":a"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
  EXPECT_FALSE(IsValidMetricName("caf\xC3\xA9"));
}

TEST(TextFormatTest, LabelNamesRejectColonsAndReservedPrefix) {
  EXPECT_TRUE(IsValidLabelName("model_name"));
  EXPECT_TRUE(IsValidLabelName("_x"));
  EXPECT_FALSE(IsValidLabelName(""));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
}

TEST(TextFormatTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\"b"), "a\\\"b");
  EXPECT_EQ(EscapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeLabelValue("a\nb"), "a\\nb");
  EXPECT_EQ(EscapeLabelValue("\\\"\n"), "\\\\\\\"\\n");
  // Tabs, carriage returns and braces are legal inside quotes.
  EXPECT_EQ(EscapeLabelValue("{\t}\r"), "{\t}\r");
}

TEST(TextFormatTest, EscapesHelpButNotQuotes) {
  EXPECT_EQ(EscapeHelp("say \"hi\""), "say \"hi\"");
  EXPECT_EQ(EscapeHelp("a\\b\nc"), "a\\\\b\\nc");
}

TEST(TextFormatTest, FormatsShortestRoundTripValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.001), "0.001");
  EXPECT_EQ(FormatValue(2560), "2560");
  EXPECT_EQ(FormatValue(16384), "16384");
  EXPECT_EQ(FormatValue(1e-6), "1e-06");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  const double tricky = 0.1 + 0.2;
  EXPECT_EQ(std::stod(FormatValue(tricky)), tricky);
}

TEST(TextFormatTest, AppendSampleLineOmitsEmptyBraces) {
  std::string out;
  AppendSampleLine("a", "", "1", &out);
  AppendSampleLine("b", "x=\"y\"", "2", &out);
  EXPECT_EQ(out, "a 1\nb{x=\"y\"} 2\n");
}

}  // namespace
}  // namespace orca::metrics
