#include "core/sched/iteration_cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace orca::sched {
namespace {

absl::Duration Linear(int64_t tokens, double fixed_ms, double per_token_ms) {
  return absl::Microseconds(1000 * (fixed_ms + per_token_ms * static_cast<double>(tokens)));
}

TEST(IterationCostModelTest, RecoversALinearCost) {
  IterationCostModel model;
  for (int i = 0; i < 100; ++i) {
    const int64_t tokens = 1 + (i % 7) * 5;
    model.Observe(tokens, Linear(tokens, 0.8, 0.03));
  }
  std::optional<IterationCostModel::Fit> fit = model.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->fixed_seconds, 0.8e-3, 1e-9);
  EXPECT_NEAR(fit->per_token_seconds, 0.03e-3, 1e-11);
  EXPECT_NEAR(fit->Seconds(32), (0.8 + 0.03 * 32) * 1e-3, 1e-9);
}

TEST(IterationCostModelTest, HasNoFitBeforeEnoughIterations) {
  IterationCostModel model;
  for (int64_t i = 0; i + 1 < IterationCostModel::kMinObservations; ++i) {
    model.Observe(1 + (i % 2) * 10, Linear(1 + (i % 2) * 10, 1, 0.1));
  }
  EXPECT_FALSE(model.fit().has_value());
  model.Observe(1, Linear(1, 1, 0.1));
  EXPECT_TRUE(model.fit().has_value());
}

TEST(IterationCostModelTest, HasNoFitWhenTheTokenCountNeverVaries) {
  // Decode-only iterations of one batch size say nothing about the cost of a token.
  IterationCostModel model;
  for (int i = 0; i < 200; ++i) model.Observe(4, absl::Milliseconds(1 + i % 3));
  EXPECT_FALSE(model.fit().has_value());
}

TEST(IterationCostModelTest, HasNoFitWhenTokensCostNothing) {
  IterationCostModel model;
  for (int i = 0; i < 200; ++i) model.Observe(1 + i % 20, absl::Milliseconds(1));
  EXPECT_FALSE(model.fit().has_value());
}

TEST(IterationCostModelTest, OneStallDoesNotMakeTokensExpensive) {
  IterationCostModel model;
  for (int i = 0; i < 100; ++i) {
    const int64_t tokens = 1 + (i % 4) * 10;
    model.Observe(tokens, Linear(tokens, 1, 0.05));
  }
  // A 200 ms stall of the machine during a 31-token iteration counts as twice its prediction.
  model.Observe(31, absl::Milliseconds(200));
  std::optional<IterationCostModel::Fit> fit = model.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_LT(fit->per_token_seconds, 0.06e-3);
  EXPECT_GT(fit->per_token_seconds, 0.05e-3);
}

TEST(IterationCostModelTest, FollowsACostThatChanges) {
  // The machine gets twice as slow: after a few half-lives the fit is the new cost.
  IterationCostModel model(/*half_life=*/16);
  for (int i = 0; i < 100; ++i) model.Observe(1 + (i % 5) * 8, Linear(1 + (i % 5) * 8, 1, 0.05));
  for (int i = 0; i < 400; ++i) model.Observe(1 + (i % 5) * 8, Linear(1 + (i % 5) * 8, 2, 0.1));
  std::optional<IterationCostModel::Fit> fit = model.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->per_token_seconds, 0.1e-3, 0.005e-3);
  EXPECT_NEAR(fit->fixed_seconds, 2e-3, 0.05e-3);
}

}  // namespace
}  // namespace orca::sched
