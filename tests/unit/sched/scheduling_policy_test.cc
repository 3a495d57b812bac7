// The selection functors on hand-built pools, without the Scheduler around them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "core/sched/orca_policy.h"
#include "core/sched/request_level_policy.h"
#include "tests/unit/sched/request_builder.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::UnixEpoch();

class PolicyTest : public ::testing::Test {
 protected:
  PolicyTest() : budget_(*KvSlotBudget::Create(100, 1)) {}

  // Adds a QUEUED request reserving `kv_reservation_slots` slots once admitted.
  Request& AddQueued(RequestId id, int64_t kv_reservation_slots) {
    auto request =
        std::make_unique<Request>(id, RequestBuilder().Prompt(4).MaxNewTokens(8).Build(), 8, kv_reservation_slots, kT0);
    Request& ref = *request;
    pool_.Add(std::move(request));
    return ref;
  }
  // Adds an admitted request between iterations (its slots reserved in the budget).
  Request& AddWaiting(RequestId id, int64_t reservation, int iterations = 1) {
    Request& request = AddQueued(id, reservation);
    EXPECT_TRUE(budget_.TryReserve(reservation));
    request.Admit(kT0);
    for (int i = 0; i < iterations; ++i) {
      (void)request.StartIteration(i + 1);
      EXPECT_EQ(request.CompleteIteration(SampledToken{7, 0.0f, {}}, kT0), FinishCause::kNone);
    }
    return request;
  }
  Request& AddInFlight(RequestId id, int64_t reservation) {
    Request& request = AddWaiting(id, reservation);
    (void)request.StartIteration(99);
    return request;
  }

  KvSlotBudget budget_;
  RequestPool pool_;
};

TEST_F(PolicyTest, OrcaSelectsInArrivalOrderUpToMaxBs) {
  AddWaiting(1, 10);
  AddWaiting(2, 10);
  AddQueued(3, 10);
  AddQueued(4, 10);
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 3), ElementsAre(1, 2, 3));
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1, 2, 3, 4));
}

TEST_F(PolicyTest, OrcaSkipsRequestsInFlight) {
  AddInFlight(1, 10);
  AddWaiting(2, 10);
  AddInFlight(3, 10);
  AddQueued(4, 10);
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(2, 4));
}

TEST_F(PolicyTest, OrcaStopsAtFirstRequestThatDoesNotFit) {
  // n_slots 100: A reserves 60 → B (50) does not fit → C (10) would, but FCFS stops at B.
  AddQueued(1, 60);
  AddQueued(2, 50);
  AddQueued(3, 10);
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1));
}

TEST_F(PolicyTest, OrcaAdmitsAgainstSlotsAlreadyReserved) {
  AddWaiting(1, 90);  // n_rsrv = 90
  AddQueued(2, 11);   // 90 + 11 > 100
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1));
  // A later request that would fit still waits behind request 2.
  AddQueued(3, 5);
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1));
}

TEST_F(PolicyTest, OrcaAdmitsARequestThatExactlyFillsTheBudget) {
  AddWaiting(1, 90);
  AddQueued(2, 10);
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1, 2));
}

TEST_F(PolicyTest, OrcaSelectsNothingWhenEverythingIsInFlight) {
  AddInFlight(1, 10);
  OrcaPolicy policy;
  EXPECT_THAT(policy.Select(pool_, budget_, 8), IsEmpty());
  EXPECT_THAT(policy.Select(pool_, budget_, 0), IsEmpty());
}

TEST_F(PolicyTest, OrcaDeliversFinishedRequestsAtOnce) {
  Request& request = AddWaiting(1, 10);
  request.Finish(FinishCause::kMaxNewTokens, "");
  OrcaPolicy policy;
  EXPECT_THAT(policy.OnRequestFinished(request), ElementsAre(1));
}

TEST_F(PolicyTest, RequestLevelFormsABatchAndNobodyJoinsIt) {
  AddQueued(1, 10);
  AddQueued(2, 10);
  AddQueued(3, 10);
  RequestLevelPolicy policy(1);
  EXPECT_THAT(policy.Select(pool_, budget_, 2), ElementsAre(1, 2));
  EXPECT_TRUE(policy.batch_active());
  // Admit and run them as the Scheduler would; request 3 stays out of the running batch.
  for (RequestId id : {1, 2}) {
    Request* r = pool_.Find(id);
    ASSERT_TRUE(budget_.TryReserve(r->kv_reservation_slots()));
    r->Admit(kT0);
    (void)r->StartIteration(1);
    (void)r->CompleteIteration(SampledToken{7, 0.0f, {}}, kT0);
  }
  EXPECT_THAT(policy.Select(pool_, budget_, 2), ElementsAre(1, 2));
  // Request 2 finishes: the batch keeps running with request 1 only, 3 still waits.
  Request* second = pool_.Find(2);
  second->Finish(FinishCause::kMaxNewTokens, "");
  EXPECT_THAT(policy.OnRequestFinished(*second), IsEmpty());  // held until the batch ends
  EXPECT_THAT(policy.Select(pool_, budget_, 2), ElementsAre(1));
  Request* first = pool_.Find(1);
  first->Finish(FinishCause::kStopToken, "");
  EXPECT_THAT(policy.OnRequestFinished(*first), ElementsAre(2, 1));  // the whole batch
  EXPECT_FALSE(policy.batch_active());
}

