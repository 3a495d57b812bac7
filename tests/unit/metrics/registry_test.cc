#include "core/metrics/registry.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/exposition_parser.h"

namespace orca::metrics {
namespace {

using ::testing::HasSubstr;

constexpr const char* kModel[] = {"model_name"};
constexpr const char* kModelReason[] = {"model_name", "finished_reason"};
constexpr double kBounds[] = {0.5, 1.0, 2.5};

MetricSpec CounterSpec(const char* name, std::span<const char* const> labels = kModel) {
  return {MetricType::kCounter, name, "A counter.", labels};
}
MetricSpec GaugeSpec(const char* name, std::span<const char* const> labels = kModel) {
  return {MetricType::kGauge, name, "A gauge.", labels};
}
MetricSpec HistogramSpec(const char* name, std::span<const double> bounds = kBounds,
                         std::span<const char* const> labels = kModel) {
  return {MetricType::kHistogram, name, "A histogram.", labels, bounds};
}

testing::ParsedPage Parse(const Registry& registry) {
  absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
  EXPECT_TRUE(page.ok()) << page.status();
  return page.ok() ? *page : testing::ParsedPage{};
}

TEST(RegistryTest, WithLabelsReturnsOneStableChildPerLabelValues) {
  Registry registry;
  Family<Counter>* family =
      *registry.AddCounter({MetricType::kCounter, "orca:request_success_total", "Finished.", kModelReason});
  Counter& stop = family->WithLabels({{"model_name", "m"}, {"finished_reason", "stop"}});
  Counter& length = family->WithLabels({{"model_name", "m"}, {"finished_reason", "length"}});
  EXPECT_NE(&stop, &length);
  // Same values in another spelling of the map: the same child.
  EXPECT_EQ(&stop, &family->WithLabels({{"finished_reason", "stop"}, {"model_name", "m"}}));
  // Creating more children never moves existing ones.
  for (int i = 0; i < 1000; ++i) {
    family->WithLabels({{"model_name", absl::StrCat("m", i)}, {"finished_reason", "stop"}});
  }
  EXPECT_EQ(&stop, &family->WithLabels({{"model_name", "m"}, {"finished_reason", "stop"}}));
  stop.Increment();
  stop.Increment(2);
  length.Increment();
  const testing::ParsedPage page = Parse(registry);
  EXPECT_EQ(page.samples.at("orca:request_success_total{model_name=\"m\",finished_reason=\"stop\"}"), 3);
  EXPECT_EQ(page.samples.at("orca:request_success_total{model_name=\"m\",finished_reason=\"length\"}"), 1);
  EXPECT_EQ(page.types.at("orca:request_success_total"), "counter");
}

TEST(RegistryTest, TryWithLabelsNamesMissingAndUnexpectedLabels) {
  Registry registry;
  Family<Gauge>* family = *registry.AddGauge(GaugeSpec("orca:g"));
  absl::StatusOr<Gauge*> missing = family->TryWithLabels({});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("missing label 'model_name'"));
  absl::StatusOr<Gauge*> extra = family->TryWithLabels({{"model_name", "m"}, {"stage", "0"}});
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(extra.status().message()), HasSubstr("unexpected label 'stage'"));
  absl::StatusOr<Gauge*> wrong = family->TryWithLabels({{"model", "m"}});
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("missing label 'model_name'"));
}

TEST(RegistryDeathTest, WithLabelsAbortsOnWrongLabelNames) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Registry registry;
  Family<Counter>* family = *registry.AddCounter(CounterSpec("orca:c_total"));
  EXPECT_DEATH(family->WithLabels({{"modelname", "m"}}), "missing label 'model_name'");
}

TEST(RegistryTest, FamilyWithoutLabelsHasOneUnlabelledChild) {
  Registry registry;
  Family<Gauge>* family = *registry.AddGauge({MetricType::kGauge, "up_like", "One series.", {}});
  family->WithLabels({}).Set(7);
  EXPECT_EQ(registry.Serialize(), "# HELP up_like One series.\n# TYPE up_like gauge\nup_like 7\n");
}

TEST(RegistryTest, CounterIgnoresNegativeAndNanIncrements) {
  Registry registry;
  Counter& counter = (*registry.AddCounter(CounterSpec("orca:c_total")))->WithLabels({{"model_name", "m"}});
  counter.Increment(1.5);
  counter.Increment(-1);
  counter.Increment(std::nan(""));
  counter.Increment(0);
  EXPECT_EQ(counter.Value(), 1.5);
}

