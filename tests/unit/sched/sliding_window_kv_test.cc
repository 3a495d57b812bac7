// KV by layer type: the workers keep the sliding-window layers' KV in a pool of its own,
// where a request holds SlidingWindowKvBlocks(start, count, window, block_size) blocks after
// each iteration (core/common/kv_footprint.h), and the scheduler counts that pool next to
// the main one (KvManager). Iteration by iteration against the simulated engine; the harness
// applies the workers' own rule to every plan and fails a plan over the pool. Timelines:
// one row per request, one column per plan: P = initiation, D = increment, x = preempted,
// - = in the pool, not in this iteration.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "core/common/kv_footprint.h"
#include "core/sched/kv_manager.h"
#include "core/sched/scheduler.h"
#include "tests/unit/sched/request_builder.h"
#include "tests/unit/sched/scheduler_harness.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::orca::sched::testing::SchedulerHarness;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::UnixEpoch();

SchedulerOptions Options(PolicyKind policy, int32_t window, int64_t local_slots, int32_t block_size = 1) {
  SchedulerOptions options;
  options.policy = policy;
  options.max_bs = 4;
  options.n_slots = 64;
  options.n_workers = 1;
  options.kv_block_size = block_size;
  options.sliding_window = window;
  options.kv_local_slots = local_slots;
  return options;
}

// The entry of `id` in the last plan (nullptr when it is not there).
const ScheduledRequest* LastEntry(const SchedulerHarness& h, RequestId id) {
  for (const ScheduledRequest& r : h.plans().back().requests) {
    if (r.request_id == id) return &r;
  }
  return nullptr;
}

TEST(SlidingWindowKvManagerTest, ReservedAdmissionReservesTheWindowBoundAndAFullPoolChangesNothing) {
  KvManager::Options o;
  o.n_slots = 64;
  o.block_size = 2;
  o.sliding_window = 4;
  o.n_local_slots = 16;  // 8 blocks
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(o);
  ASSERT_TRUE(kv.ok()) << kv.status();
  // 6 prompt tokens + 12 new: 18 positions. Its prefill [0, 6) spans min(9, (4 + 6 - 2) / 2 + 2)
  // = 6 blocks at most: that is what admission reserves.
  Request a(1, RequestBuilder().Prompt(6).MaxNewTokens(12).Build(), 12, 18, kT0);
  EXPECT_EQ((*kv)->LocalBlocksToAdmit(a, 0), SlidingWindowKvBound(18, 6, 4, 2));
  EXPECT_EQ((*kv)->LocalBlocksToAdmit(a, 0), 6);
  ASSERT_TRUE((*kv)->TryAdmit(a, 0));
  EXPECT_EQ((*kv)->local_blocks(1), 6);
  EXPECT_EQ((*kv)->num_free_local_blocks(), 2);
  // A second one fits the main pool (18 + 18 of 64 slots) but not the local one.
  Request b(2, RequestBuilder().Prompt(6).MaxNewTokens(12).Build(), 12, 18, kT0);
  EXPECT_FALSE((*kv)->TryAdmit(b, 0));
  EXPECT_FALSE((*kv)->holds(2));
  EXPECT_EQ((*kv)->slot_budget().n_rsrv(), 18);  // nothing changed
  const KvStats stats = (*kv)->stats();
  EXPECT_EQ(stats.num_local_used_slots, 12);
  EXPECT_EQ(stats.n_local_slots, 16);
  EXPECT_EQ((*kv)->CheckInvariants(), "");
  (*kv)->Free(1);
  EXPECT_EQ((*kv)->num_free_local_blocks(), 8);
  EXPECT_TRUE((*kv)->TryAdmit(b, 0));
  EXPECT_EQ((*kv)->CheckInvariants(), "");
}

TEST(SlidingWindowKvManagerTest, WithoutALocalPoolNothingIsCounted) {
  KvManager::Options o;
  o.n_slots = 64;
  o.block_size = 2;
  o.sliding_window = 4;  // the model has a window, the workers keep it in the main pool
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(o);
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_FALSE((*kv)->has_local_pool());
  Request a(1, RequestBuilder().Prompt(6).MaxNewTokens(12).Build(), 12, 18, kT0);
  EXPECT_EQ((*kv)->LocalBlocksToAdmit(a, 0), 0);
  ASSERT_TRUE((*kv)->TryAdmit(a, 0));
  EXPECT_EQ((*kv)->stats().num_local_used_slots, 0);
  EXPECT_EQ((*kv)->stats().n_local_slots, 0);
}

