// Timelines of the options beyond the paper: chunked prefill, paged KV with preemption,
// prefix caching and priorities, one iteration at a time against the simulated engine
// (which checks every plan against the worker protocol, and with scheduler-owned block
// tables that every position read holds the request's own prefix). Columns as in
// scheduler_timeline_test.cc, plus:
//   c = a prompt chunk that does not sample   x = preempted (its KV taken back)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/unit/sched/request_builder.h"
#include "tests/unit/sched/scheduler_harness.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::orca::sched::testing::SchedulerHarness;

constexpr RequestState kQueued = RequestState::kQueued;
constexpr RequestState kRunning = RequestState::kRunning;
constexpr RequestState kLength = RequestState::kFinishedLength;

struct OptionsBuilder {
  SchedulerOptions options;
  OptionsBuilder(PolicyKind policy, int32_t max_bs, int64_t n_slots) {
    options.policy = policy;
    options.max_bs = max_bs;
    options.n_slots = n_slots;
  }
  OptionsBuilder& Block(int32_t size) {
    options.kv_block_size = size;
    return *this;
  }
  OptionsBuilder& Chunk(int32_t tokens) {
    options.max_num_batched_tokens = tokens;
    return *this;
  }
  OptionsBuilder& LongPrefillThreshold(int32_t tokens) {
    options.long_prefill_token_threshold = tokens;
    return *this;
  }
  OptionsBuilder& Slowdown(double r) {
    options.max_prefill_slowdown = r;
    return *this;
  }
  OptionsBuilder& PrefixCaching() {
    options.enable_prefix_caching = true;
    return *this;
  }
  OptionsBuilder& Priority(absl::Duration aging) {
    options.scheduling_order = SchedulingOrder::kPriority;
    options.priority_aging = aging;
    return *this;
  }
  OptionsBuilder& Workers(int32_t n) {
    options.n_workers = n;
    return *this;
  }
  SchedulerOptions Build() const { return options; }
};

void ExpectStates(const SchedulerHarness& h, const std::vector<std::pair<RequestId, RequestState>>& expected,
                  int iteration) {
  for (const auto& [id, state] : expected) {
    EXPECT_EQ(h.state(id), state) << "request " << h.log(id).label << " after iteration " << iteration << ": "
                                  << RequestStateName(h.state(id));
  }
  EXPECT_EQ(h.CheckInvariants(true), "") << "after iteration " << iteration;
}

std::vector<int64_t> PlanTokens(const SchedulerHarness& h) {
  std::vector<int64_t> tokens;
  for (const IterationPlan& plan : h.plans()) tokens.push_back(plan.NumTokens());
  return tokens;
}

TEST(ChunkedPrefillTimelineTest, DecodesGoFirstAndPromptsFillTheTokenBudgetInChunks) {
  // max_num_batched_tokens 8. b's 14-token prompt takes three iterations (4 + 7 + 3 tokens)
  // while a decodes in every one; c arrives during b's prefill and gets what is left.
  //   a | P D D D
  //   b | c c P D
  //   c |   - c P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 1024).Chunk(8).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(4).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(14).MaxNewTokens(2).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}}, 0);
  EXPECT_FALSE(h.plans()[0].requests[1].sample);  // b's first chunk: 4 of 14 tokens

  RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(6).MaxNewTokens(1).Build());
  h.Step();  // a decodes, b's second chunk (7 tokens) uses the rest of the budget: c waits
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 1);
  EXPECT_TRUE(h.log(b).tokens.empty());
  h.Step();  // b's last chunk (3) samples; c is admitted with a 4-token chunk
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}}, 2);
  h.Step();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}}, 3);
  h.Step();
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}}, 4);
  EXPECT_EQ(h.log(b).tokens.size(), 2u);

  EXPECT_EQ(h.Timeline(),
            "a | P D D D\n"
            "b | c c P D\n"
            "c |   - c P\n");
  EXPECT_THAT(PlanTokens(h), ::testing::ElementsAre(8, 8, 8, 4));
  const ScheduledRequest& b3 = h.plans()[2].requests[1];
  EXPECT_EQ(b3.start_position, 11);  // continues where the second chunk ended
  EXPECT_EQ(b3.input_token_ids.size(), 3u);
}

