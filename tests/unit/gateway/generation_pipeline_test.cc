// The generation pipeline against a scripted token stream (FakeScheduler with
// the byte-level tokenizer, where token id == byte): incremental
// detokenization, stop strings held back until decided, EOS handling, n
// choices, errors and cancellation.

#include "services/gateway/generation_pipeline.h"

#include <set>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/gateway/openai_request.h"
#include "services/gateway/testing/byte_level_model.h"
#include "services/gateway/testing/fake_scheduler.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

using testing::Bytes;
using testing::FakeScheduler;
using ::testing::HasSubstr;

class RecordingObserver : public GenerationObserver {
 public:
  void OnDelta(const ChoiceDelta& delta) override {
    absl::MutexLock lock(&mu_);
    deltas_.push_back(delta);
  }
  void OnComplete(const GenerationUsage& usage) override {
    absl::MutexLock lock(&mu_);
    usage_ = usage;
    done_ = true;
  }
  void OnError(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    error_ = status;
    done_ = true;
  }

  bool WaitDone(absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  std::vector<ChoiceDelta> deltas() {
    absl::MutexLock lock(&mu_);
    return deltas_;
  }
  std::string Text(int index) {
    std::string text;
    for (const ChoiceDelta& d : deltas()) {
      if (d.index == index) text += d.text;
    }
    return text;
  }
  std::optional<ChoiceDelta> Final(int index) {
    for (const ChoiceDelta& d : deltas()) {
      if (d.index == index && d.finish_reason) return d;
    }
    return std::nullopt;
  }
  GenerationUsage usage() {
    absl::MutexLock lock(&mu_);
    return usage_;
  }
  absl::Status error() {
    absl::MutexLock lock(&mu_);
    return error_;
  }

 private:
  absl::Mutex mu_;
  std::vector<ChoiceDelta> deltas_ ABSL_GUARDED_BY(mu_);
  GenerationUsage usage_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class GenerationPipelineTest : public ::testing::Test {
 protected:
  void StartScheduler(FakeScheduler::Options options) {
    options.vocab_size = testing::kByteLevelVocabSize;
    options.iteration_interval = absl::Milliseconds(1);
    auto scheduler = FakeScheduler::Start(options);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::move(scheduler).value();
    SchedulerRouter::Options router_options;
    router_options.addresses = {scheduler_->address()};
    router_options.start_polling = false;
    auto router = SchedulerRouter::Create(router_options);
    ASSERT_TRUE(router.ok());
    router_ = std::move(router).value();
    router_->PollNow();
    pipeline_ = std::make_unique<GenerationPipeline>(&model_->tokenizer(), router_.get());
  }
  void StartScript(const std::string& script, int32_t eos_after = 0) {
    FakeScheduler::Options options;
    options.script = Bytes(script);
    options.eos_id = testing::kByteLevelEosId;
    options.eos_after = eos_after;
    StartScheduler(options);
  }
  void TearDown() override {
    pipeline_.reset();
    router_.reset();
    if (scheduler_) scheduler_->Shutdown();
  }

  GenerationRequest Request(int32_t max_new_tokens, std::vector<std::string> stop = {}) {
    GenerationRequest request;
    request.request_id = "req-1";
    request.prompts.push_back(PromptInput{Bytes("prompt"), max_new_tokens});
    request.stop = std::move(stop);
    request.sampling.temperature = 0.0f;
    return request;
  }

  std::unique_ptr<GatewayModel> model_ = testing::MakeByteLevelModel();
  std::unique_ptr<FakeScheduler> scheduler_;
  std::unique_ptr<SchedulerRouter> router_;
  std::unique_ptr<GenerationPipeline> pipeline_;
};

TEST_F(GenerationPipelineTest, LengthFinishDeliversEveryTokenAsText) {
  StartScript("abcdefgh");
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(5), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_TRUE(observer->error().ok());
  EXPECT_EQ(observer->Text(0), "abcde");
  auto final_delta = observer->Final(0);
  ASSERT_TRUE(final_delta);
  EXPECT_EQ(*final_delta->finish_reason, FinishReason::kLength);
  EXPECT_EQ(final_delta->completion_tokens, 5);
  EXPECT_EQ(final_delta->prompt_tokens, 6);
  EXPECT_EQ(observer->usage().prompt_tokens, 6);
  EXPECT_EQ(observer->usage().completion_tokens, 5);
}

TEST_F(GenerationPipelineTest, StopStringAcrossTokensIsHeldBackNeverSentAndCancelsTheCall) {
  StartScript("Hello STOP world, and much more text after it");
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(40, {"STOP"}), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->Text(0), "Hello ");
  for (const ChoiceDelta& d : observer->deltas()) EXPECT_THAT(d.text, ::testing::Not(HasSubstr("S")));
  auto final_delta = observer->Final(0);
  ASSERT_TRUE(final_delta);
  EXPECT_EQ(*final_delta->finish_reason, FinishReason::kStop);
  EXPECT_EQ(final_delta->stop_string, "STOP");
  EXPECT_EQ(final_delta->completion_tokens, 10);  // up to the token that completed "STOP"
  // The scheduler stops generating: the call was cancelled and its slots freed.
  EXPECT_TRUE(scheduler_->WaitFor([&] { return scheduler_->num_cancelled() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(scheduler_->WaitFor([&] { return scheduler_->kv_slots_used() == 0; }, absl::Seconds(10)));
}

TEST_F(GenerationPipelineTest, PartialStopMatchIsReleasedWhenItFails) {
  StartScript("STOx STOP");
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(20, {"STOP"}), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->Text(0), "STOx ");
}

TEST_F(GenerationPipelineTest, HeldBackPrefixIsFlushedAtLength) {
  StartScript("abST");
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(4, {"STOP"}), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->Text(0), "abST");
  EXPECT_EQ(*observer->Final(0)->finish_reason, FinishReason::kLength);
}

TEST_F(GenerationPipelineTest, IncludeStopStringInOutput) {
  StartScript("one, two");
  auto observer = std::make_shared<RecordingObserver>();
  GenerationRequest request = Request(8, {", "});
  request.include_stop_str_in_output = true;
  ASSERT_TRUE(pipeline_->Start(std::move(request), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->Text(0), "one, ");
}

TEST_F(GenerationPipelineTest, MultiByteCharactersAreNeverSplit) {
  StartScript("h\xc3\xa9\xe2\x82\xac!");  // "hé€!" as 7 byte tokens
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(7), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  for (const ChoiceDelta& d : observer->deltas()) EXPECT_EQ(FindInvalidUtf8(d.text), std::nullopt) << d.text;
  EXPECT_EQ(observer->Text(0), "h\xc3\xa9\xe2\x82\xac!");
}

TEST_F(GenerationPipelineTest, EosEndsWithStopAndIsNotPartOfTheText) {
  StartScript("xyz", /*eos_after=*/3);
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(10), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->Text(0), "xy");
  auto final_delta = observer->Final(0);
  EXPECT_EQ(*final_delta->finish_reason, FinishReason::kStop);
  EXPECT_EQ(final_delta->stop_token, testing::kByteLevelEosId);
  EXPECT_EQ(final_delta->completion_tokens, 3);
}

TEST_F(GenerationPipelineTest, NChoicesGetConsecutiveSeedsAndOnePromptCount) {
  StartScheduler({});
  auto observer = std::make_shared<RecordingObserver>();
  GenerationRequest request = Request(4);
  request.n = 3;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 7;
  ASSERT_TRUE(pipeline_->Start(std::move(request), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  std::set<uint64_t> seeds;
  for (const auto& r : scheduler_->requests()) seeds.insert(r.sampling().seed());
  EXPECT_EQ(seeds, (std::set<uint64_t>{7, 8, 9}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(observer->Text(i).size(), 4u);
  EXPECT_NE(observer->Text(0), observer->Text(1));
  EXPECT_EQ(observer->usage().prompt_tokens, 6);
  EXPECT_EQ(observer->usage().completion_tokens, 12);
}

TEST_F(GenerationPipelineTest, LogprobsCarryTokenBytesAndAlternatives) {
  StartScript("ab");
  auto observer = std::make_shared<RecordingObserver>();
  GenerationRequest request = Request(2);
  request.sampling.logprobs = true;
  request.sampling.top_logprobs = 2;
  ASSERT_TRUE(pipeline_->Start(std::move(request), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  std::vector<GeneratedToken> tokens;
  for (const ChoiceDelta& d : observer->deltas()) tokens.insert(tokens.end(), d.tokens.begin(), d.tokens.end());
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].id, 'a');
  EXPECT_EQ(tokens[0].text, "a");
  EXPECT_LT(tokens[0].logprob, 0.0f);
  ASSERT_EQ(tokens[0].top.size(), 2u);
  EXPECT_EQ(tokens[0].top[0].text, "a");
}

TEST_F(GenerationPipelineTest, EngineErrorMidStreamFailsTheRequest) {
  StartScheduler({});
  scheduler_->FailNextGenerate(grpc::StatusCode::INTERNAL, "worker 1 crashed", /*after_tokens=*/2);
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(10), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->error().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(observer->error().message()), HasSubstr("worker 1 crashed"));
}

TEST_F(GenerationPipelineTest, SchedulerRejectionKeepsItsCodeAndReason) {
  StartScheduler({});
  scheduler_->FailNextGenerate(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full: 1024 waiting");
  auto observer = std::make_shared<RecordingObserver>();
  ASSERT_TRUE(pipeline_->Start(Request(10), observer).ok());
  ASSERT_TRUE(observer->WaitDone());
  EXPECT_EQ(observer->error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(observer->error().message()), HasSubstr("queue full"));
}

TEST_F(GenerationPipelineTest, CancelStopsEventsAndFreesTheSchedulerSlots) {
  FakeScheduler::Options options;
  options.iteration_interval = absl::Milliseconds(5);
  StartScheduler(options);
  auto observer = std::make_shared<RecordingObserver>();
  auto handle = pipeline_->Start(Request(1000), observer);
  ASSERT_TRUE(handle.ok());
  ASSERT_TRUE(scheduler_->WaitFor([&] { return !observer->deltas().empty(); }, absl::Seconds(10)));
  (*handle)->Cancel();
  EXPECT_TRUE(scheduler_->WaitFor([&] { return scheduler_->kv_slots_used() == 0; }, absl::Seconds(10)));
  EXPECT_EQ(scheduler_->num_cancelled(), 1);
  EXPECT_TRUE(pipeline_->WaitIdle(absl::Seconds(10)));
  const size_t seen = observer->deltas().size();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(observer->deltas().size(), seen);
  EXPECT_TRUE(observer->error().ok());
}

TEST_F(GenerationPipelineTest, NoReadySchedulerFailsAtStart) {
  FakeScheduler::Options options;
  options.ready = false;
  StartScheduler(options);
  auto observer = std::make_shared<RecordingObserver>();
  auto handle = pipeline_->Start(Request(3), observer);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(handle.status().message()), HasSubstr("No scheduler is ready"));
}

}  // namespace
}  // namespace orca::gateway
