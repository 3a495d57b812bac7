// Percentiles and the run summary: throughput over the makespan, failures and cut-off
// requests, the paper's normalized latency.

#include "core/loadgen/bench_summary.h"

#include <gtest/gtest.h>

#include <vector>

namespace orca::loadgen {
namespace {

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.99), 7.0);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.5), 2.5);  // unsorted input
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 1.0), 4.0);
  std::vector<double> ten;
  for (int i = 1; i <= 10; ++i) ten.push_back(i);
  EXPECT_NEAR(Percentile(ten, 0.9), 9.1, 1e-12);  // NumPy: np.percentile(1..10, 90) = 9.1
  EXPECT_NEAR(Percentile(ten, 0.99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 7.0), 2.0);  // q is clamped
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, -1.0), 1.0);
}

TEST(PercentileTest, SummarizeGivesMeanQuantilesAndMax) {
  const Distribution d = Summarize({3, 1, 2, 10});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 4.0);
  EXPECT_DOUBLE_EQ(d.p50, 2.5);
  EXPECT_DOUBLE_EQ(d.max, 10.0);
  EXPECT_EQ(Summarize({}).count, 0);
}

RequestRecord Done(double sent, double e2e, int32_t tokens, std::vector<double> itl = {}) {
  RequestRecord r;
  r.outcome = RequestOutcome::kOk;
  r.scheduled_s = sent;
  r.sent_s = sent;
  r.e2e_s = e2e;
  r.ttft_s = e2e / 4;
  r.prompt_tokens = 10;
  r.output_tokens = tokens;
  r.itl_s = std::move(itl);
  return r;
}

TEST(SummarizeRunTest, ThroughputOverTheMakespanOfCompletedRequests) {
  std::vector<RequestRecord> records = {Done(1.0, 2.0, 4, {0.1, 0.2}), Done(2.0, 3.0, 6, {0.3}), Done(3.0, 1.0, 2)};
  RequestRecord failed = Done(1.5, 0.5, 0);
  failed.outcome = RequestOutcome::kFailed;
  records.push_back(failed);
  const BenchSummary s = SummarizeRun(records, /*run_end_s=*/10.0);
  EXPECT_EQ(s.num_requests, 4);
  EXPECT_EQ(s.num_completed, 3);
  EXPECT_EQ(s.num_failed, 1);
  // First send at 1.0, last completion at 5.0 (2.0 + 3.0); the run end does not count
  // because nothing was cut off.
  EXPECT_DOUBLE_EQ(s.makespan_s, 4.0);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 0.75);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 3.0);
  EXPECT_DOUBLE_EQ(s.total_tokens_per_s, (30.0 + 12.0) / 4.0);
  EXPECT_EQ(s.itl_s.count, 3);
  EXPECT_DOUBLE_EQ(s.e2e_s.p50, 2.0);
  // Normalized: 2/4, 3/6, 1/2 — all 0.5 s/token.
  EXPECT_DOUBLE_EQ(s.normalized_latency_s.p50, 0.5);
  EXPECT_DOUBLE_EQ(s.normalized_latency_s.p99, 0.5);
}

TEST(SummarizeRunTest, CutOffRequestsStretchTheMakespanToTheEndOfTheRun) {
  std::vector<RequestRecord> records = {Done(0.0, 1.0, 10)};
  RequestRecord cut;
  cut.outcome = RequestOutcome::kUnfinished;
  cut.sent_s = 0.5;
  cut.scheduled_s = 0.2;
  records.push_back(cut);
  RequestRecord not_sent;
  not_sent.scheduled_s = 99;
  records.push_back(not_sent);
  const BenchSummary s = SummarizeRun(records, /*run_end_s=*/8.0);
  EXPECT_EQ(s.num_unfinished, 1);
  EXPECT_EQ(s.num_not_sent, 1);
  EXPECT_DOUBLE_EQ(s.makespan_s, 8.0);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 1.0 / 8.0);
  EXPECT_NEAR(s.max_send_lag_s, 0.3, 1e-12);  // the unsent request does not count
}

TEST(SummarizeRunTest, NoCompletedRequestMeansNoThroughput) {
  RequestRecord failed;
  failed.outcome = RequestOutcome::kFailed;
  const BenchSummary s = SummarizeRun(std::vector<RequestRecord>{failed}, 3.0);
  EXPECT_EQ(s.num_completed, 0);
  EXPECT_DOUBLE_EQ(s.throughput_rps, 0.0);
  EXPECT_EQ(s.normalized_latency_s.count, 0);
}

}  // namespace
}  // namespace orca::loadgen
