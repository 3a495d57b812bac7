// The request-level baseline as FasterTransformer runs it (SchedulerOptions::
// faster_transformer, the paper's ft(max_bs, mbs)), iteration by iteration against the
// simulated engine, next to the selective-batching baseline on the same workload.
// Timelines: one row per request, one column per plan:
//   P = initiation   D = increment   d = increment of a member that already ended (its token
//   is computed and discarded)   - = in the pool, not in this iteration   (blank) = not
//   submitted yet / delivered.

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "sim/cost_model.h"
#include "tests/unit/sched/request_builder.h"
#include "tests/unit/sched/scheduler_harness.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::orca::sched::testing::SchedulerHarness;

constexpr RequestState kQueued = RequestState::kQueued;
constexpr RequestState kRunning = RequestState::kRunning;
constexpr RequestState kLength = RequestState::kFinishedLength;
constexpr RequestState kStop = RequestState::kFinishedStop;

SchedulerOptions Options(bool faster_transformer, int32_t max_bs, int64_t n_slots, int32_t n_workers,
                         int32_t num_microbatches = 0) {
  SchedulerOptions options;
  options.policy = PolicyKind::kRequestLevel;
  options.max_bs = max_bs;
  options.n_slots = n_slots;
  options.n_workers = n_workers;
  options.num_microbatches = num_microbatches;
  options.faster_transformer = faster_transformer;
  return options;
}

void ExpectStates(SchedulerHarness& h, const std::vector<std::pair<RequestId, RequestState>>& expected, int iteration) {
  for (const auto& [id, state] : expected) {
    EXPECT_EQ(h.state(id), state) << "request " << h.log(id).label << " after iteration " << iteration << ":\n"
                                  << h.Timeline();
  }
  EXPECT_EQ(h.CheckInvariants(true), "") << "after iteration " << iteration;
}

// The plan's entry for `id` (the test fails when it is missing).
const ScheduledRequest& Entry(const IterationPlan& plan, RequestId id) {
  for (const ScheduledRequest& r : plan.requests) {
    if (r.request_id == id) return r;
  }
  ADD_FAILURE() << "request " << id << " is not in iteration " << plan.iteration_id;
  static const ScheduledRequest kNone;
  return kNone;
}

TEST(FasterTransformerTimelineTest, PromptsArePaddedToTheBatchLongestAndThePaddingIsComputed) {
  // a (4 tokens), b (10), c (7), 2 new tokens each. FasterTransformer runs the batch as a
  // [3, 10] prompt tensor: a carries 6 padding tokens, c 3, b none; each member reserves
  // [longest prompt + largest output] = 12 slots. Selective batching computes 21 tokens and
  // reserves 6 + 12 + 9.
  //   a | P D
  //   b | P D
  //   c | P D
  for (const bool ft : {false, true}) {
    SCOPED_TRACE(ft ? "faster_transformer" : "selective");
    SchedulerHarness h(Options(ft, 3, 1024, 1));
    RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(2).Build());
    RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(10).MaxNewTokens(2).Build());
    RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(7).MaxNewTokens(2).Build());
    const std::vector<IterationPlan> plans = h.ScheduleAll();
    ASSERT_EQ(plans.size(), 1u);
    const IterationPlan& prompt = plans.front();
    EXPECT_EQ(prompt.NumTokens(), 21);
    EXPECT_EQ(prompt.NumPaddingTokens(), ft ? 9 : 0);
    EXPECT_EQ(Entry(prompt, a).num_padding_tokens, ft ? 6 : 0);
    EXPECT_EQ(Entry(prompt, b).num_padding_tokens, 0);
    EXPECT_EQ(Entry(prompt, c).num_padding_tokens, ft ? 3 : 0);
    // The workers' KV bound: own prompt + the batch's largest output (FT), or its own.
    EXPECT_EQ(Entry(prompt, a).new_request->kv_reservation_slots, 6);
    EXPECT_EQ(Entry(prompt, c).new_request->kv_reservation_slots, 9);
    EXPECT_EQ(h.scheduler().stats().n_rsrv, ft ? 36 : 27);
    EXPECT_EQ(h.scheduler().GetRequest(a)->reserved_slots, ft ? 12 : 6);
    ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}}, 0);

    // The cost of the padded prompt: padding tokens are priced like prompt tokens.
    absl::StatusOr<sim::CostModel> cost = sim::CostModel::Preset("gpt3-13b");
    ASSERT_TRUE(cost.ok());
    IterationPlan unpadded = prompt;
    for (ScheduledRequest& r : unpadded.requests) r.num_padding_tokens = 0;
    const double extra_ms = absl::ToDoubleMilliseconds(cost->IterationTime(prompt) - cost->IterationTime(unpadded));
    if (ft) {
      EXPECT_GT(extra_ms, 9 * cost->per_token_seconds * 1e3);  // 9 more tokens through every GEMM
    } else {
      EXPECT_EQ(extra_ms, 0);
    }

    h.Step();
    ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}}, 1);
    // Increments carry no padding.
    EXPECT_EQ(h.plans().back().NumPaddingTokens(), 0);
    h.Step();
    ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}}, 2);
    EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
    EXPECT_EQ(h.Timeline(),
              "a | P D\n"
              "b | P D\n"
              "c | P D\n");
    h.FlushReleases();
    EXPECT_EQ(h.engine().num_live_requests(), 0);
  }
}

