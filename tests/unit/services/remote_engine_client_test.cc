// The engine master's pipeline client (RemoteEngineClient) against fake
// worker stages served in-process over real gRPC on 127.0.0.1 port 0: the
// stages' own Results and Heartbeats reactors, a scripted pipeline behind
// them. Issue 11: liveness comes from the stages' heartbeats (a long
// iteration is not a death, a short silence costs nothing, a long one ends
// the session), a cut data plane is found from the stages' progress, plans
// made for an ended session never reach the next one, and the KV block size
// is checked when the pipeline forms.

#include "services/scheduler/remote_engine_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/worker/heartbeat_writer.h"
#include "services/worker/results_writer.h"
#include "services/worker/worker_service.h"

namespace orca::scheduler {
namespace {

using worker::HeartbeatSink;
using worker::ResultSink;

// The stages of a fake pipeline: stage 0 takes control messages, the last
// stage answers each plan with one token per request after `delay`.
class FakePipeline {
 public:
  // One stage behind the real orca.v1.Worker service (its reactors and its authentication).
  class Stage final : public worker::WorkerBackend {
   public:
    Stage(FakePipeline* pipeline, int index) : pipeline_(pipeline), index_(index) {}

    void OnControl(v1::ControlMessage msg) override { pipeline_->OnControl(msg); }
    v1::WorkerInfo Info() const override {
      v1::WorkerInfo info;
      info.set_stage(index_);
      info.set_num_stages(pipeline_->num_stages());
      info.set_loaded(true);
      info.set_vocab_size(100);
      info.set_max_context(1024);
      info.set_kv_slots_total(4096);
      info.set_kv_block_size(pipeline_->kv_block_size);
      if (index_ < static_cast<int>(pipeline_->sliding_window.size()))
        info.set_sliding_window(pipeline_->sliding_window[index_]);
      if (index_ < static_cast<int>(pipeline_->kv_local_slots.size()))
        info.set_kv_local_slots_total(pipeline_->kv_local_slots[index_]);
      info.set_session_id(pipeline_->session());
      return info;
    }

    absl::Status SubscribeResults(uint64_t session, std::shared_ptr<ResultSink> sink) override {
      absl::MutexLock lock(&pipeline_->mu_);
      pipeline_->results_ = std::move(sink);
      pipeline_->results_session_ = session;
      return absl::OkStatus();
    }
    void Unsubscribe(const ResultSink* sink) override {
      absl::MutexLock lock(&pipeline_->mu_);
      if (pipeline_->results_.get() == sink) pipeline_->results_.reset();
    }
    void SubscribeHeartbeats(std::shared_ptr<HeartbeatSink> sink, absl::Duration interval) override {
      absl::MutexLock lock(&pipeline_->mu_);
      pipeline_->heartbeats_.push_back({index_, std::move(sink), interval});
    }
    void UnsubscribeHeartbeats(const HeartbeatSink* sink) override {
      absl::MutexLock lock(&pipeline_->mu_);
      auto& h = pipeline_->heartbeats_;
      h.erase(std::remove_if(h.begin(), h.end(), [sink](const auto& s) { return s.sink.get() == sink; }), h.end());
    }

   private:
    FakePipeline* pipeline_;
    int index_;
  };

