// The scheduler service in-process on 127.0.0.1 port 0, over real gRPC, with
// a scripted engine client: streaming, finish reasons, limits and their
// errors, cancellation (RPC and client disconnect), deadlines, engine
// failures, readiness, the rendezvous store and metrics.

#include "services/scheduler/scheduler_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <future>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "core/metrics/registry.h"
#include "gtest/gtest.h"
#include "services/common/channels.h"
#include "services/common/service_main.h"
#include "tests/unit/services/fake_engine_client.h"
#include "tests/unit/services/internal_auth_probe.h"

namespace orca::scheduler {
namespace {

constexpr char kInternalToken[] = "scheduler-test-token-0123456789abcdef";

using testing::FakeEngineClient;

class SchedulerServiceTest : public ::testing::Test {
 protected:
  void StartService(int64_t max_queued_requests = 0, int64_t n_slots = 512,
                    absl::Duration engine_down_wait = absl::ZeroDuration(),
                    services::InternalAuth auth = services::InternalAuth::Insecure()) {
    SchedulerLoop::Options o;
    o.scheduler.max_bs = 4;
    o.scheduler.n_slots = n_slots;
    o.scheduler.max_queued_requests = max_queued_requests;
    o.engine_down_wait = engine_down_wait;
    StartServiceWith(o, std::move(auth));
  }
  void StartServiceWith(SchedulerLoop::Options o, services::InternalAuth auth = services::InternalAuth::Insecure()) {
    // A scripted engine: 2 ms per iteration, model "scripted".
    auto engine = std::make_unique<FakeEngineClient>(engine_options_);
    engine_ = engine.get();
    auto loop = SchedulerLoop::Create(o, std::move(engine), &registry_);
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(*loop);
    ASSERT_TRUE(loop_->Start().ok());
    service_ = std::make_unique<SchedulerService>(loop_.get(), std::move(auth));
    int port = 0;
    auto server = services::StartGrpcServer("127.0.0.1:0", {service_.get()}, {.bound_port = &port});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = v1::Scheduler::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (loop_) loop_->CancelAll();
    if (service_) service_->store().Close();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (loop_) loop_->Stop();
  }