TEST(FasterTransformerTimelineTest, ThePaddedFootprintDecidesWhoJoinsTheBatch) {
  // n_slots 30. Selective: a (4+2) + b (10+2) + c (7+2) = 27 fits, all three run together.
  // FasterTransformer: two members at [10 + 2] = 24 fit, three need 36: c waits for the
  // next batch.
  //   a | P D
  //   b | P D
  //   c | - - P D
  SchedulerHarness h(Options(/*faster_transformer=*/true, 3, 30, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(2).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(10).MaxNewTokens(2).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(7).MaxNewTokens(2).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 0);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 24);
  h.RunToCompletion();
  EXPECT_EQ(h.state(c), kLength);
  EXPECT_EQ(h.Timeline(),
            "a | P D\n"
            "b | P D\n"
            "c | - - P D\n");
  // Alone in its batch, c is not padded.
  EXPECT_EQ(Entry(h.plans()[2], c).num_padding_tokens, 0);

  SchedulerHarness selective(Options(/*faster_transformer=*/false, 3, 30, 1));
  for (const char* id : {"a", "b", "c"}) {
    const int32_t prompt = id[0] == 'a' ? 4 : (id[0] == 'b' ? 10 : 7);
    selective.Submit(RequestBuilder().Id(id).Prompt(prompt).MaxNewTokens(2).Build());
  }
  selective.RunToCompletion();
  EXPECT_EQ(selective.Timeline(),
            "a | P D\n"
            "b | P D\n"
            "c | P D\n");
}

TEST(FasterTransformerTimelineTest, FinishedMembersKeepComputingUntilTheWholeBatchEnds) {
  // a needs 1 token, b 3. Selective batching stops a after its token (a | P - -);
  // FasterTransformer keeps it in every iteration of the batch, its tokens discarded: the
  // client sees exactly 1 token, delivered with b's when the batch ends; c waits for both.
  //   a | P d d
  //   b | P D D
  //   c | - - - P
  SchedulerHarness h(Options(/*faster_transformer=*/true, 2, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(3).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(1).Build());
  const std::vector<IterationPlan> first = h.ScheduleAll();
  ASSERT_EQ(first.size(), 1u);
  // a's workers reserve room for the batch's 3 decode positions, not its own 1.
  EXPECT_EQ(Entry(first[0], a).new_request->kv_reservation_slots, 4 + 3);
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 0);
  h.Step();  // a generated its only token: it ended but goes on computing with the batch
  EXPECT_EQ(h.log(a).tokens.size(), 1u);
  EXPECT_TRUE(h.log(a).finishes.empty());
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 1);
  EXPECT_EQ(h.scheduler().GetRequest(a)->num_generated_tokens, 1);
  EXPECT_EQ(h.plans().back().requests.size(), 2u);
  h.Step();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 2);
  EXPECT_EQ(h.log(a).tokens.size(), 1u);  // the discarded token is not streamed
  h.Step();                               // b ends the batch: a and b delivered together, slots released, c starts
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kRunning}}, 3);
  ASSERT_EQ(h.log(a).finishes.size(), 1u);
  EXPECT_EQ(h.log(a).finishes[0].num_generated_tokens, 1);
  EXPECT_EQ(h.log(a).finishes[0].timings.total, absl::Milliseconds(3));
  EXPECT_EQ(h.log(a).tokens.size(), 1u);
  EXPECT_EQ(h.log(b).tokens.size(), 3u);
  h.Step();
  ExpectStates(h, {{c, kLength}}, 4);
  EXPECT_EQ(h.Timeline(),
            "a | P d d\n"
            "b | P D D\n"
            "c | - - - P\n");
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_FALSE(h.scheduler().HasRequests());
  h.FlushReleases();
  EXPECT_EQ(h.engine().num_live_requests(), 0);
}

TEST(FasterTransformerTimelineTest, AMemberEndedByAStopTokenKeepsItsCauseAndItsTokens) {
  // Every generated token is 7, a stop token of a only: a ends after 1 token (STOP) but
  // computes the batch's remaining 2 iterations; b (no stop token) generates 3.
  //   a | P d d
  //   b | P D D
  SchedulerHarness h(Options(/*faster_transformer=*/true, 2, 1024, 1), [](RequestId, int32_t) { return int32_t{7}; });
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(3).StopTokens({7}).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(3).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), kStop);
  EXPECT_EQ(h.state(b), kLength);
  ASSERT_EQ(h.log(a).finishes.size(), 1u);
  EXPECT_EQ(h.log(a).finishes[0].matched_stop_token_id, 7);
  EXPECT_EQ(h.log(a).finishes[0].num_generated_tokens, 1);
  EXPECT_EQ(h.log(a).tokens, std::vector<int32_t>({7}));
  EXPECT_EQ(h.Timeline(),
            "a | P d d\n"
            "b | P D D\n");
}

