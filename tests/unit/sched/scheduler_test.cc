// The Scheduler's API contract: admission errors, plan records, finish reasons, cancellation,
// deadlines, failures and draining. Multi-iteration timelines live in
// scheduler_timeline_test.cc, randomized workloads in scheduler_property_test.cc.

#include "core/sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/sched/request_builder.h"
#include "tests/unit/sched/scheduler_harness.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::orca::sched::testing::SchedulerHarness;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

SchedulerOptions Options(int32_t max_bs = 4, int64_t n_slots = 1024, int32_t n_workers = 1) {
  SchedulerOptions options;
  options.max_bs = max_bs;
  options.n_slots = n_slots;
  options.n_workers = n_workers;
  return options;
}

std::unique_ptr<Scheduler> MakeScheduler(const SchedulerOptions& options) {
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(options);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  return std::move(*scheduler);
}

const absl::Time kT0 = absl::UnixEpoch();

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// ---- Create and Submit -------------------------------------------------------------------

TEST(SchedulerCreateTest, RejectsBadOptionsNamingTheField) {
  SchedulerOptions options = Options();
  options.max_bs = 0;
  EXPECT_THAT(Message(Scheduler::Create(options).status()), HasSubstr("max_bs must be >= 1"));
  options = Options();
  options.n_workers = 0;
  EXPECT_THAT(Message(Scheduler::Create(options).status()), HasSubstr("n_workers must be >= 1"));
  options = Options();
  options.kv_block_size = 16;
  options.n_slots = 1000;
  EXPECT_THAT(Message(Scheduler::Create(options).status()),
              HasSubstr("n_slots (1000) must be a multiple of kv_block_size (16)"));
  options = Options();
  options.max_queued_tokens = -1;
  EXPECT_EQ(Scheduler::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerSubmitTest, RejectsARequestThatCanNeverFitWithTheNumbers) {
  auto scheduler = MakeScheduler(Options(4, 512));
  absl::StatusOr<RequestId> id = scheduler->Submit(RequestBuilder().Prompt(600).MaxNewTokens(100).Build(), kT0);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(id.status()), "prompt (600 tokens) + max_new_tokens (100) = 700 exceeds n_slots (512)");
  // Exactly n_slots fits.
  EXPECT_TRUE(scheduler->Submit(RequestBuilder().Prompt(500).MaxNewTokens(12).Build(), kT0).ok());
}

TEST(SchedulerSubmitTest, NamesTheBlockRoundingWhenItIsWhatDoesNotFit) {
  SchedulerOptions options = Options(4, 512);
  options.kv_block_size = 16;
  auto scheduler = MakeScheduler(options);
  absl::StatusOr<RequestId> id = scheduler->Submit(RequestBuilder().Prompt(500).MaxNewTokens(13).Build(), kT0);
  EXPECT_EQ(Message(id.status()),
            "prompt (500 tokens) + max_new_tokens (13) = 513 (528 rounded up to kv_block_size 16) "
            "exceeds n_slots (512)");
}

TEST(SchedulerSubmitTest, RejectsPromptsThatFillTheContextAndCapsTheRest) {
  SchedulerOptions options = Options(4, 4096);
  options.max_context = 1024;
  auto scheduler = MakeScheduler(options);
  absl::StatusOr<RequestId> full = scheduler->Submit(RequestBuilder().Prompt(1024).MaxNewTokens(1).Build(), kT0);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(Message(full.status()), HasSubstr("prompt (1024 tokens)"));
  EXPECT_THAT(Message(full.status()), HasSubstr("max_context 1024"));

  absl::StatusOr<RequestId> capped = scheduler->Submit(RequestBuilder().Prompt(1000).MaxNewTokens(100).Build(), kT0);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(scheduler->GetRequest(*capped)->max_new_tokens, 24);
  EXPECT_EQ(scheduler->GetRequest(*capped)->reserved_slots, 1024);
}

