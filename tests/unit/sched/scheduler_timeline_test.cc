// Multi-iteration simulations with the simulated engine, one iteration at a time, the
// state asserted after every iteration. Timelines: one row per request, one column per
// plan (iteration) in the order the scheduler issued them:
//   P = initiation (whole prompt)   D = increment (one token)   - = in the pool, not in
//   this iteration   (blank) = not submitted yet / already delivered to the client.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
constexpr RequestState kWaiting = RequestState::kWaitingNextIteration;
constexpr RequestState kLength = RequestState::kFinishedLength;
constexpr RequestState kCancelled = RequestState::kFinishedCancelled;

SchedulerOptions Options(PolicyKind policy, int32_t max_bs, int64_t n_slots, int32_t n_workers) {
  SchedulerOptions options;
  options.policy = policy;
  options.max_bs = max_bs;
  options.n_slots = n_slots;
  options.n_workers = n_workers;
  return options;
}

void ExpectStates(const SchedulerHarness& h, const std::vector<std::pair<RequestId, RequestState>>& expected,
                  int iteration, bool scheduled_all = true) {
  for (const auto& [id, state] : expected) {
    EXPECT_EQ(h.state(id), state) << "request " << h.log(id).label << " after iteration " << iteration << ": "
                                  << RequestStateName(h.state(id));
  }
  EXPECT_EQ(h.CheckInvariants(scheduled_all), "") << "after iteration " << iteration;
}

TEST(OrcaTimelineTest, RequestsLeaveAtTheirLastIterationAndLateArrivalsJoinTheNext) {
  //   a | P D D        a: 3 new tokens
  //   b | P            b: 1 new token; leaves after iteration 1 with its token
  //   c |   P D D      c: arrives while iteration 1 is in flight, runs in iteration 2
  SchedulerHarness h(Options(PolicyKind::kOrca, 3, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(3).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(1).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}}, 0);

  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(3).Build());
  EXPECT_EQ(h.state(c), kQueued);
  h.Step();  // iteration 1 returns; iteration 2 = a, c
  ExpectStates(h, {{a, kRunning}, {b, kLength}, {c, kRunning}}, 1);
  EXPECT_EQ(h.log(b).tokens.size(), 1u);  // delivered with its finish, at once
  EXPECT_EQ(h.log(b).finishes.at(0).timings.total, absl::Milliseconds(1));
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 7 + 7);

  h.Step();
  ExpectStates(h, {{a, kRunning}, {c, kRunning}}, 2);
  h.Step();
  ExpectStates(h, {{a, kLength}, {c, kRunning}}, 3);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 7);
  h.Step();
  ExpectStates(h, {{c, kLength}}, 4);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_EQ(h.num_in_flight(), 0);

  EXPECT_EQ(h.Timeline(),
            "a | P D D\n"
            "b | P\n"
            "c |   P D D\n");
}

TEST(OrcaTimelineTest, SlotPressureAdmitsInArrivalOrderAndNobodyOvertakes) {
  // n_slots 20. a reserves 10, b 6 (16 in use); c needs 10 and waits; d needs 4 and would
  // fit, but FCFS keeps it behind c. b leaves → c fits (20/20); a leaves → d fits.
  //   a | P D D D D D
  //   b | P D
  //   c | - - P D D D D D
  //   d | - - - - - - P D
  SchedulerHarness h(Options(PolicyKind::kOrca, 4, 20, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").Prompt(4).MaxNewTokens(6).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").Prompt(4).MaxNewTokens(2).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(4).MaxNewTokens(6).Build());
  RequestId d = h.Submit(RequestBuilder().Id("d").Prompt(2).MaxNewTokens(2).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}, {d, kQueued}}, 0);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 16);

  const std::vector<std::vector<std::pair<RequestId, RequestState>>> after = {
      {{a, kRunning}, {b, kRunning}, {c, kQueued}, {d, kQueued}},  // 1
      {{a, kRunning}, {b, kLength}, {c, kRunning}, {d, kQueued}},  // 2: b out, c in
      {{a, kRunning}, {c, kRunning}, {d, kQueued}},                // 3
      {{a, kRunning}, {c, kRunning}, {d, kQueued}},                // 4
      {{a, kRunning}, {c, kRunning}, {d, kQueued}},                // 5
      {{a, kLength}, {c, kRunning}, {d, kRunning}},                // 6: a out, d in
      {{c, kRunning}, {d, kRunning}},                              // 7
      {{c, kLength}, {d, kLength}},                                // 8
  };
  const std::vector<int64_t> n_rsrv = {16, 20, 20, 20, 20, 14, 14, 0};
  for (size_t i = 0; i < after.size(); ++i) {
    h.Step();
    ExpectStates(h, after[i], static_cast<int>(i + 1));
    EXPECT_EQ(h.scheduler().stats().n_rsrv, n_rsrv[i]) << "after iteration " << i + 1;
  }
  EXPECT_EQ(h.Timeline(),
            "a | P D D D D D\n"
            "b | P D\n"
            "c | - - P D D D D D\n"
            "d | - - - - - - P D\n");
}