TEST(RegistryTest, GaugeGoesUpAndDown) {
  Registry registry;
  Gauge& gauge = (*registry.AddGauge(GaugeSpec("orca:g")))->WithLabels({{"model_name", "m"}});
  gauge.Set(10);
  gauge.Increment();
  gauge.Decrement(4);
  EXPECT_EQ(gauge.Value(), 7);
  gauge.Set(-2.5);
  EXPECT_EQ(Parse(registry).samples.at("orca:g{model_name=\"m\"}"), -2.5);
}

TEST(RegistryTest, HistogramBucketsIncludeTheirUpperBound) {
  Registry registry;
  Histogram& h = (*registry.AddHistogram(HistogramSpec("orca:h_seconds")))->WithLabels({{"model_name", "m"}});
  // Bounds 0.5, 1, 2.5, +Inf.
  for (double v : {-1.0, 0.0, 0.5}) h.Observe(v);  // <= 0.5
  for (double v : {0.5000001, 1.0}) h.Observe(v);  // (0.5, 1]
  h.Observe(2.5);                                  // (1, 2.5]
  for (double v : {2.5000001, 1e9}) h.Observe(v);  // +Inf only
  h.Observe(std::numeric_limits<double>::infinity());
  h.Observe(std::nan(""));  // ignored

  const Histogram::Snapshot snapshot = h.Collect();
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{3, 5, 6, 9}));
  EXPECT_EQ(snapshot.count, 9u);
  EXPECT_TRUE(std::isinf(snapshot.sum));

  const testing::ParsedPage page = Parse(registry);
  EXPECT_EQ(page.samples.at("orca:h_seconds_bucket{model_name=\"m\",le=\"0.5\"}"), 3);
  EXPECT_EQ(page.samples.at("orca:h_seconds_bucket{model_name=\"m\",le=\"1\"}"), 5);
  EXPECT_EQ(page.samples.at("orca:h_seconds_bucket{model_name=\"m\",le=\"2.5\"}"), 6);
  EXPECT_EQ(page.samples.at("orca:h_seconds_bucket{model_name=\"m\",le=\"+Inf\"}"), 9);
  EXPECT_EQ(page.samples.at("orca:h_seconds_count{model_name=\"m\"}"), 9);
  EXPECT_EQ(page.types.at("orca:h_seconds"), "histogram");
}

TEST(RegistryTest, HistogramSumAndExactText) {
  Registry registry;
  constexpr double bounds[] = {1, 8};
  Histogram& h = (*registry.AddHistogram(HistogramSpec("tokens", bounds, {})))->WithLabels({});
  h.Observe(1);
  h.Observe(3);
  h.Observe(100);
  EXPECT_EQ(registry.Serialize(),
            "# HELP tokens A histogram.\n"
            "# TYPE tokens histogram\n"
            "tokens_bucket{le=\"1\"} 1\n"
            "tokens_bucket{le=\"8\"} 2\n"
            "tokens_bucket{le=\"+Inf\"} 3\n"
            "tokens_sum 104\n"
            "tokens_count 3\n");
}

TEST(RegistryTest, HistogramWithoutBoundsHasOnlyInfBucket) {
  Registry registry;
  Histogram& h = (*registry.AddHistogram(HistogramSpec("h", {}, {})))->WithLabels({});
  h.Observe(-5);
  h.Observe(5);
  EXPECT_EQ(h.Collect().cumulative_counts, (std::vector<uint64_t>{2}));
}

TEST(RegistryTest, TrailingInfBoundIsDroppedAndReRegistrationStillMatches) {
  Registry registry;
  constexpr double with_inf[] = {1, 2, std::numeric_limits<double>::infinity()};
  Family<Histogram>* family = *registry.AddHistogram(HistogramSpec("h", with_inf, {}));
  EXPECT_EQ(family->buckets(), (std::vector<double>{1, 2}));
  EXPECT_EQ(*registry.AddHistogram(HistogramSpec("h", with_inf, {})), family);
  constexpr double without_inf[] = {1, 2};
  EXPECT_EQ(*registry.AddHistogram(HistogramSpec("h", without_inf, {})), family);
}