TEST(SlidingWindowKvManagerTest, APoolNeedsAWindowAndAWholeBlock) {
  KvManager::Options o;
  o.n_slots = 64;
  o.block_size = 4;
  o.n_local_slots = 16;
  EXPECT_THAT(KvManager::Create(o).status().message(), HasSubstr("sliding_window is 0"));
  o.sliding_window = 8;
  o.n_local_slots = 3;
  EXPECT_THAT(KvManager::Create(o).status().message(), HasSubstr("no whole KV block"));
}

TEST(SlidingWindowSchedulerTest, ReservedModeShrinksToTheDecodeBoundAndTheWorkersStayWithinIt) {
  // Window 4, blocks of 2. Prompt 6 + 12 new: admission reserves the prefill's bound (6
  // blocks); from its first decode on it computes one token per iteration, so the
  // reservation is the decode bound, min(9, (4 - 1) / 2 + 2) = 3 blocks, and what the
  // workers hold after each decode at position p is SlidingWindowKvBlocks(p, 1) <= 3.
  SchedulerHarness h(Options(PolicyKind::kOrca, 4, 16, 2));
  const RequestId a = h.Submit(RequestBuilder().Prompt(6).MaxNewTokens(12).Id("a").Build());
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 6 * 2);
  EXPECT_EQ(h.worker_local_blocks(), SlidingWindowKvBlocks(0, 6, 4, 2));  // 3: positions 0..5
  for (int32_t position = 6; position < 17; ++position) {
    h.Step();
    const ScheduledRequest* entry = LastEntry(h, a);
    ASSERT_NE(entry, nullptr);
    ASSERT_EQ(entry->start_position, position);
    EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 3 * 2) << "decode at " << position;
    EXPECT_EQ(h.scheduler().kv().local_blocks(a), 3);
    EXPECT_EQ(h.worker_local_blocks(), SlidingWindowKvBlocks(position, 1, 4, 2)) << "decode at " << position;
    EXPECT_EQ(h.CheckInvariants(true), "") << "decode at " << position;
  }
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 0);
  EXPECT_EQ(h.scheduler().stats().n_local_slots, 16);
}

TEST(SlidingWindowSchedulerTest, PagedModeHoldsExactlyTheWindowOfEachIteration) {
  // Paged: what the request holds is its last iteration's SlidingWindowKvBlocks, no bound.
  SchedulerHarness h(Options(PolicyKind::kPaged, 4, 20, 2));  // room for a readmission's 9 blocks
  const RequestId a = h.Submit(RequestBuilder().Prompt(6).MaxNewTokens(12).Id("a").Build());
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, SlidingWindowKvBlocks(0, 6, 4, 2) * 2);
  for (int32_t position = 6; position < 17; ++position) {
    h.Step();
    ASSERT_NE(LastEntry(h, a), nullptr);
    // Decodes at 6, 7: keys from position 3 (block 1) to block 3: 3 blocks; at 8: keys 5..8, blocks 2..4.
    EXPECT_EQ(h.scheduler().stats().n_local_rsrv, SlidingWindowKvBlocks(position, 1, 4, 2) * 2)
        << "decode at " << position;
    EXPECT_EQ(h.worker_local_blocks(), SlidingWindowKvBlocks(position, 1, 4, 2));
    EXPECT_EQ(h.CheckInvariants(true), "") << "decode at " << position;
  }
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 0);
}

