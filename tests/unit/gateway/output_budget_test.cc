// The gateway-wide budget for buffered stream output (issue 45): each
// connection could buffer 16 MiB and thousands of requests run, with no
// overall cap. Now a stream holding more than its share pauses its scheduler
// request until its client reads; a client that reads nothing for
// max_output_pause has its request cancelled (KV freed) and its stream ends
// with an error event; every other stream completes; the total never passes
// the budget.

#include "services/gateway/output_budget.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/raw_http_client.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway::testing {
namespace {

using nlohmann::json;
using orca::testing::RawHttpClient;
using ::testing::HasSubstr;

TEST(OutputBudgetTest, ChargesUpToTheCapAndRemembersThePeak) {
  OutputBudget budget({.max_bytes = 100, .max_pause = absl::Seconds(1)});
  EXPECT_TRUE(budget.TryCharge(60));
  EXPECT_TRUE(budget.TryCharge(40));
  EXPECT_FALSE(budget.TryCharge(1)) << "the cap is hard";
  EXPECT_EQ(budget.buffered_bytes(), 100u);
  budget.Release(70);
  EXPECT_FALSE(budget.TryCharge(71));
  EXPECT_TRUE(budget.TryCharge(70));
  budget.Release(100);
  EXPECT_EQ(budget.buffered_bytes(), 0u);
  EXPECT_EQ(budget.peak_bytes(), 100u);
  EXPECT_EQ(budget.num_refused(), 2);
  EXPECT_FALSE(budget.TryCharge(101));
}

TEST(OutputBudgetTest, AStreamsShareIsHalfTheBudgetSplitOverTheOpenStreams) {
  OutputBudget budget({.max_bytes = 1000, .max_pause = absl::Seconds(1)});
  EXPECT_EQ(budget.StreamShare(), 500u);  // no stream open: as for one
  budget.AddStream();
  EXPECT_EQ(budget.StreamShare(), 500u);
  for (int i = 0; i < 4; ++i) budget.AddStream();
  EXPECT_EQ(budget.StreamShare(), 100u);
  for (int i = 0; i < 5; ++i) budget.RemoveStream();
  EXPECT_EQ(budget.num_streams(), 0);
  OutputBudget tiny({.max_bytes = 4, .max_pause = absl::Seconds(1)});
  for (int i = 0; i < 10; ++i) tiny.AddStream();
  EXPECT_EQ(tiny.StreamShare(), 1u);
}

// A client with a small receive buffer, so that the gateway's writes back up
// soon when it does not read.
RawHttpClient::Options SlowClient() { return {.receive_buffer_bytes = 4096, .receive_timeout_seconds = 20}; }

std::string StreamRequest(int max_tokens) {
  const std::string body = json{{"messages", {{{"role", "user"}, {"content", "budget"}}}},
                                {"max_tokens", max_tokens},
                                {"ignore_eos", true},
                                {"stream", true},
                                {"logprobs", true},
                                {"top_logprobs", 20},  // a few KB per token: buffers fill fast
                                {"stream_options", {{"include_usage", true}}}}
                               .dump();
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A stream that completed: [DONE] after a usage chunk with every token, no error.
void ExpectComplete(const std::string& raw, int max_tokens) {
  const std::vector<std::string> events = SseEvents(raw);
  ASSERT_GE(events.size(), 2u) << raw.substr(0, 300);
  EXPECT_EQ(events.back(), "[DONE]");
  const json usage = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(usage.contains("usage")) << events[events.size() - 2];
  EXPECT_EQ(usage["usage"]["completion_tokens"], max_tokens);
  for (const std::string& event : events) EXPECT_THAT(event, ::testing::Not(HasSubstr("\"error\"")));
}

GatewayFixture::Config BudgetConfig(int64_t max_bytes, absl::Duration max_pause) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.max_model_len = 1 << 20;
  config.scheduler.max_context = 1 << 20;
  config.scheduler.iteration_interval = absl::Milliseconds(1);
  config.gateway.max_buffered_output_bytes = max_bytes;
  config.gateway.max_output_pause = max_pause;
  return config;
}

TEST(OutputBudgetGatewayTest, AClientThatNeverReadsIsPausedThenCancelledWhileOthersComplete) {
  constexpr int64_t kBudget = 256 << 10;
  GatewayFixture f(BudgetConfig(kBudget, absl::Milliseconds(300)));
  ASSERT_NE(f.gateway().output_budget(), nullptr);
  const OutputBudget& budget = *f.gateway().output_budget();
  RawHttpClient never_reads(f.port(), SlowClient());
  never_reads.Send(StreamRequest(1'000'000));
  ASSERT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_running() == 1; }, absl::Seconds(10)));

  constexpr int kReaders = 4;
  constexpr int kTokens = 300;
  std::vector<std::string> outputs(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      RawHttpClient client(f.port(), SlowClient());
      client.Send(StreamRequest(kTokens));
      outputs[i] = client.ReadToEnd();
    });
  }
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < kReaders; ++i) {
    SCOPED_TRACE(i);
    ExpectComplete(outputs[i], kTokens);
  }

  // The reader that reads nothing is cancelled at its scheduler: KV freed.
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_cancelled() == 1; }, absl::Seconds(60)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().kv_slots_used() == 0; }, absl::Seconds(10)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.gateway().num_active_requests() == 0; }, absl::Seconds(10)));
  EXPECT_GT(budget.num_pauses(), 0);
  EXPECT_EQ(budget.num_pause_cancels(), 1);
  EXPECT_EQ(budget.num_refused(), 0) << "a stream hit the hard cap";
  EXPECT_LE(budget.peak_bytes(), static_cast<size_t>(kBudget));

  // When it does read, its stream ends with an error event naming the reason.
  const std::vector<std::string> events = SseEvents(never_reads.ReadToEnd());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(error.contains("error")) << events[events.size() - 2];
  EXPECT_EQ(error["error"]["type"], "timeout");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("read none of its stream for 300ms"));
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("--max-output-pause-seconds"));
  EXPECT_EQ(budget.buffered_bytes(), 0u);
}

TEST(OutputBudgetGatewayTest, AReaderThatFallsBehindIsPausedThenResumedNotCancelled) {
  constexpr int64_t kBudget = 64 << 10;
  GatewayFixture f(BudgetConfig(kBudget, absl::Seconds(10)));
  ASSERT_NE(f.gateway().output_budget(), nullptr);
  const OutputBudget& budget = *f.gateway().output_budget();
  RawHttpClient late(f.port(), SlowClient());
  constexpr int kTokens = 2000;  // several MB: more than the sockets' buffers hold
  late.Send(StreamRequest(kTokens));
  // It reads nothing until its producer has been paused, then everything.
  ASSERT_TRUE(f.scheduler().WaitFor([&] { return budget.num_pauses() > 0; }, absl::Seconds(30)));
  ExpectComplete(late.ReadToEnd(), kTokens);
  EXPECT_EQ(budget.num_pause_cancels(), 0);
  EXPECT_EQ(budget.num_refused(), 0);
  EXPECT_LE(budget.peak_bytes(), static_cast<size_t>(kBudget));
  EXPECT_EQ(f.scheduler().num_cancelled(), 0);
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return budget.buffered_bytes() == 0; }, absl::Seconds(10)));
}

}  // namespace
}  // namespace orca::gateway::testing