TEST(ChunkedPrefillTimelineTest, ALongPrefillThresholdLeavesRoomForTheRequestQueuedBehindALongPrompt) {
  // The same workload with long_prefill_token_threshold 4: b's chunks are at most 4 tokens, so c,
  // which arrives during b's prefill, is admitted in the next iteration with the rest of the budget
  // (without the cap it waits until b's prompt is done, above).
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 1024).Chunk(8).LongPrefillThreshold(4).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(4).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(14).MaxNewTokens(2).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}}, 0);
  RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(6).MaxNewTokens(1).Build());
  h.Step();  // a decodes, b's second chunk is 4 tokens, c is admitted with the 3 left
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}}, 1);
  for (int i = 2; i < 8 && h.state(b) != kLength; ++i) h.Step();
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}}, 8);
  for (const IterationPlan& plan : h.plans())
    for (const ScheduledRequest& r : plan.requests)
      if (r.phase == Phase::kInitiation) {
        EXPECT_LE(r.input_token_ids.size(), 4u) << "plan " << plan.iteration_id;
      }
  EXPECT_EQ(h.Timeline(),
            "a | P D D D\n"
            "b | c c c P D\n"
            "c |   c P\n");
}

// One pipeline beat where an iteration of T tokens takes 1 ms + 0.25 ms × T (n_workers 1).
void CostlyStep(SchedulerHarness& h) {
  h.Advance(absl::Microseconds(1000 + 250 * h.plans().back().NumTokens()));
  ASSERT_TRUE(h.CompleteOldest());
  h.ScheduleAll();
  EXPECT_EQ(h.CheckInvariants(true), "") << "after plan " << h.plans().size();
}

TEST(ChunkedPrefillTimelineTest, TheTimeBudgetCutsChunksToWhatTheDecodesCanWaitFor) {
  // max_prefill_slowdown 2, no token budget. w's 20-token prompt and 32 decodes teach the
  // scheduler the engine's cost (1 ms + 0.25 ms per token). Then b's 17-token prompt
  // arrives while w decodes: an iteration may take twice w's decode alone, 2 × 1.25 ms, so
  // b gets (2 - 1) × 1.25 / 0.25 = 5 tokens per iteration: 5, 5, 5, 2 (the last samples).
  // When nothing decodes, c's 30-token prompt goes whole: no inter-token latency to protect.
  //   w | P D ... D D D D D
  //   b |           c c c P
  //   c |                     P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 1024).Slowdown(2).Build());
  RequestId w = h.Submit(RequestBuilder().Id("w").Prompt(20).MaxNewTokens(40).Build());
  h.ScheduleAll();
  for (int i = 0; i < 33; ++i) CostlyStep(h);  // 34 plans: the prompt, 33 decodes
  ASSERT_EQ(h.plans().size(), 34u);
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(17).MaxNewTokens(1).Build());
  h.ScheduleAll();                            // nothing: w's 34th plan is in flight
  for (int i = 0; i < 4; ++i) CostlyStep(h);  // plans 35-38 carry w's decode and b's chunks
  std::vector<int64_t> tokens = PlanTokens(h);
  EXPECT_THAT(std::vector<int64_t>(tokens.begin() + 34, tokens.end()), ::testing::ElementsAre(6, 6, 6, 3));
  CostlyStep(h);  // plan 38 returns: b's token
  ExpectStates(h, {{w, kRunning}, {b, kLength}}, 38);
  EXPECT_EQ(h.log(b).tokens.size(), 1u);
  while (h.num_in_flight() > 0) CostlyStep(h);
  ExpectStates(h, {{w, kLength}}, 40);
  RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(30).MaxNewTokens(1).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.plans().back().NumTokens(), 30);
  CostlyStep(h);
  ExpectStates(h, {{c, kLength}}, 41);
}

