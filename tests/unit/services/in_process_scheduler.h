#pragma once
// orca.v1.Scheduler in-process on 127.0.0.1:0 over real gRPC, driving a
// FakeEngineClient (or any engine client a test gives it), with a blocking
// Generate helper.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/metrics/registry.h"
#include "gtest/gtest.h"
#include "services/scheduler/scheduler_service.h"
#include "tests/unit/services/fake_engine_client.h"

namespace orca::scheduler::testing {

class InProcessScheduler {
 public:
  /// With a FakeEngineClient made with `engine_options`, 8 requests a batch
  /// and 1024 KV slots.
  explicit InProcessScheduler(FakeEngineClient::Options engine_options = {}) {
    auto engine = std::make_unique<FakeEngineClient>(engine_options);
    engine_ = engine.get();
    SchedulerLoop::Options o;
    o.scheduler.max_bs = 8;
    o.scheduler.n_slots = 1024;
    Start(o, std::move(engine));
  }
  /// With `engine` and `options`; Generate waits at most `generate_deadline`.
  InProcessScheduler(const SchedulerLoop::Options& options, std::unique_ptr<EngineClient> engine,
                     std::chrono::seconds generate_deadline)
      : generate_deadline_(generate_deadline) {
    Start(options, std::move(engine));
  }
  ~InProcessScheduler() {
    loop_->CancelAll();
    service_->store().Close();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    loop_->Stop();
  }

  struct Result {
    std::vector<int32_t> tokens;
    v1::GenerateResponse last;
    grpc::Status status;
  };
  Result Generate(const v1::GenerateRequest& request) {
    Result r;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + generate_deadline_);
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      for (const auto& t : response.tokens()) r.tokens.push_back(t.token_id());
      r.last = response;
    }
    r.status = reader->Finish();
    return r;
  }
  static v1::GenerateRequest Request(std::vector<int32_t> prompt, int max_new_tokens) {
    v1::GenerateRequest request;
    request.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
    request.set_max_new_tokens(max_new_tokens);
    return request;
  }

  v1::SchedulerStats Stats() {
    grpc::ClientContext context;
    v1::SchedulerStats stats;
    EXPECT_TRUE(stub_->GetStats(&context, v1::StatsRequest(), &stats).ok());
    return stats;
  }
  /// Stats() once no request runs and no KV slot is held, or after `timeout` (then as they
  /// are): a stream's last message can reach its client before the loop's next round has
  /// released the request and published the counts.
  v1::SchedulerStats StatsWhenIdle(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    v1::SchedulerStats stats = Stats();
    while ((stats.kv_slots_used() != 0 || stats.num_requests_running() != 0) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      stats = Stats();
    }
    return stats;
  }

  /// The fake engine (only when made with one).
  FakeEngineClient& engine() { return *engine_; }
  v1::Scheduler::Stub& stub() { return *stub_; }

 private:
  void Start(const SchedulerLoop::Options& options, std::unique_ptr<EngineClient> engine) {
    auto loop = SchedulerLoop::Create(options, std::move(engine), &registry_);
    EXPECT_TRUE(loop.ok()) << loop.status();
    loop_ = std::move(loop).value();
    EXPECT_TRUE(loop_->Start().ok());
    service_ = std::make_unique<SchedulerService>(loop_.get(), services::InternalAuth::Insecure());
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    EXPECT_GT(port, 0);
    stub_ = v1::Scheduler::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }

  const std::chrono::seconds generate_deadline_{30};
  metrics::Registry registry_;
  FakeEngineClient* engine_ = nullptr;
  std::unique_ptr<SchedulerLoop> loop_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

}  // namespace orca::scheduler::testing
