// The worker's Results stream (ResultsWriter) over real gRPC on 127.0.0.1
// port 0, fed by a fake result source: results arrive in order, and the call
// ends cleanly however it ends — in particular a client that cancels while a
// write is stuck in flow control (issue 11: the worker aborted with
// `callback_common.h: assertion failed: call_ == nullptr` when OnCancel and
// OnWriteDone(false) both finished the call).

#include "services/worker/results_writer.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace orca::worker {
namespace {

class FakeSource final : public ResultSource {
 public:
  absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) override {
    absl::MutexLock lock(&mu_);
    if (session == 0) return absl::FailedPreconditionError("no session 0");
    sink_ = std::move(sink);
    ++subscriptions_;
    return absl::OkStatus();
  }
  void Unsubscribe(const ResultSink* sink) override {
    absl::MutexLock lock(&mu_);
    if (sink_.get() == sink) sink_.reset();
    ++unsubscriptions_;
  }
  /// Pushes to the current subscriber (as the compute thread does); false without one.
  bool Push(v1::IterationResult r) {
    absl::MutexLock lock(&mu_);
    if (!sink_) return false;
    sink_->Push(std::move(r));
    return true;
  }
  bool WaitSubscribed(int n) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return subscriptions_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }
  bool WaitUnsubscribed(int n) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unsubscriptions_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }

 private:
  absl::Mutex mu_;
  std::shared_ptr<ResultSink> sink_ ABSL_GUARDED_BY(mu_);
  int subscriptions_ ABSL_GUARDED_BY(mu_) = 0;
  int unsubscriptions_ ABSL_GUARDED_BY(mu_) = 0;
};

class ResultsOnlyService final : public v1::Worker::CallbackService {
 public:
  explicit ResultsOnlyService(ResultSource* source) : source_(source) {}
  grpc::ServerWriteReactor<v1::IterationResult>* Results(grpc::CallbackServerContext*,
                                                         const v1::ResultsRequest* request) override {
    return ResultsWriter::Start(source_, request->session_id());
  }

 private:
  ResultSource* source_;
};

v1::IterationResult Result(uint64_t iteration, size_t padding = 0) {
  v1::IterationResult r;
  r.set_iteration_id(iteration);
  if (padding > 0) r.set_error(std::string(padding, 'x'));  // a big message fills the flow-control window
  return r;
}

class ResultsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Worker::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }

  FakeSource source_;
  ResultsOnlyService service_{&source_};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

TEST_F(ResultsWriterTest, StreamsResultsInOrder) {
  grpc::ClientContext ctx;
  v1::ResultsRequest req;
  req.set_session_id(7);
  auto reader = stub_->Results(&ctx, req);
  ASSERT_TRUE(source_.WaitSubscribed(1));
  for (uint64_t i = 1; i <= 100; ++i) ASSERT_TRUE(source_.Push(Result(i)));
  v1::IterationResult r;
  for (uint64_t i = 1; i <= 100; ++i) {
    ASSERT_TRUE(reader->Read(&r));
    EXPECT_EQ(r.iteration_id(), i);
  }
  ctx.TryCancel();
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(source_.WaitUnsubscribed(1));
}

// Results pushed one by one from a producer thread while the client reads: most writes start
// on the producer's thread and complete on one of gRPC's, so a write's OnWriteDone often runs
// before its StartWrite has returned. The next message must not be moved into the buffer gRPC
// is serializing until then (under ThreadSanitizer, scripts/tsan.sh, the old order was reported
// as a race in some runs).
TEST_F(ResultsWriterTest, StreamsResultsPushedOneByOneFromAnotherThreadInOrder) {
  constexpr uint64_t kResults = 3000;
  grpc::ClientContext ctx;
  v1::ResultsRequest req;
  req.set_session_id(7);
  auto reader = stub_->Results(&ctx, req);
  ASSERT_TRUE(source_.WaitSubscribed(1));
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kResults; ++i) {
      if (!source_.Push(Result(i, i % 7 == 0 ? 300 : 0))) return;
      if (i % 16 == 0) std::this_thread::yield();
    }
  });
  v1::IterationResult r;
  uint64_t got = 0;
  while (got < kResults && reader->Read(&r)) {
    if (r.iteration_id() != ++got) {
      ADD_FAILURE() << "result " << r.iteration_id() << " arrived as number " << got;
      break;
    }
  }
  producer.join();
  EXPECT_EQ(got, kResults);
  ctx.TryCancel();
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(source_.WaitUnsubscribed(1));
}

TEST_F(ResultsWriterTest, RefusedSubscriptionEndsTheCallWithTheReason) {
  grpc::ClientContext ctx;
  auto reader = stub_->Results(&ctx, v1::ResultsRequest());  // session 0: refused by the fake
  v1::IterationResult r;
  EXPECT_FALSE(reader->Read(&r));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "no session 0");
}

// The engine master goes away (its session torn down, or the scheduler was
// stalled and restarted) while a result is stuck in flow control: OnCancel
// arrives with a write in flight, and that write then completes with ok=false.
// The call must end exactly once, and the worker must go on serving.
TEST_F(ResultsWriterTest, CancelWithAWriteInFlightEndsTheCallOnceAndTheServerLivesOn) {
  constexpr int kRounds = 20;
  for (int round = 1; round <= kRounds; ++round) {
    grpc::ClientContext ctx;
    v1::ResultsRequest req;
    req.set_session_id(100 + round);
    auto reader = stub_->Results(&ctx, req);
    ASSERT_TRUE(source_.WaitSubscribed(round));
    // 32 x 1 MiB with a reader that never reads: a write stays in flight.
    for (uint64_t i = 1; i <= 32; ++i) ASSERT_TRUE(source_.Push(Result(i, 1 << 20)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ctx.TryCancel();
    ASSERT_TRUE(source_.WaitUnsubscribed(round)) << "the call never reached OnDone";
    EXPECT_FALSE(source_.Push(Result(999)));  // nobody subscribed any more
  }
  // Still serving.
  grpc::ClientContext ctx;
  v1::ResultsRequest req;
  req.set_session_id(1);
  auto reader = stub_->Results(&ctx, req);
  ASSERT_TRUE(source_.WaitSubscribed(kRounds + 1));
  ASSERT_TRUE(source_.Push(Result(42)));
  v1::IterationResult r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.iteration_id(), 42u);
  ctx.TryCancel();
}

}  // namespace
}  // namespace orca::worker