TEST(RegistryTest, ExpositionEscapesHelpAndLabelValues) {
  Registry registry;
  Family<Gauge>* family =
      *registry.AddGauge({MetricType::kGauge, "orca:g", "Line one\nback\\slash \"quoted\".", kModel});
  family->WithLabels({{"model_name", "a\"b\\c\nd"}}).Set(1);
  family->WithLabels({{"model_name", "bad\xFFutf8"}}).Set(2);
  const std::string page = registry.Serialize();
  EXPECT_THAT(page, HasSubstr("# HELP orca:g Line one\\nback\\\\slash \"quoted\".\n"));
  EXPECT_THAT(page, HasSubstr("orca:g{model_name=\"a\\\"b\\\\c\\nd\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("orca:g{model_name=\"bad\xEF\xBF\xBDutf8\"} 2\n"));
  absl::StatusOr<testing::ParsedPage> parsed = testing::ParsePage(page);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->helps.at("orca:g"), "Line one\nback\\slash \"quoted\".");
}

TEST(RegistryTest, FamilyWithNoChildrenExposesOnlyMetadata) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter(CounterSpec("orca:c_total")).ok());
  EXPECT_EQ(registry.Serialize(), "# HELP orca:c_total A counter.\n# TYPE orca:c_total counter\n");
}

TEST(RegistryTest, FamiliesAppearInRegistrationOrder) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge(GaugeSpec("zeta")).ok());
  ASSERT_TRUE(registry.AddGauge(GaugeSpec("alpha")).ok());
  const std::string page = registry.Serialize();
  EXPECT_LT(page.find("zeta"), page.find("alpha"));
  EXPECT_NE(registry.Find("alpha"), nullptr);
  EXPECT_EQ(registry.Find("beta"), nullptr);
}

struct BadSpecCase {
  const char* test_name;
  MetricSpec spec;
  const char* expected_message;
};

constexpr const char* kDuplicateLabels[] = {"a", "a"};
constexpr const char* kLeLabel[] = {"le"};
constexpr const char* kReservedLabel[] = {"__x"};
constexpr const char* kColonLabel[] = {"a:b"};
constexpr double kUnsorted[] = {1, 3, 2};
constexpr double kRepeated[] = {1, 1};
constexpr double kNanBound[] = {1, std::numeric_limits<double>::quiet_NaN()};
constexpr double kInfInside[] = {1, std::numeric_limits<double>::infinity(), 5};
constexpr double kMinusInf[] = {-std::numeric_limits<double>::infinity(), 1};

class RegistryBadSpecTest : public ::testing::TestWithParam<BadSpecCase> {};

