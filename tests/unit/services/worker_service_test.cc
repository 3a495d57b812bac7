// orca.v1.Worker's service in-process on 127.0.0.1 port 0, over real gRPC,
// in front of a recording fake node (issue 45): every RPC wants the internal
// token. Before, one Control message carrying a new session id, from anyone
// who could connect, made the stage drop every request in flight.

#include "services/worker/worker_service.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/common/channels.h"
#include "services/common/service_main.h"
#include "tests/unit/services/internal_auth_probe.h"

namespace orca::worker {
namespace {

constexpr char kToken[] = "worker-test-token-0123456789abcdef";

// Records what reaches the node; sinks are fed by the test.
class RecordingNode final : public WorkerBackend {
 public:
  void OnControl(v1::ControlMessage msg) override {
    absl::MutexLock lock(&mu_);
    controls_.push_back(std::move(msg));
  }
  v1::WorkerInfo Info() const override {
    absl::MutexLock lock(&mu_);
    ++info_calls_;
    v1::WorkerInfo info;
    info.set_stage(1);
    info.set_num_stages(2);
    info.set_loaded(true);
    return info;
  }
  absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) override {
    absl::MutexLock lock(&mu_);
    results_sessions_.push_back(session);
    results_ = std::move(sink);
    return absl::OkStatus();
  }
  void Unsubscribe(const ResultSink* sink) override {
    absl::MutexLock lock(&mu_);
    if (results_.get() == sink) results_.reset();
  }
  void SubscribeHeartbeats(std::shared_ptr<HeartbeatSink> sink, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++heartbeat_subscriptions_;
    heartbeats_ = std::move(sink);
  }
  void UnsubscribeHeartbeats(const HeartbeatSink* sink) override {
    absl::MutexLock lock(&mu_);
    if (heartbeats_.get() == sink) heartbeats_.reset();
  }

  /// Whatever reached the node: control messages, GetInfo, subscriptions.
  int NumTouches() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(controls_.size() + results_sessions_.size()) + info_calls_ + heartbeat_subscriptions_;
  }
  std::vector<v1::ControlMessage> controls() const {
    absl::MutexLock lock(&mu_);
    return controls_;
  }
  bool WaitControls(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return controls_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(20));
  }
  std::shared_ptr<ResultSink> results_sink() const {
    absl::MutexLock lock(&mu_);
    return results_;
  }
  std::shared_ptr<HeartbeatSink> heartbeat_sink() const {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  bool WaitSubscribed() const {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return results_ != nullptr || heartbeats_ != nullptr; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(20));
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::ControlMessage> controls_ ABSL_GUARDED_BY(mu_);
  mutable int info_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> results_sessions_ ABSL_GUARDED_BY(mu_);
  int heartbeat_subscriptions_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<ResultSink> results_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<HeartbeatSink> heartbeats_ ABSL_GUARDED_BY(mu_);
};

services::InternalAuth Auth(std::vector<std::string> tokens) {
  auto auth = services::InternalAuth::FromTokens(std::move(tokens), "test");
  EXPECT_TRUE(auth.ok()) << auth.status();
  return *auth;
}