TEST(ChunkedPrefillTimelineTest, WithoutAFitTheTimeBudgetLeavesTheTokenBudget) {
  // Every harness iteration takes 1 ms whatever its tokens: tokens cost nothing measurable,
  // so the time budget never binds and the plans are the token budget's (the first test's).
  //   a | P D D D
  //   b | c c P D
  //   c |   - c P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 1024).Chunk(8).Slowdown(1.5).Build());
  h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(4).Build());
  h.Submit(RequestBuilder().Id("b").Prompt(14).MaxNewTokens(2).Build());
  h.ScheduleAll();
  h.Submit(RequestBuilder().Id("c").Prompt(6).MaxNewTokens(1).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.Timeline(),
            "a | P D D D\n"
            "b | c c P D\n"
            "c |   - c P\n");
  EXPECT_THAT(PlanTokens(h), ::testing::ElementsAre(8, 8, 8, 4));
}

TEST(ChunkedPrefillTimelineTest, AlgorithmOnePutsTheWholePromptIntoOneIteration) {
  // The same workload under Algorithm 1: b's 14 prompt tokens ride in iteration 1 whole.
  //   a | P D D D
  //   b | P D
  //   c |   P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 1024).Build());
  h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(4).Build());
  h.Submit(RequestBuilder().Id("b").Prompt(14).MaxNewTokens(2).Build());
  h.ScheduleAll();
  h.Submit(RequestBuilder().Id("c").Prompt(6).MaxNewTokens(1).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.Timeline(),
            "a | P D D D\n"
            "b | P D\n"
            "c |   P\n");
  EXPECT_THAT(PlanTokens(h), ::testing::ElementsAre(18, 8, 1, 1));
}

TEST(PagedTimelineTest, GrowsBlockByBlockAndPreemptsTheLatestArrivalWhenBlocksRunOut) {
  // 4 blocks of 4 tokens. a and b are admitted on one block each (their prompts) and grow
  // at positions 4 and 8. In iteration 6 a needs a third block and none is free: b, the
  // later arrival, is preempted (its 2 blocks freed) and a continues. b is readmitted when
  // a finishes and recomputes its prompt plus the 5 tokens it had generated in one
  // initiation, which samples its 6th and last token (the one it would have generated
  // without the preemption: the simulated engine's tokens depend on the position only).
  //   a | P D D D D D
  //   b | P D D D D x P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kPaged, 4, 16).Block(4).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(6).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(4).MaxNewTokens(6).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 2);
  // Blocks in use once each iteration returned and the next was planned.
  const std::vector<int32_t> blocks_in_use = {4, 4, 4, 4, 3, 3, 0};
  for (int i = 1; i <= 7; ++i) {
    h.Step();
    EXPECT_EQ(h.CheckInvariants(true), "") << "after iteration " << i;
    EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, blocks_in_use[i - 1]) << "after iteration " << i;
    if (i == 5) {
      EXPECT_EQ(h.state(b), kQueued);  // preempted in the plan of iteration 6
      EXPECT_EQ(h.scheduler().GetRequest(b)->num_preemptions, 1);
      EXPECT_EQ(h.log(b).tokens.size(), 5u);  // what it generated stays streamed
    }
  }
  ExpectStates(h, {{a, kLength}, {b, kLength}}, 7);
  EXPECT_EQ(h.scheduler().stats().num_preemptions, 1u);
  EXPECT_EQ(h.Timeline(),
            "a | P D D D D D\n"
            "b | P D D D D x P\n");
  // The recompute: prompt + 5 generated tokens in one initiation, told to the workers as new.
  const ScheduledRequest& again = h.plans()[6].requests[0];
  EXPECT_EQ(again.request_id, b);
  EXPECT_EQ(again.input_token_ids.size(), 9u);
  ASSERT_TRUE(again.new_request.has_value());
  EXPECT_EQ(again.new_request->output_token_ids,
            std::vector<int32_t>(h.log(b).tokens.begin(), h.log(b).tokens.begin() + 5));
  EXPECT_THAT(h.plans()[5].released_request_ids, ::testing::ElementsAre(b));
  h.FlushReleases();
  EXPECT_EQ(h.engine().num_allocated_slots(), 0);
}

