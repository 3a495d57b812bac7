// The Fig. 10 report from measured points: configuration parsing, the throughput ratio at
// equal median normalized latency (interpolated as sim/sweep does), and the
// CSV / gnuplot outputs.

#include "core/loadgen/fig10_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/loadgen/serving_sweep.h"

namespace orca::loadgen {
namespace {

using ::testing::HasSubstr;

MeasuredPoint Point(double rate, double throughput, double median_s) {
  MeasuredPoint p;
  p.arrival_rate = rate;
  p.summary.num_requests = 10;
  p.summary.num_completed = 10;
  p.summary.throughput_rps = throughput;
  p.summary.normalized_latency_s.p50 = median_s;
  p.summary.normalized_latency_s.p99 = 2 * median_s;
  return p;
}

std::vector<MeasuredCurve> Curves() {
  std::vector<SweepCurveSpec> specs = *ParseCurveSpecs("orca:8,orca:2,request-level:1");
  std::vector<MeasuredCurve> curves(3);
  curves[0].spec = specs[0];
  curves[0].points = {Point(1, 1.0, 0.010), Point(2, 2.0, 0.012), Point(4, 3.9, 0.020), Point(8, 5.0, 0.080)};
  curves[1].spec = specs[1];  // a worse orca configuration: the best one counts
  curves[1].points = {Point(1, 1.0, 0.011), Point(2, 1.5, 0.040)};
  curves[2].spec = specs[2];
  curves[2].points = {Point(1, 1.0, 0.010), Point(2, 1.9, 0.030), Point(4, 2.2, 0.200)};
  return curves;
}

TEST(Fig10ReportTest, ParsesConfigurations) {
  absl::StatusOr<std::vector<SweepCurveSpec>> specs = ParseCurveSpecs(" orca:16, request-level:1 ");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].policy, sched::PolicyKind::kOrca);
  EXPECT_EQ((*specs)[0].max_bs, 16);
  EXPECT_EQ((*specs)[0].label, "orca(max_bs=16)");
  EXPECT_EQ((*specs)[1].policy, sched::PolicyKind::kRequestLevel);
  EXPECT_EQ((*specs)[1].label, "request-level(max_bs=1)");
  for (const char* bad : {"", "orca", "orca:0", "fcfs:4", "orca:x", "orca:4:2"}) {
    absl::StatusOr<std::vector<SweepCurveSpec>> parsed = ParseCurveSpecs(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(ParseCurveSpecs("orca:8,orca:zero").status().message()), HasSubstr("'orca:zero'"));
}

TEST(Fig10ReportTest, LlamaServerCurvesAreABaseline) {
  absl::StatusOr<std::vector<SweepCurveSpec>> specs = ParseCurveSpecs("orca:16,llama-server:32");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_TRUE((*specs)[0].server.empty());
  EXPECT_EQ((*specs)[1].server, "llama-server");
  EXPECT_EQ((*specs)[1].max_bs, 32);
  EXPECT_EQ((*specs)[1].label, "llama-server(np=32)");
  EXPECT_EQ((*specs)[1].policy, sched::PolicyKind::kRequestLevel);
  for (const char* bad : {"llama-server", "llama-server:0", "llama-server:8:prefix", "llama-server:x"}) {
    EXPECT_THAT(std::string(ParseCurveSpecs(bad).status().message()), HasSubstr("llama-server:NP")) << bad;
  }
  // The ratio is Orca's best against llama-server's, and the CSV names the server.
  std::vector<MeasuredCurve> curves(2);
  curves[0].spec = (*specs)[0];
  curves[0].points = {Point(1, 1.0, 0.010), Point(4, 4.0, 0.012)};
  curves[1].spec = (*specs)[1];
  curves[1].points = {Point(1, 1.0, 0.010), Point(2, 1.0, 0.100)};
  EXPECT_NEAR(RatioTargets(curves, {1.2}).at(0), 0.012, 1e-12);
  EXPECT_GT(PeakRatio(curves, RatioTargets(curves, {1.2})), 3.0);
  EXPECT_THAT(SweepToCsv(curves), HasSubstr("\"llama-server(np=32)\",llama-server,32,"));
}

TEST(Fig10ReportTest, ParsesChunkedPrefillAndPrefixCachingOptions) {
  absl::StatusOr<std::vector<SweepCurveSpec>> specs =
      ParseCurveSpecs("orca:16:chunk=64,paged:32:chunk=64:prefix,paged:8,request-level:8:prefix");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 4u);
  EXPECT_EQ((*specs)[0].label, "orca(max_bs=16,chunk=64)");
  EXPECT_EQ((*specs)[0].max_num_batched_tokens, 64);
  EXPECT_FALSE((*specs)[0].prefix_caching);
  EXPECT_EQ((*specs)[1].label, "paged(max_bs=32,chunk=64,prefix)");
  EXPECT_EQ((*specs)[1].policy, sched::PolicyKind::kPaged);
  EXPECT_TRUE((*specs)[1].prefix_caching);
  EXPECT_EQ((*specs)[2].label, "paged(max_bs=8)");
  EXPECT_EQ((*specs)[3].label, "request-level(max_bs=8,prefix)");
  absl::StatusOr<std::vector<SweepCurveSpec>> timed = ParseCurveSpecs("paged:16:chunk=32:slowdown=2.5");
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_EQ((*timed)[0].label, "paged(max_bs=16,chunk=32,slowdown=2.5)");
  EXPECT_EQ((*timed)[0].max_prefill_slowdown, 2.5);
  absl::StatusOr<std::vector<SweepCurveSpec>> capped = ParseCurveSpecs("orca:8:chunk=256:cap=64");
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ((*capped)[0].label, "orca(max_bs=8,chunk=256,cap=64)");
  EXPECT_EQ((*capped)[0].long_prefill_token_threshold, 64);
  EXPECT_EQ(ApplyCurveSpec((*capped)[0], {}).long_prefill_token_threshold, 64);
  for (const char* bad : {"orca:16:chunk=8", "orca:16:chunky", "request-level:8:chunk=64", "paged:4:chunk=x",
                          "orca:16:slowdown=1", "orca:16:slowdown=x", "request-level:8:slowdown=2",
                          "orca:16:cap=0", "orca:16:cap=x", "request-level:8:cap=64"}) {
    EXPECT_FALSE(ParseCurveSpecs(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseCurveSpecs("orca:16:prefx").status().message()), HasSubstr("unknown option 'prefx'"));
}

TEST(Fig10ReportTest, ParsesTheFasterTransformerBaselineAndItsMicrobatches) {
  absl::StatusOr<std::vector<SweepCurveSpec>> specs = ParseCurveSpecs("ft:8,ft:16:mbs=2,request-level:4:mbs=3");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].label, "ft(max_bs=8)");
  EXPECT_EQ((*specs)[0].policy, sched::PolicyKind::kRequestLevel);
  EXPECT_TRUE((*specs)[0].faster_transformer);
  EXPECT_EQ((*specs)[0].microbatches, 0);
  EXPECT_EQ((*specs)[1].label, "ft(max_bs=16,mbs=2)");
  EXPECT_EQ((*specs)[1].microbatches, 2);
  EXPECT_EQ((*specs)[2].label, "request-level(max_bs=4,mbs=3)");
  EXPECT_FALSE((*specs)[2].faster_transformer);
  // Into the scheduler's options: the paper's ft(16, 2).
  const sched::SchedulerOptions o = ApplyCurveSpec((*specs)[1], sched::SchedulerOptions{});
  EXPECT_EQ(o.policy, sched::PolicyKind::kRequestLevel);
  EXPECT_EQ(o.max_bs, 16);
  EXPECT_TRUE(o.faster_transformer);
  EXPECT_EQ(o.num_microbatches, 2);
  for (const char* bad : {"orca:8:mbs=2", "ft:8:mbs=0", "ft:8:prefix", "ft:8:chunk=16", "ft:0"}) {
    EXPECT_FALSE(ParseCurveSpecs(bad).ok()) << bad;
  }
}