TEST(OrcaTimelineTest, PipelineHoldsNWorkersBatchesWhileThereIsWork) {
  // n_workers 2, max_bs 2: two batches alternate through the pipeline; a request in flight
  // is never selected again until its iteration returns.
  // (a and b show '-' in iteration 4: it was issued before their last iteration returned.)
  //   a | P - D -
  //   b | P - D -
  //   c | - P - D
  //   d | - P - D
  SchedulerHarness h(Options(PolicyKind::kOrca, 2, 1024, 2));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(2).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(2).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(2).Build());
  RequestId d = h.Submit(RequestBuilder().Id("d").MaxNewTokens(2).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.num_in_flight(), 2);
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}, {d, kRunning}}, 0);

  h.Step();  // [a b] returns; [a b] goes again
  EXPECT_EQ(h.num_in_flight(), 2);
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}, {d, kRunning}}, 1);
  h.Step();  // [c d] returns; [c d] goes again
  EXPECT_EQ(h.num_in_flight(), 2);
  h.Step();  // [a b] finish; nothing else selectable: one batch in flight
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kRunning}, {d, kRunning}}, 3);
  EXPECT_EQ(h.num_in_flight(), 1);
  h.Step();
  ExpectStates(h, {{c, kLength}, {d, kLength}}, 4);
  EXPECT_EQ(h.num_in_flight(), 0);

  EXPECT_EQ(h.Timeline(),
            "a | P - D -\n"
            "b | P - D -\n"
            "c | - P - D\n"
            "d | - P - D\n");
}

TEST(OrcaTimelineTest, OneRequestOccupiesOnePipelineSlotOnly) {
  SchedulerHarness h(Options(PolicyKind::kOrca, 8, 1024, 3));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(3).Build());
  h.ScheduleAll();
  EXPECT_EQ(h.num_in_flight(), 1);  // min(n_workers = 3, work available = 1)
  for (int i = 1; i <= 3; ++i) {
    h.Step();
    EXPECT_EQ(h.num_in_flight(), i < 3 ? 1 : 0);
    EXPECT_EQ(h.CheckInvariants(true), "");
  }
  EXPECT_EQ(h.state(a), kLength);
}

