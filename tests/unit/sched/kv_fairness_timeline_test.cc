// Fairness of the KV budget, one iteration at a time (the timeline style of
// scheduler_timeline_test.cc):
//  - max_request_kv_share caps what one request, or one group of n sequences of a prompt
//    counted together, may reserve: a request over it is refused at submit with the
//    numbers, and a small request behind the largest one accepted starts at once;
//  - SubmitGroup (n > 1) submits the sequences of one prompt together; with prefix
//    caching the group's leader computes the prompt and the others share its full blocks
//    (reserved once, held once), so the group reserves prompt + n × max_new_tokens.
// Timelines: P = initiation, D = increment, - = in the pool, not in this iteration.

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
using ::testing::HasSubstr;

constexpr RequestState kQueued = RequestState::kQueued;
constexpr RequestState kRunning = RequestState::kRunning;
constexpr RequestState kLength = RequestState::kFinishedLength;
constexpr RequestState kCancelled = RequestState::kFinishedCancelled;

SchedulerOptions Options(PolicyKind policy, int64_t n_slots, double share, int32_t block = 1, bool prefix = false) {
  SchedulerOptions options;
  options.policy = policy;
  options.max_bs = 8;
  options.n_slots = n_slots;
  options.n_workers = 1;
  options.kv_block_size = block;
  options.enable_prefix_caching = prefix;
  options.max_request_kv_share = share;
  return options;
}

// `n` specs of one prompt, ids "<name>0".."<name>n-1", each with its own seed.
std::vector<RequestSpec> Group(const std::string& name, int n, int32_t prompt, int32_t max_new) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec spec = RequestBuilder().Id(name + std::to_string(i)).Prompt(prompt).MaxNewTokens(max_new).Build();
    spec.sampling.seed = 1234 + i;
    specs.push_back(std::move(spec));
  }
  return specs;
}

void ExpectStates(const SchedulerHarness& h, const std::vector<std::pair<RequestId, RequestState>>& expected,
                  int iteration) {
  for (const auto& [id, state] : expected) {
    EXPECT_EQ(h.state(id), state) << "request " << h.log(id).label << " after iteration " << iteration << ": "
                                  << RequestStateName(h.state(id));
  }
  EXPECT_EQ(h.CheckInvariants(/*scheduled_all=*/true), "") << "after iteration " << iteration;
}

TEST(KvFairnessTimelineTest, ARequestOverTheShareIsRefusedAndASmallOneBehindTheLargestStartsAtOnce) {
  // n_slots 64. "big" asks prompt 4 + max_new_tokens 60 = 64 slots, "small" 3 + 3 = 6.
  //  - share 1 (the paper): big takes all 64 slots and small waits behind it for 60
  //    iterations (the defect: one request holds the budget while a tiny one waits);
  //  - share 0.5: big is refused at submit with the numbers; the largest request accepted
  //    (prompt 4 + 28 = 32) leaves room, and small starts in the very first iteration:
  //      big | P D D ...
  //    small | P D D
  struct Case {
    double share;
    int32_t big_max_new;
    bool big_accepted;
    int small_first_plan;  // 0-based index of the plan small starts in
  };
  for (const Case& c : {Case{1.0, 60, true, 60}, Case{0.5, 60, false, 0}, Case{0.5, 28, true, 0}}) {
    SCOPED_TRACE(::testing::Message() << "share " << c.share << " big max_new_tokens " << c.big_max_new);
    SchedulerHarness h(Options(PolicyKind::kOrca, 64, c.share));
    absl::StatusOr<RequestId> big =
        h.TrySubmit(RequestBuilder().Id("big").Prompt(4).MaxNewTokens(c.big_max_new).Build());
    ASSERT_EQ(big.ok(), c.big_accepted) << big.status();
    if (!big.ok()) {
      EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(big.status().message(), HasSubstr("prompt (4 tokens) + max_new_tokens (60) take 64 KV slots"));
      EXPECT_THAT(big.status().message(),
                  HasSubstr("per-request limit of 32 (max_request_kv_share 0.5 of n_slots 64)"));
    }
    h.ScheduleAll();
    const RequestId small = h.Submit(RequestBuilder().Id("small").Prompt(3).MaxNewTokens(3).Build());
    h.RunToCompletion();
    EXPECT_EQ(h.state(small), kLength);
    if (big.ok()) {
      EXPECT_EQ(h.state(*big), kLength);
    }
    int first = -1;
    for (size_t k = 0; k < h.plans().size() && first < 0; ++k) {
      for (const ScheduledRequest& r : h.plans()[k].requests)
        first = r.request_id == small ? static_cast<int>(k) : first;
    }
    // Submitted after the first plan when big was accepted: it can join from plan 1 on.
    EXPECT_EQ(first, big.ok() ? std::max(1, c.small_first_plan) : 0);
    EXPECT_EQ(h.CheckInvariants(true), "");
  }
}