TEST(SlidingWindowSchedulerTest, ARequestWaitsForTheLocalPoolAndIsAdmittedWhenItFrees) {
  // Window 4, blocks of 1, a local pool of 8 blocks; the main pool (64 slots) has room for
  // both. a and b (4 prompt + 3 new each) reserve 7 local blocks at admission, so b waits
  // behind a even after a shrinks to its decode bound (5): it starts when a finishes.
  //
  //   a | P D D
  //   b |   - - P D D
  SchedulerHarness h(Options(PolicyKind::kOrca, 4, 8));
  const RequestId a = h.Submit(RequestBuilder().Prompt(4).MaxNewTokens(3).Id("a").Build());
  h.ScheduleAll();
  const RequestId b = h.Submit(RequestBuilder().Prompt(4).MaxNewTokens(3).Id("b").Build());
  h.ScheduleAll();
  EXPECT_EQ(h.state(b), RequestState::kQueued);
  EXPECT_LE(h.scheduler().stats().n_rsrv + 7, h.scheduler().stats().n_slots);  // the main pool has room
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 7);
  EXPECT_EQ(h.scheduler().GetRequest(b)->local_blocks_to_admit, 7);
  h.Step();  // a's first decode: its reservation shrinks to 5, still no room for b's 7
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 5);
  EXPECT_EQ(h.state(b), RequestState::kQueued);
  h.Step();
  EXPECT_EQ(h.state(b), RequestState::kQueued);
  h.Step();  // a returns its last token: b is admitted in the next plan
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
  EXPECT_EQ(h.state(b), RequestState::kRunning);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 7);
  h.RunToCompletion();
  EXPECT_EQ(h.state(b), RequestState::kFinishedLength);
  EXPECT_EQ(h.CheckInvariants(true), "");
  EXPECT_LE(h.worker_local_peak(), 8);
  EXPECT_EQ(h.Timeline(),
            "a | P D D\n"
            "b |   - - P D D\n");
}

TEST(SlidingWindowSchedulerTest, PagedModePreemptsTheLaterRequestWhenLocalBlocksRunOut) {
  // Window 4, blocks of 1, a local pool of 7 blocks. a (1 token) decodes, holding
  // min(p + 1, 4) blocks at position p; b (3 tokens) is admitted beside it. At a's decode at
  // position 3, a needs a 4th block while b holds 4: b, served after a, is preempted
  // (nothing evicted from under a), and comes back once a's end frees the pool.
  SchedulerHarness h(Options(PolicyKind::kPaged, 4, 7));
  const RequestId a = h.Submit(RequestBuilder().Prompt(1).MaxNewTokens(6).Id("a").Build());
  h.ScheduleAll();  // plan 1: a [0, 1)
  const RequestId b = h.Submit(RequestBuilder().Prompt(3).MaxNewTokens(4).Id("b").Build());
  h.Step();  // plan 2: a [1, 2) holds 2, b [0, 3) holds 3
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 5);
  h.Step();  // plan 3: a [2, 3) holds 3, b [3, 4) holds 4
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 7);
  EXPECT_EQ(h.scheduler().stats().num_preemptions, 0u);
  h.Step();  // plan 4: a [3, 4) needs 4: b preempted
  EXPECT_EQ(h.scheduler().stats().num_preemptions, 1u);
  EXPECT_EQ(h.state(b), RequestState::kQueued);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 4);
  EXPECT_EQ(h.CheckInvariants(true), "");
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
  EXPECT_EQ(h.state(b), RequestState::kFinishedLength);
  EXPECT_EQ(h.log(b).tokens.size(), 4u);
  // b is readmitted with its 3 prompt + 2 generated tokens recomputed (5 blocks) once a's
  // end leaves room for them.
  EXPECT_EQ(h.Timeline(),
            "a | P D D D D D\n"
            "b |   P D x - - P D\n");
  EXPECT_LE(h.worker_local_peak(), 7);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 0);
}