TEST(OrcaTimelineTest, CancellationAtEveryMomentReleasesEverything) {
  // n_workers 2, max_bs 1 (a request shows '-' until the call that delivers its finish):
  //   a | P - D -          cancelled between iterations, while iteration 4 is in flight
  //   b | - P -            cancelled while in flight: finishes when iteration 2 returns
  //   c | - -              cancelled while queued
  //   d | - - - P D D      admitted as soon as b's slots come back
  SchedulerHarness h(Options(PolicyKind::kOrca, 1, 1024, 2));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(5).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(5).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(5).Build());
  RequestId d = h.Submit(RequestBuilder().Id("d").MaxNewTokens(3).Build());
  h.ScheduleAll();  // [a] [b]
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}, {d, kQueued}}, 0);

  EXPECT_TRUE(h.Cancel(c));  // queued → at once
  ExpectStates(h, {{c, kCancelled}}, 0);
  EXPECT_TRUE(h.Cancel(b));  // in flight → marked
  ExpectStates(h, {{b, kRunning}}, 0);

  h.Step();  // [a] returns; [a] goes again (b still in flight)
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {d, kQueued}}, 1);
  h.Step();  // [b] returns → cancelled, its token discarded; d admitted
  ExpectStates(h, {{a, kRunning}, {b, kCancelled}, {d, kRunning}}, 2);
  EXPECT_TRUE(h.log(b).tokens.empty());
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();  // [a] returns; a waits for its next iteration (not scheduled yet)
  ExpectStates(h, {{a, kWaiting}, {d, kRunning}}, 3, /*scheduled_all=*/false);
  EXPECT_TRUE(h.Cancel(a));  // between iterations → at once
  ExpectStates(h, {{a, kCancelled}}, 3, /*scheduled_all=*/false);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 7);  // only d's reservation
  h.ScheduleAll();
  h.RunToCompletion();
  ExpectStates(h, {{d, kLength}}, 6);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  h.FlushReleases();
  EXPECT_EQ(h.engine().num_allocated_slots(), 0);  // every stage freed every request
  EXPECT_EQ(h.engine().num_live_requests(), 0);
  EXPECT_FALSE(h.scheduler().HasRequests());

  EXPECT_EQ(h.Timeline(),
            "a | P - D -\n"
            "b | - P -\n"
            "c | - -\n"
            "d | - - - P D D\n");
}

TEST(RequestLevelTimelineTest, BatchRunsUntilAllFinishAndNobodyJoinsOrLeaves) {
  // The baseline on the same workload as ORCA below: a finishes after 1 token but is only
  // delivered when b (3 tokens) ends the batch; c waits for the whole batch.
  //   a | P - -
  //   b | P D D
  //   c | - - - P
  SchedulerHarness h(Options(PolicyKind::kRequestLevel, 2, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(3).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(1).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kQueued}}, 0);
  h.Step();  // a generated its only token: finished but held; c may not join
  EXPECT_EQ(h.log(a).tokens.size(), 1u);
  EXPECT_TRUE(h.log(a).finishes.empty());
  EXPECT_EQ(h.scheduler().GetRequest(a)->state, kLength);
  ExpectStates(h, {{b, kRunning}, {c, kQueued}}, 1);
  h.Step();
  ExpectStates(h, {{b, kRunning}, {c, kQueued}}, 2);
  h.Step();  // b finishes: a and b delivered together; c starts a new batch
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kRunning}}, 3);
  EXPECT_EQ(h.log(a).finishes.at(0).timings.total, absl::Milliseconds(3));
  h.Step();
  ExpectStates(h, {{c, kLength}}, 4);
  EXPECT_EQ(h.Timeline(),
            "a | P - -\n"
            "b | P D D\n"
            "c | - - - P\n");
}