TEST(KvFairnessTimelineTest, TheShareCountsTheSequencesOfOneGroupTogether) {
  // n_slots 64, share 0.5 → 32 slots. A sequence of prompt 8 + max_new_tokens 4 takes 12:
  // three of them as three requests fit the share each, but as one group of n = 3 (36
  // slots; no prefix caching, so each holds its own copy of the prompt) they do not.
  SchedulerHarness h(Options(PolicyKind::kOrca, 64, 0.5));
  absl::StatusOr<std::vector<RequestId>> three = h.TrySubmitGroup(Group("g", 3, 8, 4));
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status().message(),
              HasSubstr("n = 3 sequences of one prompt (8 tokens, each its own copy) with max_new_tokens (4) take 36 "
                        "KV slots, over the per-request limit of 32"));
  EXPECT_EQ(h.scheduler().stats().num_queued, 0);  // all or none
  absl::StatusOr<std::vector<RequestId>> two = h.TrySubmitGroup(Group("h", 2, 8, 4));
  ASSERT_TRUE(two.ok()) << two.status();
  for (int i = 0; i < 3; ++i) h.Submit(RequestBuilder().Prompt(8).MaxNewTokens(4).Build());
  h.RunToCompletion();
  EXPECT_EQ(h.CheckInvariants(true), "");
}