TEST(PagedTimelineTest, AdmitsOnThePromptsBlocksOnly) {
  // Reserved KV (Algorithm 1) admits only one of these at a time: each reserves 4 + 12 = 16
  // of 24 slots. Paged KV admits both on their prompt block (4 tokens each).
  for (PolicyKind policy : {PolicyKind::kOrca, PolicyKind::kPaged}) {
    SchedulerHarness h(OptionsBuilder(policy, 4, 24).Block(4).Build());
    RequestId a = h.Submit(RequestBuilder().Prompt(4).MaxNewTokens(12).Build());
    RequestId b = h.Submit(RequestBuilder().Prompt(4).MaxNewTokens(12).Build());
    h.ScheduleAll();
    EXPECT_EQ(h.state(a), kRunning);
    EXPECT_EQ(h.state(b), policy == PolicyKind::kPaged ? kRunning : kQueued) << PolicyKindName(policy);
    EXPECT_EQ(h.scheduler().stats().n_rsrv, policy == PolicyKind::kPaged ? 8 : 16);
    h.RunToCompletion();
    EXPECT_EQ(h.CheckInvariants(true), "");
    EXPECT_EQ(h.state(b), kLength);
  }
}

TEST(PrefixCachingTimelineTest, ALaterRequestReusesTheCachedFullBlocksAndPrefillsTheRest) {
  // Blocks of 4. a's 10-token prompt fills 2 blocks, registered when its iteration returns.
  // b shares a's first 8 tokens: it starts at position 8 with a's two blocks and computes 2
  // tokens. c is a's prompt exactly: 8 tokens hit, the last 2 are computed (the last
  // token's logits are needed). d is a's first 8 tokens: 4 hit, the second block is
  // recomputed rather than rewritten in place.
  std::vector<int32_t> prompt_a = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  std::vector<int32_t> prompt_b = {11, 12, 13, 14, 15, 16, 17, 18, 30, 31};
  std::vector<int32_t> prompt_d(prompt_a.begin(), prompt_a.begin() + 8);
  // Two batches in flight, so that b, c and d start while a's second iteration runs.
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 64).Block(4).PrefixCaching().Workers(2).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").PromptIds(prompt_a).MaxNewTokens(2).Build());
  h.ScheduleAll();
  h.Step();
  RequestId b = h.Submit(RequestBuilder().Id("b").PromptIds(prompt_b).MaxNewTokens(2).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").PromptIds(prompt_a).MaxNewTokens(2).Build());
  RequestId d = h.Submit(RequestBuilder().Id("d").PromptIds(prompt_d).MaxNewTokens(2).Build());
  h.ScheduleAll();
  const IterationPlan& plan = h.plans().back();
  ASSERT_EQ(plan.requests.size(), 3u);  // b, c, d start (a's decode is in flight)
  const ScheduledRequest& sb = plan.requests[0];
  const ScheduledRequest& sc = plan.requests[1];
  const ScheduledRequest& sd = plan.requests[2];
  EXPECT_EQ(sb.request_id, b);
  const std::vector<int32_t>& a_blocks = *h.scheduler().kv().block_table(a);
  EXPECT_EQ(sb.start_position, 8);
  EXPECT_EQ(sb.input_token_ids, std::vector<int32_t>({30, 31}));
  EXPECT_EQ(std::vector<int32_t>(sb.new_block_ids.begin(), sb.new_block_ids.begin() + 2),
            std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 2));
  EXPECT_EQ(sc.start_position, 8);
  EXPECT_EQ(sc.input_token_ids, std::vector<int32_t>({19, 20}));
  EXPECT_EQ(sd.start_position, 4);
  EXPECT_EQ(sd.input_token_ids.size(), 4u);
  EXPECT_EQ(h.scheduler().GetRequest(b)->num_cached_tokens, 8);
  const KvStats kv = h.scheduler().stats().kv;
  EXPECT_EQ(kv.prefix_cache_queries, 10 + 10 + 10 + 8);
  EXPECT_EQ(kv.prefix_cache_hits, 8 + 8 + 4);
  h.RunToCompletion();
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}, {d, kLength}}, 4);
  // Finished requests' blocks stay cached (free, evictable) for the next request: a's two
  // (d recomputed a copy of the second one, which is not cached twice; no other block
  // filled up).
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 0);
  EXPECT_EQ(h.scheduler().stats().kv.num_cached_blocks, 2);
}