TEST(RequestLevelTimelineTest, OrcaOnTheSameWorkloadReturnsEarlyAndAdmitsAtOnce) {
  //   a | P
  //   b | P D D
  //   c | - P
  SchedulerHarness h(Options(PolicyKind::kOrca, 2, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(3).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(1).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.log(a).finishes.at(0).timings.total, absl::Milliseconds(1));
  EXPECT_EQ(h.log(c).finishes.at(0).timings.total, absl::Milliseconds(2));
  EXPECT_EQ(h.state(b), kLength);
  EXPECT_EQ(h.Timeline(),
            "a | P\n"
            "b | P D D\n"
            "c | - P\n");
}

TEST(RequestLevelTimelineTest, PipelineRunsOneBatchAsMicrobatches) {
  // n_workers 2, max_bs 4: batch {a b c d} runs as microbatches {a b} and {c d}, like
  // FasterTransformer's pipeline; e waits for the whole batch although a slot is free
  // after iteration 3.
  //   a | P - - - -
  //   b | P - D - -
  //   c | - P - D -
  //   d | - P - D D
  //   e | - - - - - P
  SchedulerHarness h(Options(PolicyKind::kRequestLevel, 4, 1024, 2));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(2).Build());
  RequestId c = h.Submit(RequestBuilder().Id("c").MaxNewTokens(2).Build());
  RequestId d = h.Submit(RequestBuilder().Id("d").MaxNewTokens(3).Build());
  RequestId e = h.Submit(RequestBuilder().Id("e").MaxNewTokens(1).Build());
  h.ScheduleAll();
  ExpectStates(h, {{a, kRunning}, {b, kRunning}, {c, kRunning}, {d, kRunning}, {e, kQueued}}, 0);
  h.Step();  // a finished (held), b goes again
  ExpectStates(h, {{b, kRunning}, {c, kRunning}, {d, kRunning}, {e, kQueued}}, 1);
  EXPECT_EQ(h.scheduler().GetRequest(a)->state, kLength);
  h.Step();
  ExpectStates(h, {{b, kRunning}, {c, kRunning}, {d, kRunning}, {e, kQueued}}, 2);
  h.Step();  // b finished (held); its microbatch is done, the other is in flight
  ExpectStates(h, {{c, kRunning}, {d, kRunning}, {e, kQueued}}, 3);
  EXPECT_EQ(h.num_in_flight(), 1);
  EXPECT_TRUE(h.log(b).finishes.empty());
  h.Step();
  ExpectStates(h, {{d, kRunning}, {e, kQueued}}, 4);
  h.Step();  // d ends the batch: a, b, c, d delivered together; e starts the next batch
  ExpectStates(h, {{a, kLength}, {b, kLength}, {c, kLength}, {d, kLength}, {e, kRunning}}, 5);
  h.Step();
  ExpectStates(h, {{e, kLength}}, 6);
  EXPECT_EQ(h.Timeline(),
            "a | P - - - -\n"
            "b | P - D - -\n"
            "c | - P - D -\n"
            "d | - P - D D\n"
            "e | - - - - - P\n");
}

TEST(RequestLevelTimelineTest, CancellingTheLastRunningMemberDeliversTheHeldOnes) {
  SchedulerHarness h(Options(PolicyKind::kRequestLevel, 2, 1024, 1));
  RequestId a = h.Submit(RequestBuilder().Id("a").MaxNewTokens(1).Build());
  RequestId b = h.Submit(RequestBuilder().Id("b").MaxNewTokens(9).Build());
  h.ScheduleAll();
  h.Step();  // a held, b waiting in flight again
  EXPECT_TRUE(h.log(a).finishes.empty());
  EXPECT_TRUE(h.Cancel(a));  // already finished: found, nothing changes
  EXPECT_TRUE(h.log(a).finishes.empty());
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();
  EXPECT_TRUE(h.Cancel(b));  // between iterations: b ends the batch
  EXPECT_EQ(h.state(b), kCancelled);
  EXPECT_EQ(h.state(a), kLength);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_FALSE(h.scheduler().HasRequests());
}

TEST(OrcaTimelineTest, NoDeadlockWhenEveryRequestNeedsTheWholeBudget) {
  // n_slots equals one request's reservation: requests run one at a time, all finish.
  SchedulerHarness h(Options(PolicyKind::kOrca, 8, 12, 2));
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(h.Submit(RequestBuilder().Prompt(8).MaxNewTokens(4).Build()));
  h.ScheduleAll();
  int iteration = 0;
  while (h.num_in_flight() > 0) {
    h.Step();
    ++iteration;
    ASSERT_EQ(h.CheckInvariants(true), "") << "after iteration " << iteration;
    ASSERT_LE(h.scheduler().stats().num_running, 1);
  }
  EXPECT_EQ(iteration, 6 * 4);
  for (RequestId id : ids) EXPECT_EQ(h.state(id), kLength);
}

}  // namespace
}  // namespace orca::sched