TEST(SchedulerSubmitTest, RejectsMalformedSpecsNamingTheField) {
  SchedulerOptions options = Options();
  options.vocab_size = 1000;
  auto scheduler = MakeScheduler(options);
  auto error = [&](const RequestSpec& spec) {
    absl::Status status = scheduler->Submit(spec, kT0).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return Message(status);
  };
  EXPECT_THAT(error(RequestBuilder().PromptIds({}).Build()), HasSubstr("prompt_token_ids must not be empty"));
  EXPECT_THAT(error(RequestBuilder().PromptIds({1, -2}).Build()), HasSubstr("prompt_token_ids[1] = -2 is negative"));
  EXPECT_THAT(error(RequestBuilder().PromptIds({1000}).Build()),
              HasSubstr("prompt_token_ids[0] = 1000 is out of range for vocab_size (1000)"));
  EXPECT_THAT(error(RequestBuilder().MaxNewTokens(0).Build()), HasSubstr("max_new_tokens must be >= 1 (got 0)"));
  EXPECT_THAT(error(RequestBuilder().MaxNewTokens(4).MinNewTokens(5).Build()),
              HasSubstr("min_new_tokens (5) must be in [0, max_new_tokens (4)]"));
  EXPECT_THAT(error(RequestBuilder().Temperature(-1).Build()),
              HasSubstr("sampling: 'temperature' must be in [0, 2], got -1"));
  EXPECT_THAT(error(RequestBuilder().StopTokens({-1}).Build()), HasSubstr("stop_token_ids[0]"));
  EXPECT_EQ(scheduler->stats().num_queued, 0);
}

TEST(SchedulerSubmitTest, EnforcesQueueLimitsWithTheReason) {
  SchedulerOptions options = Options(1, 1024);
  options.max_queued_requests = 2;
  options.max_queued_tokens = 100;
  auto scheduler = MakeScheduler(options);
  ASSERT_TRUE(scheduler->Submit(RequestBuilder().Prompt(40).Build(), kT0).ok());
  ASSERT_TRUE(scheduler->Submit(RequestBuilder().Prompt(40).Build(), kT0).ok());
  absl::Status full = scheduler->Submit(RequestBuilder().Prompt(1).Build(), kT0).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(full), HasSubstr("2 requests waiting (max_queued_requests 2)"));

  // Admitting one frees a queue place; the token limit is next.
  ASSERT_TRUE(scheduler->Schedule(kT0).has_value());
  absl::Status tokens = scheduler->Submit(RequestBuilder().Prompt(61).Build(), kT0).status();
  EXPECT_EQ(tokens.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Message(tokens), HasSubstr("40 prompt tokens waiting + 61 would exceed max_queued_tokens (100)"));
  EXPECT_TRUE(scheduler->Submit(RequestBuilder().Prompt(60).Build(), kT0).ok());
  // A prompt larger than the whole token limit can never be queued.
  EXPECT_EQ(scheduler->Submit(RequestBuilder().Prompt(101).Build(), kT0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerSubmitTest, RefusesNewWorkWhileDrainingButFinishesWhatItHas) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(2).Build());
  h.scheduler().BeginDrain();
  absl::Status status = h.scheduler().Submit(RequestBuilder().Build(), h.now()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(h.scheduler().stats().draining);
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
}

TEST(SchedulerSubmitTest, CallerIdsAreUniqueAmongUnfinishedRequests) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().Id("req-1").MaxNewTokens(1).Build());
  EXPECT_EQ(h.scheduler().FindRequest("req-1"), a);
  EXPECT_EQ(h.scheduler().Submit(RequestBuilder().Id("req-1").Build(), h.now()).status().code(),
            absl::StatusCode::kAlreadyExists);
  h.RunToCompletion();
  EXPECT_EQ(h.scheduler().FindRequest("req-1"), std::nullopt);
  EXPECT_TRUE(h.scheduler().Submit(RequestBuilder().Id("req-1").Build(), h.now()).ok());
}