TEST_P(RegistryBadSpecTest, IsRejectedWithAPreciseMessage) {
  Registry registry;
  const MetricSpec& spec = GetParam().spec;
  absl::Status status;
  switch (spec.type) {
    case MetricType::kCounter:
      status = registry.AddCounter(spec).status();
      break;
    case MetricType::kGauge:
      status = registry.AddGauge(spec).status();
      break;
    case MetricType::kHistogram:
      status = registry.AddHistogram(spec).status();
      break;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().expected_message));
  EXPECT_EQ(registry.Serialize(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Specs, RegistryBadSpecTest,
    ::testing::Values(BadSpecCase{"EmptyName", CounterSpec(""), "name must match"},
                      BadSpecCase{"DashInName", GaugeSpec("orca:a-b"), "name must match"},
                      BadSpecCase{"CounterWithoutTotal", CounterSpec("orca:tokens"), "must end in '_total'"},
                      BadSpecCase{"GaugeWithTotal", GaugeSpec("orca:x_total"), "only counter names"},
                      BadSpecCase{"HistogramWithTotal", HistogramSpec("orca:iteration_tokens_total"),
                                  "only counter names"},
                      BadSpecCase{"DuplicateLabel", GaugeSpec("g", kDuplicateLabels), "duplicate label 'a'"},
                      BadSpecCase{"ReservedLabel", GaugeSpec("g", kReservedLabel), "invalid label name '__x'"},
                      BadSpecCase{"ColonLabel", GaugeSpec("g", kColonLabel), "invalid label name 'a:b'"},
                      BadSpecCase{"LeOnHistogram", HistogramSpec("h", kBounds, kLeLabel), "'le' is reserved"},
                      BadSpecCase{"UnsortedBuckets", HistogramSpec("h", kUnsorted),
                                  "bucket 2 (2) is not greater than the previous bound (3)"},
                      BadSpecCase{"RepeatedBucket", HistogramSpec("h", kRepeated), "bucket 1 (1)"},
                      BadSpecCase{"NanBucket", HistogramSpec("h", kNanBound), "bucket 1 is NaN"},
                      BadSpecCase{"InfInsideBuckets", HistogramSpec("h", kInfInside), "bucket 1 is +Inf"},
                      BadSpecCase{"MinusInfBucket", HistogramSpec("h", kMinusInf), "bucket 0 is -Inf"},
                      BadSpecCase{"BucketsOnGauge", MetricSpec{MetricType::kGauge, "g", "x", kModel, kBounds},
                                  "buckets are only allowed on histograms"}),
    [](const ::testing::TestParamInfo<BadSpecCase>& info) { return info.param.test_name; });

TEST(RegistryTest, SpecTypeMustMatchTheAddMethod) {
  Registry registry;
  absl::Status status = registry.AddCounter(GaugeSpec("orca:g")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("spec type is gauge, expected counter"));
}

TEST(RegistryTest, IdenticalReRegistrationSharesTheFamily) {
  Registry registry;
  Family<Gauge>* first = *registry.AddGauge(GaugeSpec("orca:g"));
  Family<Gauge>* second = *registry.AddGauge(GaugeSpec("orca:g"));
  EXPECT_EQ(first, second);
  first->WithLabels({{"model_name", "a"}}).Set(1);
  second->WithLabels({{"model_name", "b"}}).Set(2);
  EXPECT_EQ(Parse(registry).samples.size(), 2u);
}

TEST(RegistryTest, ConflictingReRegistrationIsAlreadyExists) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge(GaugeSpec("orca:g")).ok());
  // Different help text.
  absl::Status status = registry.AddGauge({MetricType::kGauge, "orca:g", "Other help.", kModel}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  // Different labels.
  EXPECT_EQ(registry.AddGauge(GaugeSpec("orca:g", kModelReason)).status().code(), absl::StatusCode::kAlreadyExists);
  // Different type.
  status = registry.AddHistogram(HistogramSpec("orca:g")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(status.message()), HasSubstr("already used by gauge 'orca:g'"));
}