TEST_F(PolicyTest, RequestLevelSplitsTheBatchIntoMicrobatchesForAPipeline) {
  for (RequestId id = 1; id <= 6; ++id) AddQueued(id, 10);
  RequestLevelPolicy policy(2);
  // One batch of max_bs 5 = microbatches {1, 2} and {3, 4, 5}; the first goes now.
  EXPECT_THAT(policy.Select(pool_, budget_, 5), ElementsAre(1, 2));
  for (RequestId id = 1; id <= 5; ++id) {
    Request* r = pool_.Find(id);
    ASSERT_TRUE(budget_.TryReserve(r->kv_reservation_slots()));
    r->Admit(kT0);
  }
  for (RequestId id : {1, 2}) (void)pool_.Find(id)->StartIteration(1);
  EXPECT_THAT(policy.Select(pool_, budget_, 5), ElementsAre(3, 4, 5));
  for (RequestId id : {3, 4, 5}) (void)pool_.Find(id)->StartIteration(2);
  // Both microbatches in flight: nothing runs, and request 6 waits for the whole batch.
  EXPECT_THAT(policy.Select(pool_, budget_, 5), IsEmpty());
  for (RequestId id : {1, 2}) {
    (void)pool_.Find(id)->CompleteIteration(SampledToken{7, 0.0f, {}}, kT0);
  }
  EXPECT_THAT(policy.Select(pool_, budget_, 5), ElementsAre(1, 2));
}

TEST_F(PolicyTest, RequestLevelFormsTheNextBatchOnlyWhenEveryMemberFinished) {
  AddQueued(1, 10);
  AddQueued(2, 10);
  RequestLevelPolicy policy(2);
  EXPECT_THAT(policy.Select(pool_, budget_, 1), ElementsAre(1));
  Request* first = pool_.Find(1);
  ASSERT_TRUE(budget_.TryReserve(first->kv_reservation_slots()));
  first->Admit(kT0);
  (void)first->StartIteration(1);
  // A pipeline slot is free, but request 2 may not start before batch {1} ends.
  EXPECT_THAT(policy.Select(pool_, budget_, 1), IsEmpty());
  first->Finish(FinishCause::kMaxNewTokens, "");
  EXPECT_THAT(policy.OnRequestFinished(*first), ElementsAre(1));
  EXPECT_FALSE(policy.batch_active());
  EXPECT_THAT(policy.Select(pool_, budget_, 1), ElementsAre(2));
}

TEST_F(PolicyTest, RequestLevelDeliversCancelledAndFailedMembersAtOnce) {
  AddQueued(1, 10);
  AddQueued(2, 10);
  AddQueued(3, 10);
  RequestLevelPolicy policy(1);
  EXPECT_THAT(policy.Select(pool_, budget_, 3), ElementsAre(1, 2, 3));
  Request* r1 = pool_.Find(1);
  r1->Finish(FinishCause::kMaxNewTokens, "");
  EXPECT_THAT(policy.OnRequestFinished(*r1), IsEmpty());
  Request* r2 = pool_.Find(2);
  r2->Finish(FinishCause::kCancelled, "");
  EXPECT_THAT(policy.OnRequestFinished(*r2), ElementsAre(2));
  Request* r3 = pool_.Find(3);
  r3->Finish(FinishCause::kError, "boom");
  EXPECT_THAT(policy.OnRequestFinished(*r3), ElementsAre(3, 1));
}

TEST_F(PolicyTest, RequestLevelBatchFormationStopsAtFirstRequestThatDoesNotFit) {
  AddQueued(1, 60);
  AddQueued(2, 50);
  AddQueued(3, 10);
  RequestLevelPolicy policy(1);
  EXPECT_THAT(policy.Select(pool_, budget_, 8), ElementsAre(1));
}

TEST(PolicyKindTest, ParsesTheFlagValues) {
  EXPECT_EQ(ParsePolicyKind("orca"), PolicyKind::kOrca);
  EXPECT_EQ(ParsePolicyKind("request-level"), PolicyKind::kRequestLevel);
  EXPECT_EQ(ParsePolicyKind("fifo"), std::nullopt);
  EXPECT_STREQ(PolicyKindName(PolicyKind::kRequestLevel), "request-level");
  EXPECT_EQ(CreatePolicy(PolicyKind::kOrca, 1)->kind(), PolicyKind::kOrca);
}

}  // namespace
}  // namespace orca::sched
