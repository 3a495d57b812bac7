// The gateway and the schedulers' KV budget (issue 45, fairness): what a
// scheduler reports of the KV one request may take (GetStats
// max_request_kv_slots, kv_block_size, shares_group_prompts) sizes requests
// before they are sent:
//  - a request whose n sequences can never fit is a 400 at once, naming the
//    prompt tokens, max_tokens, n and the limit, and never reaches a scheduler;
//  - an absent max_tokens (the rest of the context) is cut so that it fits;
//  - the n sequences of one prompt go to ONE scheduler as one group (group_id,
//    group_size, group_index), each with its seed + index, and give the texts
//    n separate requests with those seeds give.
// In-process: FakeSchedulers and a gateway on 127.0.0.1:0.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

using nlohmann::json;
using testing::FakeScheduler;
using testing::GatewayFixture;
using ::testing::HasSubstr;
using testing::HttpResult;

GatewayFixture::Config WithKvLimits(int64_t max_request_kv_slots, int32_t block, bool shares) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.max_request_kv_slots = max_request_kv_slots;
  config.scheduler.kv_block_size = block;
  config.scheduler.shares_group_prompts = shares;
  return config;
}

TEST(GatewayKvBudgetTest, ARequestThatCanNeverFitIsA400AtOnceWithTheNumbers) {
  // One request may take 512 KV slots in blocks of 16 (the prompt is 5 bytes = 5 tokens).
  struct Case {
    const char* name;
    std::string body;
    const char* param;
    std::vector<std::string> words;
  };
  const std::string long_prompt(600, 'x');
  const std::vector<Case> cases = {
      {"n sequences of max_tokens",
       R"({"prompt": "hello", "n": 4, "max_tokens": 200, "temperature": 1})",
       "max_tokens",
       {"5 tokens in the prompt and 4 sequences (n) of 200 new tokens (max_tokens) take 832 KV slots",
        "at most 512 KV slots", "reduce n, max_tokens"}},
      {"one long completion",
       R"({"prompt": "hello", "max_tokens": 600})",
       "max_tokens",
       {"5 tokens in the prompt and 600 new tokens (max_tokens) take 608 KV slots", "at most 512 KV slots"}},
      {"a prompt that leaves no room, max_tokens absent",
       R"({"prompt": ")" + long_prompt + R"("})",
       "prompt",
       {"600 tokens in the prompt and 1 new tokens (max_tokens) take 608 KV slots", "at most 512 KV slots"}},
      {"n sequences that leave no room, max_tokens absent",
       R"({"prompt": "hello", "n": 40, "temperature": 1})",
       "n",
       {"40 sequences (n) of 1 new tokens (max_tokens) take 640 KV slots"}},
      {"chat",
       R"({"messages": [{"role": "user", "content": "hi"}], "n": 3, "max_tokens": 150, "temperature": 1})",
       "max_tokens",
       {"in the messages and 3 sequences (n) of 150 new tokens", "at most 512 KV slots"}},
  };
  GatewayFixture f(WithKvLimits(512, 16, false));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const bool chat = c.body.find("messages") != std::string::npos;
    HttpResult r = f.Client().Request("POST", chat ? "/v1/chat/completions" : "/v1/completions", c.body);
    ASSERT_EQ(r.status, 400) << r.body;
    const json error = r.Json()["error"];
    EXPECT_EQ(error["param"], c.param) << r.body;
    for (const std::string& word : c.words) EXPECT_THAT(error["message"].get<std::string>(), HasSubstr(word));
  }
  EXPECT_EQ(f.scheduler().num_generate_calls(), 0);  // never queued anywhere
  // What fits goes through.
  HttpResult ok = f.Client().Request("POST", "/v1/completions", R"({"prompt": "hello", "n": 2, "max_tokens": 200})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(GatewayKvBudgetTest, AnAbsentMaxTokensIsCutSoThatTheRequestFits) {
  // A 40-token prompt, n = 2, a 64-slot limit in blocks of 16, context 1024. Sharing the
  // prompt's 2 full blocks, a sequence of 40 + 8 tokens (48 slots) fits twice in 64
  // (48 + 48 − 32); each its own copy, not even 40 + 1 does (2 × 48 > 64).
  struct Case {
    bool shares;
    int status;
    int32_t max_new_tokens;
  };
  for (const Case& c : {Case{true, 200, 8}, Case{false, 400, 0}}) {
    SCOPED_TRACE(c.shares ? "shared prompt blocks" : "a copy of the prompt each");
    GatewayFixture f(WithKvLimits(64, 16, c.shares));
    HttpResult r = f.Client().Request("POST", "/v1/completions",
                                      R"({"prompt": "0123456789012345678901234567890123456789", "n": 2})");
    ASSERT_EQ(r.status, c.status) << r.body;
    if (c.status != 200) {
      EXPECT_EQ(r.Json()["error"]["param"], "n");
      continue;
    }
    ASSERT_EQ(f.scheduler().requests().size(), 2u);
    for (const auto& request : f.scheduler().requests()) EXPECT_EQ(request.max_new_tokens(), c.max_new_tokens);
  }
  // Without n the default stays the rest of the context when that fits.
  GatewayFixture::Config config = WithKvLimits(4096, 16, false);
  config.max_model_len = 40;
  GatewayFixture f(config);
  ASSERT_EQ(f.Client().Request("POST", "/v1/completions", R"({"prompt": "0123456789"})").status, 200);
  EXPECT_EQ(f.scheduler().requests()[0].max_new_tokens(), 30);
}