  /// Stages that require `auth`'s internal token.
  explicit FakePipeline(int num_stages, services::InternalAuth auth = services::InternalAuth::Insecure()) {
    for (int i = 0; i < num_stages; ++i) {
      stages_.push_back(std::make_unique<Stage>(this, i));
      services_.push_back(std::make_unique<worker::WorkerService>(stages_.back().get(), auth));
      grpc::ServerBuilder b;
      int port = 0;
      b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      b.RegisterService(services_.back().get());
      servers_.push_back(b.BuildAndStart());
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakePipeline() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
    for (auto& s : servers_) s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    // Shutdown returns after every reactor's OnDone, which unsubscribes under mu_; gRPC
    // orders the two through its own atomics (invisible to TSan): take mu_ once so what
    // OnDone touched is seen before the members are destroyed.
    absl::MutexLock lock(&mu_);
    heartbeats_.clear();
  }

  int num_stages() const { return static_cast<int>(stages_.size()); }
  const std::vector<std::string>& addresses() const { return addresses_; }
  uint64_t session() const {
    absl::MutexLock lock(&mu_);
    return session_;
  }

  // Scripting (set before a client connects).
  int32_t kv_block_size = 16;
  std::vector<int32_t> sliding_window;   // per stage (missing: 0)
  std::vector<int64_t> kv_local_slots;   // per stage (missing: 0)
  std::atomic<int64_t> answer_delay_ms{0};
  /// Stages whose heartbeats stop (as under SIGSTOP) while set.
  void SetSilent(int stage, bool silent) {
    absl::MutexLock lock(&mu_);
    silent_[stage] = silent;
  }
  /// Fields every heartbeat of `stage` carries on top of the session.
  void SetProgress(int stage, v1::Heartbeat progress) {
    absl::MutexLock lock(&mu_);
    progress_[stage] = std::move(progress);
  }
  /// Ends the Results stream (the last stage went away and came back).
  void BreakResults() {
    std::shared_ptr<ResultSink> sink;
    {
      absl::MutexLock lock(&mu_);
      sink = std::move(results_);
    }
    if (auto* w = dynamic_cast<worker::ResultsWriter*>(sink.get()))
      w->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "last stage restarted"));
  }
  /// Control messages with requests seen in `session`.
  std::vector<v1::ControlMessage> Plans(uint64_t session) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::ControlMessage> out;
    for (const auto& m : control_)
      if (m.session_id() == session && m.requests_size() > 0) out.push_back(m);
    return out;
  }
  int NumSessions() {
    absl::MutexLock lock(&mu_);
    return num_sessions_;
  }

 private:
  struct HeartbeatSub {
    int stage;
    std::shared_ptr<HeartbeatSink> sink;
    absl::Duration interval;
    absl::Time next = absl::InfinitePast();
  };

  void OnControl(const v1::ControlMessage& msg) {
    absl::MutexLock lock(&mu_);
    control_.push_back(msg);
    if (msg.session_id() != session_) {
      session_ = msg.session_id();
      ++num_sessions_;
    }
    work_.push_back({msg, absl::Now() + absl::Milliseconds(answer_delay_ms.load())});
  }

  void Loop() {
    while (true) {
      std::vector<std::pair<std::shared_ptr<HeartbeatSink>, v1::Heartbeat>> beats;
      std::shared_ptr<ResultSink> results;
      std::vector<v1::IterationResult> answers;
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(5));
        if (stop_) return;
        const absl::Time now = absl::Now();
        for (HeartbeatSub& h : heartbeats_) {
          if (silent_[h.stage] || now < h.next) continue;
          h.next = now + h.interval;
          v1::Heartbeat hb = progress_[h.stage];
          hb.set_stage(h.stage);
          hb.set_session_id(session_);
          hb.set_connected(true);
          beats.emplace_back(h.sink, hb);
        }
        // Answers wait for the master's Results subscription to this session.
        const bool subscribed = results_ != nullptr && results_session_ == session_;
        while (subscribed && !work_.empty() && work_.front().second <= now) {
          const v1::ControlMessage& m = work_.front().first;
          const bool hello = m.requests_size() == 0 && m.released_request_ids_size() == 0;
          v1::IterationResult r;
          r.set_iteration_id(hello ? 0 : m.iteration_id());
          for (const auto& req : m.requests()) {
            v1::RequestResult* rr = r.add_results();
            rr->set_request_id(req.request_id());
            rr->mutable_token()->set_token_id(7);
          }
          if (hello || m.requests_size() > 0) answers.push_back(r);
          work_.pop_front();
        }
        if (subscribed) results = results_;
      }
      for (auto& [sink, hb] : beats) sink->Push(hb);
      if (results)
        for (auto& a : answers) results->Push(a);
    }
  }

  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<std::unique_ptr<worker::WorkerService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  int num_sessions_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::ControlMessage> control_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<v1::ControlMessage, absl::Time>> work_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ResultSink> results_ ABSL_GUARDED_BY(mu_);
  uint64_t results_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<HeartbeatSub> heartbeats_ ABSL_GUARDED_BY(mu_);
  std::map<int, bool> silent_ ABSL_GUARDED_BY(mu_);
  std::map<int, v1::Heartbeat> progress_ ABSL_GUARDED_BY(mu_);
};