TEST(FasterTransformerTimelineTest, CancellingAPaddingOutMemberDeliversItAtOnce) {
  SchedulerHarness h(Options(/*faster_transformer=*/true, 2, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(9).Build());
  h.ScheduleAll();
  h.Step();  // a ended, pads out; both in flight again
  h.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(h.CompleteOldest());  // both between iterations
  EXPECT_TRUE(h.Cancel(a));
  EXPECT_EQ(h.state(a), RequestState::kFinishedCancelled);
  ASSERT_EQ(h.log(a).finishes.size(), 1u);
  EXPECT_EQ(h.CheckInvariants(false), "");
  EXPECT_TRUE(h.Cancel(b));  // b was the last: the batch ends
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_FALSE(h.scheduler().HasRequests());
}

TEST(FasterTransformerTimelineTest, MicrobatchesAreIndependentOfThePipelineDepth) {
  // ft(max_bs 4, mbs 2) on ONE pipeline slot: the microbatches take turns (a and b are held
  // until c and d end the batch).
  //   a | P - D -
  //   b | P - D -
  //   c | - P - D
  //   d | - P - D
  {
    SchedulerHarness h(Options(/*faster_transformer=*/true, 4, 1024, /*n_workers=*/1, /*num_microbatches=*/2));
    std::vector<RequestId> ids;
    for (const char* id : {"a", "b", "c", "d"})
      ids.push_back(h.Submit(RequestBuilder().Id(id).MaxNewTokens(2).Build()));
    EXPECT_EQ(h.ScheduleAll().size(), 1u);
    ExpectStates(h, {{ids[0], kRunning}, {ids[1], kRunning}, {ids[2], kQueued}, {ids[3], kQueued}}, 0);
    h.RunToCompletion();
    EXPECT_EQ(h.Timeline(),
              "a | P - D -\n"
              "b | P - D -\n"
              "c | - P - D\n"
              "d | - P - D\n");
  }
  // ft(max_bs 4, mbs 1) on a 2-deep pipeline: one batch, one iteration in flight, the
  // second slot idles (the paper's ft(x, 1) curves on a pipeline).
  //   a | P D
  //   b | P D
  //   c | P D
  //   d | P D
  {
    SchedulerHarness h(Options(/*faster_transformer=*/true, 4, 1024, /*n_workers=*/2, /*num_microbatches=*/1));
    std::vector<RequestId> ids;
    for (const char* id : {"a", "b", "c", "d"})
      ids.push_back(h.Submit(RequestBuilder().Id(id).MaxNewTokens(2).Build()));
    EXPECT_EQ(h.ScheduleAll().size(), 1u);
    EXPECT_EQ(h.num_in_flight(), 1);
    h.RunToCompletion();
    EXPECT_EQ(h.Timeline(),
              "a | P D\n"
              "b | P D\n"
              "c | P D\n"
              "d | P D\n");
  }
  // ft(max_bs 4, mbs 4) on a 2-deep pipeline: two of the four one-member microbatches in
  // flight, taking turns; a ends first and pads out once more while d computes its last
  // token.
  //   a | P - - - D - - - d
  //   b | - P - - - D - - -
  //   c | - - P - - - D - -
  //   d | - - - P - - - D -
  {
    SchedulerHarness h(Options(/*faster_transformer=*/true, 4, 1024, /*n_workers=*/2, /*num_microbatches=*/4));
    std::vector<RequestId> ids;
    for (const char* id : {"a", "b", "c", "d"})
      ids.push_back(h.Submit(RequestBuilder().Id(id).MaxNewTokens(2).Build()));
    const std::vector<IterationPlan> plans = h.ScheduleAll();
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_EQ(plans[0].requests.size(), 1u);
    EXPECT_EQ(h.num_in_flight(), 2);
    ExpectStates(h, {{ids[0], kRunning}, {ids[1], kRunning}, {ids[2], kQueued}, {ids[3], kQueued}}, 0);
    h.RunToCompletion();
    for (RequestId id : ids) EXPECT_EQ(h.state(id), kLength);
    EXPECT_EQ(h.Timeline(),
              "a | P - - - D - - - d\n"
              "b | - P - - - D - - -\n"
              "c | - - P - - - D - -\n"
              "d | - - - P - - - D -\n");
  }
}

TEST(FasterTransformerTimelineTest, OptionsAreCheckedAndOffByDefault) {
  SchedulerOptions orca;
  orca.num_microbatches = 2;
  EXPECT_FALSE(Scheduler::Create(orca).ok());
  SchedulerOptions ft = Options(true, 4, 1024, 1);
  ft.enable_prefix_caching = true;
  absl::StatusOr<std::unique_ptr<Scheduler>> made = Scheduler::Create(ft);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("prefix"), std::string::npos) << made.status();
  SchedulerOptions negative = Options(false, 4, 1024, 1, -1);
  EXPECT_FALSE(Scheduler::Create(negative).ok());
  EXPECT_FALSE(SchedulerOptions{}.faster_transformer);
  EXPECT_EQ(SchedulerOptions{}.num_microbatches, 0);
}

}  // namespace
}  // namespace orca::sched