// Blocks filled while decoding join the cache like prompt blocks, under the same chain of
// (parent, tokens) keys, so the next chat turn (prompt + the model's reply + a new user turn)
// reuses them. Blocks of 4, two batches in flight; a has a 6-token prompt and 8 new tokens:
//   position  0-3: prompt            block 0, written by a's prompt iteration P
//             4-7: prompt 4-5, g0 g1 block 1, its last slot written by a's second decode
//             8-11: g2..g5           block 2
//             12: g6                 partial, never registered (g7 is sampled, never computed)
// A block is registered when the iteration that wrote its last slot returns, never while it
// is in flight: a turn arriving then reuses block 0 only.
class DecodeFilledBlocksTest : public ::testing::TestWithParam<PolicyKind> {};

TEST_P(DecodeFilledBlocksTest, TheNextTurnReusesTheBlocksTheReplyFilled) {
  const std::vector<int32_t> prompt_a = {11, 12, 13, 14, 15, 16};
  SchedulerHarness h(OptionsBuilder(GetParam(), 4, 64).Block(4).PrefixCaching().Workers(2).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").PromptIds(prompt_a).MaxNewTokens(8).Build());
  h.ScheduleAll();
  auto cached = [&] { return h.scheduler().stats().kv.num_cached_blocks; };
  EXPECT_EQ(cached(), 0);
  h.Step();  // P returned (g0); D1 (input g0, writes position 6) is in flight
  EXPECT_EQ(cached(), 1);
  h.Step();  // D1 returned (g1); D2 (input g1, writes position 7) is in flight
  ASSERT_EQ(h.log(a).tokens.size(), 2u);
  EXPECT_EQ(cached(), 1) << "block 1 registered before the iteration writing its last slot returned";
  // A turn that needs block 1 now: only block 0 hits; it computes block 1 itself.
  std::vector<int32_t> early = prompt_a;
  early.insert(early.end(), h.log(a).tokens.begin(), h.log(a).tokens.end());
  early.insert(early.end(), {40, 41});
  RequestId b = h.Submit(RequestBuilder().Id("b").PromptIds(early).MaxNewTokens(1).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().GetRequest(b)->num_cached_tokens, 4);
  h.Step();  // D2 returned: block 1 is complete and registered
  EXPECT_GE(cached(), 2);
  h.RunToCompletion();
  ASSERT_EQ(h.state(a), kLength);
  ASSERT_EQ(h.log(a).tokens.size(), 8u);
  // a computed 6 + 7 tokens: blocks 0-2 cached, the partial block 3 not (b's copy of block 1
  // is not cached twice; b's own partial block neither).
  EXPECT_EQ(cached(), 3);
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 0);

  // The next turn: a's prompt, its whole reply, a new user turn. 16 tokens, so 3 blocks may
  // hit (the last token is computed): all three of a's, two of them filled by decodes.
  std::vector<int32_t> turn = prompt_a;
  turn.insert(turn.end(), h.log(a).tokens.begin(), h.log(a).tokens.end());
  turn.insert(turn.end(), {40, 41});
  const KvStats before = h.scheduler().stats().kv;
  RequestId c = h.Submit(RequestBuilder().Id("c").PromptIds(turn).MaxNewTokens(2).Build());
  h.ScheduleAll();
  const ScheduledRequest& sc = h.plans().back().requests.back();
  EXPECT_EQ(sc.request_id, c);
  EXPECT_EQ(sc.start_position, 12);
  EXPECT_EQ(sc.input_token_ids, std::vector<int32_t>({h.log(a).tokens[6], h.log(a).tokens[7], 40, 41}));
  const KvStats after = h.scheduler().stats().kv;
  EXPECT_EQ(after.prefix_cache_queries - before.prefix_cache_queries, 16);
  EXPECT_EQ(after.prefix_cache_hits - before.prefix_cache_hits, 12);
  // A reply that diverges inside block 2 reuses blocks 0 and 1 only.
  std::vector<int32_t> other = prompt_a;
  other.insert(other.end(), h.log(a).tokens.begin(), h.log(a).tokens.begin() + 3);
  other.insert(other.end(), {h.log(a).tokens[3] + 1, 7, 7, 7, 7});
  RequestId d = h.Submit(RequestBuilder().Id("d").PromptIds(other).MaxNewTokens(2).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().GetRequest(d)->num_cached_tokens, 8);
  h.RunToCompletion();
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}, {d, kLength}}, 4);
}