class WorkerServiceTest : public ::testing::Test {
 protected:
  void StartService(services::InternalAuth auth) {
    service_ = std::make_unique<WorkerService>(&node_, std::move(auth));
    int port = 0;
    auto server = services::StartGrpcServer("127.0.0.1:0", {service_.get()}, {.bound_port = &port});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = "127.0.0.1:" + std::to_string(port);
    plain_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // Opens a Control stream, writes `messages` and returns the call's status.
  grpc::Status SendControl(const std::shared_ptr<grpc::Channel>& channel, const std::vector<v1::ControlMessage>& msgs,
                           const std::string& authorization = "") {
    auto stub = v1::Worker::NewStub(channel);
    grpc::ClientContext ctx;
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    v1::ControlSummary summary;
    auto writer = stub->Control(&ctx, &summary);
    for (const auto& m : msgs)
      if (!writer->Write(m)) break;
    writer->WritesDone();
    return writer->Finish();
  }

  RecordingNode node_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> plain_;
};

// Every RPC of orca.v1.Worker (taken from its descriptor: a new one is covered too), called
// with no, a malformed and a wrong credential, ends UNAUTHENTICATED and the node sees nothing.
TEST_F(WorkerServiceTest, EveryRpcRefusesACallerWithoutTheInternalToken) {
  StartService(Auth({kToken}));
  testing::ExpectEveryMethodRefuses(
      plain_, "orca.v1.Worker",
      {{"none", "", "missing internal credential"},
       {"not bearer", std::string("Basic ") + kToken, "must be sent as 'authorization: Bearer <token>'"},
       {"wrong", "Bearer worker-test-token-0123456789abcdeX", "wrong internal credential"},
       {"prefix of the token", "Bearer worker-test-token", "wrong internal credential"}},
      kToken, {"Control", "Results", "GetInfo", "Heartbeats"});
  EXPECT_EQ(node_.NumTouches(), 0);
}

// The attack of issue 45: one Control message with a new session id reset the pipeline
// (10 of 40 live streams failed). Without the token it never reaches the node; a channel
// made with the token (services/common/channels.h) delivers it.
TEST_F(WorkerServiceTest, AControlMessageStartingASessionIsRefusedWithoutTheTokenAndDeliveredWithIt) {
  StartService(Auth({kToken}));
  v1::ControlMessage reset;
  reset.set_session_id(42);
  const grpc::Status refused = SendControl(plain_, {reset, reset});
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  const grpc::Status wrong = SendControl(plain_, {reset}, "Bearer not-the-token-0123456789abcdef");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << wrong.error_message();
  EXPECT_TRUE(node_.controls().empty());

  const grpc::Status ok = SendControl(services::CreateInternalChannel(address_, Auth({kToken})), {reset});
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  ASSERT_TRUE(node_.WaitControls(1));
  EXPECT_EQ(node_.controls()[0].session_id(), 42u);
}

// With the token (sent by an internal channel) every RPC is served: GetInfo answers, Results
// and Heartbeats stream what the node pushes. A second token of the file is accepted too
// (rotation), and the one a process sends is the first.
TEST_F(WorkerServiceTest, WithTheTokenEveryRpcIsServed) {
  StartService(Auth({"the-new-token-0123456789abcdef", kToken}));
  auto channel = services::CreateInternalChannel(address_, Auth({kToken, "unused-second-token-0123456789"}));
  auto stub = v1::Worker::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::WorkerInfo info;
    const grpc::Status s = stub->GetInfo(&ctx, v1::WorkerInfoRequest(), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(info.stage(), 1);
  }
  {
    grpc::ClientContext ctx;
    v1::ResultsRequest req;
    req.set_session_id(7);
    auto reader = stub->Results(&ctx, req);
    ASSERT_TRUE(node_.WaitSubscribed());
    v1::IterationResult pushed;
    pushed.set_iteration_id(99);
    node_.results_sink()->Push(pushed);
    v1::IterationResult got;
    ASSERT_TRUE(reader->Read(&got));
    EXPECT_EQ(got.iteration_id(), 99u);
    ctx.TryCancel();
    reader->Finish().error_code();
  }
  {
    grpc::ClientContext ctx;
    auto reader = stub->Heartbeats(&ctx, v1::HeartbeatRequest());
    for (int i = 0; i < 2000 && node_.heartbeat_sink() == nullptr; ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_NE(node_.heartbeat_sink(), nullptr);
    v1::Heartbeat beat;
    beat.set_stage(1);
    beat.set_session_id(7);
    node_.heartbeat_sink()->Push(beat);
    v1::Heartbeat got;
    ASSERT_TRUE(reader->Read(&got));
    EXPECT_EQ(got.session_id(), 7u);
    ctx.TryCancel();
    reader->Finish().error_code();
  }
}

// --insecure-internal: the service takes every caller (the opt-out, for a network nobody else reaches).
TEST_F(WorkerServiceTest, AnInsecureServiceServesEveryCaller) {
  StartService(services::InternalAuth::Insecure());
  auto stub = v1::Worker::NewStub(plain_);
  grpc::ClientContext ctx;
  v1::WorkerInfo info;
  EXPECT_TRUE(stub->GetInfo(&ctx, v1::WorkerInfoRequest(), &info).ok());
  v1::ControlMessage m;
  m.set_session_id(3);
  EXPECT_TRUE(SendControl(plain_, {m}).ok());
  ASSERT_TRUE(node_.WaitControls(1));
}

}  // namespace
}  // namespace orca::worker
