// Prompt logprobs through the scheduler: each chunk of a chunked prefill
// reports its positions, a recomputed request's repeats are dropped (each
// position reported once, in order), and a request asking for prompt logprobs
// does not reuse cached prefix blocks (they have no logits).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/sched/scheduler.h"
#include "tests/unit/sched/request_builder.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;

const absl::Time kT0 = absl::UnixEpoch();

std::unique_ptr<Scheduler> MakeScheduler(SchedulerOptions options) {
  auto s = Scheduler::Create(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

// A record scoring positions [first, first + n) with logprob -position (so tests can tell them apart).
RequestResult PromptRecord(RequestId id, int32_t first, int32_t n, std::optional<int32_t> token) {
  RequestResult r;
  r.request_id = id;
  r.has_token = token.has_value();
  if (token) r.token.token_id = *token;
  r.prompt_first_position = first;
  for (int32_t p = first; p < first + n; ++p) r.prompt_logprobs.push_back({p, -static_cast<float>(p), {}, 1});
  return r;
}

std::vector<float> Logprobs(const std::vector<SampledToken>& tokens) {
  std::vector<float> out;
  for (const SampledToken& t : tokens) out.push_back(t.logprob);
  return out;
}

TEST(PromptLogprobsSchedulerTest, ChunksReportTheirPositionsOnceAndInOrder) {
  SchedulerOptions options;
  options.max_bs = 4;
  options.n_slots = 256;
  options.max_num_batched_tokens = 4;
  auto scheduler = MakeScheduler(options);
  RequestSpec spec = RequestBuilder().Prompt(10).MaxNewTokens(3).Build();
  spec.sampling.prompt_logprobs = 0;
  absl::StatusOr<RequestId> id = scheduler->Submit(spec, kT0);
  ASSERT_TRUE(id.ok()) << id.status();

  // Chunks [0, 4), [4, 8), [8, 10): rows 0..3 score positions 1..4, rows 4..7 positions 5..8, row 8 position 9.
  const std::vector<std::pair<int32_t, int32_t>> chunks = {{1, 4}, {5, 4}, {9, 1}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::optional<IterationPlan> plan = scheduler->Schedule(kT0);
    ASSERT_TRUE(plan.has_value());
    ASSERT_EQ(plan->requests.size(), 1u);
    EXPECT_EQ(plan->requests[0].start_position, static_cast<int32_t>(c) * 4);
    const bool last = c + 1 == chunks.size();
    EXPECT_EQ(plan->requests[0].sample, last);
    auto events = scheduler->OnIterationDone(
        plan->iteration_id,
        {PromptRecord(*id, chunks[c].first, chunks[c].second, last ? std::optional(7) : std::nullopt)}, kT0);
    ASSERT_TRUE(events.ok()) << events.status();
    ASSERT_EQ(events->size(), 1u);
    std::vector<float> want;
    for (int32_t p = chunks[c].first; p < chunks[c].first + chunks[c].second; ++p) want.push_back(-p);
    EXPECT_EQ(Logprobs((*events)[0].new_prompt_logprobs), want) << "chunk " << c;
    EXPECT_EQ((*events)[0].new_tokens.size(), last ? 1u : 0u);
  }
  // A record repeating positions (a recompute after a preemption) and one past the prompt add nothing.
  std::optional<IterationPlan> plan = scheduler->Schedule(kT0);
  ASSERT_TRUE(plan.has_value());
  RequestResult again = PromptRecord(*id, 1, 12, 8);
  auto events = scheduler->OnIterationDone(plan->iteration_id, {again}, kT0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_TRUE((*events)[0].new_prompt_logprobs.empty());
  EXPECT_EQ((*events)[0].new_tokens.size(), 1u);
}

TEST(PromptLogprobsSchedulerTest, RequestsWithoutPromptLogprobsIgnoreStrayRecords) {
  SchedulerOptions options;
  options.max_bs = 4;
  options.n_slots = 256;
  auto scheduler = MakeScheduler(options);
  absl::StatusOr<RequestId> id = scheduler->Submit(RequestBuilder().Prompt(5).MaxNewTokens(2).Build(), kT0);
  ASSERT_TRUE(id.ok());
  std::optional<IterationPlan> plan = scheduler->Schedule(kT0);
  ASSERT_TRUE(plan.has_value());
  auto events = scheduler->OnIterationDone(plan->iteration_id, {PromptRecord(*id, 1, 4, 9)}, kT0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_TRUE((*events)[0].new_prompt_logprobs.empty());
  EXPECT_EQ((*events)[0].new_tokens.size(), 1u);
}

TEST(PromptLogprobsSchedulerTest, PrefixCacheIsNotReusedForPromptLogprobs) {
  SchedulerOptions options;
  options.max_bs = 4;
  options.n_slots = 64;
  options.kv_block_size = 4;
  options.enable_prefix_caching = true;
  auto scheduler = MakeScheduler(options);
  const std::vector<int32_t> prompt = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  absl::StatusOr<RequestId> a = scheduler->Submit(RequestBuilder().PromptIds(prompt).MaxNewTokens(1).Build(), kT0);
  ASSERT_TRUE(a.ok());
  std::optional<IterationPlan> plan = scheduler->Schedule(kT0);
  ASSERT_TRUE(plan.has_value());
  ASSERT_TRUE(scheduler->OnIterationDone(plan->iteration_id, {PromptRecord(*a, 1, 0, 5)}, kT0).ok());
  ASSERT_EQ(scheduler->stats().kv.num_cached_blocks, 2);  // a's two full blocks

  RequestSpec with = RequestBuilder().PromptIds(prompt).MaxNewTokens(1).Build();
  with.sampling.prompt_logprobs = 1;
  absl::StatusOr<RequestId> b = scheduler->Submit(with, kT0);
  absl::StatusOr<RequestId> c = scheduler->Submit(RequestBuilder().PromptIds(prompt).MaxNewTokens(1).Build(), kT0);
  ASSERT_TRUE(b.ok() && c.ok());
  plan = scheduler->Schedule(kT0);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->requests.size(), 2u);
  EXPECT_EQ(plan->requests[0].request_id, *b);
  EXPECT_EQ(plan->requests[0].start_position, 0) << "prompt logprobs need every position's logits";
  EXPECT_EQ(plan->requests[0].input_token_ids, prompt);
  EXPECT_EQ(plan->requests[1].request_id, *c);
  EXPECT_EQ(plan->requests[1].start_position, 8) << "the others still hit the cache";
}

}  // namespace
}  // namespace orca::sched