TEST_P(DecodeFilledBlocksTest, ACancelledRequestLeavesOnlyItsReturnedBlocksCached) {
  // a decodes into block 1 and is cancelled while the iteration writing position 7 is in
  // flight: that iteration's token is discarded and block 1 never registered; block 0 is.
  const std::vector<int32_t> prompt_a = {11, 12, 13, 14, 15, 16};
  SchedulerHarness h(OptionsBuilder(GetParam(), 4, 64).Block(4).PrefixCaching().Workers(2).Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").PromptIds(prompt_a).MaxNewTokens(8).Build());
  h.ScheduleAll();
  h.Step();
  h.Step();  // D2 (writes position 7) in flight
  EXPECT_TRUE(h.Cancel(a));
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedCancelled);
  EXPECT_EQ(h.scheduler().stats().kv.num_cached_blocks, 1);
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 0);
  EXPECT_EQ(h.CheckInvariants(true), "");
}

TEST(DecodeFilledBlocksPagedTest, APreemptedRequestRecomputesOnlyPastItsCachedDecodeBlocks) {
  // Paged, 7 blocks of 4. a and b decode side by side; at position 12 a takes the last free
  // block and b, needing its fourth, is preempted (latest first) with 12 computed tokens in 3
  // full registered blocks: 0 (prompt), 1 and 2 (filled by its decodes). Released tail first,
  // they join the free queue's MRU end, so a's fifth block evicts b's block 2 and blocks 0-1
  // survive. Readmitted once a finishes, b's prompt + generated tokens hit them: it recomputes
  // from position 8, not 4. The simulated workers check that every position read holds the
  // request's own tokens.
  SchedulerHarness h(OptionsBuilder(PolicyKind::kPaged, 4, 28).Block(4).PrefixCaching().Build());
  RequestId a = h.Submit(RequestBuilder().Id("a").PromptIds({1, 2, 3, 4}).MaxNewTokens(16).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").PromptIds({5, 6, 7, 8}).MaxNewTokens(12).Build());
  h.RunToCompletion();
  ExpectStates(h, {{a, kLength}, {b, kLength}}, -1);
  EXPECT_GE(h.scheduler().stats().num_preemptions, 1u);
  int32_t readmitted_at = -1;
  int admissions = 0;
  for (const IterationPlan& plan : h.plans()) {
    for (const ScheduledRequest& r : plan.requests) {
      if (r.request_id == b && r.new_request.has_value() && ++admissions == 2) readmitted_at = r.start_position;
    }
  }
  ASSERT_EQ(admissions, 2) << h.Timeline();
  EXPECT_EQ(readmitted_at, 8) << "b's decode-filled blocks were not reused\n" << h.Timeline();
}

INSTANTIATE_TEST_SUITE_P(ReservedAndPaged, DecodeFilledBlocksTest,
                         ::testing::Values(PolicyKind::kOrca, PolicyKind::kPaged),
                         [](const ::testing::TestParamInfo<PolicyKind>& info) {
                           return std::string(PolicyKindName(info.param));
                         });

TEST(PrefixCachingTimelineTest, APipelineRestartEmptiesTheCache) {
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  SchedulerHarness h(OptionsBuilder(PolicyKind::kPaged, 4, 64).Block(4).PrefixCaching().Build());
  h.Submit(RequestBuilder().PromptIds(prompt).MaxNewTokens(3).Build());
  h.ScheduleAll();
  h.Step();  // its two full blocks are cached now
  EXPECT_EQ(h.scheduler().stats().kv.num_cached_blocks, 2);
  h.FailAll(absl::UnavailableError("worker restarted"));
  EXPECT_EQ(h.scheduler().stats().kv.num_cached_blocks, 0);
  RequestId again = h.Submit(RequestBuilder().PromptIds(prompt).MaxNewTokens(1).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.plans().back().requests[0].start_position, 0);  // computed from scratch
  h.RunToCompletion();
  EXPECT_EQ(h.state(again), kLength);
}

TEST(PriorityTimelineTest, AnUrgentArrivalIsAdmittedBeforeEarlierLessUrgentOnes) {
  // Strict priority, 8 slots: one request (6 slots) at a time. b (priority 5) waits for a;
  // c (priority -5) arrives later but is admitted first when a's slots come back.
  //   a | P D
  //   b | - - - - P D
  //   c |   - P D
  SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 8).Priority(absl::ZeroDuration()).Build());
  RequestSpec a = RequestBuilder().Id("a").Prompt(4).MaxNewTokens(2).Build();
  RequestSpec b = RequestBuilder().Id("b").Prompt(4).MaxNewTokens(2).Build();
  RequestSpec c = RequestBuilder().Id("c").Prompt(4).MaxNewTokens(2).Build();
  b.priority = 5;
  c.priority = -5;
  h.Submit(a);
  h.Submit(b);
  h.ScheduleAll();
  h.Submit(c);
  h.RunToCompletion();
  EXPECT_EQ(h.CheckInvariants(true), "");
  EXPECT_EQ(h.Timeline(),
            "a | P D\n"
            "b | - - - - P D\n"
            "c |   - P D\n");
}