// Two schedulers behind one gateway.
class TwoSchedulers {
 public:
  TwoSchedulers() {
    GatewayFixture::Config config = GatewayFixture::DefaultConfig();
    for (auto& s : schedulers_) {
      auto started = FakeScheduler::Start(config.scheduler);
      EXPECT_TRUE(started.ok()) << started.status();
      s = std::move(started).value();
    }
    config.gateway.schedulers = {schedulers_[0]->address(), schedulers_[1]->address()};
    auto gateway = Gateway::CreateWithModel(config.gateway, testing::MakeByteLevelModel(config.max_model_len));
    EXPECT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(gateway).value();
    EXPECT_TRUE(gateway_->WaitUntilReady(absl::Seconds(10)));
  }
  ~TwoSchedulers() {
    gateway_->Shutdown();
    for (auto& s : schedulers_) s->Shutdown();
  }
  HttpResult Post(const std::string& body) {
    return testing::TestHttpClient(gateway_->http_port()).Request("POST", "/v1/completions", body);
  }
  FakeScheduler& scheduler(int i) { return *schedulers_[i]; }

 private:
  std::unique_ptr<FakeScheduler> schedulers_[2];
  std::unique_ptr<Gateway> gateway_;
};

TEST(GatewayKvBudgetTest, TheNSequencesOfOnePromptGoToOneSchedulerAsOneGroupWithTheirSeeds) {
  TwoSchedulers s;
  // Single requests alternate between the two once both are ready: the router spreads
  // calls, so a group on one scheduler is the gateway's doing.
  std::vector<std::string> separate;
  for (int i = 0; i < 40 && (s.scheduler(0).num_generate_calls() == 0 || s.scheduler(1).num_generate_calls() == 0);
       ++i) {
    ASSERT_EQ(s.Post(R"({"prompt": "warm", "max_tokens": 1})").status, 200);
  }
  ASSERT_GT(s.scheduler(0).num_generate_calls(), 0);
  ASSERT_GT(s.scheduler(1).num_generate_calls(), 0);
  // Today's texts: four separate requests with seeds 1234..1237.
  for (int i = 0; i < 4; ++i) {
    HttpResult r =
        s.Post(absl::StrCat(R"({"prompt": "Once upon", "max_tokens": 6, "temperature": 1, "seed": )", 1234 + i, "}"));
    ASSERT_EQ(r.status, 200) << r.body;
    separate.push_back(r.Json()["choices"][0]["text"]);
  }
  const int64_t before[2] = {s.scheduler(0).num_generate_calls(), s.scheduler(1).num_generate_calls()};
  HttpResult r = s.Post(R"({"prompt": "Once upon", "max_tokens": 6, "temperature": 1, "seed": 1234, "n": 4})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.Json();
  ASSERT_EQ(body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(body["choices"][i]["text"], separate[i]) << "choice " << i;

  // All four on one scheduler, as one group: one id, size 4, indexes 0-3, seeds 1234 + index.
  const int64_t added[2] = {s.scheduler(0).num_generate_calls() - before[0],
                            s.scheduler(1).num_generate_calls() - before[1]};
  EXPECT_TRUE((added[0] == 4 && added[1] == 0) || (added[0] == 0 && added[1] == 4))
      << added[0] << " and " << added[1] << " calls";
  const std::vector<orca::v1::GenerateRequest> requests = s.scheduler(added[0] == 4 ? 0 : 1).requests();
  ASSERT_GE(requests.size(), 4u);
  std::set<std::string> group_ids;
  std::map<int32_t, uint64_t> seed_by_index;
  for (size_t i = requests.size() - 4; i < requests.size(); ++i) {
    group_ids.insert(requests[i].group_id());
    EXPECT_EQ(requests[i].group_size(), 4);
    seed_by_index[requests[i].group_index()] = requests[i].sampling().seed();
  }
  EXPECT_EQ(group_ids.size(), 1u);
  EXPECT_FALSE(group_ids.begin()->empty());
  EXPECT_EQ(seed_by_index, (std::map<int32_t, uint64_t>{{0, 1234}, {1, 1235}, {2, 1236}, {3, 1237}}));
  // n = 1 carries no group.
  EXPECT_EQ(s.scheduler(0).requests().front().group_size(), 0);
}

}  // namespace
}  // namespace orca::gateway