TEST(Fig10ReportTest, RatioAtEqualMedianLatencyInterpolatesEachCurve) {
  const std::vector<MeasuredCurve> curves = Curves();
  // The baseline floor is 10 ms/token; 1.5x and 2x of it.
  const std::vector<double> targets = RatioTargets(curves, {1.5, 2.0});
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_NEAR(targets[0], 0.015, 1e-12);
  EXPECT_NEAR(targets[1], 0.020, 1e-12);

  std::vector<loadgen::SweepCurve> sim;
  for (const MeasuredCurve& c : curves) sim.push_back(ToSimCurve(c));
  // At 15 ms/token: orca(8) on its (2.0, 12 ms)-(3.9, 20 ms) segment: 2.0 + 3/8 * 1.9;
  // the baseline on (1.0, 10 ms)-(1.9, 30 ms): 1.0 + 1/4 * 0.9.
  EXPECT_NEAR(*loadgen::BestThroughputAtLatency(sim, sched::PolicyKind::kOrca, 0.015), 2.7125, 1e-9);
  EXPECT_NEAR(*loadgen::BestThroughputAtLatency(sim, sched::PolicyKind::kRequestLevel, 0.015), 1.225, 1e-9);
  // At 20 ms/token orca(8)'s measured point counts as it is: 3.9 over 1.45.
  EXPECT_NEAR(PeakRatio(curves, targets), 3.9 / 1.45, 1e-9);

  const std::string table = FormatEqualLatencyTable(curves, {1.5, 2.0});
  EXPECT_THAT(table, HasSubstr("10.00 ms/token"));
  EXPECT_THAT(table, HasSubstr("15.0 ms/token                       2.71"));
  EXPECT_THAT(table, HasSubstr("2.2x"));
  EXPECT_THAT(table, HasSubstr("2.7x"));
}