TEST(PriorityTimelineTest, WithPagedKvAnUrgentArrivalPreemptsLessUrgentRunningWork) {
  // 2 blocks of 4. a (priority 5) runs on both; b (priority 0) arrives needing 2 blocks:
  // a is preempted (and recomputed later), b runs.
  //   a | P x P D D
  //   b |   P
  SchedulerHarness h(OptionsBuilder(PolicyKind::kPaged, 4, 8).Block(4).Priority(absl::ZeroDuration()).Build());
  RequestSpec a = RequestBuilder().Id("a").Prompt(4).MaxNewTokens(4).Build();
  a.priority = 5;
  RequestId ia = h.Submit(a);
  h.ScheduleAll();
  RequestId ib = h.Submit(RequestBuilder().Id("b").Prompt(6).MaxNewTokens(1).Build());
  h.RunToCompletion();
  ExpectStates(h, {{ia, kLength}, {ib, kLength}}, 5);
  EXPECT_EQ(h.Timeline(),
            "a | P x P D D\n"
            "b |   P\n");
  EXPECT_EQ(h.scheduler().stats().num_preemptions, 1u);
}

TEST(PriorityTimelineTest, AgingBoundsHowLongALessUrgentRequestWaits) {
  // Room for one request at a time (2 iterations each) and an urgent request (priority 0)
  // arriving every iteration, forever. Strict priority starves the priority-10 request;
  // with aging A = 10 ms its virtual deadline is arrival + 10 × 10 ms = 100 ms, so only the
  // urgent requests that arrive before t = 100 ms may go first, and every later one waits
  // for it.
  for (absl::Duration aging : {absl::ZeroDuration(), absl::Milliseconds(10)}) {
    SchedulerHarness h(OptionsBuilder(PolicyKind::kOrca, 4, 6).Priority(aging).Build());
    RequestSpec low = RequestBuilder().Id("low").Prompt(4).MaxNewTokens(2).Build();
    low.priority = 10;
    const RequestId id_low = h.Submit(low);
    std::vector<std::pair<RequestId, absl::Time>> urgent;
    for (int step = 0; step < 400 && !h.delivered(id_low); ++step) {
      urgent.emplace_back(h.Submit(RequestBuilder().Prompt(4).MaxNewTokens(2).Build()), h.now());
      h.ScheduleAll();
      h.Step();
      ASSERT_EQ(h.CheckInvariants(true), "") << "step " << step;
    }
    if (aging == absl::ZeroDuration()) {
      EXPECT_FALSE(h.delivered(id_low)) << "strict priority has no bound";
      continue;
    }
    ASSERT_TRUE(h.delivered(id_low));
    const absl::Time bound = absl::UnixEpoch() + 10 * aging;
    const int64_t low_started = h.log(id_low).delivered_after_plan.value() - 2;
    for (const auto& [id, arrival] : urgent) {
      if (arrival < bound || !h.delivered(id)) continue;
      // Arrived after the bound: it ran after `low` did.
      EXPECT_GT(*h.log(id).delivered_after_plan, low_started) << "request " << id << " overtook low";
    }
  }
}

}  // namespace
}  // namespace orca::sched