TEST(SchedulerSubmitTest, RejectsADeadlineThatAlreadyPassed) {
  auto scheduler = MakeScheduler(Options());
  EXPECT_EQ(scheduler->Submit(RequestBuilder().Deadline(kT0).Build(), kT0).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// ---- Plans -------------------------------------------------------------------------------

TEST(SchedulerPlanTest, FirstScheduleCarriesTheFullRecordThenOnlyDiffs) {
  SchedulerHarness h(Options(), [](RequestId, int32_t index) { return 40 + index; });
  RequestId a = h.Submit(RequestBuilder().PromptIds({5, 6, 7}).MaxNewTokens(3).Temperature(0.5f).Build());

  std::vector<IterationPlan> plans = h.ScheduleAll();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].iteration_id, 1u);
  ASSERT_EQ(plans[0].requests.size(), 1u);
  const ScheduledRequest& first = plans[0].requests[0];
  EXPECT_EQ(first.request_id, a);
  EXPECT_EQ(first.phase, Phase::kInitiation);
  EXPECT_THAT(first.input_token_ids, ElementsAre(5, 6, 7));
  EXPECT_EQ(first.start_position, 0);
  ASSERT_TRUE(first.new_request.has_value());
  EXPECT_EQ(first.new_request->kv_reservation_slots, 6);  // prompt 3 + max new 3
  EXPECT_FLOAT_EQ(first.new_request->sampling.temperature, 0.5f);
  EXPECT_THAT(first.new_request->prompt_token_ids, ElementsAre(5, 6, 7));
  EXPECT_EQ(plans[0].NumTokens(), 3);

  h.Step();  // token 40 returns; the next plan feeds it back at position 3
  ASSERT_EQ(h.plans().size(), 2u);
  const ScheduledRequest& second = h.plans()[1].requests[0];
  EXPECT_EQ(second.phase, Phase::kIncrement);
  EXPECT_THAT(second.input_token_ids, ElementsAre(40));
  EXPECT_EQ(second.start_position, 3);
  EXPECT_FALSE(second.new_request.has_value());

  h.Step();
  const ScheduledRequest& third = h.plans()[2].requests[0];
  EXPECT_THAT(third.input_token_ids, ElementsAre(41));
  EXPECT_EQ(third.start_position, 4);

  h.Step();
  EXPECT_THAT(h.log(a).tokens, ElementsAre(40, 41, 42));
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
}

TEST(SchedulerPlanTest, ReleasedIdsRideOnTheNextPlanOrAreTakenWhenIdle) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(1).Build());
  h.ScheduleAll();
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();  // a finishes
  EXPECT_EQ(h.scheduler().stats().num_pending_releases, 1);
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(1).Build());
  std::vector<IterationPlan> plans = h.ScheduleAll();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_THAT(plans[0].released_request_ids, ElementsAre(a));
  EXPECT_EQ(plans[0].requests[0].request_id, b);
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();
  EXPECT_FALSE(h.scheduler().Schedule(h.now()).has_value());
  EXPECT_THAT(h.scheduler().TakeReleasedRequestIds(), ElementsAre(b));
  EXPECT_THAT(h.scheduler().TakeReleasedRequestIds(), IsEmpty());
}

TEST(SchedulerPlanTest, UnknownIterationsAreNotFound) {
  auto scheduler = MakeScheduler(Options());
  EXPECT_FALSE(scheduler->Schedule(kT0).has_value());
  EXPECT_EQ(scheduler->OnIterationDone(7, {}, kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler->OnIterationFailed(7, absl::InternalError("x"), kT0).status().code(),
            absl::StatusCode::kNotFound);
}

// ---- Finishing -----------------------------------------------------------------------------

TEST(SchedulerFinishTest, StopTokenEndsTheRequestAndIsDeliveredWithTheFinish) {
  // Generates 11, 12, 13, ...; 12 is a stop token.
  SchedulerHarness h(Options(), [](RequestId, int32_t index) { return 11 + index; });
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(10).StopTokens({12}).Id("a").Build());
  h.ScheduleAll();
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();
  h.ScheduleAll();
  h.Advance(absl::Milliseconds(1));
  // The event carrying the stop token also carries the finish.
  absl::StatusOr<std::vector<RequestEvent>> events =
      h.scheduler().OnIterationDone(2, {RequestResult{a, SampledToken{12, -0.1f, {}}}}, h.now());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  const RequestEvent& event = (*events)[0];
  EXPECT_EQ(event.caller_id, "a");
  ASSERT_EQ(event.new_tokens.size(), 1u);
  EXPECT_EQ(event.new_tokens[0].token_id, 12);
  ASSERT_TRUE(event.finish.has_value());
  EXPECT_EQ(event.finish->state, RequestState::kFinishedStop);
  EXPECT_EQ(event.finish->cause, FinishCause::kStopToken);
  EXPECT_EQ(event.finish->matched_stop_token_id, 12);
  EXPECT_EQ(event.finish->num_generated_tokens, 2);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
}

