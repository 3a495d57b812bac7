// n > 1 and the KV budget at the scheduler service (issue 45, fairness), over
// real gRPC on 127.0.0.1:0 with the in-process engine on a small synthetic
// model:
//  - the sequences of one prompt arrive as separate Generate calls carrying
//    group_id / group_size / group_index; the loop gathers them and submits
//    them as one group, whose tokens are exactly those of separate requests
//    with the same seeds — also with prefix caching, where the members compute
//    only the end of the prompt on their leader's KV blocks (shared physically:
//    the prefix cache counts their hits);
//  - GetStats reports the KV one request may take (--max-request-kv-share), and
//    a request or group over it is INVALID_ARGUMENT at once, with the numbers,
//    for callers that bypass the gateway;
//  - a malformed group, a repeated index, a group missing a member.

#include <grpcpp/grpcpp.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/scheduler/in_process_engine_client.h"
#include "tests/unit/services/in_process_scheduler.h"

namespace orca::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlock = 16;

const std::string& ModelPath() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/orca-group-test-", ::getpid());
    engine::SyntheticModelOptions o;
    o.hidden_size = 64;
    o.num_layers = 2;
    o.num_heads = 4;
    o.num_kv_heads = 2;
    o.intermediate_size = 96;
    o.vocab_size = 300;
    o.max_position = 2048;
    o.dtype = DType::kF32;
    o.seed = 45;
    const absl::Status s = engine::WriteSyntheticCheckpoint(o, dir);
    EXPECT_TRUE(s.ok()) << s;
    return dir;
  }();
  return path;
}

struct Mode {
  const char* name;
  sched::PolicyKind policy;
  bool prefix_caching;
};

// The scheduler service with the in-process engine, on 127.0.0.1:0.
class Service : public testing::InProcessScheduler {
 public:
  explicit Service(const Mode& mode, double share = 1.0, absl::Duration group_wait = absl::Seconds(5))
      : InProcessScheduler(LoopOptions(mode, share, group_wait), Engine(), std::chrono::seconds(60)) {}

  // The calls of one group at once, each on its own thread (as the gateway's streams).
  std::vector<Result> GenerateAll(const std::vector<v1::GenerateRequest>& requests) {
    std::vector<std::future<Result>> calls;
    for (const v1::GenerateRequest& r : requests) {
      calls.push_back(std::async(std::launch::async, [this, r] { return Generate(r); }));
    }
    std::vector<Result> results;
    for (auto& c : calls) results.push_back(c.get());
    return results;
  }

 private:
  static std::unique_ptr<EngineClient> Engine() {
    engine::Engine::Options eo;
    eo.model_path = ModelPath();
    eo.n_slots = 1024;
    eo.kv_block_size = kBlock;
    eo.num_threads = 1;
    auto engine = InProcessEngineClient::Create(eo, "synthetic");
    EXPECT_TRUE(engine.ok()) << engine.status();
    return std::move(engine).value();
  }
  static SchedulerLoop::Options LoopOptions(const Mode& mode, double share, absl::Duration group_wait) {
    SchedulerLoop::Options o;
    o.scheduler.policy = mode.policy;
    o.scheduler.max_bs = 8;
    o.scheduler.n_slots = 1024;
    o.scheduler.kv_block_size = kBlock;
    o.scheduler.enable_prefix_caching = mode.prefix_caching;
    o.scheduler.max_request_kv_share = share;
    o.group_wait = group_wait;
    return o;
  }
};

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(1 + (i * 37) % 290);
  return prompt;
}

v1::GenerateRequest Request(const std::vector<int32_t>& prompt, int max_new_tokens, uint64_t seed) {
  v1::GenerateRequest request;
  request.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_new_tokens(max_new_tokens);
  request.set_ignore_eos(true);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_seed(seed);
  return request;
}

// What the gateway sends for n = `n`: one call per sequence, the seed + its index.
std::vector<v1::GenerateRequest> Group(const std::string& id, const std::vector<int32_t>& prompt, int n,
                                       int max_new_tokens, uint64_t seed) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    v1::GenerateRequest r = Request(prompt, max_new_tokens, seed + static_cast<uint64_t>(i));
    r.set_request_id(absl::StrCat(id, "-", i));
    r.set_group_id(id);
    r.set_group_size(n);
    r.set_group_index(i);
    requests.push_back(std::move(r));
  }
  return requests;
}

class SchedulerGroupTest : public ::testing::TestWithParam<Mode> {};

