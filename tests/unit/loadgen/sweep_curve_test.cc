// Throughput at equal median normalized latency over latency-throughput curves (moved here
// with the comparison from the simulation's tests).

#include "core/loadgen/sweep_curve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace orca::loadgen {
namespace {

using sched::PolicyKind;
using ::testing::HasSubstr;

SweepCurve Curve(PolicyKind policy, std::vector<std::pair<double, double>> throughput_latency) {
  SweepCurve curve;
  curve.config.scheduler.policy = policy;
  for (const auto& [throughput, latency] : throughput_latency) {
    SweepPoint p;
    p.arrival_rate = throughput;
    p.throughput_rps = throughput;
    p.median_normalized_latency = latency;
    curve.points.push_back(p);
  }
  return curve;
}

TEST(SweepTest, InterpolatesThroughputAtALatencyTarget) {
  SweepCurve curve = Curve(PolicyKind::kOrca, {{1, 0.02}, {2, 0.03}, {3, 0.05}, {3.2, 0.50}});
  EXPECT_EQ(ThroughputAtLatency(curve, 0.01), std::nullopt);  // below its lightest load
  EXPECT_DOUBLE_EQ(*ThroughputAtLatency(curve, 0.02), 1.0);
  EXPECT_DOUBLE_EQ(*ThroughputAtLatency(curve, 0.04), 2.5);
  EXPECT_DOUBLE_EQ(*ThroughputAtLatency(curve, 1.0), 3.2);  // never crosses: best point

  std::vector<SweepCurve> curves = {curve, Curve(PolicyKind::kOrca, {{4, 0.03}, {5, 0.10}}),
                                    Curve(PolicyKind::kRequestLevel, {{0.5, 0.03}, {1, 0.2}})};
  EXPECT_DOUBLE_EQ(*BestThroughputAtLatency(curves, PolicyKind::kOrca, 0.04), 4 + 1.0 / 7);
  EXPECT_DOUBLE_EQ(*BestThroughputAtLatency(curves, PolicyKind::kRequestLevel, 0.03), 0.5);
  EXPECT_DOUBLE_EQ(*MinMedianLatency(curves, PolicyKind::kOrca), 0.02);
  EXPECT_THAT(FormatRatioTable(curves, {0.03}), HasSubstr("8.0x"));
}

}  // namespace
}  // namespace orca::loadgen