TEST(SchedulerFinishTest, EosStopsUnlessIgnoredWhileStopTokensAlwaysApply) {
  auto eos_second = [](RequestId, int32_t index) { return index == 1 ? 0 : 5; };
  {
    SchedulerHarness h(Options(), eos_second);
    RequestId a = h.Submit(RequestBuilder().MaxNewTokens(5).Eos({0}).Build());
    h.RunToCompletion();
    EXPECT_EQ(h.log(a).finishes[0].cause, FinishCause::kEosToken);
    EXPECT_EQ(h.log(a).tokens.size(), 2u);
  }
  {
    SchedulerHarness h(Options(), eos_second);
    RequestId a = h.Submit(RequestBuilder().MaxNewTokens(5).Eos({0}).IgnoreEos().Build());
    h.RunToCompletion();
    EXPECT_EQ(h.log(a).finishes[0].cause, FinishCause::kMaxNewTokens);
    EXPECT_EQ(h.log(a).tokens.size(), 5u);
  }
  {
    SchedulerHarness h(Options(), eos_second);
    RequestId a = h.Submit(RequestBuilder().MaxNewTokens(5).Eos({0}).IgnoreEos().StopTokens({0}).Build());
    h.RunToCompletion();
    EXPECT_EQ(h.log(a).finishes[0].cause, FinishCause::kStopToken);
  }
}

TEST(SchedulerFinishTest, MinNewTokensDefersStopTokens) {
  SchedulerHarness h(Options(), [](RequestId, int32_t) { return 0; });  // always EOS
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(8).MinNewTokens(3).Eos({0}).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.log(a).tokens.size(), 3u);
  EXPECT_EQ(h.log(a).finishes[0].cause, FinishCause::kEosToken);
}

TEST(SchedulerFinishTest, ContextLimitEndsWithLength) {
  SchedulerOptions options = Options(4, 64);
  options.max_context = 10;
  SchedulerHarness h(options);
  RequestId a = h.Submit(RequestBuilder().Prompt(7).MaxNewTokens(20).Build());
  h.RunToCompletion();
  const FinishInfo& finish = h.log(a).finishes.at(0);
  EXPECT_EQ(finish.state, RequestState::kFinishedLength);
  EXPECT_EQ(finish.cause, FinishCause::kContextLimit);
  EXPECT_EQ(finish.num_generated_tokens, 3);
}

TEST(SchedulerFinishTest, ReportsQueuePrefillDecodeAndTtft) {
  SchedulerHarness h(Options(1));
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(2).Build());  // t = 0
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(1).Build());  // waits: max_bs 1
  h.RunToCompletion();  // a: admitted 0, token 1 ms, finish 2 ms; b: admitted 2, finish 3 ms
  const RequestTimings& ta = h.log(a).finishes.at(0).timings;
  EXPECT_EQ(ta.queue, absl::ZeroDuration());
  EXPECT_EQ(ta.prefill, absl::Milliseconds(1));
  EXPECT_EQ(ta.ttft, absl::Milliseconds(1));
  EXPECT_EQ(ta.decode, absl::Milliseconds(1));
  EXPECT_EQ(ta.total, absl::Milliseconds(2));
  const RequestTimings& tb = h.log(b).finishes.at(0).timings;
  EXPECT_EQ(tb.queue, absl::Milliseconds(2));
  EXPECT_EQ(tb.ttft, absl::Milliseconds(3));
  EXPECT_EQ(tb.decode, absl::ZeroDuration());
}

// ---- Cancellation, deadlines, failures -----------------------------------------------------

TEST(SchedulerCancelTest, QueuedRequestFinishesAtOnceAndNeverReachesTheWorkers) {
  SchedulerHarness h(Options(1));
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(4).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(4).Build());
  h.ScheduleAll();  // a in flight, b queued (max_bs 1)
  EXPECT_EQ(h.state(b), RequestState::kQueued);
  EXPECT_TRUE(h.Cancel(b));
  EXPECT_EQ(h.state(b), RequestState::kFinishedCancelled);
  EXPECT_EQ(h.log(b).finishes[0].cause, FinishCause::kCancelled);
  EXPECT_EQ(h.scheduler().stats().num_queued, 0);
  EXPECT_EQ(h.scheduler().stats().queued_tokens, 0);
  EXPECT_EQ(h.scheduler().stats().num_pending_releases, 0);  // workers never saw it
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
}

TEST(SchedulerCancelTest, WaitingRequestFinishesAtOnceAndReleasesItsSlots) {
  SchedulerHarness h(Options(4, 1024, /*n_workers=*/2));
  RequestId a = h.Submit(RequestBuilder().Prompt(10).MaxNewTokens(6).Build());
  h.ScheduleAll();
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();  // a now waits for its next iteration
  EXPECT_EQ(h.state(a), RequestState::kWaitingNextIteration);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 16);
  EXPECT_TRUE(h.Cancel(a));
  EXPECT_EQ(h.state(a), RequestState::kFinishedCancelled);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_THAT(h.scheduler().TakeReleasedRequestIds(), ElementsAre(a));
}