  struct Result {
    std::vector<int32_t> tokens;
    v1::GenerateResponse last;
    grpc::Status status;
  };
  Result Generate(v1::GenerateRequest req, std::chrono::milliseconds deadline = std::chrono::seconds(20),
                  grpc::ClientContext* external = nullptr) {
    Result r;
    grpc::ClientContext local;
    grpc::ClientContext& ctx = external ? *external : local;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    auto reader = stub_->Generate(&ctx, req);
    v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
      for (const auto& t : resp.tokens()) r.tokens.push_back(t.token_id());
      r.last = resp;
    }
    r.status = reader->Finish();
    return r;
  }
  static v1::GenerateRequest Req(std::vector<int32_t> prompt, int max_new, std::string id = "") {
    v1::GenerateRequest req;
    req.set_request_id(id);
    req.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
    req.set_max_new_tokens(max_new);
    return req;
  }
  v1::SchedulerStats RawStats() {
    grpc::ClientContext ctx;
    v1::SchedulerStats s;
    EXPECT_TRUE(stub_->GetStats(&ctx, v1::StatsRequest(), &s).ok());
    return s;
  }
  // Stats once nothing runs or waits (the loop publishes one snapshot per round).
  v1::SchedulerStats Stats() {
    v1::SchedulerStats s;
    for (int i = 0; i < 100; ++i) {
      grpc::ClientContext ctx;
      s.Clear();
      EXPECT_TRUE(stub_->GetStats(&ctx, v1::StatsRequest(), &s).ok());
      if (s.num_requests_running() == 0 && s.num_requests_waiting() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return s;
  }

  FakeEngineClient::Options engine_options_{.model_name = "scripted", .step = absl::Milliseconds(2)};
  metrics::Registry registry_;
  std::string address_;
  FakeEngineClient* engine_ = nullptr;
  std::unique_ptr<SchedulerLoop> loop_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

TEST_F(SchedulerServiceTest, StreamsTokensAndFinishesWithLengthAndUsage) {
  StartService();
  Result r = Generate(Req({1, 2, 3}, 5));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.last.prompt_tokens(), 3);
  EXPECT_EQ(r.last.completion_tokens(), 5);
  const std::string page = registry_.Serialize();
  EXPECT_NE(page.find("orca:generation_tokens_total{model_name=\"scripted\"} 5"), std::string::npos) << page;
  EXPECT_NE(page.find("orca:request_success_total{model_name=\"scripted\",finished_reason=\"length\"} 1"),
            std::string::npos);
  EXPECT_EQ(Stats().kv_slots_used(), 0);
}

TEST_F(SchedulerServiceTest, StopsAtEosAndCallerStopTokens) {
  StartService();
  // Tokens are (id + position) % 97; with a stop token equal to the first one the request stops at once.
  v1::GenerateRequest req = Req({1, 2, 3}, 50);
  Result probe = Generate(req);
  ASSERT_FALSE(probe.tokens.empty());
  v1::GenerateRequest stop = Req({1, 2, 3}, 50);
  stop.add_stop_token_ids((2 + 3) % 97);  // request id 2, first position 3
  Result r = Generate(stop);
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(r.last.matched_stop_token_id(), 5u);
}

TEST_F(SchedulerServiceTest, RejectsWhatCanNeverFitWithTheNumbers) {
  StartService(0, 64);
  Result r = Generate(Req(std::vector<int32_t>(40, 1), 40));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("n_slots (64)"), std::string::npos) << r.status.error_message();
  Result bad = Generate(Req({1, 500}, 4));
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.status.error_message();
  v1::GenerateRequest temp = Req({1}, 4);
  temp.mutable_sampling()->set_temperature(-1);
  EXPECT_NE(Generate(temp).status.error_message().find("temperature"), std::string::npos);
}

// The gateway always rejected a negative top_p; the scheduler's own copy of the sampling
// conversion used to turn it into 1 (disabled) and run the request.
TEST_F(SchedulerServiceTest, RejectsANegativeTopPInsteadOfDisablingIt) {
  StartService(0, 64);
  v1::GenerateRequest request = Req({1}, 4);
  request.mutable_sampling()->set_top_p(-0.5f);
  Result r = Generate(request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("top_p"), std::string::npos) << r.status.error_message();
}

TEST_F(SchedulerServiceTest, QueueLimitAnswersResourceExhaustedWithTheReason) {
  StartService(/*max_queued_requests=*/1, /*n_slots=*/64);
  engine_->set_step(absl::Milliseconds(50));
  // Two long requests fill the slots; the next waits in the queue; one more is over the limit.
  // (Submitted one at a time: requests arriving in the same round all count as queued.)
  std::vector<std::future<Result>> held;
  auto submit_and_wait = [&](auto done) {
    held.push_back(std::async(std::launch::async, [this] { return Generate(Req(std::vector<int32_t>(8, 1), 20)); }));
    for (int i = 0; i < 300 && !done(RawStats()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  submit_and_wait([](const v1::SchedulerStats& s) { return s.num_requests_running() == 1; });
  submit_and_wait([](const v1::SchedulerStats& s) { return s.num_requests_running() == 2; });
  submit_and_wait([](const v1::SchedulerStats& s) { return s.num_requests_waiting() == 1; });
  ASSERT_EQ(RawStats().num_requests_waiting(), 1);
  Result over = Generate(Req({1}, 4));
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(over.status.error_message().find("max_queued_requests"), std::string::npos) << over.status.error_message();
  for (auto& f : held) {
    Result r = f.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  EXPECT_EQ(Stats().kv_slots_used(), 0);
}

TEST_F(SchedulerServiceTest, CancelRpcAndClientDisconnectReleaseEverything) {
  StartService();
  engine_->set_step(absl::Milliseconds(20));
  auto by_rpc = std::async(std::launch::async, [this] { return Generate(Req({1, 2}, 200, "caller-7")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  grpc::ClientContext cctx;
  v1::CancelRequest creq;
  creq.set_request_id("caller-7");
  v1::CancelResponse cresp;
  ASSERT_TRUE(stub_->Cancel(&cctx, creq, &cresp).ok());
  EXPECT_TRUE(cresp.found());
  Result r = by_rpc.get();
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_LT(r.tokens.size(), 200u);

  grpc::ClientContext ctx;
  auto dropped = std::async(std::launch::async, [&] {
    return Generate(Req({1, 2}, 200), std::chrono::seconds(20), &ctx);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ctx.TryCancel();  // the client goes away
  EXPECT_EQ(dropped.get().status.error_code(), grpc::StatusCode::CANCELLED);
  v1::SchedulerStats s = Stats();
  EXPECT_EQ(s.kv_slots_used(), 0);
  EXPECT_EQ(s.num_requests_running(), 0);
  const std::string page = registry_.Serialize();
  EXPECT_NE(page.find("finished_reason=\"cancelled\"} 2"), std::string::npos) << page;
}

TEST_F(SchedulerServiceTest, DeadlineEndsTheRequest) {
  StartService();
  engine_->set_step(absl::Milliseconds(20));
  v1::GenerateRequest req = Req({1}, 200);
  req.set_deadline_unix_millis(absl::ToUnixMillis(absl::Now() + absl::Milliseconds(200)));
  Result r = Generate(req);
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_LT(r.tokens.size(), 200u);
  EXPECT_EQ(Stats().kv_slots_used(), 0);
}

TEST_F(SchedulerServiceTest, EngineFailureEndsRequestsWithTheErrorAndNotReadyRejects) {
  StartService();
  engine_->set_fail(true);
  Result r = Generate(Req({1, 2}, 10));
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_NE(r.last.error().find("injected failure"), std::string::npos) << r.last.error();
  EXPECT_EQ(r.last.error_code(), static_cast<int32_t>(absl::StatusCode::kInternal));
  engine_->set_fail(false);
  // The stats snapshot is published once per round: wait until it no longer
  // counts the failed request, or the wait below could pass on that stale
  // count and take the pipeline down before the next request is admitted.
  ASSERT_EQ(Stats().num_requests_running(), 0);
  // A pipeline failure mid-stream is UNAVAILABLE on the wire: a retry may work (issue 11).
  engine_->set_step(absl::Milliseconds(20));
  auto running = std::async(std::launch::async, [this] { return Generate(Req({1, 2}, 100)); });
  for (int i = 0; i < 200 && RawStats().num_requests_running() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  engine_->SetReady(false);
  Result died = running.get();
  EXPECT_EQ(died.last.finish_reason(), v1::FINISH_REASON_ERROR) << died.status.error_message();
  EXPECT_EQ(died.last.error_code(), static_cast<int32_t>(absl::StatusCode::kUnavailable)) << died.last.error();
  for (int i = 0; i < 100 && loop_->Ready().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Result refused = Generate(Req({1}, 3));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.status.error_message().find("worker 1 died"), std::string::npos);
  engine_->SetReady(true);
  for (int i = 0; i < 100 && !loop_->Ready().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(Generate(Req({1}, 3)).status.ok());
}

// Issue 11: while the pipeline restarts, queued requests wait for it (for
// --engine-down-wait-ms), then fail UNAVAILABLE — never hang.
TEST_F(SchedulerServiceTest, RequestArrivingWhileTheEngineIsDownIsServedWhenItReturnsWithinTheWait) {
  StartService(0, 512, absl::Seconds(20));
  engine_->SetReady(false);
  for (int i = 0; i < 100 && loop_->Ready().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto pending = std::async(std::launch::async, [this] { return Generate(Req({1, 2}, 4)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  engine_->SetReady(true);
  Result r = pending.get();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(SchedulerServiceTest, QueuedRequestFailsUnavailableWhenThePipelineStaysDownPastTheWait) {
  // 64 slots: the first request holds them all, the second queues behind it.
  StartService(0, 64, absl::Milliseconds(500));
  engine_->set_step(absl::Milliseconds(20));
  auto running = std::async(std::launch::async, [this] { return Generate(Req({1, 2}, 60)); });
  for (int i = 0; i < 200 && RawStats().num_requests_running() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto queued = std::async(std::launch::async, [this] { return Generate(Req({3, 4}, 60)); });
  for (int i = 0; i < 200 && RawStats().num_requests_waiting() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(RawStats().num_requests_waiting(), 1);
  const auto down = std::chrono::steady_clock::now();
  engine_->SetReady(false);
  Result failed = running.get();  // admitted: dies with the pipeline
  EXPECT_EQ(failed.last.finish_reason(), v1::FINISH_REASON_ERROR);
  Result r = queued.get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - down).count();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("worker 1 died"), std::string::npos) << r.status.error_message();
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_LT(waited, 15.0) << "a bounded wait, not a hang";
  v1::SchedulerStats stats = Stats();
  EXPECT_EQ(stats.num_requests_waiting(), 0);
  EXPECT_EQ(stats.kv_slots_used(), 0);
}

TEST_F(SchedulerServiceTest, DrainRejectsNewRequestsWithUnavailable) {
  StartService();
  loop_->BeginDrain();
  for (int i = 0; i < 100 && loop_->Ready().ok(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Result r = Generate(Req({1}, 3));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("draining"), std::string::npos);
}

// Issue 45: every RPC of the scheduler's port (from its descriptor: a new one is covered too)
// wants the internal token; without it, with a malformed or a wrong one, it ends
// UNAUTHENTICATED before anything is done: no request is queued, cancelled or stored.
TEST_F(SchedulerServiceTest, EveryRpcRefusesACallerWithoutTheInternalToken) {
  auto auth = services::InternalAuth::FromTokens({kInternalToken}, "test");
  ASSERT_TRUE(auth.ok()) << auth.status();
  StartService(0, 512, absl::ZeroDuration(), *auth);
  {
    // A request of the token holder, which an unauthenticated Cancel must not reach.
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kInternalToken);
    v1::StoreSetRequest req;
    req.set_key("rendezvous/k");
    req.set_value("kept");
    v1::StoreSetResponse resp;
    ASSERT_TRUE(stub_->StoreSet(&ctx, req, &resp).ok());
  }
  auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  orca::testing::ExpectEveryMethodRefuses(
      channel, "orca.v1.Scheduler",
      {{"none", "", "missing internal credential"},
       {"not bearer", std::string("Basic ") + kInternalToken, "must be sent as 'authorization: Bearer <token>'"},
       {"wrong", "Bearer scheduler-test-token-0123456789abcdeX", "wrong internal credential"}},
      kInternalToken, {"Generate", "Cancel", "GetStats", "StoreSet", "StoreGet"});
  // Typed calls that would change something: a generation, a cancellation, a store write.
  Result refused = Generate(Req({1, 2}, 3, "victim"));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    v1::CancelRequest req;
    req.set_request_id("victim");
    v1::CancelResponse resp;
    EXPECT_EQ(stub_->Cancel(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer wrong-token-0123456789abcdef");
    v1::StoreSetRequest req;
    req.set_key("rendezvous/k");
    req.set_value("overwritten");
    v1::StoreSetResponse resp;
    EXPECT_EQ(stub_->StoreSet(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(engine_->submitted(), 0) << "nothing was scheduled";

  // The token holder: every RPC served, and the store kept its value.
  auto holder = v1::Scheduler::NewStub(services::CreateInternalChannel(address_, *auth));
  {
    grpc::ClientContext ctx;
    v1::StoreGetRequest req;
    req.set_key("rendezvous/k");
    v1::StoreGetResponse resp;
    ASSERT_TRUE(holder->StoreGet(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.value(), "kept");
  }
  {
    grpc::ClientContext ctx;
    v1::SchedulerStats stats;
    EXPECT_TRUE(holder->GetStats(&ctx, v1::StatsRequest(), &stats).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::CancelRequest req;
    req.set_request_id("nobody");
    v1::CancelResponse resp;
    EXPECT_TRUE(holder->Cancel(&ctx, req, &resp).ok());
    EXPECT_FALSE(resp.found());
  }
  grpc::ClientContext with_token;
  auth->Authorize(&with_token);
  Result ok = Generate(Req({1}, 3), std::chrono::seconds(20), &with_token);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 3u);
}

// The options beyond the paper reach the scheduler through the loop: GetStats reports
// them, and the preemptions and prefix-cache counters advance and are exported under
// their vLLM-style names.
TEST_F(SchedulerServiceTest, BeyondPaperOptionsAreAppliedReportedAndCounted) {
  SchedulerLoop::Options o;
  o.scheduler.policy = sched::PolicyKind::kPaged;
  o.scheduler.max_bs = 8;
  o.scheduler.n_slots = 128;  // 16 blocks of 8: six requests of 40 + 24 tokens must preempt
  o.scheduler.kv_block_size = 8;
  o.scheduler.max_num_batched_tokens = 16;
  o.scheduler.max_prefill_slowdown = 3;
  o.scheduler.long_prefill_token_threshold = 12;
  o.scheduler.enable_prefix_caching = true;
  o.scheduler.scheduling_order = sched::SchedulingOrder::kPriority;
  o.scheduler.priority_aging = absl::Milliseconds(50);
  StartServiceWith(o);

  std::vector<std::future<Result>> results;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt(24, 7);  // three shared blocks, then two of the request's own
    for (int t = 0; t < 16; ++t) prompt.push_back(10 + i + t);
    v1::GenerateRequest req = Req(prompt, 24);
    req.set_priority(i % 2);
    results.push_back(std::async(std::launch::async, [this, req] { return Generate(req); }));
  }
  for (auto& f : results) {
    Result r = f.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens.size(), 24u);
  }
  const v1::SchedulerStats s = Stats();
  EXPECT_EQ(s.policy(), "paged");
  EXPECT_EQ(s.max_num_batched_tokens(), 16);
  EXPECT_EQ(s.max_prefill_slowdown(), 3);
  EXPECT_EQ(s.long_prefill_token_threshold(), 12);
  EXPECT_TRUE(s.prefix_caching());
  EXPECT_EQ(s.scheduling_order(), "priority");
  EXPECT_EQ(s.priority_aging_millis(), 50);
  EXPECT_EQ(s.kv_block_size(), 8);
  EXPECT_GT(s.num_preemptions(), 0u);
  EXPECT_GT(s.prefix_cache_hits(), 0);
  EXPECT_GE(s.prefix_cache_queries(), s.prefix_cache_hits());
  EXPECT_EQ(s.kv_slots_used(), 0);

  const std::string page = registry_.Serialize();
  auto counter = [&](const std::string& name) {
    const std::string key = name + "{model_name=\"scripted\"} ";
    const size_t at = page.find(key);
    return at == std::string::npos ? -1.0 : std::stod(page.substr(at + key.size()));
  };
  EXPECT_EQ(counter("orca:num_preemptions_total"), static_cast<double>(s.num_preemptions())) << page;
  EXPECT_EQ(counter("orca:prefix_cache_hits_total"), static_cast<double>(s.prefix_cache_hits())) << page;
  EXPECT_EQ(counter("orca:prefix_cache_queries_total"), static_cast<double>(s.prefix_cache_queries())) << page;

  const std::string config = SchedulingConfigJson(loop_->stats());
  EXPECT_NE(config.find("\"policy\":\"paged\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"enable_prefix_caching\":true"), std::string::npos) << config;
}

// Issue 47, KV by layer type: the engine's pool for sliding-window layers is counted by the
// scheduler, reported by GetStats, /metrics and the scheduling config, and named when a
// request can never fit it.
TEST_F(SchedulerServiceTest, TheSlidingWindowPoolIsCountedAndReportedByLayerType) {
  engine_options_.sliding_window = 8;
  engine_options_.kv_local_slots = 64;  // blocks of 1: two requests of 20 + 10 tokens (28 each) at once
  StartService(0, 512);
  std::vector<std::future<Result>> results;
  for (int i = 0; i < 3; ++i) {
    results.push_back(std::async(std::launch::async, [this] { return Generate(Req(std::vector<int32_t>(20, 3), 10)); }));
  }
  for (auto& f : results) {
    Result r = f.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens.size(), 10u);
  }
  const v1::SchedulerStats s = Stats();
  EXPECT_EQ(s.sliding_window(), 8);
  EXPECT_EQ(s.kv_local_slots_total(), 64);
  EXPECT_EQ(s.kv_local_slots_used(), 0);
  EXPECT_NE(registry_.Serialize().find("orca:kv_local_slots_capacity{model_name=\"scripted\"} 64"), std::string::npos)
      << registry_.Serialize();
  const std::string config = SchedulingConfigJson(loop_->stats());
  EXPECT_NE(config.find("\"sliding_window\":8,\"kv_local_slots\":64"), std::string::npos) << config;
  // 100 prompt tokens span min(110, 8 + 100) = 108 blocks at once: never, whatever frees.
  Result r = Generate(Req(std::vector<int32_t>(100, 1), 10));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("sliding-window layers' KV pool"), std::string::npos)
      << r.status.error_message();
}

TEST_F(SchedulerServiceTest, PrefixCachingIsRefusedWhileTheWorkersKeepOnlyTheWindow) {
  SchedulerLoop::Options o;
  o.scheduler.kv_block_size = 16;
  o.scheduler.n_slots = 1024;
  o.scheduler.enable_prefix_caching = true;
  auto engine = std::make_unique<FakeEngineClient>(
      FakeEngineClient::Options{.model_name = "gemma", .sliding_window = 512, .kv_local_slots = 2048});
  auto loop = SchedulerLoop::Create(o, std::move(engine), &registry_);
  ASSERT_FALSE(loop.ok());
  EXPECT_EQ(loop.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loop.status().message().find("keep only the last 512 positions"), std::string::npos) << loop.status();
  EXPECT_NE(loop.status().message().find("--swa-full"), std::string::npos) << loop.status();
  // Workers started with --swa-full report no local pool: prefix caching works.
  auto swa_full = std::make_unique<FakeEngineClient>(
      FakeEngineClient::Options{.model_name = "gemma", .sliding_window = 512, .kv_local_slots = 0});
  EXPECT_TRUE(SchedulerLoop::Create(o, std::move(swa_full), &registry_).ok());
}

TEST_F(SchedulerServiceTest, PriorityOutOfRangeIsInvalidArgument) {
  StartService();
  v1::GenerateRequest req = Req({1, 2, 3}, 2);
  req.set_priority(1000001);
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("priority"), std::string::npos) << r.status.error_message();
}

TEST_F(SchedulerServiceTest, RendezvousStoreWaitsForKeys) {
  StartService();
  auto getter = std::async(std::launch::async, [this] {
    grpc::ClientContext ctx;
    v1::StoreGetRequest req;
    req.set_key("pp/rank1");
    req.set_wait_millis(5000);
    v1::StoreGetResponse resp;
    EXPECT_TRUE(stub_->StoreGet(&ctx, req, &resp).ok());
    return resp;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  grpc::ClientContext ctx;
  v1::StoreSetRequest set;
  set.set_key("pp/rank1");
  set.set_value("addr");
  v1::StoreSetResponse sresp;
  ASSERT_TRUE(stub_->StoreSet(&ctx, set, &sresp).ok());
  v1::StoreGetResponse got = getter.get();
  EXPECT_TRUE(got.found());
  EXPECT_EQ(got.value(), "addr");
  grpc::ClientContext ctx2;
  v1::StoreGetRequest missing;
  missing.set_key("absent");
  missing.set_wait_millis(50);
  v1::StoreGetResponse none;
  ASSERT_TRUE(stub_->StoreGet(&ctx2, missing, &none).ok());
  EXPECT_FALSE(none.found());
}

}  // namespace
}  // namespace orca::scheduler