TEST(RegistryTest, HistogramSampleNamesCannotBeTakenByOtherFamilies) {
  Registry registry;
  ASSERT_TRUE(registry.AddHistogram(HistogramSpec("orca:latency_seconds")).ok());
  absl::Status status = registry.AddGauge(GaugeSpec("orca:latency_seconds_count")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(status.message()), HasSubstr("'orca:latency_seconds_count' is already used by histogram"));
  // And the other way round.
  ASSERT_TRUE(registry.AddGauge(GaugeSpec("orca:size_sum")).ok());
  EXPECT_EQ(registry.AddHistogram(HistogramSpec("orca:size")).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(RegistryTest, GaugeCallbackIsReadAtEveryScrape) {
  Registry registry;
  Family<Gauge>* family = *registry.AddGauge(GaugeSpec("orca:kv_slots_used"));
  std::atomic<int> used{3};
  int calls = 0;
  absl::StatusOr<CallbackRegistration> registration = family->AddCallback({{"model_name", "m"}}, [&] {
    ++calls;
    return static_cast<double>(used.load());
  });
  ASSERT_TRUE(registration.ok()) << registration.status();
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(Parse(registry).samples.at("orca:kv_slots_used{model_name=\"m\"}"), 3);
  used = 42;
  EXPECT_EQ(Parse(registry).samples.at("orca:kv_slots_used{model_name=\"m\"}"), 42);
  EXPECT_EQ(calls, 2);
  registration->Reset();
  EXPECT_FALSE(registration->active());
  EXPECT_EQ(Parse(registry).samples.count("orca:kv_slots_used{model_name=\"m\"}"), 0u);
  EXPECT_EQ(calls, 2);
}

TEST(RegistryTest, GaugeCallbackUnregistersWhenItsRegistrationDies) {
  Registry registry;
  Family<Gauge>* family = *registry.AddGauge(GaugeSpec("orca:g"));
  {
    CallbackRegistration outer;
    {
      absl::StatusOr<CallbackRegistration> inner = family->AddCallback({{"model_name", "m"}}, [] { return 1.0; });
      ASSERT_TRUE(inner.ok());
      outer = std::move(*inner);  // moved-from registration must not unregister
    }
    EXPECT_EQ(Parse(registry).samples.size(), 1u);
  }
  EXPECT_EQ(Parse(registry).samples.size(), 0u);
  // The series can be registered again once it is gone.
  EXPECT_TRUE(family->AddCallback({{"model_name", "m"}}, [] { return 2.0; }).ok());
}

TEST(RegistryTest, GaugeCallbackCannotDuplicateASeries) {
  Registry registry;
  Family<Gauge>* family = *registry.AddGauge(GaugeSpec("orca:g"));
  family->WithLabels({{"model_name", "plain"}});
  EXPECT_EQ(family->AddCallback({{"model_name", "plain"}}, [] { return 1.0; }).status().code(),
            absl::StatusCode::kAlreadyExists);
  absl::StatusOr<CallbackRegistration> callback = family->AddCallback({{"model_name", "cb"}}, [] { return 1.0; });
  ASSERT_TRUE(callback.ok());
  EXPECT_EQ(family->AddCallback({{"model_name", "cb"}}, [] { return 1.0; }).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(family->TryWithLabels({{"model_name", "cb"}}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(family->AddCallback({{"model_name", "x"}}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(family->AddCallback({{"stage", "x"}}, [] { return 1.0; }).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Several threads hammer cached children, create children concurrently and
// scrape at the same time; totals must be exact and every page well formed.
TEST(RegistryTest, ConcurrentUpdatesCreationAndScrapesAreExact) {
  Registry registry;
  Family<Counter>* counters = *registry.AddCounter(CounterSpec("orca:events_total"));
  Family<Gauge>* gauges = *registry.AddGauge(GaugeSpec("orca:in_flight"));
  Family<Histogram>* histograms = *registry.AddHistogram(HistogramSpec("orca:size"));
  Counter& shared_counter = counters->WithLabels({{"model_name", "shared"}});
  Gauge& shared_gauge = gauges->WithLabels({{"model_name", "shared"}});
  Histogram& shared_histogram = histograms->WithLabels({{"model_name", "shared"}});

  constexpr int kThreads = 4;
  constexpr int kIterations = 20000;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      absl::StatusOr<testing::ParsedPage> page = testing::ParsePage(registry.Serialize());
      if (!page.ok()) {
        ADD_FAILURE() << page.status();
        return;
      }
      // _count is derived from the buckets, so it always equals +Inf.
      EXPECT_EQ(page->samples["orca:size_bucket{model_name=\"shared\",le=\"+Inf\"}"],
                page->samples["orca:size_count{model_name=\"shared\"}"]);
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        shared_counter.Increment();
        shared_gauge.Increment();
        shared_histogram.Observe(i % 4 == 0 ? 0.5 : 3.0);
        shared_gauge.Decrement();
        if (i % 100 == 0) {
          // A lookup of an existing child and the creation of a new one.
          counters->WithLabels({{"model_name", "shared"}}).Increment();
          counters->WithLabels({{"model_name", absl::StrCat("t", t, "_", i)}}).Increment();
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done = true;
  scraper.join();

  constexpr int kLookupsPerThread = kIterations / 100;
  EXPECT_EQ(shared_counter.Value(), kThreads * (kIterations + kLookupsPerThread));
  EXPECT_EQ(shared_gauge.Value(), 0);
  const Histogram::Snapshot snapshot = shared_histogram.Collect();
  EXPECT_EQ(snapshot.count, static_cast<uint64_t>(kThreads * kIterations));
  EXPECT_EQ(snapshot.cumulative_counts[0], static_cast<uint64_t>(kThreads * kIterations / 4));
  EXPECT_EQ(snapshot.sum, kThreads * (kIterations / 4 * 0.5 + kIterations * 3 / 4 * 3.0));
  const testing::ParsedPage page = Parse(registry);
  size_t counter_series = 0;
  for (const auto& [series, value] : page.samples) {
    if (series.rfind("orca:events_total{", 0) == 0) ++counter_series;
  }
  EXPECT_EQ(counter_series, 1u + kThreads * kLookupsPerThread);
}

}  // namespace
}  // namespace orca::metrics