// Records what the client reports, as the scheduler loop would.
class Recorder {
 public:
  void OnState(bool ready, const std::string& reason, uint64_t session) {
    absl::MutexLock lock(&mu_);
    ready_ = ready;
    if (ready) session_ = session;
    if (!ready && !reason.empty()) reasons_.push_back(reason);
    if (!ready && had_ready_) ++failures_;
    had_ready_ |= ready;
  }
  void OnOutcome(IterationOutcome o) {
    absl::MutexLock lock(&mu_);
    outcomes_.push_back(std::move(o));
  }
  bool WaitReady(bool want, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_ == want; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  bool WaitOutcomes(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outcomes_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }
  uint64_t session() {
    absl::MutexLock lock(&mu_);
    return session_;
  }
  int failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }
  std::string last_reason() {
    absl::MutexLock lock(&mu_);
    return reasons_.empty() ? "" : reasons_.back();
  }
  std::vector<IterationOutcome> outcomes() {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool had_ready_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> reasons_ ABSL_GUARDED_BY(mu_);
  std::vector<IterationOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

sched::IterationPlan Plan(sched::IterationId id, sched::RequestId request) {
  sched::IterationPlan p;
  p.iteration_id = id;
  sched::ScheduledRequest r;
  r.request_id = request;
  r.input_token_ids = {1, 2, 3};
  r.new_request = sched::NewRequestData{16, {}, {1, 2, 3}};
  p.requests.push_back(r);
  return p;
}

class RemoteEngineClientTest : public ::testing::Test {
 protected:
  void Start(int stages, absl::Duration worker_timeout, int32_t kv_block_size = 16,
             services::InternalAuth auth = services::InternalAuth::Insecure()) {
    pipeline_ = std::make_unique<FakePipeline>(stages, auth);
    RemoteEngineClient::Options o;
    o.workers = pipeline_->addresses();
    o.internal_auth = auth;
    o.worker_timeout = worker_timeout;
    o.kv_block_size = kv_block_size;
    o.startup_timeout = absl::Seconds(10);
    auto c = RemoteEngineClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    ASSERT_TRUE(client_
                    ->Start([this](IterationOutcome o) { rec_.OnOutcome(std::move(o)); },
                            [this](bool r, const std::string& why, uint64_t s) { rec_.OnState(r, why, s); })
                    .ok());
    ASSERT_TRUE(rec_.WaitReady(true)) << rec_.last_reason();
  }
  void TearDown() override {
    if (client_) client_->Stop();
  }

  std::unique_ptr<FakePipeline> pipeline_;
  std::unique_ptr<RemoteEngineClient> client_;
  Recorder rec_;
};

TEST_F(RemoteEngineClientTest, AnIterationLongerThanTheTimeoutIsNotADeathWhileTheStagesHeartbeat) {
  Start(2, absl::Milliseconds(300));
  pipeline_->answer_delay_ms = 1500;  // five timeouts of compute
  client_->Submit(Plan(1, 1), rec_.session());
  ASSERT_TRUE(rec_.WaitOutcomes(1, absl::Seconds(10))) << rec_.last_reason();
  EXPECT_TRUE(rec_.outcomes()[0].status.ok()) << rec_.outcomes()[0].status;
  EXPECT_EQ(rec_.outcomes()[0].results.size(), 1u);
  EXPECT_EQ(rec_.failures(), 0) << rec_.last_reason();
  EXPECT_TRUE(client_->ready());
}

TEST_F(RemoteEngineClientTest, ASilenceShorterThanTheTimeoutCostsNothing) {
  Start(2, absl::Milliseconds(1000));
  pipeline_->SetSilent(1, true);
  absl::SleepFor(absl::Milliseconds(500));
  pipeline_->SetSilent(1, false);
  client_->Submit(Plan(1, 1), rec_.session());
  ASSERT_TRUE(rec_.WaitOutcomes(1, absl::Seconds(10)));
  EXPECT_TRUE(rec_.outcomes()[0].status.ok());
  EXPECT_EQ(rec_.failures(), 0) << rec_.last_reason();
}

TEST_F(RemoteEngineClientTest, AStageSilentPastTheTimeoutEndsTheSessionAndItReformsWhenItSpeaksAgain) {
  Start(2, absl::Milliseconds(400));
  const int sessions = pipeline_->NumSessions();
  const absl::Time t0 = absl::Now();
  pipeline_->SetSilent(1, true);
  ASSERT_TRUE(rec_.WaitReady(false, absl::Seconds(5)));
  const absl::Duration detect = absl::Now() - t0;
  EXPECT_GE(detect, absl::Milliseconds(350));
  EXPECT_LT(detect, absl::Seconds(3));
  EXPECT_NE(rec_.last_reason().find("stage 1"), std::string::npos) << rec_.last_reason();
  EXPECT_NE(rec_.last_reason().find("no heartbeat"), std::string::npos) << rec_.last_reason();
  pipeline_->SetSilent(1, false);
  ASSERT_TRUE(rec_.WaitReady(true, absl::Seconds(5))) << rec_.last_reason();
  EXPECT_GT(pipeline_->NumSessions(), sessions);
}

TEST_F(RemoteEngineClientTest, AStageWaitingForActivationsItsUpstreamComputedMeansACutDataPlane) {
  Start(2, absl::Milliseconds(400));
  v1::Heartbeat up, down;
  up.set_last_iteration_id(5);  // stage 0 computed iteration 5 long ago
  up.set_last_iteration_age_micros(3'000'000);
  down.set_waiting_iteration_id(5);
  down.set_waiting_micros(100'000);  // waiting, but not long yet: fine
  pipeline_->SetProgress(0, up);
  pipeline_->SetProgress(1, down);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(rec_.failures(), 0) << rec_.last_reason();
  down.set_waiting_micros(2'000'000);
  pipeline_->SetProgress(1, down);
  ASSERT_TRUE(rec_.WaitReady(false, absl::Seconds(5)));
  EXPECT_NE(rec_.last_reason().find("data plane between them is cut"), std::string::npos) << rec_.last_reason();
  EXPECT_NE(rec_.last_reason().find("iteration 5"), std::string::npos) << rec_.last_reason();
}

TEST_F(RemoteEngineClientTest, AStageWaitingWhileItsUpstreamStillComputesIsFine) {
  Start(2, absl::Milliseconds(300));
  v1::Heartbeat up, down;
  up.set_last_iteration_id(4);  // still computing iteration 5
  up.set_last_iteration_age_micros(5'000'000);
  down.set_waiting_iteration_id(5);
  down.set_waiting_micros(5'000'000);
  pipeline_->SetProgress(0, up);
  pipeline_->SetProgress(1, down);
  absl::SleepFor(absl::Milliseconds(900));
  EXPECT_EQ(rec_.failures(), 0) << rec_.last_reason();
  // Stage 0 has just finished computing it: the activations are on their way.
  up.set_last_iteration_id(5);
  up.set_last_iteration_age_micros(1'000);
  pipeline_->SetProgress(0, up);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(rec_.failures(), 0) << rec_.last_reason();
}

// Issue 11 item 5: the loop made a plan before it heard that its session
// ended; it must not reach the next session's workers, which would reserve
// KV for requests that are already dead and never release it.
TEST_F(RemoteEngineClientTest, APlanMadeForAnEndedSessionNeverReachesTheNextSession) {
  Start(1, absl::Seconds(5));
  const uint64_t old_session = rec_.session();
  pipeline_->BreakResults();
  ASSERT_TRUE(rec_.WaitReady(false));
  client_->Submit(Plan(10, 42), old_session);  // in flight when the loop learns of the failure
  client_->Release({41}, old_session);
  ASSERT_TRUE(rec_.WaitReady(true)) << rec_.last_reason();
  const uint64_t new_session = rec_.session();
  ASSERT_NE(new_session, old_session);
  client_->Submit(Plan(11, 43), new_session);
  ASSERT_TRUE(rec_.WaitOutcomes(1, absl::Seconds(10)));
  std::vector<v1::ControlMessage> plans = pipeline_->Plans(new_session);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].requests(0).request_id(), 43u);
  EXPECT_EQ(rec_.outcomes().size(), 1u);
  EXPECT_EQ(rec_.outcomes()[0].iteration_id, 11u);
}

TEST_F(RemoteEngineClientTest, KvBlockSizeMismatchIsRefusedNamingBothValues) {
  pipeline_ = std::make_unique<FakePipeline>(2);
  pipeline_->kv_block_size = 32;
  RemoteEngineClient::Options o;
  o.workers = pipeline_->addresses();
  o.kv_block_size = 16;
  o.startup_timeout = absl::Seconds(10);
  auto c = RemoteEngineClient::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("--kv-block-size is 16 but the workers' is 32"), std::string::npos) << c.status();
  o.kv_block_size = 32;
  auto ok = RemoteEngineClient::Create(o);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->info().kv_block_size, 32);
}