TEST(SchedulerCancelTest, InFlightRequestIsMarkedAndFinishesWhenItsIterationReturns) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(6).Build());
  h.ScheduleAll();
  EXPECT_TRUE(h.Cancel(a));
  EXPECT_TRUE(h.log(a).finishes.empty());
  EXPECT_TRUE(h.scheduler().GetRequest(a)->cancel_requested);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 10);  // still in the pipeline
  h.Advance(absl::Milliseconds(1));
  h.CompleteOldest();
  EXPECT_EQ(h.state(a), RequestState::kFinishedCancelled);
  EXPECT_THAT(h.log(a).tokens, IsEmpty());  // its token was discarded
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_THAT(h.scheduler().TakeReleasedRequestIds(), ElementsAre(a));
}

TEST(SchedulerCancelTest, UnknownOrDeliveredIdsAreNotFound) {
  SchedulerHarness h(Options());
  EXPECT_FALSE(h.Cancel(42));
  RequestId a = h.Submit(RequestBuilder().Build());
  EXPECT_TRUE(h.Cancel(a));
  EXPECT_FALSE(h.Cancel(a));
}

TEST(SchedulerDeadlineTest, ExpiresRequestsInEveryState) {
  // max_bs 1, two pipeline slots: a and b alternate, c and d queue behind them.
  SchedulerHarness h(Options(1, 1024, 2));
  const absl::Time deadline = h.now() + absl::Milliseconds(5);
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(50).Deadline(deadline).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(50).Deadline(deadline).Build());
  RequestId c = h.Submit(RequestBuilder().MaxNewTokens(50).Deadline(deadline).Build());
  RequestId d = h.Submit(RequestBuilder().MaxNewTokens(50).Build());
  h.ScheduleAll();  // [a], [b]
  h.Advance(absl::Milliseconds(6));
  h.CompleteOldest();  // a waits for its next iteration, b is still in flight
  ASSERT_EQ(h.state(a), RequestState::kWaitingNextIteration);
  ASSERT_EQ(h.state(b), RequestState::kRunning);
  ASSERT_EQ(h.state(c), RequestState::kQueued);

  h.ExpireDeadlines();
  EXPECT_EQ(h.state(a), RequestState::kFinishedCancelled);
  EXPECT_EQ(h.log(a).finishes[0].cause, FinishCause::kDeadlineExceeded);
  EXPECT_EQ(h.state(c), RequestState::kFinishedCancelled);
  EXPECT_EQ(h.state(b), RequestState::kRunning);  // marked; finishes when it returns
  EXPECT_TRUE(h.scheduler().GetRequest(b)->cancel_requested);
  EXPECT_EQ(h.state(d), RequestState::kQueued);
  h.CompleteOldest();
  EXPECT_EQ(h.log(b).finishes.at(0).cause, FinishCause::kDeadlineExceeded);
  EXPECT_THAT(h.log(b).tokens, IsEmpty());
  h.RunToCompletion();
  EXPECT_EQ(h.state(d), RequestState::kFinishedLength);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
}

TEST(SchedulerFailureTest, FailedIterationFailsItsMembersOnly) {
  SchedulerHarness h(Options(1, 1024, 2));
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  h.ScheduleAll();  // [a], [b]
  ASSERT_TRUE(h.FailOldest(absl::UnavailableError("stage 1 lost")));
  const FinishInfo& finish = h.log(a).finishes.at(0);
  EXPECT_EQ(finish.state, RequestState::kFinishedError);
  EXPECT_EQ(finish.cause, FinishCause::kError);
  EXPECT_EQ(finish.error_message, "stage 1 lost");
  EXPECT_EQ(h.state(b), RequestState::kRunning);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 7);
  h.RunToCompletion();
  EXPECT_EQ(h.state(b), RequestState::kFinishedLength);
}

TEST(SchedulerFailureTest, MemberWithoutAResultFailsAndOthersContinue) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  std::vector<IterationPlan> plans = h.ScheduleAll();
  ASSERT_EQ(plans.size(), 1u);
  absl::StatusOr<std::vector<RequestEvent>> events = h.scheduler().OnIterationDone(
      plans[0].iteration_id, {RequestResult{b, SampledToken{9, 0.f, {}}}, RequestResult{77, {}}}, h.now());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].request_id, a);
  EXPECT_EQ((*events)[0].finish->state, RequestState::kFinishedError);
  EXPECT_THAT((*events)[0].finish->error_message, HasSubstr("no token for request"));
  EXPECT_EQ((*events)[1].request_id, b);
  EXPECT_FALSE((*events)[1].finish.has_value());
  EXPECT_EQ(h.scheduler().GetRequest(b)->state, RequestState::kWaitingNextIteration);
}

