#include "core/metrics/orca_metrics.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/exposition_parser.h"

namespace orca::metrics {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<double> Buckets(const MetricSpec& spec) { return {spec.buckets.begin(), spec.buckets.end()}; }

TEST(MetricCatalogTest, NamesArePrefixedUniqueAndLabelledByModel) {
  std::set<std::string> names;
  for (const MetricSpec* spec : kMetricCatalog) {
    const std::string name = spec->name;
    SCOPED_TRACE(name);
    EXPECT_TRUE(name.starts_with("orca:"));
    EXPECT_TRUE(names.insert(name).second) << "duplicate";
    ASSERT_FALSE(spec->label_names.empty());
    EXPECT_STREQ(spec->label_names[0], kModelNameLabel);
    EXPECT_EQ(spec->type == MetricType::kCounter, name.ends_with("_total"));
    EXPECT_EQ(spec->type == MetricType::kHistogram, !spec->buckets.empty());
    EXPECT_FALSE(std::string(spec->help).empty());
    EXPECT_EQ(FindMetricSpec(name), spec);
  }
  EXPECT_EQ(FindMetricSpec("orca:nope"), nullptr);
  EXPECT_EQ(names.size(), 26u);
}

TEST(MetricCatalogTest, UsesVllmBucketsForVllmFamilies) {
  EXPECT_THAT(Buckets(kTimeToFirstTokenSeconds),
              ElementsAreArray({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
                                1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}));
  EXPECT_THAT(Buckets(kInterTokenLatencySeconds),
              ElementsAreArray({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                                20.0, 40.0, 80.0}));
  const std::vector<double> request_latency = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
  for (const MetricSpec* spec : {&kE2eRequestLatencySeconds, &kRequestQueueTimeSeconds, &kRequestPrefillTimeSeconds,
                                 &kRequestDecodeTimeSeconds}) {
    EXPECT_EQ(Buckets(*spec), request_latency) << spec->name;
  }
  EXPECT_THAT(Buckets(kIterationTokens),
              ElementsAreArray({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}));
}

TEST(MetricCatalogTest, RegisterCatalogIsIdempotentAndExposesEveryFamily) {
  Registry registry;
  ASSERT_TRUE(RegisterCatalog(&registry).ok());
  ASSERT_TRUE(RegisterCatalog(&registry).ok());
  absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
  ASSERT_TRUE(page.ok()) << page.status();
  for (const MetricSpec* spec : kMetricCatalog) {
    EXPECT_EQ(page->types[spec->name], MetricTypeName(spec->type)) << spec->name;
    EXPECT_EQ(page->helps[spec->name], spec->help) << spec->name;
  }
}

TEST(SchedulerMetricsTest, ExportsEveryReasonFromZeroAndCachesChildren) {
  Registry registry;
  absl::StatusOr<std::unique_ptr<SchedulerMetrics>> metrics = SchedulerMetrics::Create(&registry, "tiny");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  SchedulerMetrics& m = **metrics;
  absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
  ASSERT_TRUE(page.ok()) << page.status();
  for (const char* reason : kFinishedReasons) {
    const std::string series =
        std::string("orca:request_success_total{model_name=\"tiny\",") + "finished_reason=\"" + reason + "\"}";
    EXPECT_EQ(page->samples.count(series), 1u) << series;
  }
  EXPECT_EQ(&m.request_success("stop"), &m.request_success("stop"));
  m.request_success("stop").Increment();
  m.request_success("abort").Increment();  // not a known reason: its own series
  m.prompt_tokens().Increment(12);
  m.num_requests_running().Set(3);
  m.SetKvSlots(256, 1024);
  m.SetKvLocalSlots(48, 128);
  m.time_to_first_token_seconds().Observe(0.03);
  m.batch_size().Observe(4);
  page = testing::ParsePage(registry.Serialize());
  ASSERT_TRUE(page.ok()) << page.status();
  const auto& s = page->samples;
  EXPECT_EQ(s.at("orca:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"}"), 1);
  EXPECT_EQ(s.at("orca:request_success_total{model_name=\"tiny\",finished_reason=\"abort\"}"), 1);
  EXPECT_EQ(s.at("orca:prompt_tokens_total{model_name=\"tiny\"}"), 12);
  EXPECT_EQ(s.at("orca:num_requests_running{model_name=\"tiny\"}"), 3);
  EXPECT_EQ(s.at("orca:kv_slots_used{model_name=\"tiny\"}"), 256);
  EXPECT_EQ(s.at("orca:kv_slots_capacity{model_name=\"tiny\"}"), 1024);
  EXPECT_EQ(s.at("orca:kv_cache_usage_perc{model_name=\"tiny\"}"), 0.25);
  EXPECT_EQ(s.at("orca:kv_local_slots_used{model_name=\"tiny\"}"), 48);
  EXPECT_EQ(s.at("orca:kv_local_slots_capacity{model_name=\"tiny\"}"), 128);
  EXPECT_EQ(s.at("orca:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"}"), 0);
  EXPECT_EQ(s.at("orca:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"}"), 1);
  EXPECT_EQ(s.at("orca:batch_size_bucket{model_name=\"tiny\",le=\"4\"}"), 1);
  m.SetKvSlots(0, 0);
  EXPECT_EQ(m.kv_cache_usage_perc().Value(), 0);
}

TEST(SchedulerMetricsTest, TwoModelsShareOneRegistry) {
  Registry registry;
  auto a = SchedulerMetrics::Create(&registry, "a");
  auto b = SchedulerMetrics::Create(&registry, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->generation_tokens().Increment(5);
  EXPECT_EQ((*b)->generation_tokens().Value(), 0);
  EXPECT_NE(&(*a)->generation_tokens(), &(*b)->generation_tokens());
}

TEST(SchedulerMetricsTest, FailsWhenANameIsTakenWithAnotherSpec) {
  Registry registry;
  constexpr const char* kOtherLabels[] = {"pod"};
  ASSERT_TRUE(registry.AddGauge({MetricType::kGauge, kNumRequestsRunning.name, "Something else.", kOtherLabels}).ok());
  absl::StatusOr<std::unique_ptr<SchedulerMetrics>> metrics = SchedulerMetrics::Create(&registry, "m");
  EXPECT_EQ(metrics.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SchedulerMetrics::Create(nullptr, "m").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerMetricsTest, LabelsTheStage) {
  Registry registry;
  auto stage0 = WorkerMetrics::Create(&registry, "m", 0);
  auto stage1 = WorkerMetrics::Create(&registry, "m", 1);
  ASSERT_TRUE(stage0.ok() && stage1.ok());
  (*stage1)->stage_compute_seconds().Observe(0.002);
  (*stage1)->stage_communication_seconds().Observe(0.0002);
  absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->samples.at("orca:stage_compute_seconds_count{model_name=\"m\",stage=\"1\"}"), 1);
  EXPECT_EQ(page->samples.at("orca:stage_compute_seconds_count{model_name=\"m\",stage=\"0\"}"), 0);
  EXPECT_EQ(page->samples.at("orca:stage_communication_seconds_bucket{model_name=\"m\",stage=\"1\",le=\"0.00025\"}"),
            1);
  absl::Status negative = WorkerMetrics::Create(&registry, "m", -1).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.message()), HasSubstr("stage must be >= 0, got -1"));
}

TEST(GatewayMetricsTest, RecordsRequestsByRouteMethodAndStatus) {
  Registry registry;
  auto gateway = GatewayMetrics::Create(&registry, "m");
  ASSERT_TRUE(gateway.ok());
  (*gateway)->RecordRequest("/v1/completions", "POST", 200, 1.2);
  (*gateway)->RecordRequest("/v1/completions", "POST", 200, 0.3);
  (*gateway)->RecordRequest("/v1/completions", "POST", 429, 0.001);
  absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
  ASSERT_TRUE(page.ok()) << page.status();
  const auto& s = page->samples;
  EXPECT_EQ(s.at("orca:http_requests_total{model_name=\"m\",route=\"/v1/completions\","
                 "method=\"POST\",status=\"200\"}"),
            2);
  EXPECT_EQ(s.at("orca:http_requests_total{model_name=\"m\",route=\"/v1/completions\","
                 "method=\"POST\",status=\"429\"}"),
            1);
  EXPECT_EQ(s.at("orca:http_request_duration_seconds_count{model_name=\"m\","
                 "route=\"/v1/completions\",method=\"POST\"}"),
            3);
  EXPECT_DOUBLE_EQ(s.at("orca:http_request_duration_seconds_sum{model_name=\"m\","
                        "route=\"/v1/completions\",method=\"POST\"}"),
                   1.501);
}

}  // namespace
}  // namespace orca::metrics