// Issue 47, KV by layer type: the stages' pools for sliding-window layers are counted as the
// smallest one (a stage without one has nothing to count); the window must be the same.
TEST_F(RemoteEngineClientTest, TheSlidingWindowPoolIsTheSmallestStagesAndTheWindowMustAgree) {
  pipeline_ = std::make_unique<FakePipeline>(3);
  pipeline_->sliding_window = {1024, 1024, 1024};
  pipeline_->kv_local_slots = {4096, 0, 2048};
  RemoteEngineClient::Options o;
  o.workers = pipeline_->addresses();
  o.startup_timeout = absl::Seconds(10);
  auto c = RemoteEngineClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->info().sliding_window, 1024);
  EXPECT_EQ((*c)->info().kv_local_slots, 2048);
  pipeline_->sliding_window = {1024, 1024, 512};
  auto bad = RemoteEngineClient::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("disagree on the sliding window"), std::string::npos) << bad.status();
}

services::InternalAuth Auth(const std::string& token) {
  auto auth = services::InternalAuth::FromTokens({token}, "test");
  EXPECT_TRUE(auth.ok()) << auth.status();
  return *auth;
}

// Issue 45: every worker RPC the engine master makes (GetInfo, Control, Results, Heartbeats)
// needs the internal token. Stages that require one refuse a master without it or with
// another, so no session forms; with it, sessions form and iterations come back.
TEST_F(RemoteEngineClientTest, StagesRefuseAMasterWithoutTheirInternalTokenAndServeOneWithIt) {
  const std::string token = "stage-token-0123456789abcdef";
  pipeline_ = std::make_unique<FakePipeline>(2, Auth(token));
  struct Case {
    const char* name;
    services::InternalAuth auth;
    const char* refusal;
  };
  const Case cases[] = {{"none", services::InternalAuth::Insecure(), "missing internal credential"},
                        {"wrong", Auth("another-token-0123456789abcdef"), "wrong internal credential"}};
  for (const Case& c : cases) {
    RemoteEngineClient::Options o;
    o.workers = pipeline_->addresses();
    o.internal_auth = c.auth;
    o.startup_timeout = absl::Milliseconds(500);
    auto refused = RemoteEngineClient::Create(o);
    ASSERT_FALSE(refused.ok()) << c.name;
    EXPECT_NE(refused.status().message().find(c.refusal), std::string::npos) << c.name << ": " << refused.status();
  }
  EXPECT_EQ(pipeline_->NumSessions(), 0);
  pipeline_.reset();

  Start(2, absl::Seconds(5), 16, Auth(token));
  client_->Submit(Plan(1, 1), rec_.session());
  ASSERT_TRUE(rec_.WaitOutcomes(1, absl::Seconds(10))) << rec_.last_reason();
  EXPECT_TRUE(rec_.outcomes()[0].status.ok()) << rec_.outcomes()[0].status;
  EXPECT_EQ(rec_.outcomes()[0].results.size(), 1u);
  EXPECT_EQ(pipeline_->NumSessions(), 1);
}

}  // namespace
}  // namespace orca::scheduler