TEST(SchedulerFailureTest, MemberTheEngineCannotServeFailsWithItsReasonAndOthersContinue) {
  SchedulerHarness h(Options());
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(3).Build());
  std::vector<IterationPlan> plans = h.ScheduleAll();
  ASSERT_EQ(plans.size(), 1u);
  RequestResult failed{a, {}};
  failed.has_token = false;
  failed.error = absl::FailedPreconditionError("structured outputs are unavailable on this worker");
  absl::StatusOr<std::vector<RequestEvent>> events = h.scheduler().OnIterationDone(
      plans[0].iteration_id, {failed, RequestResult{b, SampledToken{9, 0.f, {}}}}, h.now());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].request_id, a);
  ASSERT_TRUE((*events)[0].finish.has_value());
  EXPECT_EQ((*events)[0].finish->state, RequestState::kFinishedError);
  EXPECT_EQ((*events)[0].finish->error_message, "structured outputs are unavailable on this worker");
  EXPECT_EQ((*events)[0].finish->error_code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.scheduler().GetRequest(b)->state, RequestState::kWaitingNextIteration);
  EXPECT_THAT(h.scheduler().TakeReleasedRequestIds(), ElementsAre(a));  // its KV is freed on the workers too
}

TEST(SchedulerFailureTest, FailAllFailsAdmittedRequestsAndKeepsQueuedOnes) {
  SchedulerHarness h(Options(1, 1024, 2));
  RequestId a = h.Submit(RequestBuilder().MaxNewTokens(5).Build());
  RequestId b = h.Submit(RequestBuilder().MaxNewTokens(5).Build());
  RequestId c = h.Submit(RequestBuilder().MaxNewTokens(5).Build());
  h.ScheduleAll();     // [a], [b]
  h.CompleteOldest();  // a waits
  h.ScheduleAll();     // [a] again? b is in flight, a selectable: yes
  h.CompleteOldest();  // b waits, a in flight
  ASSERT_EQ(h.state(a), RequestState::kRunning);
  ASSERT_EQ(h.state(b), RequestState::kWaitingNextIteration);
  ASSERT_EQ(h.state(c), RequestState::kQueued);
  const IterationId stale = *h.scheduler().GetRequest(a)->in_flight_iteration;

  h.FailAll(absl::UnavailableError("worker 0 died"));
  EXPECT_EQ(h.state(a), RequestState::kFinishedError);
  EXPECT_EQ(h.state(b), RequestState::kFinishedError);
  EXPECT_EQ(h.log(b).finishes[0].error_message, "worker 0 died");
  EXPECT_EQ(h.state(c), RequestState::kQueued);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_EQ(h.scheduler().stats().num_batches_in_flight, 0);
  EXPECT_EQ(h.scheduler().OnIterationDone(stale, {}, h.now()).status().code(), absl::StatusCode::kNotFound);
  // The pipeline comes back: the queued request runs, releases of the failed ones go first.
  std::vector<IterationPlan> plans = h.ScheduleAll();
  ASSERT_FALSE(plans.empty());
  EXPECT_THAT(plans[0].released_request_ids, ElementsAre(a, b));
  h.RunToCompletion();
  EXPECT_EQ(h.state(c), RequestState::kFinishedLength);
}

TEST(SchedulerStatsTest, ReportsTheBudgetAndCounts) {
  SchedulerHarness h(Options(2, 100, 1));
  h.Submit(RequestBuilder().Prompt(10).MaxNewTokens(10).Build());
  h.Submit(RequestBuilder().Prompt(10).MaxNewTokens(10).Build());
  h.Submit(RequestBuilder().Prompt(30).MaxNewTokens(10).Build());
  h.ScheduleAll();
  SchedulerStats stats = h.scheduler().stats();
  EXPECT_EQ(stats.num_running, 2);
  EXPECT_EQ(stats.num_in_flight_requests, 2);
  EXPECT_EQ(stats.num_queued, 1);
  EXPECT_EQ(stats.queued_tokens, 30);
  EXPECT_EQ(stats.n_rsrv, 40);
  EXPECT_EQ(stats.n_slots, 100);
  EXPECT_EQ(stats.num_batches_in_flight, 1);
  EXPECT_EQ(stats.num_iterations_scheduled, 1u);
  EXPECT_EQ(stats.num_iterations_completed, 0u);
}

}  // namespace
}  // namespace orca::sched