TEST(KvFairnessTimelineTest, AGroupOfFourSharesItsPromptBlocksAndReservesThePromptOnce) {
  // Orca (Algorithm 1) with prefix caching, blocks of 4, n_slots 48. A group of n = 4
  // sequences of a 10-token prompt, max_new_tokens 4: each alone reserves 14 → 16 slots
  // (64 for four: they could not run together), the group 40 = its 2 full prompt blocks
  // (8 slots) once + 4 × 8 of its own. s0 (the leader) computes the prompt; s1-s3 wait
  // (skipped, not waited for: c, which arrived after them, starts at once) until s0's
  // iteration returns, then take s0's two prompt blocks as a prefix hit and compute only
  // prompt tokens 8-9.
  //   s0 | P D D D
  //   s1 | - P D D D
  //   s2 | - P D D D
  //   s3 | - P D D D
  //   c  | P D D D
  SchedulerHarness h(Options(PolicyKind::kOrca, 48, 1.0, /*block=*/4, /*prefix=*/true));
  absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(Group("s", 4, 10, 4));
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<RequestId> s = *group;
  const RequestId c = h.Submit(RequestBuilder().Id("c").Prompt(4).MaxNewTokens(4).Build());
  EXPECT_EQ(h.scheduler().GetRequest(s[1])->slots_to_admit, 16);  // not its group's business yet
  EXPECT_EQ(h.scheduler().GetRequest(s[0])->slots_to_admit, 40);  // the leader admits the group

  h.ScheduleAll();
  ExpectStates(h, {{s[0], kRunning}, {s[1], kQueued}, {s[2], kQueued}, {s[3], kQueued}, {c, kRunning}}, 0);
  EXPECT_TRUE(h.scheduler().GetRequest(s[1])->waits_for_shared_prompt);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 40 + 8);
  EXPECT_EQ(h.scheduler().stats().kv.num_group_reserved_slots, 8 + 3 * 8);
  const std::vector<int32_t> leader_blocks = *h.scheduler().kv().block_table(s[0]);

  h.Step();  // s0's prompt returned: its two full blocks are registered, s1-s3 start
  ExpectStates(h, {{s[0], kRunning}, {s[1], kRunning}, {s[2], kRunning}, {s[3], kRunning}, {c, kRunning}}, 1);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 48);  // nothing more: their parts were reserved
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 4 + 3 * 2 + 2);
  for (int i = 1; i < 4; ++i) {
    const ScheduledRequest* entry = nullptr;
    for (const ScheduledRequest& r : h.plans().back().requests) entry = r.request_id == s[i] ? &r : entry;
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->start_position, 8) << "s" << i;  // only its last 2 prompt tokens computed
    EXPECT_EQ(entry->input_token_ids.size(), 2u);
    ASSERT_GE(entry->new_block_ids.size(), 2u);
    EXPECT_EQ(entry->new_block_ids[0], leader_blocks[0]) << "s" << i;  // the leader's blocks, shared
    EXPECT_EQ(entry->new_block_ids[1], leader_blocks[1]) << "s" << i;
    EXPECT_EQ(h.scheduler().GetRequest(s[i])->num_cached_tokens, 8);
  }
  EXPECT_EQ(h.scheduler().stats().kv.num_group_reserved_slots, 8);  // the shared blocks, once

  for (int it = 2; it <= 5; ++it) {
    h.Step();
    EXPECT_EQ(h.CheckInvariants(true), "") << "after iteration " << it;
  }
  ExpectStates(h, {{s[0], kLength}, {s[1], kLength}, {s[2], kLength}, {s[3], kLength}, {c, kLength}}, 5);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_EQ(h.scheduler().stats().kv.num_group_reserved_slots, 0);
  EXPECT_EQ(h.Timeline(),
            "s0 | P D D D\n"
            "s1 | - P D D D\n"
            "s2 | - P D D D\n"
            "s3 | - P D D D\n"
            "c  | P D D D\n");
  // Each sequence's tokens are its own (the simulated engine draws per request).
  for (RequestId id : s) EXPECT_EQ(h.log(id).tokens.size(), 4u);
}

TEST(KvFairnessTimelineTest, PagedGroupMembersShareThePromptBlocksOfTheirLeader) {
  // Paged KV with prefix caching, blocks of 4: the same group of four takes 4 blocks for
  // s0 and 2 private blocks for each of s1-s3 (their last prompt block, then a decode
  // block), never a copy of the prompt's first 8 tokens.
  SchedulerHarness h(Options(PolicyKind::kPaged, 64, 1.0, /*block=*/4, /*prefix=*/true));
  absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(Group("s", 4, 10, 4));
  ASSERT_TRUE(group.ok()) << group.status();
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 3);  // s0's prompt: 10 tokens
  h.Step();
  // s0 decodes at position 10 (its 3rd block); s1-s3 hold s0's blocks 0-1 and one own block each.
  EXPECT_EQ(h.scheduler().stats().kv.num_blocks_in_use, 3 + 3);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(h.scheduler().GetRequest((*group)[i])->num_cached_tokens, 8);
  h.RunToCompletion();
  for (RequestId id : *group) EXPECT_EQ(h.state(id), kLength);
  EXPECT_EQ(h.CheckInvariants(true), "");
  EXPECT_EQ(h.Timeline(),
            "s0 | P D D D\n"
            "s1 | - P D D D\n"
            "s2 | - P D D D\n"
            "s3 | - P D D D\n");
}