TEST_P(SchedulerGroupTest, AGroupOfFourSeededSequencesGivesTheTokensOfFourSeparateRequests) {
  const std::vector<int32_t> prompt = Prompt(70);  // 4 full blocks shared, 6 tokens in the 5th
  // Before: four separate requests, one at a time, each computing the whole prompt.
  std::vector<std::vector<int32_t>> separate;
  {
    Service reference({"orca", sched::PolicyKind::kOrca, false});
    for (int i = 0; i < 4; ++i) {
      Service::Result r = reference.Generate(Request(prompt, 12, 1234 + i));
      ASSERT_TRUE(r.status.ok()) << r.status.error_message();
      separate.push_back(r.tokens);
    }
  }
  Service s(GetParam());
  const std::vector<Service::Result> group = s.GenerateAll(Group("g", prompt, 4, 12, 1234));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(group[i].status.ok()) << "sequence " << i << ": " << group[i].status.error_message();
    EXPECT_EQ(group[i].tokens, separate[i]) << "sequence " << i;
  }
  const v1::SchedulerStats stats = s.StatsWhenIdle();
  EXPECT_EQ(stats.shares_group_prompts(), GetParam().prefix_caching);
  if (GetParam().prefix_caching) {
    // Members 1-3 started on the leader's 4 full prompt blocks: computed once, held once.
    EXPECT_EQ(stats.prefix_cache_hits(), 3 * 4 * kBlock);
  }
  EXPECT_EQ(stats.kv_slots_used(), 0);
  EXPECT_EQ(stats.num_requests_running(), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerGroupTest,
                         ::testing::Values(Mode{"orca", sched::PolicyKind::kOrca, false},
                                           Mode{"orca_prefix_caching", sched::PolicyKind::kOrca, true},
                                           Mode{"paged_prefix_caching", sched::PolicyKind::kPaged, true}),
                         [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

TEST(SchedulerKvShareTest, GetStatsReportsTheLimitAndTheSchedulerRefusesWhatIsOverIt) {
  Service s({"orca", sched::PolicyKind::kOrca, false}, /*share=*/0.5);
  EXPECT_EQ(s.Stats().max_request_kv_slots(), 512);
  EXPECT_FALSE(s.Stats().shares_group_prompts());
  // One request of 40 + 600 tokens (640 slots).
  Service::Result one = s.Generate(Request(Prompt(40), 600, 1));
  EXPECT_EQ(one.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(one.status.error_message(),
              HasSubstr("prompt (40 tokens) + max_new_tokens (600) take 640 KV slots, over the per-request limit of "
                        "512 (max_request_kv_share 0.5 of n_slots 1024)"));
  // Four sequences of 40 + 100 (each its own copy of the prompt: 4 × 144), every call refused.
  for (const Service::Result& r : s.GenerateAll(Group("big", Prompt(40), 4, 100, 1))) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(), HasSubstr("n = 4 sequences of one prompt (40 tokens, each its own copy) "
                                                    "with max_new_tokens (100) take 576 KV slots"));
  }
  // Three of them fit (432).
  for (const Service::Result& r : s.GenerateAll(Group("fits", Prompt(40), 3, 100, 1))) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens.size(), 100u);
  }
}

TEST(SchedulerKvShareTest, WithSharedPromptBlocksAGroupCountsItsPromptOnce) {
  // 4 × (160 + 40 → 208) = 832 slots each its own copy; sharing the prompt's 9 full blocks
  // (144 slots) it is 832 − 3 × 144 = 400, within 512.
  Service s({"paged_prefix_caching", sched::PolicyKind::kPaged, true}, /*share=*/0.5);
  EXPECT_TRUE(s.Stats().shares_group_prompts());
  for (const Service::Result& r : s.GenerateAll(Group("g", Prompt(160), 4, 40, 7))) {
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
}

TEST(SchedulerGroupTagTest, MalformedTagsRepeatedIndexesAndMissingMembers) {
  Service s({"orca", sched::PolicyKind::kOrca, false}, 1.0, /*group_wait=*/absl::Milliseconds(300));
  v1::GenerateRequest bad = Request(Prompt(8), 2, 1);
  bad.set_group_id("x");
  bad.set_group_size(3);
  bad.set_group_index(3);
  Service::Result r = s.Generate(bad);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("group_index in [0, group_size)"));
  bad.set_group_id("");
  bad.set_group_index(0);
  EXPECT_EQ(s.Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Index 0 twice: the second is refused, the group then misses index 1 and runs
  // without it once group_wait has passed.
  std::vector<v1::GenerateRequest> twice = Group("t", Prompt(8), 2, 3, 1);
  twice[1] = twice[0];
  twice[1].set_request_id("t-dup");
  const std::vector<Service::Result> results = s.GenerateAll(twice);
  int ok = 0, already = 0;
  for (const Service::Result& x : results) {
    ok += x.status.ok() ? 1 : 0;
    already += x.status.error_code() == grpc::StatusCode::ALREADY_EXISTS ? 1 : 0;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(already, 1);

  // A late member of a group that went without it runs alone at once.
  std::vector<v1::GenerateRequest> late = Group("late", Prompt(8), 2, 3, 1);
  Service::Result first = s.Generate(late[0]);  // returns after group_wait
  EXPECT_TRUE(first.status.ok()) << first.status.error_message();
  Service::Result second = s.Generate(late[1]);
  EXPECT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.tokens.size(), 3u);
}

}  // namespace
}  // namespace orca::scheduler