TEST(SlidingWindowSchedulerTest, TheFasterTransformerPaddingHoldsItsWindowUntilTheBatchEnds) {
  // Window 4, blocks of 1. a (2 tokens) is padded to b's 6: its padding sequence computes 4
  // positions at its initiation and keeps SlidingWindowKvBlocks(0, 4) = 4 blocks until its
  // release. Both decode to the batch's largest max_new_tokens (3): 6 + 3 = 9 positions
  // for b, 2 + 3 = 5 for a.
  SchedulerOptions options = Options(PolicyKind::kRequestLevel, 4, 32);
  options.faster_transformer = true;
  SchedulerHarness h(options);
  const RequestId a = h.Submit(RequestBuilder().Prompt(2).MaxNewTokens(3).Id("a").Build());
  const RequestId b = h.Submit(RequestBuilder().Prompt(6).MaxNewTokens(3).Id("b").Build());
  h.ScheduleAll();
  ASSERT_NE(LastEntry(h, a), nullptr);
  EXPECT_EQ(LastEntry(h, a)->num_padding_tokens, 4);
  const int64_t a_padding = SlidingWindowKvBlocks(0, 4, 4, 1);
  EXPECT_EQ(h.scheduler().kv().local_blocks(a), SlidingWindowKvBound(5, 2, 4, 1) + a_padding);
  EXPECT_EQ(h.scheduler().kv().local_blocks(b), SlidingWindowKvBound(9, 6, 4, 1));
  EXPECT_EQ(h.worker_local_blocks(), SlidingWindowKvBlocks(0, 2, 4, 1) + a_padding + SlidingWindowKvBlocks(0, 6, 4, 1));
  h.Step();  // first decodes: both shrink to the decode bound, a keeps its padding's blocks
  EXPECT_EQ(h.scheduler().kv().local_blocks(a), SlidingWindowKvBound(5, 1, 4, 1) + a_padding);
  EXPECT_EQ(h.scheduler().kv().local_blocks(b), SlidingWindowKvBound(9, 1, 4, 1));
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv,
            SlidingWindowKvBound(5, 1, 4, 1) + a_padding + SlidingWindowKvBound(9, 1, 4, 1));
  EXPECT_EQ(h.CheckInvariants(true), "");
  h.RunToCompletion();
  EXPECT_EQ(h.state(a), RequestState::kFinishedLength);
  EXPECT_EQ(h.scheduler().stats().n_local_rsrv, 0);
  h.FlushReleases();
  EXPECT_EQ(h.worker_local_blocks(), 0);
}

TEST(SlidingWindowSchedulerTest, ARequestWhoseWindowCanNeverFitIsRefusedNamingThePool) {
  SchedulerHarness h(Options(PolicyKind::kOrca, 4, 6));
  // 8 prompt tokens: its prefill spans min(10, 4 + 8 - 2 + 2) = 10 blocks, over the pool's 6.
  absl::StatusOr<RequestId> id = h.TrySubmit(RequestBuilder().Prompt(8).MaxNewTokens(2).Build());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("sliding-window layers' KV pool"));
  EXPECT_THAT(id.status().message(), HasSubstr("need 10 blocks"));
  EXPECT_THAT(id.status().message(), HasSubstr("more than its 6 (kv_local_slots 6)"));
  // Chunked prefill caps the prefill's span: 3-token chunks need (4 + 3 - 2) + 2 = 7 — still
  // over; 2-token chunks need 6, which fits.
  SchedulerOptions chunked = Options(PolicyKind::kOrca, 4, 6);
  chunked.max_num_batched_tokens = 4;
  chunked.long_prefill_token_threshold = 2;
  SchedulerHarness c(chunked);
  EXPECT_TRUE(c.TrySubmit(RequestBuilder().Prompt(8).MaxNewTokens(2).Build()).ok());
  c.RunToCompletion();
  EXPECT_EQ(c.CheckInvariants(true), "");
  // The main pool's refusal names its pool when there are two.
  absl::StatusOr<RequestId> big = h.TrySubmit(RequestBuilder().Prompt(60).MaxNewTokens(10).Build());
  EXPECT_THAT(big.status().message(), HasSubstr("exceeds n_slots (64), the full-attention layers' KV pool"));
}

TEST(SlidingWindowSchedulerTest, PrefixCachingWithALocalPoolIsRefusedAtCreation) {
  SchedulerOptions options = Options(PolicyKind::kOrca, 4096, 8192, 16);
  options.n_slots = 8192;
  options.enable_prefix_caching = true;
  absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("keep only the last 4096 positions"));
  EXPECT_THAT(s.status().message(), HasSubstr("--swa-full"));
  options.kv_local_slots = 0;  // the workers keep every position (--swa-full): fine
  EXPECT_TRUE(Scheduler::Create(options).ok());
}

}  // namespace
}  // namespace orca::sched
