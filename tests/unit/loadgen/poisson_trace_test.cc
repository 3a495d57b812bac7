// The paper's §6.2 trace generator (moved here with it from the simulation's tests).

#include "core/loadgen/poisson_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace orca::loadgen {
namespace {

using ::testing::HasSubstr;

TEST(TraceTest, IsDeterministicAndFollowsThePapersDistributions) {
  TraceOptions options;
  options.seed = 7;
  options.arrival_rate = 4.0;
  options.num_requests = 20000;
  absl::StatusOr<std::vector<TraceRequest>> trace = GeneratePoissonTrace(options);
  ASSERT_TRUE(trace.ok()) << trace.status();
  absl::StatusOr<std::vector<TraceRequest>> again = GeneratePoissonTrace(options);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(trace->size(), 20000u);

  double prompt_sum = 0;
  double output_sum = 0;
  absl::Duration previous;
  for (size_t i = 0; i < trace->size(); ++i) {
    const TraceRequest& r = (*trace)[i];
    EXPECT_EQ(r.arrival, (*again)[i].arrival);
    EXPECT_EQ(r.num_prompt_tokens, (*again)[i].num_prompt_tokens);
    ASSERT_GE(r.num_prompt_tokens, 32);
    ASSERT_LE(r.num_prompt_tokens, 512);
    ASSERT_GE(r.max_new_tokens, 1);
    ASSERT_LE(r.max_new_tokens, 128);
    ASSERT_GE(r.arrival, previous);
    previous = r.arrival;
    prompt_sum += r.num_prompt_tokens;
    output_sum += r.max_new_tokens;
  }
  // Means of U(32,512) and U(1,128) are 272 and 64.5; mean gap 1/λ = 0.25 s.
  EXPECT_NEAR(prompt_sum / 20000, 272.0, 4.0);
  EXPECT_NEAR(output_sum / 20000, 64.5, 1.0);
  EXPECT_NEAR(absl::ToDoubleSeconds(trace->back().arrival) / 20000, 0.25, 0.01);
}

TEST(TraceTest, RateChangesArrivalsOnlyAndSeedChangesEverything) {
  TraceOptions slow;
  slow.num_requests = 50;
  TraceOptions fast = slow;
  fast.arrival_rate = 10.0;
  TraceOptions other = slow;
  other.seed = 2;
  auto a = GeneratePoissonTrace(slow);
  auto b = GeneratePoissonTrace(fast);
  auto c = GeneratePoissonTrace(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  int same_as_other_seed = 0;
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ((*a)[i].num_prompt_tokens, (*b)[i].num_prompt_tokens);
    EXPECT_EQ((*a)[i].max_new_tokens, (*b)[i].max_new_tokens);
    EXPECT_NEAR(absl::ToDoubleSeconds((*a)[i].arrival), 10 * absl::ToDoubleSeconds((*b)[i].arrival), 1e-6);
    same_as_other_seed += (*a)[i].num_prompt_tokens == (*c)[i].num_prompt_tokens;
  }
  EXPECT_LT(same_as_other_seed, 5);
}

TEST(TraceTest, RejectsBadOptionsNamingTheField) {
  TraceOptions options;
  options.arrival_rate = 0;
  EXPECT_THAT(std::string(GeneratePoissonTrace(options).status().message()), HasSubstr("arrival_rate"));
  options = TraceOptions();
  options.max_prompt_tokens = 10;
  EXPECT_THAT(std::string(GeneratePoissonTrace(options).status().message()), HasSubstr("min_prompt_tokens"));
}

}  // namespace
}  // namespace orca::loadgen