TEST(Fig10ReportTest, NoBaselineMeansNoRatio) {
  std::vector<MeasuredCurve> curves = Curves();
  curves.pop_back();
  EXPECT_TRUE(RatioTargets(curves, {2.0}).empty());
  EXPECT_DOUBLE_EQ(PeakRatio(curves, {}), 0.0);
  EXPECT_THAT(FormatEqualLatencyTable(curves, {2.0}), HasSubstr("no request-level baseline"));
}

TEST(Fig10ReportTest, WritesCsvRowsAndAGnuplotScriptWithOneCurveEach) {
  const std::vector<MeasuredCurve> curves = Curves();
  const std::string csv = SweepToCsv(curves);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 + 2 + 3);
  EXPECT_THAT(csv, HasSubstr("\"orca(max_bs=8)\",orca,8,0,0,4,3.900000"));  // chunk 0, prefix off
  EXPECT_THAT(csv, HasSubstr("\"request-level(max_bs=1)\",request-level,1,"));

  const std::string script = Fig10GnuplotScript(curves, "/tmp/it's.png", "Title");
  EXPECT_THAT(script, HasSubstr("set output '/tmp/it''s.png'"));
  EXPECT_THAT(script, HasSubstr("$C0 << EOD\n1.000000 10.000000\n2.000000 12.000000\n"));
  EXPECT_THAT(script, HasSubstr("$C2 using 1:2 with linespoints lw 2 dt 2"));
  EXPECT_THAT(script, HasSubstr("title 'request-level(max_bs=1)'"));
  EXPECT_THAT(FormatSweepPoints(curves), HasSubstr("orca(max_bs=2)"));
}

TEST(Fig10ReportTest, LabelsBecomeFileNames) {
  EXPECT_EQ(LabelToFileName("orca(max_bs=8)"), "orca_max_bs_8");
  EXPECT_EQ(LabelToFileName("request-level(max_bs=1)"), "request-level_max_bs_1");
  EXPECT_EQ(LabelToFileName("../.."), "curve");
  EXPECT_EQ(LabelToFileName("()"), "curve");
}

}  // namespace
}  // namespace orca::loadgen
