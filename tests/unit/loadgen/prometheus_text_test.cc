// Reading histogram totals off a /metrics page (the pipeline benchmark's overhead numbers).

#include "core/loadgen/prometheus_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace orca::loadgen {
namespace {

using ::testing::HasSubstr;

constexpr char kPage[] = R"(# HELP orca:stage_compute_seconds Per iteration, time a stage computes.
# TYPE orca:stage_compute_seconds histogram
orca:stage_compute_seconds_bucket{model_name="m",stage="0",le="0.001"} 3
orca:stage_compute_seconds_sum{model_name="m",stage="0"} 0.25
orca:stage_compute_seconds_count{model_name="m",stage="0"} 10
orca:stage_compute_seconds_sum{model_name="m",stage="1"} 0.75
orca:stage_compute_seconds_count{model_name="m",stage="1"} 10
weird{label="a } b \"quoted\" c"} 4 1700000000000
plain_total 2.5e3

)";

TEST(PrometheusTextTest, ParsesSeriesWithTrickyLabelsAndTimestamps) {
  absl::StatusOr<MetricSamples> samples = ParsePrometheusText(kPage);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_DOUBLE_EQ(samples->at("weird{label=\"a } b \\\"quoted\\\" c\"}"), 4);
  EXPECT_DOUBLE_EQ(samples->at("plain_total"), 2500);
  EXPECT_DOUBLE_EQ(SumSeries(*samples, "orca:stage_compute_seconds_count"), 20);
  EXPECT_DOUBLE_EQ(SumSeries(*samples, "orca:stage_compute_seconds"), 0);  // exact names only
}

TEST(PrometheusTextTest, ReadsHistogramTotalsPerLabelAndTheirDelta) {
  const MetricSamples samples = *ParsePrometheusText(kPage);
  const HistogramTotals all = ReadHistogram(samples, "orca:stage_compute_seconds");
  EXPECT_DOUBLE_EQ(all.sum, 1.0);
  EXPECT_DOUBLE_EQ(all.count, 20);
  const HistogramTotals stage1 = ReadHistogram(samples, "orca:stage_compute_seconds", "stage=\"1\"");
  EXPECT_DOUBLE_EQ(stage1.mean(), 0.075);
  const HistogramTotals run = Delta(all, HistogramTotals{0.5, 16});
  EXPECT_DOUBLE_EQ(run.sum, 0.5);
  EXPECT_DOUBLE_EQ(run.count, 4);
  EXPECT_DOUBLE_EQ(HistogramTotals{}.mean(), 0.0);
}

TEST(PrometheusTextTest, RejectsMalformedLinesNamingThem) {
  EXPECT_THAT(std::string(ParsePrometheusText("ok 1\nbroken{a=\"x\" 2\n").status().message()),
              HasSubstr("metrics line 2"));
  EXPECT_THAT(std::string(ParsePrometheusText("novalue\n").status().message()), HasSubstr("metrics line 1"));
  EXPECT_FALSE(ParsePrometheusText("x{} notanumber\n").ok());
}

}  // namespace
}  // namespace orca::loadgen