TEST(KvFairnessTimelineTest, WhenTheLeaderLeavesBeforeItsPromptIsComputedTheOthersRunAlone) {
  // The leader is cancelled while its prompt is in flight: nothing is shared, the group's
  // reservation is returned, and s1, s2 are admitted as ordinary requests (each its whole
  // prompt and its own reservation).
  SchedulerHarness h(Options(PolicyKind::kOrca, 64, 1.0, /*block=*/4, /*prefix=*/true));
  absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(Group("s", 3, 10, 4));
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<RequestId> s = *group;
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 8 + 3 * 8);
  EXPECT_TRUE(h.Cancel(s[0]));  // in flight: finishes when its iteration returns
  h.Step();
  ExpectStates(h, {{s[0], kCancelled}, {s[1], kRunning}, {s[2], kRunning}}, 1);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 2 * 16);
  EXPECT_EQ(h.scheduler().stats().kv.num_group_reserved_slots, 0);
  h.RunToCompletion();
  EXPECT_EQ(h.CheckInvariants(true), "");
  EXPECT_EQ(h.Timeline(),
            "s0 | P\n"
            "s1 | - P D D D\n"
            "s2 | - P D D D\n");
}

TEST(KvFairnessTimelineTest, AMemberCancelledWhileWaitingReturnsItsPartAtOnce) {
  SchedulerHarness h(Options(PolicyKind::kOrca, 64, 1.0, /*block=*/4, /*prefix=*/true));
  absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(Group("s", 3, 10, 4));
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<RequestId> s = *group;
  h.ScheduleAll();
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 32);
  EXPECT_TRUE(h.Cancel(s[2]));
  ExpectStates(h, {{s[0], kRunning}, {s[1], kQueued}, {s[2], kCancelled}}, 0);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 24);
  h.RunToCompletion();
  ExpectStates(h, {{s[0], kLength}, {s[1], kLength}}, 5);
  EXPECT_FALSE(h.scheduler().GetRequest(s[1]).has_value());
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
}

TEST(KvFairnessTimelineTest, APipelineFailureWhileMembersWaitLetsThemStartOverAlone) {
  // FailAll drops the leader (and the workers' KV with the prompt): the waiting members
  // stay queued and run later, each computing its own prompt.
  SchedulerHarness h(Options(PolicyKind::kOrca, 64, 1.0, /*block=*/4, /*prefix=*/true));
  absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(Group("s", 3, 10, 4));
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<RequestId> s = *group;
  h.ScheduleAll();
  h.FailAll(absl::UnavailableError("stage 1 died"));
  EXPECT_EQ(h.state(s[0]), RequestState::kFinishedError);
  EXPECT_EQ(h.scheduler().stats().n_rsrv, 0);
  EXPECT_FALSE(h.scheduler().GetRequest(s[1])->waits_for_shared_prompt);
  h.FlushReleases();
  h.RunToCompletion();
  ExpectStates(h, {{s[1], kLength}, {s[2], kLength}}, 5);
  for (const IterationPlan& plan : h.plans()) {
    for (const ScheduledRequest& r : plan.requests) {
      if (r.new_request.has_value()) EXPECT_EQ(r.start_position, 0) << "request " << r.request_id;
    }
  }
}

TEST(KvFairnessTimelineTest, GroupsAreCheckedAllOrNone) {
  SchedulerHarness h(Options(PolicyKind::kOrca, 64, 1.0));
  std::vector<RequestSpec> specs = Group("s", 3, 10, 4);
  specs[2].prompt_token_ids.push_back(7);
  absl::StatusOr<std::vector<RequestId>> differing = h.TrySubmitGroup(specs);
  EXPECT_EQ(differing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(differing.status().message(), HasSubstr("group member 2's prompt differs from member 0's"));
  specs = Group("s", 2, 10, 4);
  specs[1].caller_id = "s0";
  EXPECT_EQ(h.TrySubmitGroup(specs).status().code(), absl::StatusCode::kAlreadyExists);
  specs = Group("s", 2, 10, 4);
  specs[1].max_new_tokens = 0;
  absl::StatusOr<std::vector<RequestId>> bad = h.TrySubmitGroup(specs);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("group member 1: max_new_tokens must be >= 1"));
  EXPECT_EQ(h.TrySubmitGroup({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.scheduler().stats().num_queued, 0);
  EXPECT_FALSE(h.scheduler().HasRequests());
}

}  // namespace
}  // namespace orca::sched
